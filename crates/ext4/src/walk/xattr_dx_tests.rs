//! The xattr and dx walkers on hand-built areas and nodes: what a strict walk returns
//! or refuses, and which issues a lenient walk reports and where it goes on.

use super::dx::{self, DxCtx, DxIssue, DxKind};
use super::xattr::{self, Area, Entry, Value, XattrCtx, XattrIssue, XattrVisitor};
use super::Mode;
use crate::format::dx::{DxHeaderFault, NODE_COUNT_OFFSET, ROOT_COUNT_OFFSET};
use crate::format::xattr::{
    block_checksum, finish_block_header, lay_out, OnDisk, XattrBlockHeader, XattrEntry,
    BLOCK_HEADER_SIZE, XATTR_MAGIC,
};
use std::ops::ControlFlow;

/// Records what a lenient walk reports.
#[derive(Default)]
struct Log<'a> {
    entries: Vec<Entry<'a>>,
    issues: Vec<XattrIssue>,
}

impl<'a> XattrVisitor<'a> for Log<'a> {
    fn entry(&mut self, e: Entry<'a>) {
        self.entries.push(e);
    }
    fn issue(&mut self, issue: XattrIssue) -> ControlFlow<()> {
        self.issues.push(issue);
        ControlFlow::Continue(())
    }
}

fn cx() -> XattrCtx {
    XattrCtx {
        ino: 12,
        ea_inode: false,
        seed: None,
    }
}

fn attr(index: u8, name: &[u8], value: &[u8]) -> OnDisk {
    OnDisk {
        index,
        name: name.to_vec(),
        value: value.to_vec(),
    }
}

/// An in-inode area (after the magic) of `len` bytes holding `attrs`.
fn area(len: usize, attrs: &[OnDisk]) -> Vec<u8> {
    let mut a = vec![0u8; len];
    assert!(lay_out(&mut a, 0, len, 0, attrs));
    a
}

/// A 1 KiB xattr block holding `attrs`, checksummed with `seed` as block `blk`.
fn block(attrs: &[OnDisk], seed: Option<u32>, blk: u64) -> Vec<u8> {
    let mut b = vec![0u8; 1024];
    assert!(lay_out(&mut b, BLOCK_HEADER_SIZE, 1024, 0, attrs));
    finish_block_header(&mut b, attrs);
    if let Some(seed) = seed {
        let c = block_checksum(seed, blk, &b);
        XattrBlockHeader::new(&mut b[..32])
            .unwrap()
            .set_h_checksum(c);
    }
    b
}

fn lenient_area(a: &[u8]) -> Log<'_> {
    let mut log = Log::default();
    let _ = xattr::scan_entries(a, 0, &cx(), Mode::Lenient, &mut log);
    log
}

#[test]
fn strict_walk_finds_names_and_values() {
    let a = area(96, &[attr(1, b"a", b"xyz"), attr(7, b"data", b"")]);
    let got = xattr::entries(&a, 0, &cx(), Area::Inode).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].index, got[0].name), (1, &b"a"[..]));
    assert_eq!(got[0].value, Value::Here(b"xyz"));
    assert_eq!(
        (got[1].name, got[1].value),
        (&b"data"[..], Value::Here(b""))
    );
    assert!(lenient_area(&a).issues.is_empty());
}

#[test]
fn a_list_without_end_marker_is_truncated() {
    let mut a = area(40, &[attr(1, b"a", b"v")]);
    // Fill the end marker and everything after the entry with non-zero bytes.
    let first = crate::format::xattr::entry_size(1);
    a[first..first + 4].fill(0xff);
    let e = xattr::entries(&a, 0, &cx(), Area::Inode).unwrap_err();
    assert!(e.to_string().contains("runs off the end"), "{e}");
    let log = lenient_area(&a);
    assert!(matches!(log.issues[..], [XattrIssue::Truncated { .. }]));
    assert_eq!(log.entries.len(), 1, "the good entry is still visited");
}

#[test]
fn a_name_past_the_area_is_truncated() {
    let mut a = area(40, &[attr(1, b"a", b"")]);
    XattrEntry::new(&mut a[..16]).unwrap().set_e_name_len(200);
    assert!(xattr::entries(&a, 0, &cx(), Area::Inode).is_err());
    let log = lenient_area(&a);
    assert_eq!(log.issues, [XattrIssue::Truncated { off: 0 }]);
    assert!(log.entries.is_empty());
}

#[test]
fn a_value_outside_is_reported_and_walked_past() {
    let mut a = area(64, &[attr(1, b"a", b"v"), attr(1, b"b", b"w")]);
    XattrEntry::new(&mut a[..16]).unwrap().set_e_value_offs(64);
    let e = xattr::entries(&a, 0, &cx(), Area::Inode).unwrap_err();
    assert!(e.to_string().contains("outside its area"), "{e}");
    let log = lenient_area(&a);
    assert_eq!(
        log.issues,
        [XattrIssue::ValueOutside {
            off: 0,
            value_offs: 64,
            size: 1
        }]
    );
    assert_eq!(log.entries.len(), 2);
    assert_eq!(log.entries[0].value, Value::Outside);
}

