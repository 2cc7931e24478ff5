//! The requests a client sends the owner, one per frame, and their encoding. Each is one
//! call of [`usfs_fs::FileSystem`] or [`usfs_fs::FileSystemWrite`], plus `Hello` (what the
//! owner serves), `Append` (a write at the end of the file, atomic against other appends,
//! as O_APPEND is) and `Open`/`Release` (the opener counts that keep an unlinked file).
//!
//! A reply is a status byte: 0 and the call's result, or 1, the errno and a message.

use super::wire::{Dec, Enc};
use usfs_fs::{Fallocate, Ino, NewNode, RenameFlags, SetAttr};

/// One request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Req<'a> {
    Hello,
    Lookup {
        dir: Ino,
        name: &'a [u8],
    },
    Getattr {
        ino: Ino,
    },
    Readdir {
        dir: Ino,
        pos: u64,
        dots: bool,
    },
    Read {
        ino: Ino,
        off: u64,
        len: u32,
    },
    Readlink {
        ino: Ino,
    },
    /// One step of a path walk (FileSystem::step_attrs).
    Step {
        dir: Ino,
        name: &'a [u8],
    },
    ListXattrs {
        ino: Ino,
    },
    GetXattr {
        ino: Ino,
        name: &'a [u8],
    },
    NextData {
        ino: Ino,
        off: u64,
    },
    Statfs,
    Describe,
    Create {
        dir: Ino,
        name: &'a [u8],
        node: NewNode,
    },
    Mkdir {
        dir: Ino,
        name: &'a [u8],
        node: NewNode,
    },
    Symlink {
        dir: Ino,
        name: &'a [u8],
        target: &'a [u8],
        uid: u32,
        gid: u32,
    },
    Link {
        ino: Ino,
        dir: Ino,
        name: &'a [u8],
    },
    Unlink {
        dir: Ino,
        name: &'a [u8],
    },
    Rmdir {
        dir: Ino,
        name: &'a [u8],
    },
    Rename {
        dir: Ino,
        name: &'a [u8],
        new_dir: Ino,
        new_name: &'a [u8],
        flags: RenameFlags,
    },
    /// `by`: the writer's (uid, gid), for what a write takes away (setuid, capabilities).
    Write {
        ino: Ino,
        off: u64,
        data: &'a [u8],
        by: (u32, u32),
    },
    Append {
        ino: Ino,
        data: &'a [u8],
        by: (u32, u32),
    },
    Setattr {
        ino: Ino,
        attr: SetAttr,
    },
    Fallocate {
        ino: Ino,
        mode: Fallocate,
        off: u64,
        len: u64,
    },
    SetXattr {
        ino: Ino,
        name: &'a [u8],
        value: &'a [u8],
    },
    RemoveXattr {
        ino: Ino,
        name: &'a [u8],
    },
    Fsync {
        ino: Ino,
        datasync: bool,
    },
    Sync,
    Open {
        ino: Ino,
    },
    Release {
        ino: Ino,
    },
}

/// fallocate modes on the wire: (kind, keep_size).
fn fallocate_code(m: Fallocate) -> (u8, bool) {
    match m {
        Fallocate::Allocate { keep_size } => (0, keep_size),
        Fallocate::PunchHole => (1, true),
        Fallocate::ZeroRange { keep_size } => (2, keep_size),
    }
}

fn fallocate_from(kind: u8, keep_size: bool) -> Option<Fallocate> {
    Some(match kind {
        0 => Fallocate::Allocate { keep_size },
        1 => Fallocate::PunchHole,
        2 => Fallocate::ZeroRange { keep_size },
        _ => return None,
    })
}

