//! Inode placement, flex_bg-aware: Orlov spreading of top-level directories over flex
//! groups, everything else near its parent, and a flex group is filled up to a free-block
//! ratio before the next one is used.

use super::bitset::BitSet;

/// A flex group whose free blocks fall below this percentage is skipped for new
/// inodes while another one has room (keeps space for the files' data near them).
pub const MIN_FREE_BLOCK_PERCENT: u64 = 10;

/// What is being placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InodeKind {
    /// A directory directly under the root (spread with Orlov).
    TopDir,
    /// Any other directory.
    Dir,
    /// Anything else.
    File,
}

/// Per-group inode state.
#[derive(Clone, Debug)]
struct IGroup {
    /// Bit per inode, set = used; `None` while untouched (INODE_UNINIT).
    used: Option<BitSet>,
    free: u32,
    dirs: u32,
}

/// The inode allocator.
#[derive(Clone, Debug)]
pub struct InodeAllocator {
    ipg: u32,
    groups_per_flex: u32,
    groups: Vec<IGroup>,
    free_total: u64,
}

/// No inode is free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoInodes;

impl std::fmt::Display for NoInodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no free inodes left")
    }
}

impl std::error::Error for NoInodes {}

impl InodeAllocator {
    /// `group_count` groups of `ipg` inodes, all free.
    pub fn new(group_count: u32, ipg: u32, groups_per_flex: u32) -> InodeAllocator {
        InodeAllocator {
            ipg,
            groups_per_flex: groups_per_flex.max(1),
            groups: vec![
                IGroup {
                    used: None,
                    free: ipg,
                    dirs: 0,
                };
                group_count as usize
            ],
            free_total: group_count as u64 * ipg as u64,
        }
    }

    /// Free inodes.
    pub fn free_inodes(&self) -> u64 {
        self.free_total
    }

    /// Free inodes in group `g`.
    pub fn group_free(&self, g: u32) -> u32 {
        self.groups[g as usize].free
    }

    /// Directories in group `g`.
    pub fn group_dirs(&self, g: u32) -> u32 {
        self.groups[g as usize].dirs
    }

    /// One past the highest used inode index of group `g` (0 if none): the table
    /// beyond it is unused (`bg_itable_unused`).
    pub fn high_water(&self, g: u32) -> u32 {
        match &self.groups[g as usize].used {
            None => 0,
            Some(b) => b.high_water(),
        }
    }

    /// The on-disk inode bitmap of group `g` (`bytes` long, padding set), `None` if the
    /// group was never touched.
    pub fn bitmap_bytes(&self, g: u32, bytes: usize) -> Option<Vec<u8>> {
        self.groups[g as usize]
            .used
            .as_ref()
            .map(|b| b.to_bytes(bytes, true))
    }

    /// Installs group `g`'s state read from an image: its inode bitmap (bit per inode, set
    /// = used) and directory count. An INODE_UNINIT group is not loaded (all free).
    pub fn load_group(&mut self, g: u32, bitmap: &[u8], dirs: u32) {
        let used = BitSet::from_bytes(bitmap, self.ipg);
        let free = self.ipg - used.count_ones(0, self.ipg);
        let gr = &mut self.groups[g as usize];
        self.free_total = self.free_total - gr.free as u64 + free as u64;
        *gr = IGroup {
            used: Some(used),
            free,
            dirs,
        };
    }

    /// Marks inode `ino` (1-based) used, e.g. the reserved inodes 1..first_ino.
    pub fn reserve(&mut self, ino: u32, is_dir: bool) -> Result<(), String> {
        let (g, i) = self.split(ino)?;
        let ipg = self.ipg;
        let gr = &mut self.groups[g as usize];
        let b = gr.used.get_or_insert_with(|| BitSet::new(ipg));
        if b.get(i) {
            return Err(format!("inode {ino} is already in use"));
        }
        b.set(i);
        gr.free -= 1;
        if is_dir {
            gr.dirs += 1;
        }
        self.free_total -= 1;
        Ok(())
    }

    /// Frees inode `ino`.
    pub fn free(&mut self, ino: u32, is_dir: bool) -> Result<(), String> {
        let (g, i) = self.split(ino)?;
        let gr = &mut self.groups[g as usize];
        match gr.used.as_mut() {
            Some(b) if b.get(i) => b.clear(i),
            _ => return Err(format!("inode {ino} is not in use")),
        }
        gr.free += 1;
        if is_dir {
            gr.dirs -= 1;
        }
        self.free_total += 1;
        Ok(())
    }

