//! `usfs mount -o rw` against the kernel (rw_fuse.rs over /dev/fuse, rw_fuse_uring.rs
//! over io_uring): real programs (tar, cp -a, make, git, sqlite3, python) run the same
//! workload on a usfs FUSE mount of one copy of an image and on a kernel loop mount of
//! another; the trees must be equal, `e2fsck -fn` clean, and the kernel must mount the
//! usfs-written image and keep writing with e2fsck clean after. A short seeded
//! `usfs_testkit::exercise` pass (random operations checked against a model) runs on a
//! usfs mount; the kernel's view of the image must equal the model too.

use super::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use usfs_testkit::exercise::{run_ops, Options as ExerciseOptions};
use usfs_testkit::{compare, CmpOptions};

/// The workload: every kind of change real programs make.
pub(crate) const WORKLOAD: &str = r#"
set -e
umask 022
export GIT_AUTHOR_DATE=@1000000000 GIT_COMMITTER_DATE=@1000000000 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
mkdir -p w && cd w
tar -xf "$TARBALL"
cp -a tree copy
mkdir -p proj && cd proj
printf '#include <stdio.h>\nint main(void){puts("hi");return 0;}\n' > main.c
printf 'all: hello\nhello: main.o\n\tgcc -o hello main.o\nmain.o: main.c\n\tgcc -c main.c\n' > Makefile
make -s >/dev/null
./hello > out.txt
git init -q . && git add -A && git commit -q -m first && rm -f .git/index
cd ..
sqlite3 db.sqlite 'create table t(a,b); begin; insert into t values(1,2); insert into t values(3,4); commit;'
for i in $(seq 1 200); do sqlite3 db.sqlite "insert into t values($i, 'row $i');"; done
python3 - <<'PY'
import os
with open('py.bin', 'wb') as f:
    for i in range(2000):
        f.write(bytes([i % 251]) * 1000)
with open('py.bin', 'r+b') as f:
    f.seek(123457); f.write(b'overwrite'); f.truncate(1500000)
with open('sparse', 'wb') as f:
    f.seek(10 << 20); f.write(b'end')
os.setxattr('py.bin', 'user.one', b'1')
os.setxattr('py.bin', 'user.big', b'x' * 900)
os.setxattr('copy', 'user.dir', b'd')
os.removexattr('py.bin', 'user.one')
with open('app', 'ab') as f:
    for i in range(100):
        f.write(b'line %d\n' % i)
os.truncate('app', 100)
os.truncate('app', 5000)
PY
touch acl-f && mkdir -p acl-d && setfacl -m u:1234:rw acl-f && setfacl -m d:u:1234:rx,d:g::rwx acl-d
touch acl-d/inherits && mkdir acl-d/sub && mkdir -m 0700 acl-d/priv && chmod 640 acl-f && setfacl -m u:5:r acl-f
touch acl-g && setfacl -m u:7:rw acl-g && setfacl -b acl-g
echo new > target && echo old > src && mv src target
ln target hard1 && ln target hard2 && rm hard1
mkdir -p deep && d=deep; for i in $(seq 1 40); do d=$d/level$i; done; mkdir -p $d && echo bottom > $d/f
mkdir big && (cd big && for i in $(seq 1 3000); do : > "entry-$i-with-a-longer-name"; done)
(cd big && for i in $(seq 1 3000 | awk 'NR%3==0'); do rm "entry-$i-with-a-longer-name"; done)
mkdir gone && echo x > gone/f && rm -r gone
rm -rf copy/tree-sub-0
mv tree moved && mkdir tree && mv moved tree/
chmod 0700 proj && chmod u+s app
# What a write, a truncate and chown take away: setuid, setgid when group-executable
# (writer or truncater without CAP_FSETID: nobody, through descriptors root opened), and
# file capabilities (any writer, root too).
for f in priv-w priv-t priv-g priv-l priv-c priv-cap priv-capt; do echo data > $f; done
chmod 6777 priv-w priv-t && chmod 2767 priv-g && chmod 2766 priv-l && chmod 4755 priv-c
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c 'import os; os.write(3, b"more"); os.ftruncate(4, 2); os.write(5, b"x"); os.write(6, b"y")' 3>>priv-w 4<>priv-t 5>>priv-g 6>>priv-l
chown 1:1 priv-c
python3 -c 'import os; v = bytes.fromhex("0100000200040000000000000000000000000000"); [os.setxattr(f, "security.capability", v) for f in ("priv-cap", "priv-capt")]'
echo more >> priv-cap && truncate -s 1 priv-capt
"#;

pub(crate) fn make_tarball(dir: &Path) -> PathBuf {
    let src = dir.join("tree");
    sh(&format!(
        "mkdir -p '{s}' && cd '{s}' && for d in 0 1 2 3; do mkdir -p tree-sub-$d/x/y; \
         for f in $(seq 1 60); do head -c $((f * 997)) /dev/urandom > tree-sub-$d/x/f$f; done; \
         ln -s x tree-sub-$d/link; done && truncate -s 3M tree-sub-0/holey",
        s = src.display()
    ));
    let tar = dir.join("tree.tar");
    sh(&format!(
        "cd '{}' && tar -cf '{}' tree",
        dir.display(),
        tar.display()
    ));
    tar
}

pub(crate) fn run_workload(root: &Path, tarball: &Path) {
    let (code, out, err) = run_limited(
        Command::new("bash")
            .arg("-c")
            .arg(WORKLOAD)
            .current_dir(root)
            .env("TARBALL", tarball),
        Duration::from_secs(300),
    );
    assert_eq!(
        code,
        Some(0),
        "workload in {} failed:\n{}\n{}",
        root.display(),
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&err)
    );
}