#[test]
fn an_empty_value_anywhere_is_empty() {
    let mut a = area(64, &[attr(1, b"a", b"")]);
    XattrEntry::new(&mut a[..16])
        .unwrap()
        .set_e_value_offs(1000);
    let got = xattr::entries(&a, 0, &cx(), Area::Inode).unwrap();
    assert_eq!(got[0].value, Value::Outside);
    assert!(lenient_area(&a).issues.is_empty());
}

#[test]
fn ea_inode_values_need_the_feature() {
    let mut a = area(64, &[attr(1, b"a", b"")]);
    {
        let mut e = XattrEntry::new(&mut a[..16]).unwrap();
        e.set_e_value_inum(13);
        e.set_e_value_size(5000);
    }
    assert!(xattr::entries(&a, 0, &cx(), Area::Inode).is_err());
    let log = lenient_area(&a);
    assert_eq!(log.issues, [XattrIssue::EaInodeFeature { off: 0 }]);
    let with = XattrCtx {
        ea_inode: true,
        ..cx()
    };
    let got = xattr::entries(&a, 0, &with, Area::Inode).unwrap();
    assert_eq!(
        got[0].value,
        Value::Inode {
            ino: 13,
            size: 5000
        }
    );
}

#[test]
fn overlapping_values_are_a_lenient_issue_only() {
    let mut a = area(64, &[attr(1, b"a", b"vv"), attr(1, b"b", b"ww")]);
    // Point the second value at the first.
    let off1 = XattrEntry::new(&a[..16]).unwrap().e_value_offs();
    let second = crate::format::xattr::entry_size(1);
    XattrEntry::new(&mut a[second..second + 16])
        .unwrap()
        .set_e_value_offs(off1);
    assert!(xattr::entries(&a, 0, &cx(), Area::Inode).is_ok());
    assert_eq!(lenient_area(&a).issues, [XattrIssue::ValueOverlap]);
    // A value inside the entry table.
    let mut a = area(64, &[attr(1, b"a", b"vv")]);
    XattrEntry::new(&mut a[..16]).unwrap().set_e_value_offs(4);
    assert_eq!(lenient_area(&a).issues, [XattrIssue::ValueOverlap]);
}

#[test]
fn block_header_checksum_and_hashes() {
    let attrs = [attr(1, b"a", b"v1"), attr(1, b"bb", b"")];
    let cxs = XattrCtx {
        seed: Some(7),
        ..cx()
    };
    let b = block(&attrs, Some(7), 33);
    assert_eq!(xattr::block_entries(&b, 33, &cxs).unwrap().len(), 2);
    // The checksum names the block.
    let e = xattr::block_entries(&b, 34, &cxs).unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
    let mut log = Log::default();
    let _ = xattr::scan_block(&b, 34, &cxs, Mode::Lenient, &mut log);
    assert_eq!(log.issues, [XattrIssue::Checksum]);
    assert_eq!(log.entries.len(), 2, "a lenient walk goes on");
    // A bad hash: lenient only.
    let mut b = block(&attrs, None, 33);
    XattrEntry::new(&mut b[32..48]).unwrap().set_e_hash(1);
    assert!(xattr::block_entries(&b, 33, &cx()).is_ok());
    let mut log = Log::default();
    let _ = xattr::scan_block(&b, 33, &cx(), Mode::Lenient, &mut log);
    assert_eq!(log.issues, [XattrIssue::Hash { off: 32 }]);
    // A bad magic ends the walk.
    XattrBlockHeader::new(&mut b[..32]).unwrap().set_h_magic(1);
    let mut log = Log::default();
    let _ = xattr::scan_block(&b, 33, &cx(), Mode::Lenient, &mut log);
    assert_eq!(log.issues, [XattrIssue::Magic { found: 1 }]);
    assert!(log.entries.is_empty());
    XattrBlockHeader::new(&mut b[..32])
        .unwrap()
        .set_h_magic(XATTR_MAGIC);
    XattrBlockHeader::new(&mut b[..32]).unwrap().set_h_blocks(2);
    assert_eq!(
        xattr::header_issue(&b),
        Some(XattrIssue::Blocks { found: 2 })
    );
}

#[test]
fn ibody_needs_room_and_magic() {
    let mut raw = vec![0u8; 256];
    assert!(xattr::ibody(&raw, 256, 32).is_none());
    raw[160..164].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
    assert_eq!(xattr::ibody(&raw, 256, 32).map(<[u8]>::len), Some(92));
    assert!(xattr::ibody(&raw, 128, 32).is_none());
    assert!(xattr::ibody(&raw, 256, 126).is_none());
}

fn dcx(seed: Option<u32>) -> DxCtx {
    DxCtx {
        ino: 20,
        generation: 3,
        seed,
        large_dir: false,
        nblocks: 10,
    }
}

