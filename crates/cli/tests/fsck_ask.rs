//! `usfs fsck` without -n, -y or -p on a terminal asks before each fix, as e2fsck does:
//! answers y/n/a and Enter, on a real pseudo-terminal and with answers piped in under
//! `E2FSCK_FORCE_INTERACTIVE` (e2fsck's variable). All yes repairs the image as -y does
//! (e2fsck -fn clean, exit 1); a "no" leaves the image byte for byte as it was (exit 4);
//! 'a' answers the rest; end of input is "no". Off a terminal the default stays -n.

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A small image with three problems e2fsck and usfs fix in one round: two link counts
/// and an i_size.
fn damaged(s: &Scratch) -> PathBuf {
    let src = s.path("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..4 {
        std::fs::write(src.join(format!("d/f{i}")), vec![b'x'; 3000 + i]).unwrap();
    }
    let img = s.path("a.img");
    mke2fs(&img, "8M", &["-t", "ext4", "-b", "1024"], Some(&src));
    let cmds = "sif /d/f0 links_count 5\nsif /d/f1 links_count 3\nsif /d/f2 size 1\n";
    let mut c = Command::new("debugfs")
        .args(["-w", "-f", "-"])
        .arg(&img)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(cmds.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success());
    img
}

/// `usfs fsck -f IMG` with `answers` piped to standard input under
/// E2FSCK_FORCE_INTERACTIVE: (exit code, standard output).
fn forced(img: &Path, answers: &str) -> (i32, String) {
    let mut c = Command::new(usfs())
        .args(["fsck", "-f"])
        .arg(img)
        .env("E2FSCK_FORCE_INTERACTIVE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(answers.as_bytes())
        .unwrap();
    let out = c.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into(),
    )
}

fn e2fsck_clean(img: &Path) -> bool {
    e2fsck_exit(img, "-fn") == 0
}

#[test]
fn answers_decide_what_is_fixed() {
    if !need_tool("answers_decide_what_is_fixed", "debugfs") {
        return;
    }
    let s = Scratch::new("fsck-ask");
    let img = damaged(&s);
    let before = std::fs::read(&img).unwrap();
    assert!(!e2fsck_clean(&img));

    // A "no" to the second question: nothing is written.
    let (code, out) = forced(&img, "yn");
    assert_eq!(code, 4, "{out}");
    assert_eq!(out.matches("<y>? yes").count(), 1, "{out}");
    assert_eq!(out.matches("<y>? no").count(), 1, "{out}");
    assert!(out.contains("Fix? no"), "the unasked rest is listed: {out}");
    assert!(
        std::fs::read(&img).unwrap() == before,
        "declined: image changed"
    );

    // End of input is "no".
    let (code, _) = forced(&img, "");
    assert_eq!(code, 4);
    assert!(
        std::fs::read(&img).unwrap() == before,
        "no answer: image changed"
    );

    // Off a terminal, without E2FSCK_FORCE_INTERACTIVE, the default is -n.
    let out = Command::new(usfs())
        .args(["fsck", "-f"])
        .arg(&img)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stdout).contains("check only"));
    assert!(std::fs::read(&img).unwrap() == before);

    // 'a' answers every later question: one prompt answered "yes to all".
    let (code, out) = forced(&img, "a");
    assert_eq!(code, 1, "{out}");
    assert_eq!(out.matches("<y>?").count(), 1, "{out}");
    assert!(out.contains("yes to all"), "{out}");
    assert!(e2fsck_clean(&img), "after 'a': {out}");

    // Every question answered with y or Enter: the same repair.
    std::fs::write(&img, &before).unwrap();
    let (code, out) = forced(&img, "y\ny\ny\ny\ny\ny\ny\ny\n");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Pass 4: Checking reference counts"), "{out}");
    assert!(out.matches("<y>? yes").count() >= 3, "{out}");
    assert!(e2fsck_clean(&img), "after yes: {out}");
}

/// A pseudo-terminal pair: (controller, the terminal's path side as an owned fd).
fn pty() -> (OwnedFd, OwnedFd) {
    let (mut m, mut t) = (0, 0);
    // SAFETY: openpty writes two descriptors; null name, termios and winsize are allowed.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut t,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(t)) }
}

#[test]
fn on_a_terminal_it_asks_one_key_at_a_time() {
    if !need_tool("on_a_terminal_it_asks_one_key_at_a_time", "debugfs") {
        return;
    }
    let s = Scratch::new("fsck-ask-tty");
    let img = damaged(&s);
    let (ctl, term) = pty();
    let mut child = Command::new(usfs())
        .args(["fsck", "-f"])
        .arg(&img)
        .stdin(term.try_clone().unwrap())
        .stdout(term.try_clone().unwrap())
        .stderr(term)
        .spawn()
        .unwrap();
    let mut ctl = std::fs::File::from(ctl);
    // Single keys, no Enter: the terminal is in non-canonical mode while asked; keys
    // typed before that wait in the terminal's buffer and arrive then.
    ctl.write_all(b"yyyyyyyy").unwrap();
    let status = child.wait().unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // The child has exited: read what is buffered (EIO once the terminal side is gone).
    while let Ok(n) = ctl.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    let out = String::from_utf8_lossy(&out);
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(out.contains("<y>? yes"), "{out}");
    assert!(e2fsck_clean(&img), "{out}");
}
