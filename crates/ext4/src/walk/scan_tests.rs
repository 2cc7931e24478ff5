//! Whole-map walks in lenient mode: every block and every issue reaches the visitor, as
//! values, and the walk goes on where e2fsck goes on.

use super::{extent, indirect, BlockSource, HeaderIssue, MapCtx, MapIssue, MapVisitor, Mode};
use std::ops::ControlFlow;
use usfs_fs::{Error, Result, Structure};

/// A source whose every block is unreadable.
struct NoBlocks;
impl BlockSource for NoBlocks {
    fn read_block(&self, blk: u64) -> Result<Vec<u8>> {
        Err(Error::corrupt(Structure::Image, format!("block {blk} unreadable")).with_block(blk))
    }
}

/// Records what a walk reports.
#[derive(Default)]
struct Log {
    data: Vec<(u64, u64, u64)>,
    nodes: Vec<u64>,
    issues: Vec<MapIssue>,
}
impl MapVisitor for Log {
    fn data(&mut self, lblk: u64, pblk: u64, len: u64, _unwritten: bool) {
        self.data.push((lblk, pblk, len));
    }
    fn node(&mut self, blk: u64) {
        self.nodes.push(blk);
    }
    fn issue(&mut self, issue: MapIssue) -> ControlFlow<()> {
        self.issues.push(issue);
        ControlFlow::Continue(())
    }
}

fn cx() -> MapCtx {
    MapCtx {
        ino: 12,
        generation: 0,
        seed: None,
        block_size: 4096,
        blocks_count: 1000,
        first_data_block: 0,
    }
}

fn put(buf: &mut [u8], at: usize, v: &[u32]) {
    for (i, x) in v.iter().enumerate() {
        buf[at + 4 * i..at + 4 * i + 4].copy_from_slice(&x.to_le_bytes());
    }
}

/// An extent root (depth `depth`, eh_max `max`) holding `entries` 12-byte entries.
fn root(depth: u16, max: u16, entries: &[[u32; 3]]) -> [u8; 60] {
    let mut r = [0u8; 60];
    r[0..2].copy_from_slice(&0xF30Au16.to_le_bytes());
    r[2..4].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    r[4..6].copy_from_slice(&max.to_le_bytes());
    r[6..8].copy_from_slice(&depth.to_le_bytes());
    for (i, e) in entries.iter().enumerate() {
        put(&mut r, 12 * (i + 1), e);
    }
    r
}

/// What a whole walk of the extent tree in `r` reports in `mode`.
fn scan_extents(r: &[u8; 60], mode: Mode) -> Log {
    let mut log = Log::default();
    let flow = extent::scan(&NoBlocks, &cx(), r, mode, &mut Default::default(), &mut log);
    assert!(flow.is_continue());
    log
}

#[test]
fn extent_leaf_issues_are_values_and_the_walk_goes_on() {
    // (ee_block, ee_len | ee_start_hi << 16, ee_start_lo)
    let r = root(0, 4, &[[0, 2, 100], [1, 1, 200], [5, 1, 5000], [9, 0, 300]]);
    let log = scan_extents(&r, Mode::Lenient);
    // The out-of-order extent is reported and left out, as e2fsck clears it.
    assert_eq!(log.data, [(0, 100, 2)]);
    assert_eq!(
        log.issues,
        [
            MapIssue::ExtentOrder { lblk: 1, len: 1 },
            MapIssue::ExtentOutOfRange {
                lblk: 5,
                len: 1,
                pblk: 5000
            },
            MapIssue::ExtentOutOfRange {
                lblk: 9,
                len: 0,
                pblk: 300
            },
        ]
    );
}

#[test]
fn extent_root_rules_depend_on_the_mode() {
    // eh_max 1: the kernel accepts it, e2fsck does not (more than 2 below 4).
    let r = root(0, 1, &[[0, 1, 100]]);
    let log = scan_extents(&r, Mode::Strict);
    assert_eq!((log.data.len(), log.issues.len()), (1, 0));
    let log = scan_extents(&r, Mode::Lenient);
    let short = HeaderIssue::ShortMax {
        found: 1,
        capacity: 4,
    };
    assert_eq!(
        log.issues,
        [MapIssue::Header {
            blk: 0,
            issue: short
        }]
    );
    assert!(extent::check_root(&cx(), &r).is_ok());
}

#[test]
fn extent_index_children_are_visited_then_reported_unreadable() {
    // (ei_block, ei_leaf_lo, ei_leaf_hi | unused)
    let r = root(1, 4, &[[0, 50, 0], [10, 2000, 0]]);
    let log = scan_extents(&r, Mode::Lenient);
    assert_eq!(log.nodes, [50]);
    assert_eq!(
        log.issues,
        [
            MapIssue::Unreadable { blk: 50 },
            MapIssue::IndexOutOfRange { child: 2000 },
        ]
    );
}

#[test]
fn indirect_map_reports_pointers_outside_and_unreadable_blocks() {
    let mut r = [0u8; 60];
    put(&mut r, 0, &[7, 0, 1000]);
    put(&mut r, 12 * 4, &[60]);
    let mut log = Log::default();
    let _ = indirect::scan(&NoBlocks, &cx(), &r, &mut Default::default(), &mut log);
    assert_eq!(log.data, [(0, 7, 1)]);
    assert_eq!(log.nodes, [60]);
    assert_eq!(
        log.issues,
        [
            MapIssue::PointerOutOfRange { blk: 1000, lblk: 2 },
            MapIssue::Unreadable { blk: 60 },
        ]
    );
}
