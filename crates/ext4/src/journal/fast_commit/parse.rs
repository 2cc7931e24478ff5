//! Scanning the fast-commit area, as the kernel's `ext4_fc_replay_scan`: records are read
//! block by block, each bounds-checked and its value length checked for its type; a fast
//! commit counts only when its TAIL names the expected transaction and its crc32c
//! matches. The scan stops at the first record that does not check; the fast commits
//! before it are kept. When nothing was kept yet, a bad record is an error, as in the
//! kernel (-ECANCELED, -EFSBADCRC, -EOPNOTSUPP fail the recovery).

use super::{tag, FcAddRange, FcDelRange, FcDentryInfo, FcHead, FcTagLen, FcTail};
use crate::format::checksum::crc32c_raw;

/// One record to replay, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// Map `len` blocks from `pblk` at logical block `lblk` of inode `ino`.
    AddRange {
        /// The file.
        ino: u32,
        /// First logical block.
        lblk: u32,
        /// First physical block.
        pblk: u64,
        /// Blocks (1 to 32768).
        len: u32,
        /// An unwritten (preallocated) extent.
        unwritten: bool,
    },
    /// Unmap logical blocks `lblk..lblk+len` of inode `ino`.
    DelRange {
        /// The file.
        ino: u32,
        /// First logical block.
        lblk: u32,
        /// Blocks.
        len: u32,
    },
    /// Directory entry `name` -> `ino` in `parent`, for an inode created (`create`) or
    /// linked.
    Link {
        /// The directory.
        parent: u32,
        /// The inode named.
        ino: u32,
        /// The name (1 to 255 bytes).
        name: Vec<u8>,
        /// CREAT (true) or LINK (false).
        create: bool,
    },
    /// Directory entry `name` of `parent` (naming `ino`) removed.
    Unlink {
        /// The directory.
        parent: u32,
        /// The inode the entry named.
        ino: u32,
        /// The name.
        name: Vec<u8>,
    },
    /// The raw on-disk inode `ino` as the kernel had it (at least 128 bytes).
    Inode {
        /// The inode number.
        ino: u32,
        /// The record.
        raw: Vec<u8>,
    },
}

/// What the scan found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FastCommits {
    /// The records of every complete, checked fast commit, in order.
    pub records: Vec<Record>,
    /// Fast commits kept.
    pub commits: u32,
    /// Why the scan stopped where it did (informational), when not at a clean end.
    pub stopped: Option<String>,
}

/// Longest name a dentry record may carry.
const NAME_LEN: usize = 255;
/// Smallest inode a record may carry (EXT4_GOOD_OLD_INODE_SIZE).
const GOOD_OLD_INODE_SIZE: usize = 128;

/// ext4_fc_value_len_isvalid: is `len` a possible value length for `tag`?
fn len_ok(tag: u16, len: usize, inode_size: usize) -> bool {
    match tag {
        tag::ADD_RANGE => len == FcAddRange::<&[u8]>::SIZE,
        tag::DEL_RANGE => len == FcDelRange::<&[u8]>::SIZE,
        tag::CREAT | tag::LINK | tag::UNLINK => (1..=NAME_LEN).contains(&len.wrapping_sub(8)),
        tag::INODE => (GOOD_OLD_INODE_SIZE..=inode_size).contains(&len.wrapping_sub(4)),
        tag::PAD => true,
        tag::TAIL => len >= FcTail::<&[u8]>::SIZE,
        tag::HEAD => len == FcHead::<&[u8]>::SIZE,
        _ => false,
    }
}

/// Scan state across blocks (ext4_fc_replay_state).
struct Scan {
    tid: u32,
    inode_size: usize,
    crc: u32,
    /// Records of the fast commit being read (not yet closed by a good TAIL).
    pending: Vec<Record>,
    out: FastCommits,
}

/// How one record ended the scan, if it did.
enum Stop {
    /// JBD2_FC_REPLAY_STOP: keep what was kept, end here.
    Here(String),
    /// A negative return: the recovery fails (only before anything was kept).
    Fail(String),
}

/// Scans the fast-commit area: `read(i)` gives its block `i` (`None` on a read error,
/// which ends the scan) for `i` in `0..nblocks`. `tid` is the transaction after the
/// replayed log; `inode_size` the file system's. `Err` is a failed recovery.
pub fn scan(
    mut read: impl FnMut(u32) -> Option<Vec<u8>>,
    nblocks: u32,
    tid: u32,
    inode_size: u32,
) -> Result<FastCommits, String> {
    let mut st = Scan {
        tid,
        inode_size: inode_size as usize,
        crc: 0,
        pending: Vec::new(),
        out: FastCommits::default(),
    };
    for i in 0..nblocks {
        let Some(buf) = read(i) else {
            st.out.stopped = Some(format!("fast-commit block {i} unreadable"));
            break;
        };
        if i == 0 && (buf.len() < 4 || u16::from_le_bytes([buf[0], buf[1]]) != tag::HEAD) {
            // Nothing in the area for any transaction (the kernel stops early).
            return Ok(st.out);
        }
        match st.block(&buf) {
            None => {}
            Some(Stop::Here(why)) => {
                st.out.stopped = Some(why);
                break;
            }
            Some(Stop::Fail(why)) => return Err(why),
        }
    }
    Ok(st.out)
}

