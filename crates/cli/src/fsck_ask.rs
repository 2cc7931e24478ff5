//! The questions of an interactive `usfs fsck` (no -n, -y or -p, on a terminal), asked as
//! e2fsck's `ask_yn` asks them: the problem, then its table's word (`Fix<y>? `, `Clear<y>? `,
//! `Salvage<y>? ` ...), answered with one key — `y`,
//! `n`, or `a` for yes to all; Enter, space or Escape take the default (yes) — and echoed
//! as `yes`, `no` or `yes to all`. Control-C prints `cancelled!` and counts as no. End of
//! input counts as no too (e2fsck takes the default there; usfs changes nothing the user
//! did not accept).

use crate::cmd_fsck::{print_heading, print_pass1b_heading, PASSES};
use std::io::{Read, Write};
use usfs_fsck::problem::{Pass, Problem};
use usfs_fsck::repair::Answer;

/// Whether `usfs fsck` without -n, -y or -p asks: standard input and output are
/// terminals, or `E2FSCK_FORCE_INTERACTIVE` is set (as for e2fsck; then the answers are
/// read from standard input as bytes, whatever it is).
pub(crate) fn interactive() -> bool {
    // SAFETY: isatty only inspects the descriptors.
    let ttys = unsafe { libc::isatty(0) == 1 && libc::isatty(1) == 1 };
    ttys || std::env::var_os("E2FSCK_FORCE_INTERACTIVE").is_some()
}

/// Asks about each problem of a repair, printing the pass headings as the problems reach
/// them (from the start again at each new round).
#[derive(Default)]
pub(crate) struct Asker {
    /// The round and pass of the last problem asked about (None before the first).
    last: Option<(usize, Pass)>,
    /// Consecutive "yes" answers (e2fsck hints at 'a' after 8 of them; -1: hinted).
    yes_run: i32,
}

impl Asker {
    /// Asks whether to fix `p`, a problem of repair round `round` (from 1).
    pub(crate) fn ask(&mut self, p: &Problem, round: usize) -> Answer {
        self.headings(p.code.def().pass, round);
        if !p.code.asks() {
            // (What e2fsck only announces is shown, not asked.)
            println!("{}\n", p.message());
            return Answer::Yes;
        }
        if self.yes_run > 12 {
            self.yes_run = -1;
        }
        let hint = if self.yes_run > 8 {
            " ('a' enables 'yes' to all) "
        } else {
            ""
        };
        print!("{}.  {}{hint}<y>? ", p.message(), p.code.prompt());
        let (word, answer) = read_answer().unwrap_or(("no", Answer::No));
        self.yes_run = match answer {
            Answer::Yes if self.yes_run >= 0 => self.yes_run + 1,
            Answer::Yes => self.yes_run,
            Answer::No | Answer::All => -1,
        };
        println!("{word}\n");
        answer
    }

    /// Prints the problems of round `round` left unasked after a "no" (the round is not
    /// applied), under their headings, as `-n` would.
    pub(crate) fn unasked(&mut self, rest: &[Problem], round: usize) {
        for p in rest {
            self.headings(p.code.def().pass, round);
            println!("{}.  {}? no\n", p.message(), p.code.prompt());
        }
    }

    /// Prints the headings of the passes after the last problem's up to `pass` (all of
    /// them from the first at a new round); pass 1B's only when `pass` is 1B.
    fn headings(&mut self, pass: Pass, round: usize) {
        let from = match self.last {
            Some((r, l)) if r == round => PASSES.iter().position(|&q| q == l).map_or(0, |i| i + 1),
            _ => 0,
        };
        for &q in PASSES[from..].iter().take_while(|&&q| q <= pass) {
            print_heading(q);
            if q == Pass::P1B && pass == Pass::P1B {
                print_pass1b_heading();
            }
        }
        self.last = Some((round, pass));
    }
}

/// Reads keys until one answers: Some((echo, answer)), or None at end of input.
fn read_answer() -> Option<(&'static str, Answer)> {
    let _ = std::io::stdout().flush();
    let _raw = RawInput::enter();
    let mut key = [0u8; 1];
    loop {
        match std::io::stdin().read(&mut key) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
        return Some(match key[0] {
            b'y' | b'Y' | b'\n' | b'\r' | b' ' | 27 => ("yes", Answer::Yes),
            b'n' | b'N' => ("no", Answer::No),
            b'a' | b'A' => ("yes to all", Answer::All),
            3 => ("cancelled!", Answer::No),
            _ => continue,
        });
    }
}

/// The terminal on standard input switched to single keys without echo or signals while
/// an answer is read (e2fsck clears ICANON and ECHO; usfs also ISIG, so that Control-C
/// arrives as a key and the terminal is always put back); restored on drop.
struct RawInput {
    /// The settings to restore (None: standard input is not a terminal).
    saved: Option<libc::termios>,
}

impl RawInput {
    fn enter() -> RawInput {
        // SAFETY: termios is plain data; tcgetattr fills it or fails.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd 0 and a valid termios pointer.
        if unsafe { libc::tcgetattr(0, &mut t) } != 0 {
            return RawInput { saved: None };
        }
        let mut raw = t;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: fd 0 and a valid termios.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &raw) };
        RawInput { saved: Some(t) }
    }
}

impl Drop for RawInput {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            // SAFETY: fd 0 and the termios read from it.
            unsafe { libc::tcsetattr(0, libc::TCSANOW, t) };
        }
    }
}