pub(crate) fn fsck_clean(img: &Path, what: &str) {
    let o = Command::new("e2fsck").arg("-fn").arg(img).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{what}: e2fsck -fn:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

pub(crate) fn level_times(img: &Path, dir: &Path) {
    let m = Mount::new(img, dir, "ext4", "");
    sh(&format!(
        "cd '{}' && find . -mindepth 1 -exec touch -h -d @1000000000 {{}} + && touch -d @1000000000 .",
        m.dir.display()
    ));
}

pub(crate) fn check_layout(name: &str, args: &[&str], opts: &str) {
    check_layout_with(name, args, opts, &|_| {});
}

/// [`check_layout`], calling `probe` with the image path once the workload has run on
/// the usfs mount, before it is unmounted.
pub(crate) fn check_layout_with(name: &str, args: &[&str], opts: &str, probe: &dyn Fn(&Path)) {
    let s = Scratch::new(&format!("rw-fuse-{name}"));
    let tarball = make_tarball(&s.0);
    let a = s.path("usfs.img");
    mke2fs(&a, "128M", args, None);
    let b = s.path("kernel.img");
    std::fs::copy(&a, &b).unwrap();
    {
        // allow_other: the workload writes as nobody too (FUSE refuses other users' calls
        // without it).
        let m = UsfsMount::new(&a, &s.path("ma"), &format!("{opts},allow_other"));
        run_workload(&m.0, &tarball);
        probe(&a);
    }
    fsck_clean(&a, &format!("{name}: after usfs mount -o {opts}"));
    {
        let m = Mount::new(&b, &s.path("mb"), "ext4", "");
        run_workload(&m.dir, &tarball);
    }
    judge_against_kernel(&s, &a, &b, &format!("{name}: usfs mount -o {opts}"));
}

/// The image usfs wrote (`a`) against the one the kernel wrote with the same workload
/// (`b`): times levelled, trees equal (the project's comparator, as the kernel mounts
/// both), then the kernel keeps writing `a` with `e2fsck -fn` clean after.
pub(crate) fn judge_against_kernel(s: &Scratch, a: &Path, b: &Path, name: &str) {
    level_times(a, &s.path("la"));
    level_times(b, &s.path("lb"));
    {
        let ma = Mount::new(a, &s.path("ca"), "ext4", "ro");
        let mb = Mount::new(b, &s.path("cb"), "ext4", "ro");
        let opts = CmpOptions {
            atime: false,
            system_xattrs: true,
            ..Default::default()
        };
        if let Err(d) = compare(&ma.dir, &mb.dir, &opts) {
            panic!("{name} and the kernel differ: {d}");
        }
    }
    {
        let m = Mount::new(a, &s.path("more"), "ext4", "");
        sh(&format!(
            "cd '{}' && rm -rf w/tree && cp -r w/proj w/proj2 && for i in $(seq 1 100); do echo $i > w/k$i; done && sync",
            m.dir.display()
        ));
    }
    fsck_clean(a, &format!("{name}: the kernel kept writing"));
}

pub(crate) fn ready(test: &str) -> bool {
    need_root(test)
        && [
            "mke2fs", "sqlite3", "git", "make", "gcc", "python3", "tar", "setfacl", "setpriv",
        ]
        .iter()
        .all(|t| need_tool(test, t))
}

/// A few seconds of seeded random operations (2 threads, xattrs included) on
/// `usfs mount -o OPTS`, checked against the exerciser's model;
/// then `e2fsck -fn` clean and the tree the kernel mounts read-only equal to the same
/// model. The exerciser runs on its own thread: a server that stops answering fails the
/// test after a minute instead of hanging it.
pub(crate) fn exercise(name: &str, mke2fs_args: &[&str], mount_opts: &str) {
    exercise_with(name, mke2fs_args, mount_opts, &|_| {});
}

/// [`exercise`], calling `probe` with the image path after the operations, before the
/// usfs mount is unmounted.
pub(crate) fn exercise_with(
    name: &str,
    mke2fs_args: &[&str],
    mount_opts: &str,
    probe: &dyn Fn(&Path),
) {
    let s = Scratch::new(&format!("rw-fuse-exercise-{name}"));
    let img = s.path("ex.img");
    mke2fs(&img, "256M", mke2fs_args, None);
    let opts = ExerciseOptions {
        seed: 11,
        threads: 2,
        ops: 600,
        duration: Some(Duration::from_secs(5)),
        max_file_size: 256 << 10,
        xattrs: true,
        ..Default::default()
    };
    let dir = s.path("m");
    let work = dir.join("ex");
    let world = {
        let _m = UsfsMount::new(&img, &dir, mount_opts);
        std::fs::create_dir(&work).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let w = work.clone();
        std::thread::spawn(move || {
            let r = run_ops(&w, &opts).and_then(|(report, world)| {
                world.verify()?;
                Ok((report, world))
            });
            let _ = tx.send(r);
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok((report, world))) => {
                eprintln!("{name}: exerciser on usfs mount -o {mount_opts}: {report}");
                probe(&img);
                world
            }
            Ok(Err(f)) => panic!("{name}: on the usfs mount: {f}"),
            Err(_) => panic!("{name}: the exerciser got no answer for 60 s (a hung server?)"),
        }
    };
    fsck_clean(&img, &format!("{name}: after the exerciser"));
    let _k = Mount::new(&img, &dir, "ext4", "ro");
    world
        .verify()
        .unwrap_or_else(|f| panic!("{name}: the kernel's view of the image: {f}"));
}