impl<'a> Req<'a> {
    /// The request's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        match *self {
            Req::Hello => e.u8(0),
            Req::Lookup { dir, name } => e.u8(1).u64(dir).bytes(name),
            Req::Getattr { ino } => e.u8(2).u64(ino),
            Req::Readdir { dir, pos, dots } => e.u8(3).u64(dir).u64(pos).u8(dots as u8),
            Req::Read { ino, off, len } => e.u8(4).u64(ino).u64(off).u32(len),
            Req::Readlink { ino } => e.u8(5).u64(ino),
            Req::ListXattrs { ino } => e.u8(6).u64(ino),
            Req::GetXattr { ino, name } => e.u8(7).u64(ino).bytes(name),
            Req::NextData { ino, off } => e.u8(8).u64(ino).u64(off),
            Req::Statfs => e.u8(9),
            Req::Describe => e.u8(10),
            Req::Create { dir, name, node } => e.u8(11).u64(dir).bytes(name).node(&node),
            Req::Mkdir { dir, name, node } => e.u8(12).u64(dir).bytes(name).node(&node),
            Req::Symlink {
                dir,
                name,
                target,
                uid,
                gid,
            } => e
                .u8(13)
                .u64(dir)
                .bytes(name)
                .bytes(target)
                .u32(uid)
                .u32(gid),
            Req::Link { ino, dir, name } => e.u8(14).u64(ino).u64(dir).bytes(name),
            Req::Unlink { dir, name } => e.u8(15).u64(dir).bytes(name),
            Req::Rmdir { dir, name } => e.u8(16).u64(dir).bytes(name),
            Req::Rename {
                dir,
                name,
                new_dir,
                new_name,
                flags,
            } => e
                .u8(17)
                .u64(dir)
                .bytes(name)
                .u64(new_dir)
                .bytes(new_name)
                .u8(flags.noreplace as u8 | (flags.exchange as u8) << 1),
            Req::Write { ino, off, data, by } => {
                e.u8(18).u64(ino).u64(off).bytes(data).u32(by.0).u32(by.1)
            }
            Req::Append { ino, data, by } => e.u8(19).u64(ino).bytes(data).u32(by.0).u32(by.1),
            Req::Setattr { ino, attr } => e.u8(20).u64(ino).set_attr(&attr),
            Req::Fallocate {
                ino,
                mode,
                off,
                len,
            } => {
                let (kind, keep) = fallocate_code(mode);
                e.u8(21).u64(ino).u8(kind).u8(keep as u8).u64(off).u64(len)
            }
            Req::SetXattr { ino, name, value } => e.u8(22).u64(ino).bytes(name).bytes(value),
            Req::RemoveXattr { ino, name } => e.u8(23).u64(ino).bytes(name),
            Req::Fsync { ino, datasync } => e.u8(24).u64(ino).u8(datasync as u8),
            Req::Sync => e.u8(25),
            Req::Open { ino } => e.u8(26).u64(ino),
            Req::Release { ino } => e.u8(27).u64(ino),
            Req::Step { dir, name } => e.u8(28).u64(dir).bytes(name),
        };
        e.0
    }

    /// Reads a request; `None` for anything malformed.
    pub(crate) fn decode(b: &'a [u8]) -> Option<Req<'a>> {
        let mut d = Dec(b);
        let r = match d.u8()? {
            0 => Req::Hello,
            1 => Req::Lookup {
                dir: d.u64()?,
                name: d.bytes()?,
            },
            2 => Req::Getattr { ino: d.u64()? },
            3 => Req::Readdir {
                dir: d.u64()?,
                pos: d.u64()?,
                dots: d.u8()? != 0,
            },
            4 => Req::Read {
                ino: d.u64()?,
                off: d.u64()?,
                len: d.u32()?,
            },
            5 => Req::Readlink { ino: d.u64()? },
            6 => Req::ListXattrs { ino: d.u64()? },
            7 => Req::GetXattr {
                ino: d.u64()?,
                name: d.bytes()?,
            },
            8 => Req::NextData {
                ino: d.u64()?,
                off: d.u64()?,
            },
            9 => Req::Statfs,
            10 => Req::Describe,
            11 => Req::Create {
                dir: d.u64()?,
                name: d.bytes()?,
                node: d.node()?,
            },
            12 => Req::Mkdir {
                dir: d.u64()?,
                name: d.bytes()?,
                node: d.node()?,
            },
            13 => Req::Symlink {
                dir: d.u64()?,
                name: d.bytes()?,
                target: d.bytes()?,
                uid: d.u32()?,
                gid: d.u32()?,
            },
            14 => Req::Link {
                ino: d.u64()?,
                dir: d.u64()?,
                name: d.bytes()?,
            },
            15 => Req::Unlink {
                dir: d.u64()?,
                name: d.bytes()?,
            },
            16 => Req::Rmdir {
                dir: d.u64()?,
                name: d.bytes()?,
            },
            17 => {
                let (dir, name, new_dir, new_name) = (d.u64()?, d.bytes()?, d.u64()?, d.bytes()?);
                let f = d.u8()?;
                Req::Rename {
                    dir,
                    name,
                    new_dir,
                    new_name,
                    flags: RenameFlags {
                        noreplace: f & 1 != 0,
                        exchange: f & 2 != 0,
                    },
                }
            }
            18 => Req::Write {
                ino: d.u64()?,
                off: d.u64()?,
                data: d.bytes()?,
                by: (d.u32()?, d.u32()?),
            },
            19 => Req::Append {
                ino: d.u64()?,
                data: d.bytes()?,
                by: (d.u32()?, d.u32()?),
            },
            20 => Req::Setattr {
                ino: d.u64()?,
                attr: d.set_attr()?,
            },
            21 => {
                let ino = d.u64()?;
                let (kind, keep) = (d.u8()?, d.u8()? != 0);
                Req::Fallocate {
                    ino,
                    mode: fallocate_from(kind, keep)?,
                    off: d.u64()?,
                    len: d.u64()?,
                }
            }
            22 => Req::SetXattr {
                ino: d.u64()?,
                name: d.bytes()?,
                value: d.bytes()?,
            },
            23 => Req::RemoveXattr {
                ino: d.u64()?,
                name: d.bytes()?,
            },
            24 => Req::Fsync {
                ino: d.u64()?,
                datasync: d.u8()? != 0,
            },
            25 => Req::Sync,
            26 => Req::Open { ino: d.u64()? },
            27 => Req::Release { ino: d.u64()? },
            28 => Req::Step {
                dir: d.u64()?,
                name: d.bytes()?,
            },
            _ => return None,
        };
        d.done().then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use usfs_fs::FileType;

    #[test]
    fn requests_round_trip() {
        let node = NewNode {
            file_type: FileType::Regular,
            perm: 0o640,
            uid: 5,
            gid: 6,
            rdev: 0,
        };
        let reqs = [
            Req::Hello,
            Req::Lookup { dir: 2, name: b"a" },
            Req::Readdir {
                dir: 2,
                pos: 7,
                dots: true,
            },
            Req::Create {
                dir: 2,
                name: b"f",
                node,
            },
            Req::Rename {
                dir: 2,
                name: b"a",
                new_dir: 11,
                new_name: b"b",
                flags: RenameFlags {
                    noreplace: false,
                    exchange: true,
                },
            },
            Req::Write {
                ino: 12,
                off: 1 << 33,
                data: b"xyz",
                by: (1000, 100),
            },
            Req::Fallocate {
                ino: 12,
                mode: Fallocate::ZeroRange { keep_size: true },
                off: 1,
                len: 2,
            },
            Req::Release { ino: 12 },
        ];
        for r in reqs {
            let b = r.encode();
            assert_eq!(Req::decode(&b), Some(r));
            assert_eq!(Req::decode(&b[..b.len() - 1]), None);
        }
        assert_eq!(Req::decode(&[200]), None);
        assert_eq!(Req::decode(&[0, 0]), None, "trailing bytes");
    }
}