impl Scan {
    /// The records of one block; `Some` when the scan ends in it.
    fn block(&mut self, buf: &[u8]) -> Option<Stop> {
        let mut cur = 0usize;
        while cur + 4 <= buf.len() {
            let tl = FcTagLen::new(&buf[cur..cur + 4]).expect("4 bytes");
            let (t, len) = (tl.fc_tag(), tl.fc_len() as usize);
            let val = cur + 4;
            if len > buf.len() - val || !len_ok(t, len, self.inode_size) {
                return Some(self.bad(format!("bad record (tag {t}, length {len})")));
            }
            if let Some(stop) = self.record(t, &buf[cur..val + len]) {
                return Some(stop);
            }
            cur = val + len;
        }
        None
    }

    /// Stops at a bad record: an error when no fast commit was kept yet.
    fn bad(&self, why: String) -> Stop {
        let why = format!("fast commit: {why}");
        if self.out.commits > 0 {
            Stop::Here(why)
        } else {
            Stop::Fail(why)
        }
    }

    /// One record (`rec`: header and value, lengths already checked).
    fn record(&mut self, t: u16, rec: &[u8]) -> Option<Stop> {
        let val = &rec[4..];
        match t {
            tag::TAIL => {
                let tail = FcTail::new(val).expect("checked length");
                self.crc = crc32c_raw(self.crc, &rec[..8]);
                let ok = tail.fc_tid() == self.tid && tail.fc_crc() == self.crc;
                self.crc = 0;
                if !ok {
                    return Some(self.bad(format!(
                        "fast commit {} of transaction {}: tail does not check",
                        self.out.commits, self.tid
                    )));
                }
                self.out.records.append(&mut self.pending);
                self.out.commits += 1;
                return None;
            }
            tag::HEAD => {
                let head = FcHead::new(val).expect("checked length");
                if head.fc_features() != 0 {
                    return Some(Stop::Fail(format!(
                        "fast commit: unknown features {:#x}",
                        head.fc_features()
                    )));
                }
                if head.fc_tid() != self.tid {
                    return Some(Stop::Here(format!(
                        "fast commit: head names transaction {}, not {}",
                        head.fc_tid(),
                        self.tid
                    )));
                }
            }
            tag::PAD => {}
            _ => self.pending.push(decode(t, val)),
        }
        self.crc = crc32c_raw(self.crc, rec);
        None
    }
}