    fn split(&self, ino: u32) -> Result<(u32, u32), String> {
        if ino == 0 || (ino - 1) / self.ipg >= self.groups.len() as u32 {
            return Err(format!("inode {ino} out of range"));
        }
        Ok(((ino - 1) / self.ipg, (ino - 1) % self.ipg))
    }

    /// Allocates an inode of `kind` whose parent lives in group `parent_group`.
    /// `flex_free_blocks(f)` and `flex_blocks(f)` give the flex group's free and total
    /// blocks (from the block allocator).
    pub fn alloc(
        &mut self,
        kind: InodeKind,
        parent_group: u32,
        flex_free_blocks: &dyn Fn(u32) -> u64,
        flex_blocks: &dyn Fn(u32) -> u64,
    ) -> Result<u32, NoInodes> {
        if self.free_total == 0 {
            return Err(NoInodes);
        }
        let nflex = (self.groups.len() as u32).div_ceil(self.groups_per_flex);
        let flex = match kind {
            InodeKind::TopDir => self.orlov(nflex, flex_free_blocks),
            InodeKind::Dir | InodeKind::File => {
                let pf = parent_group / self.groups_per_flex;
                let ok = |f: u32| {
                    self.flex_free_inodes(f) > 0
                        && flex_free_blocks(f) * 100 >= flex_blocks(f) * MIN_FREE_BLOCK_PERCENT
                };
                (pf..nflex)
                    .chain(0..pf)
                    .find(|&f| ok(f))
                    .or_else(|| {
                        (pf..nflex)
                            .chain(0..pf)
                            .find(|&f| self.flex_free_inodes(f) > 0)
                    })
                    .ok_or(NoInodes)?
            }
        };
        // Inside the flex group: the parent's group if it is in it, else the first
        // group with a free inode.
        let first = flex * self.groups_per_flex;
        let last = (first + self.groups_per_flex).min(self.groups.len() as u32);
        let start = if (first..last).contains(&parent_group) && kind == InodeKind::File {
            parent_group
        } else {
            first
        };
        let g = (start..last)
            .chain(first..start)
            .find(|&g| self.groups[g as usize].free > 0)
            .ok_or(NoInodes)?;
        let ipg = self.ipg;
        let gr = &mut self.groups[g as usize];
        let b = gr.used.get_or_insert_with(|| BitSet::new(ipg));
        let i = b.find(0, false).ok_or(NoInodes)?;
        b.set(i);
        gr.free -= 1;
        if kind != InodeKind::File {
            gr.dirs += 1;
        }
        self.free_total -= 1;
        Ok(g * ipg + i + 1)
    }

    fn flex_free_inodes(&self, f: u32) -> u64 {
        let first = f * self.groups_per_flex;
        let last = (first + self.groups_per_flex).min(self.groups.len() as u32);
        (first..last)
            .map(|g| self.groups[g as usize].free as u64)
            .sum()
    }

    fn flex_dirs(&self, f: u32) -> u64 {
        let first = f * self.groups_per_flex;
        let last = (first + self.groups_per_flex).min(self.groups.len() as u32);
        (first..last)
            .map(|g| self.groups[g as usize].dirs as u64)
            .sum()
    }

    /// Orlov: among flex groups with at least the average free inodes and free blocks,
    /// the one with the fewest directories (first on ties); else any with free inodes.
    fn orlov(&self, nflex: u32, flex_free_blocks: &dyn Fn(u32) -> u64) -> u32 {
        let avg_inodes = self.free_total / nflex as u64;
        let avg_blocks = (0..nflex).map(flex_free_blocks).sum::<u64>() / nflex as u64;
        let best = (0..nflex)
            .filter(|&f| {
                self.flex_free_inodes(f) >= avg_inodes.max(1) && flex_free_blocks(f) >= avg_blocks
            })
            .min_by_key(|&f| (self.flex_dirs(f), f));
        best.unwrap_or_else(|| {
            (0..nflex)
                .max_by_key(|&f| (self.flex_free_inodes(f), std::cmp::Reverse(f)))
                .unwrap_or(0)
        })
    }
}