/// A 1 KiB interior node with `entries` (entry 0's hash ignored).
fn node(entries: &[(u32, u32)]) -> Vec<u8> {
    let mut b = vec![0u8; 1024];
    let co = NODE_COUNT_OFFSET;
    let limit = (1024 - co) / 8;
    b[co..co + 2].copy_from_slice(&(limit as u16).to_le_bytes());
    b[co + 2..co + 4].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    for (i, &(h, blk)) in entries.iter().enumerate() {
        let o = co + i * 8;
        if i > 0 {
            b[o..o + 4].copy_from_slice(&h.to_le_bytes());
        }
        b[o + 4..o + 8].copy_from_slice(&blk.to_le_bytes());
    }
    b
}

fn lenient_node(b: &[u8], kind: DxKind, cx: &DxCtx) -> (Option<dx::DxNode>, Vec<DxIssue>) {
    let mut issues = Vec::new();
    let n = dx::scan_node(b, kind, cx, Mode::Lenient, &mut |i| {
        issues.push(i);
        ControlFlow::Continue(())
    });
    (n, issues)
}

#[test]
fn dx_node_entries_and_order() {
    let b = node(&[(0, 1), (10, 2), (20, 3)]);
    let n = dx::read_node(&b, 4, DxKind::Node, &dcx(None)).unwrap();
    assert_eq!(n.entries, [(0, 1), (10, 2), (20, 3)]);
    assert_eq!(n.root, None);
    let b = node(&[(0, 1), (20, 2), (10, 3)]);
    let e = dx::read_node(&b, 4, DxKind::Node, &dcx(None)).unwrap_err();
    assert!(e.to_string().contains("out of order"), "{e}");
    let (n, issues) = lenient_node(&b, DxKind::Node, &dcx(None));
    assert!(n.is_none());
    assert_eq!(issues, [DxIssue::Unordered { at: 2 }]);
}

#[test]
fn dx_children_are_judged_strictly_only() {
    let b = node(&[(0, 1), (10, 12)]);
    let e = dx::read_node(&b, 4, DxKind::Node, &dcx(None)).unwrap_err();
    assert!(e.to_string().contains("block 12 of 10"), "{e}");
    let b0 = node(&[(0, 0)]);
    assert!(dx::read_node(&b0, 4, DxKind::Node, &dcx(None)).is_err());
    let (n, issues) = lenient_node(&b, DxKind::Node, &dcx(None));
    assert!(n.is_some() && issues.is_empty());
}

#[test]
fn dx_header_and_checksum() {
    // Without a tail the limit is wrong once metadata_csum expects one.
    let b = node(&[(0, 1)]);
    let (n, issues) = lenient_node(&b, DxKind::Node, &dcx(Some(1)));
    assert!(n.is_none());
    assert!(matches!(
        issues[..],
        [DxIssue::Header(DxHeaderFault::Limit { .. })]
    ));
    // A node with room for the tail but a wrong checksum.
    let mut b = node(&[(0, 1)]);
    let limit = ((1024 - NODE_COUNT_OFFSET - 8) / 8) as u16;
    b[NODE_COUNT_OFFSET..NODE_COUNT_OFFSET + 2].copy_from_slice(&limit.to_le_bytes());
    assert!(dx::read_node(&b, 4, DxKind::Node, &dcx(Some(1))).is_err());
    let (n, issues) = lenient_node(&b, DxKind::Node, &dcx(Some(1)));
    assert!(n.is_some(), "a lenient walk goes on past the checksum");
    assert_eq!(issues, [DxIssue::Checksum]);
    // Count 0.
    let mut b = node(&[(0, 1)]);
    b[NODE_COUNT_OFFSET + 2] = 0;
    let (_, issues) = lenient_node(&b, DxKind::Node, &dcx(None));
    assert!(matches!(
        issues[..],
        [DxIssue::Header(DxHeaderFault::Count { .. })]
    ));
}

#[test]
fn dx_root_info() {
    let mut b = vec![0u8; 1024];
    let co = ROOT_COUNT_OFFSET;
    let limit = ((1024 - co) / 8) as u16;
    b[co..co + 2].copy_from_slice(&limit.to_le_bytes());
    b[co + 2..co + 4].copy_from_slice(&1u16.to_le_bytes());
    b[co + 4..co + 8].copy_from_slice(&1u32.to_le_bytes());
    b[0x18 + 4] = 1; // half_md4
    b[0x18 + 5] = 8;
    b[0x18 + 6] = 1;
    let n = dx::read_node(&b, 0, DxKind::Root, &dcx(None)).unwrap();
    assert_eq!(n.root.map(|r| (r.hash_version, r.levels)), Some((1, 1)));
    // Two levels below the root need large_dir.
    b[0x18 + 6] = 2;
    let (n, issues) = lenient_node(&b, DxKind::Root, &dcx(None));
    assert!(n.is_none());
    assert!(matches!(issues[..], [DxIssue::RootInfo { levels: 2, .. }]));
    let large = DxCtx {
        large_dir: true,
        ..dcx(None)
    };
    assert!(dx::read_node(&b, 0, DxKind::Root, &large).is_ok());
    // An unknown hash version.
    b[0x18 + 4] = 7;
    assert!(dx::root_info(&b, true).is_err());
}