/// Decodes the value of a record of type ADD_RANGE, DEL_RANGE, CREAT, LINK, UNLINK or
/// INODE (its length already checked).
fn decode(t: u16, val: &[u8]) -> Record {
    let le32 = |o: usize| u32::from_le_bytes(val[o..o + 4].try_into().expect("4 bytes"));
    match t {
        tag::ADD_RANGE => {
            let r = FcAddRange::new(val).expect("checked length");
            let raw_len = r.ee_len() as u32;
            let (len, unwritten) = if raw_len > 32768 {
                (raw_len - 32768, true)
            } else {
                (raw_len, false)
            };
            Record::AddRange {
                ino: r.fc_ino(),
                lblk: r.ee_block(),
                pblk: (r.ee_start_hi() as u64) << 32 | r.ee_start_lo() as u64,
                len,
                unwritten,
            }
        }
        tag::DEL_RANGE => Record::DelRange {
            ino: le32(0),
            lblk: le32(4),
            len: le32(8),
        },
        tag::INODE => Record::Inode {
            ino: le32(0),
            raw: val[4..].to_vec(),
        },
        _ => {
            let d = FcDentryInfo::new(val).expect("checked length");
            let (parent, ino, name) = (d.fc_parent_ino(), d.fc_ino(), val[8..].to_vec());
            if t == tag::UNLINK {
                Record::Unlink { parent, ino, name }
            } else {
                Record::Link {
                    parent,
                    ino,
                    name,
                    create: t == tag::CREAT,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: usize = 1024;

    /// Builds an area from records; `tail(tid)` closes a fast commit with a good crc.
    struct Area {
        blocks: Vec<Vec<u8>>,
        cur: Vec<u8>,
        crc: u32,
    }

    impl Area {
        fn new() -> Area {
            Area {
                blocks: Vec::new(),
                cur: Vec::new(),
                crc: 0,
            }
        }
        fn rec(&mut self, t: u16, val: &[u8]) -> &mut Self {
            let mut r = t.to_le_bytes().to_vec();
            r.extend_from_slice(&(val.len() as u16).to_le_bytes());
            r.extend_from_slice(val);
            self.crc = crc32c_raw(self.crc, &r);
            self.cur.extend_from_slice(&r);
            self
        }
        fn tail(&mut self, tid: u32) -> &mut Self {
            let pad = BS - self.cur.len() - 4;
            let mut r = tag::TAIL.to_le_bytes().to_vec();
            r.extend_from_slice(&(pad as u16).to_le_bytes());
            r.extend_from_slice(&tid.to_le_bytes());
            let crc = crc32c_raw(self.crc, &r);
            r.extend_from_slice(&crc.to_le_bytes());
            r.resize(pad + 4, 0);
            self.cur.extend_from_slice(&r);
            self.blocks.push(std::mem::take(&mut self.cur));
            self.crc = 0;
            self
        }
        fn scan(&self, tid: u32) -> Result<FastCommits, String> {
            let b = &self.blocks;
            scan(|i| b.get(i as usize).cloned(), b.len() as u32, tid, 256)
        }
    }

    fn head(tid: u32) -> Vec<u8> {
        [0u32.to_le_bytes(), tid.to_le_bytes()].concat()
    }

    fn del(ino: u32) -> Vec<u8> {
        [ino.to_le_bytes(), 5u32.to_le_bytes(), 2u32.to_le_bytes()].concat()
    }

    #[test]
    fn good_commits_are_kept_and_a_bad_tail_stops() {
        let mut a = Area::new();
        a.rec(tag::HEAD, &head(7))
            .rec(tag::DEL_RANGE, &del(12))
            .tail(7);
        a.rec(tag::DEL_RANGE, &del(13)).tail(7);
        a.rec(tag::DEL_RANGE, &del(14)).tail(7);
        let all = a.scan(7).unwrap();
        assert_eq!(all.commits, 3);
        assert_eq!(all.records.len(), 3);
        // A torn last fast commit: its records are dropped, the others kept.
        a.blocks[2][6] ^= 1;
        let torn = a.scan(7).unwrap();
        assert_eq!(torn.commits, 2);
        assert_eq!(
            torn.records[1],
            Record::DelRange {
                ino: 13,
                lblk: 5,
                len: 2
            }
        );
        // Another transaction's area holds nothing for this one.
        assert_eq!(a.scan(8).unwrap().commits, 0);
        // A first fast commit that does not check fails the recovery.
        a.blocks[0][18] ^= 1;
        assert!(a.scan(7).is_err());
    }

    #[test]
    fn records_decode() {
        let mut a = Area::new();
        let mut add = 12u32.to_le_bytes().to_vec();
        add.extend_from_slice(&3u32.to_le_bytes());
        add.extend_from_slice(&(32768u16 + 4).to_le_bytes());
        add.extend_from_slice(&1u16.to_le_bytes());
        add.extend_from_slice(&100u32.to_le_bytes());
        let mut link = [2u32.to_le_bytes(), 12u32.to_le_bytes()].concat();
        link.extend_from_slice(b"name");
        let mut ino = 12u32.to_le_bytes().to_vec();
        ino.extend_from_slice(&[7u8; 160]);
        a.rec(tag::HEAD, &head(1))
            .rec(tag::ADD_RANGE, &add)
            .rec(tag::CREAT, &link)
            .rec(tag::PAD, &[0; 9])
            .rec(tag::UNLINK, &link)
            .rec(tag::INODE, &ino)
            .tail(1);
        let r = a.scan(1).unwrap().records;
        assert_eq!(
            r[0],
            Record::AddRange {
                ino: 12,
                lblk: 3,
                pblk: (1 << 32) | 100,
                len: 4,
                unwritten: true
            }
        );
        assert!(matches!(&r[1], Record::Link { create: true, name, .. } if name == b"name"));
        assert!(matches!(
            &r[2],
            Record::Unlink {
                parent: 2,
                ino: 12,
                ..
            }
        ));
        assert!(matches!(&r[3], Record::Inode { ino: 12, raw } if raw.len() == 160));
        // An inode record larger than the file system's inodes does not check.
        assert!(scan(|i| a.blocks.get(i as usize).cloned(), 1, 1, 128).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..3000 {
            let n = 1 + (next() % 4) as usize;
            let mut blocks: Vec<Vec<u8>> = (0..n)
                .map(|_| (0..BS).map(|_| next() as u8).collect())
                .collect();
            // Plausible headers now and then, so the scan gets past the first record.
            if round % 2 == 0 {
                let mut h = tag::HEAD.to_le_bytes().to_vec();
                h.extend_from_slice(&8u16.to_le_bytes());
                h.extend_from_slice(&head(3));
                blocks[0][..12].copy_from_slice(&h);
                let mut off = 12;
                while off + 4 <= BS && next() % 8 != 0 {
                    let t = (next() % 10) as u16;
                    let l = (next() % 300) as u16;
                    blocks[0][off..off + 2].copy_from_slice(&t.to_le_bytes());
                    blocks[0][off + 2..off + 4].copy_from_slice(&l.to_le_bytes());
                    off += 4 + l as usize;
                }
            }
            let _ = scan(|i| blocks.get(i as usize).cloned(), n as u32 + 1, 3, 256);
        }
    }
}
