//! What [`generate`](super::generate) made.

use std::fmt;

/// Counts of what a generated tree holds, and notes on what was skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GenReport {
    /// Directories created (the root not counted).
    pub dirs: u64,
    /// Regular files (inodes; extra hard-link names not counted).
    pub files: u64,
    /// Regular files with holes (included in `files`).
    pub sparse_files: u64,
    /// Regular files larger than 4 GiB (included in `sparse_files`).
    pub huge_files: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Extra names made with link(2) for inodes that already had one.
    pub hardlinks: u64,
    /// Named pipes.
    pub fifos: u64,
    /// Character device nodes.
    pub char_devices: u64,
    /// Block device nodes.
    pub block_devices: u64,
    /// Unix socket files.
    pub sockets: u64,
    /// Extended attributes set (name-value pairs, counted per inode).
    pub xattrs: u64,
    /// Directory entries created (all names, hard links included; the root not counted).
    pub entries: u64,
    /// Sum of the apparent sizes of regular files (each inode once).
    pub bytes: u64,
    /// Bytes of file data actually written (holes excluded).
    pub data_bytes: u64,
    /// What was skipped and why (e.g. device nodes without root).
    pub notes: Vec<String>,
}

impl GenReport {
    /// The report as a JSON object.
    pub fn to_json(&self) -> String {
        let counts = [
            ("dirs", self.dirs),
            ("files", self.files),
            ("sparse_files", self.sparse_files),
            ("huge_files", self.huge_files),
            ("symlinks", self.symlinks),
            ("hardlinks", self.hardlinks),
            ("fifos", self.fifos),
            ("char_devices", self.char_devices),
            ("block_devices", self.block_devices),
            ("sockets", self.sockets),
            ("xattrs", self.xattrs),
            ("entries", self.entries),
            ("bytes", self.bytes),
            ("data_bytes", self.data_bytes),
        ];
        let mut s = String::from("{");
        for (k, v) in counts {
            s.push_str(&format!("\"{k}\":{v},"));
        }
        s.push_str("\"notes\":[");
        let notes: Vec<String> = self.notes.iter().map(|n| json_str(n)).collect();
        s.push_str(&notes.join(","));
        s.push_str("]}");
        s
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl fmt::Display for GenReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} entries: {} dirs, {} files ({} sparse, {} > 4 GiB), {} symlinks, {} hard links, \
             {} fifos, {} char devs, {} block devs, {} sockets; {} xattrs",
            self.entries,
            self.dirs,
            self.files,
            self.sparse_files,
            self.huge_files,
            self.symlinks,
            self.hardlinks,
            self.fifos,
            self.char_devices,
            self.block_devices,
            self.sockets,
            self.xattrs
        )?;
        write!(
            f,
            "{} bytes apparent, {} bytes of data written",
            self.bytes, self.data_bytes
        )?;
        for n in &self.notes {
            write!(f, "\nnote: {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_notes() {
        let r = GenReport {
            notes: vec!["a \"b\"\n".into()],
            files: 3,
            ..Default::default()
        };
        let j = r.to_json();
        assert!(j.contains("\"files\":3,"));
        assert!(j.ends_with("\"notes\":[\"a \\\"b\\\"\\u000a\"]}"));
    }
}
