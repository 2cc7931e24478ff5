//! Presentation helpers shared by `ls` and `stat`.

use usfs_fs::Metadata;

/// `ls -l` mode string, e.g. `drwxr-sr-x`.
pub(crate) fn mode_string(m: &Metadata) -> String {
    let p = m.perm;
    let mut s = String::with_capacity(10);
    s.push(m.file_type.ls_char());
    let bit = |mask: u32, c: char| if p & mask != 0 { c } else { '-' };
    let special = |x: bool, s_bit: bool, lower: char, upper: char| match (s_bit, x) {
        (true, true) => lower,
        (true, false) => upper,
        (false, true) => 'x',
        (false, false) => '-',
    };
    s.push(bit(0o400, 'r'));
    s.push(bit(0o200, 'w'));
    s.push(special(p & 0o100 != 0, p & 0o4000 != 0, 's', 'S'));
    s.push(bit(0o040, 'r'));
    s.push(bit(0o020, 'w'));
    s.push(special(p & 0o010 != 0, p & 0o2000 != 0, 's', 'S'));
    s.push(bit(0o004, 'r'));
    s.push(bit(0o002, 'w'));
    s.push(special(p & 0o001 != 0, p & 0o1000 != 0, 't', 'T'));
    s
}

/// Major and minor numbers of a Linux device number.
pub(crate) fn major_minor(rdev: u64) -> (u64, u64) {
    let major = ((rdev >> 32) & 0xFFFF_F000) | ((rdev >> 8) & 0xFFF);
    let minor = ((rdev >> 12) & 0xFFFF_FF00) | (rdev & 0xFF);
    (major, minor)
}

/// A name for the terminal: bytes that are not printable UTF-8 are escaped as `\xNN`.
pub(crate) fn show_name(name: &[u8]) -> String {
    let mut out = String::new();
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.push_str(&format!("\\x{:02x}", c as u32));
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}
