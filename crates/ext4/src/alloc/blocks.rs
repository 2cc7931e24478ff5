//! The file-system-wide block allocator: whole-extent allocation with a goal, over
//! per-group bitmaps and buddies, with locality-group and per-inode preallocation,
//! request normalisation and stripe alignment (see the [module docs](super)).

use super::bitset::BitSet;
use super::group::Group;
use std::collections::HashMap;
use std::fmt;

/// Requests smaller than this many blocks (of a file whose size is known) are "small
/// files": served from the locality-group preallocation.
pub const SMALL_FILE_BLOCKS: u32 = 16;
/// Size of one locality-group preallocation, in blocks (mballoc's s_mb_group_prealloc).
pub const LG_PREALLOC_BLOCKS: u32 = 512;
/// Longest extent ext4 can describe (initialised extents).
pub const MAX_EXTENT_LEN: u32 = 32768;

/// The shape of the block space the allocator manages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocGeometry {
    /// First block of group 0 (1 with 1 KiB blocks, else 0).
    pub first_data_block: u64,
    /// Total blocks.
    pub blocks_count: u64,
    /// Blocks per group.
    pub blocks_per_group: u32,
    /// Groups per flex group (1 without flex_bg).
    pub groups_per_flex: u32,
    /// RAID stripe in blocks (stripe_width, else stride); 0 = no alignment.
    pub stripe: u32,
}

impl AllocGeometry {
    /// Number of groups.
    pub fn group_count(&self) -> u32 {
        (self.blocks_count - self.first_data_block).div_ceil(self.blocks_per_group as u64) as u32
    }
    /// First block of group `g`.
    pub fn group_first(&self, g: u32) -> u64 {
        self.first_data_block + g as u64 * self.blocks_per_group as u64
    }
    /// Blocks in group `g`.
    pub fn group_blocks(&self, g: u32) -> u32 {
        (self.blocks_count - self.group_first(g)).min(self.blocks_per_group as u64) as u32
    }
    /// Group of block `b`.
    pub fn group_of(&self, b: u64) -> u32 {
        ((b - self.first_data_block) / self.blocks_per_group as u64) as u32
    }
}

/// What a request is for: decides which preallocation serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// File-system metadata (bitmaps, inode tables, journal, tree and xattr blocks): no
    /// preallocation.
    Metadata,
    /// File or directory data of inode `owner`.
    Data {
        /// The inode the blocks belong to (keys the per-inode preallocation).
        owner: u32,
        /// The file's final size in blocks when known (delayed allocation): small files
        /// go to the locality group, and no normalisation is needed. `None` while the
        /// size may still grow (streaming writes): requests are normalised and the
        /// surplus kept as the inode's preallocation.
        final_blocks: Option<u64>,
    },
}

/// One allocation request.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// Preferred first block (the end of the file's previous extent, or the start of
    /// its group's data area).
    pub goal: u64,
    /// Blocks wanted (at most [`MAX_EXTENT_LEN`]).
    pub len: u32,
    /// What the blocks are for.
    pub purpose: Purpose,
}

/// The image has no free blocks left for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoSpace {
    /// Blocks asked for.
    pub wanted: u64,
    /// Blocks free.
    pub free: u64,
}

impl fmt::Display for NoSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no space left: {} blocks wanted, {} free",
            self.wanted, self.free
        )
    }
}

impl std::error::Error for NoSpace {}

/// Counters of what the allocator did (for tests and benchmarks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Requests served.
    pub requests: u64,
    /// Requests served at exactly their goal.
    pub goal_hits: u64,
    /// Requests served from a locality-group preallocation.
    pub lg_hits: u64,
    /// Requests served from a per-inode preallocation.
    pub inode_pa_hits: u64,
    /// Requests that got fewer blocks than asked because no run was long enough.
    pub partial: u64,
    /// Requests aligned to the RAID stripe.
    pub aligned: u64,
}

/// The block allocator. Groups are loaded (bitmap + buddy) on first use; a group never
/// touched stays "uninitialised" and can be written with BLOCK_UNINIT.
#[derive(Debug)]
pub struct BlockAllocator {
    geo: AllocGeometry,
    /// Blocks in use at the start of each untouched group (superblock backup, GDT).
    head: Vec<u32>,
    groups: Vec<Option<Box<Group>>>,
    free_total: u64,
    /// Locality-group preallocations (start, length), one per flex group.
    lg: HashMap<u32, (u64, u32)>,
    /// Per-inode preallocations (start, length).
    inode_pa: HashMap<u32, (u64, u32)>,
    /// Remainders of locality-group streams that could not be extended, kept for later
    /// small files.
    leftovers: Vec<(u64, u32)>,
    /// What happened so far.
    pub stats: AllocStats,
}

impl BlockAllocator {
    /// An allocator over `geo` where group `g` starts with `head[g]` used blocks and all
    /// else is free.
    pub fn new(geo: AllocGeometry, head: Vec<u32>) -> BlockAllocator {
        let n = geo.group_count();
        assert_eq!(head.len(), n as usize, "one head count per group");
        let free_total = (0..n)
            .map(|g| (geo.group_blocks(g) - head[g as usize].min(geo.group_blocks(g))) as u64)
            .sum();
        BlockAllocator {
            groups: (0..n).map(|_| None).collect(),
            geo,
            head,
            free_total,
            lg: HashMap::new(),
            inode_pa: HashMap::new(),
            leftovers: Vec::new(),
            stats: AllocStats::default(),
        }
    }

    /// The geometry.
    pub fn geometry(&self) -> &AllocGeometry {
        &self.geo
    }

    /// Free blocks in the whole file system (preallocated but unused blocks count as
    /// used until released).
    pub fn free_blocks(&self) -> u64 {
        self.free_total
    }

    /// Free blocks in group `g`.
    pub fn group_free(&self, g: u32) -> u32 {
        match &self.groups[g as usize] {
            Some(gr) => gr.free(),
            None => self.geo.group_blocks(g) - self.head[g as usize].min(self.geo.group_blocks(g)),
        }
    }

    /// Free blocks in flex group `f`.
    pub fn flex_free(&self, f: u32) -> u64 {
        let gpf = self.geo.groups_per_flex;
        let n = self.geo.group_count();
        (f * gpf..((f + 1) * gpf).min(n))
            .map(|g| self.group_free(g) as u64)
            .sum()
    }

    /// Has group `g` been touched (its bitmap must then be written)?
    pub fn is_loaded(&self, g: u32) -> bool {
        self.groups[g as usize].is_some()
    }

    /// Loads group `g` (building its bitmap from the head count).
    pub fn load(&mut self, g: u32) -> &mut Group {
        let blocks = self.geo.group_blocks(g);
        let head = self.head[g as usize];
        self.groups[g as usize].get_or_insert_with(|| Box::new(Group::new(blocks, head)))
    }

    /// Installs group `g`'s bitmap read from an image (bit per block, set = used).
    pub fn load_bitmap(&mut self, g: u32, bitmap: &[u8]) {
        let old = self.group_free(g) as u64;
        let gr = Group::from_bitmap(BitSet::from_bytes(bitmap, self.geo.group_blocks(g)));
        self.free_total = self.free_total - old + gr.free() as u64;
        self.groups[g as usize] = Some(Box::new(gr));
    }

    /// The on-disk block bitmap of group `g` (`bytes` long, padding bits set), or `None`
    /// if the group was never touched.
    pub fn bitmap_bytes(&self, g: u32, bytes: usize) -> Option<Vec<u8>> {
        self.groups[g as usize]
            .as_ref()
            .map(|gr| gr.used.to_bytes(bytes, true))
    }

    /// Is block `b` in use?
    pub fn is_used(&self, b: u64) -> bool {
        let g = self.geo.group_of(b);
        let off = (b - self.geo.group_first(g)) as u32;
        match &self.groups[g as usize] {
            Some(gr) => gr.used.get(off),
            None => off < self.head[g as usize],
        }
    }

    /// Marks the exact range `start..start+len` used (metadata placed by the caller, or
    /// blocks an existing image uses). Fails if any block is outside the file system or
    /// already in use.
    pub fn reserve(&mut self, start: u64, len: u64) -> Result<(), String> {
        self.for_each_piece(start, len, |a, g, off, n| {
            let gr = a.load(g);
            if gr.used.count_ones(off, off + n) != 0 {
                return Err(format!("blocks {start}..+{len}: already in use"));
            }
            gr.take(off, n);
            a.free_total -= n as u64;
            Ok(())
        })
    }

    /// Frees `start..start+len`. Fails (changing nothing in that group) if a block is
    /// already free: a double free is a bug in the caller.
    pub fn free(&mut self, start: u64, len: u64) -> Result<(), String> {
        self.for_each_piece(start, len, |a, g, off, n| {
            let gr = a.load(g);
            if gr.used.count_ones(off, off + n) != n {
                return Err(format!("blocks {start}..+{len}: freeing free blocks"));
            }
            gr.give(off, n);
            a.free_total += n as u64;
            Ok(())
        })
    }

    fn for_each_piece(
        &mut self,
        start: u64,
        len: u64,
        mut f: impl FnMut(&mut Self, u32, u32, u32) -> Result<(), String>,
    ) -> Result<(), String> {
        if start < self.geo.first_data_block || start.saturating_add(len) > self.geo.blocks_count {
            return Err(format!(
                "blocks {start}..+{len} lie outside the file system ({} blocks)",
                self.geo.blocks_count
            ));
        }
        let mut b = start;
        let end = start + len;
        while b < end {
            let g = self.geo.group_of(b);
            let off = (b - self.geo.group_first(g)) as u32;
            let n = ((self.geo.group_blocks(g) - off) as u64).min(end - b) as u32;
            f(self, g, off, n)?;
            b += n as u64;
        }
        Ok(())
    }

    /// Allocates one extent for `req`: at least one block, at most `req.len`, contiguous.
    /// Fewer than asked only when no free run is long enough (the caller asks again for
    /// the rest with the end of this extent as its goal).
    pub fn alloc(&mut self, req: &Request) -> Result<(u64, u32), NoSpace> {
        let len = req.len.clamp(1, MAX_EXTENT_LEN);
        if self.free_total == 0 {
            return Err(NoSpace {
                wanted: len as u64,
                free: 0,
            });
        }
        self.stats.requests += 1;
        let goal = self.clamp_goal(req.goal);
        match req.purpose {
            Purpose::Metadata => self.search(goal, len, 1, Fit::Buddy),
            Purpose::Data {
                final_blocks: Some(total),
                ..
            } if total < SMALL_FILE_BLOCKS as u64 => self.alloc_small(goal, len),
            Purpose::Data {
                final_blocks: Some(_),
                ..
            } => self.alloc_known(goal, len),
            Purpose::Data {
                owner,
                final_blocks: None,
            } => self.alloc_streaming(owner, goal, len),
        }
    }

    fn clamp_goal(&self, goal: u64) -> u64 {
        if goal < self.geo.first_data_block || goal >= self.geo.blocks_count {
            self.geo.first_data_block
        } else {
            goal
        }
    }

    /// Files of known size of [`SMALL_FILE_BLOCKS`] or more: continue exactly at the goal
    /// (the file's previous extent); else take the head of the flex group's
    /// locality-group stream, extended in place as far as needed, so large and small
    /// files follow each other with no gap; else the first run that holds the whole
    /// request (filling earlier gaps before opening new ones).
    fn alloc_known(&mut self, goal: u64, len: u32) -> Result<(u64, u32), NoSpace> {
        if self.run_at(goal, len) >= len {
            self.stats.goal_hits += 1;
            return Ok(self.take_at(goal, len));
        }
        let flex = self.geo.group_of(goal) / self.geo.groups_per_flex;
        let stripe = self.geo.stripe;
        if let Some(&(s, l)) = self.lg.get(&flex) {
            let aligned = stripe <= 1 || len < stripe || s.is_multiple_of(stripe as u64);
            if aligned && l >= len {
                self.take_lg(flex, s, l, len);
                self.stats.lg_hits += 1;
                return Ok((s, len));
            }
            let end = s + l as u64;
            if aligned && end < self.geo.blocks_count && self.run_at(end, len - l) >= len - l {
                self.take_at(end, len - l);
                self.lg.remove(&flex);
                self.stats.lg_hits += 1;
                return Ok((s, len));
            }
        }
        let (s, l) = self
            .search(goal, len, len, Fit::First)
            .or_else(|_| self.search(goal, len, 1, Fit::First))?;
        self.absorb_gap(s + l as u64);
        Ok((s, l))
    }

    /// If the extent just placed left a gap smaller than a locality-group
    /// preallocation before the next used block, reserve the gap for small files (a
    /// leftover), so it is filled instead of staying a free-space fragment.
    fn absorb_gap(&mut self, end: u64) {
        let r = self.run_at(end, LG_PREALLOC_BLOCKS);
        if r > 0 && r < LG_PREALLOC_BLOCKS {
            self.take_at(end, r);
            self.leftovers.push((end, r));
        }
    }

    /// Free blocks starting exactly at `b`, at most `max`, running on into the next
    /// groups while their first blocks are free.
    fn run_at(&mut self, b: u64, max: u32) -> u32 {
        let mut total = 0u32;
        let mut cur = b;
        while total < max && cur >= self.geo.first_data_block && cur < self.geo.blocks_count {
            let g = self.geo.group_of(cur);
            if self.group_free(g) == 0 {
                break;
            }
            let off = (cur - self.geo.group_first(g)) as u32;
            let r = self.load(g).free_run_at(off, max - total);
            total += r;
            if r == 0 || off + r < self.geo.group_blocks(g) {
                break;
            }
            cur += r as u64;
        }
        total
    }

    /// Takes `len` free blocks at `b` (possibly across groups).
    fn take_at(&mut self, b: u64, len: u32) -> (u64, u32) {
        self.for_each_piece(b, len as u64, |a, g, off, n| {
            a.load(g).take(off, n);
            a.free_total -= n as u64;
            Ok(())
        })
        .expect("a free run inside the file system");
        (b, len)
    }

    /// Small files: carve from the locality-group stream of the goal's flex group, so
    /// consecutive small files sit next to each other with no gaps. Remainders of earlier
    /// streams (see below) are used first, smallest gaps filled first. An exhausted stream
    /// is extended in place; when that is impossible a new one starts and the old
    /// remainder is kept for later small files rather than freed (no hole is left).
    fn alloc_small(&mut self, goal: u64, len: u32) -> Result<(u64, u32), NoSpace> {
        let flex = self.geo.group_of(goal) / self.geo.groups_per_flex;
        let best = (0..self.leftovers.len())
            .filter(|&i| self.leftovers[i].1 >= len)
            .min_by_key(|&i| self.leftovers[i].1);
        if let Some(i) = best {
            let (s, l) = self.leftovers[i];
            if l > len {
                self.leftovers[i] = (s + len as u64, l - len);
            } else {
                self.leftovers.swap_remove(i);
            }
            self.stats.lg_hits += 1;
            return Ok((s, len));
        }
        if let Some(&(s, l)) = self.lg.get(&flex) {
            if l >= len {
                self.take_lg(flex, s, l, len);
                self.stats.lg_hits += 1;
                return Ok((s, len));
            }
        }
        let mut old = self.lg.remove(&flex);
        if let Some((s, l)) = old {
            let end = s + l as u64;
            let run = self.run_at(end, LG_PREALLOC_BLOCKS);
            if run > 0 {
                // Whatever follows the stream joins it, so no gap stays behind.
                self.take_at(end, run);
                old = Some((s, l + run));
            }
            if run + l >= len {
                self.take_lg(flex, s, l + run, len);
                self.stats.lg_hits += 1;
                return Ok((s, len));
            }
        }
        let fresh = self.search(goal, LG_PREALLOC_BLOCKS.max(len), len, Fit::First);
        if let Some((s, l)) = old.filter(|o| o.1 > 0) {
            self.leftovers.push((s, l));
        }
        let (s, l) = match fresh {
            Ok(x) => x,
            Err(_) => {
                // The disk is nearly full: give every preallocation back, take any run.
                self.release_all();
                return self.search(goal, len, 1, Fit::First);
            }
        };
        self.take_lg(flex, s, l, len);
        Ok((s, len))
    }

    fn take_lg(&mut self, flex: u32, s: u64, l: u32, len: u32) {
        if l > len {
            self.lg.insert(flex, (s + len as u64, l - len));
        } else {
            self.lg.remove(&flex);
        }
    }

    /// Files whose size is not final: continue the inode's preallocation when the goal
    /// is its start; otherwise normalise the request (round up to a power of two, up to
    /// 2048 blocks) and keep the surplus as the inode's preallocation.
    fn alloc_streaming(&mut self, owner: u32, goal: u64, len: u32) -> Result<(u64, u32), NoSpace> {
        if let Some((s, l)) = self.inode_pa.remove(&owner) {
            if s == goal {
                let got = l.min(len);
                if l > got {
                    self.inode_pa.insert(owner, (s + got as u64, l - got));
                }
                self.stats.inode_pa_hits += 1;
                return Ok((s, got));
            }
            self.free(s, l as u64)
                .expect("preallocated blocks are in use");
        }
        let want = normalise(len, self.geo.blocks_per_group);
        let (s, l) = self.search(goal, want, 1, Fit::Buddy)?;
        let got = l.min(len);
        if l > got {
            self.inode_pa.insert(owner, (s + got as u64, l - got));
        }
        Ok((s, got))
    }

    /// Gives back the unused part of inode `owner`'s preallocation (the file was closed).
    pub fn release_inode(&mut self, owner: u32) {
        if let Some((s, l)) = self.inode_pa.remove(&owner) {
            self.free(s, l as u64)
                .expect("preallocated blocks are in use");
        }
    }

    /// Gives back every preallocation (before the bitmaps are written).
    pub fn release_all(&mut self) {
        let pas: Vec<(u64, u32)> = self
            .lg
            .drain()
            .map(|(_, v)| v)
            .chain(self.inode_pa.drain().map(|(_, v)| v))
            .chain(self.leftovers.drain(..))
            .collect();
        for (s, l) in pas {
            self.free(s, l as u64)
                .expect("preallocated blocks are in use");
        }
    }

    /// Blocks held by preallocations.
    pub fn preallocated(&self) -> u64 {
        self.lg
            .values()
            .chain(self.inode_pa.values())
            .chain(self.leftovers.iter())
            .map(|&(_, l)| l as u64)
            .sum()
    }

    /// The search proper: a run of `len` blocks (at least `min`), trying in turn
    /// the goal itself, a stripe-aligned run (large requests on RAID), a buddy chunk
    /// of the right order in the goal group and onwards, any run long enough, and
    /// finally the longest run there is.
    fn search(&mut self, goal: u64, len: u32, min: u32, fit: Fit) -> Result<(u64, u32), NoSpace> {
        let n = self.geo.group_count();
        let g0 = self.geo.group_of(goal);
        let off0 = (goal - self.geo.group_first(g0)) as u32;
        let order = (g0..n).chain(0..g0);
        // 1. Exactly at the goal (extends the previous extent).
        if self.group_free(g0) > 0 {
            let run = self.load(g0).free_run_at(off0, len);
            if run >= len {
                self.stats.goal_hits += 1;
                return Ok(self.take(g0, off0, len));
            }
        }
        // 2. RAID: large requests start on a stripe boundary.
        let stripe = self.geo.stripe;
        if stripe > 1 && len >= stripe {
            for g in order.clone() {
                if self.group_free(g) < len {
                    continue;
                }
                let near = if g == g0 { off0 } else { 0 };
                let base = self.geo.group_first(g);
                if let Some(s) = self.load(g).find_aligned(len, near, base, stripe) {
                    self.stats.aligned += 1;
                    return Ok(self.take(g, s, len));
                }
            }
        }
        // 3. Buddy: the smallest free aligned chunk holding the request (metadata and
        //    normalised requests); or, for data of known size, the first run holding it.
        for g in order.clone() {
            if self.group_free(g) < if fit == Fit::First { min } else { len } {
                continue;
            }
            let near = if g == g0 { off0 } else { 0 };
            match fit {
                Fit::Buddy => {
                    if let Some(s) = self.load(g).find_buddy(len, near) {
                        return Ok(self.take(g, s, len));
                    }
                }
                Fit::First => {
                    // The first run of at least `min`, as much of it as asked.
                    let gr = self.load(g);
                    if let Some(s) = gr.first_fit(min.max(1), near) {
                        let run = gr.free_run_at(s, len);
                        return Ok(self.take(g, s, run));
                    }
                }
            }
        }
        // 4. Any run long enough (unaligned).
        for g in order.clone() {
            if self.group_free(g) < len {
                continue;
            }
            let near = if g == g0 { off0 } else { 0 };
            if let Some((s, l)) = self.load(g).longest_run(near) {
                if l >= len {
                    return Ok(self.take(g, s, len));
                }
            }
        }
        // 5. The disk is fragmented or nearly full: the longest run anywhere.
        let mut best: Option<(u32, u32, u32)> = None;
        for g in order {
            if self.group_free(g) == 0 || best.is_some_and(|(_, _, l)| self.group_free(g) <= l) {
                continue;
            }
            if let Some((s, l)) = self.load(g).longest_run(0) {
                if best.is_none_or(|(_, _, bl)| l > bl) {
                    best = Some((g, s, l));
                }
            }
        }
        match best {
            Some((g, s, l)) if l >= min => {
                self.stats.partial += 1;
                Ok(self.take(g, s, l.min(len)))
            }
            _ => Err(NoSpace {
                wanted: len as u64,
                free: self.free_total,
            }),
        }
    }

    fn take(&mut self, g: u32, off: u32, len: u32) -> (u64, u32) {
        self.load(g).take(off, len);
        self.free_total -= len as u64;
        (self.geo.group_first(g) + off as u64, len)
    }

    /// Checks every loaded group (bitmap, free count, buddy) and the total.
    pub fn check(&self) -> Result<(), String> {
        let mut total = 0u64;
        for g in 0..self.geo.group_count() {
            if let Some(gr) = &self.groups[g as usize] {
                gr.check().map_err(|e| format!("group {g}: {e}"))?;
            }
            total += self.group_free(g) as u64;
        }
        if total != self.free_total {
            return Err(format!(
                "free total {} but groups hold {total}",
                self.free_total
            ));
        }
        Ok(())
    }
}

/// How step 3 of the search picks a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// The smallest buddy chunk that holds the request.
    Buddy,
    /// The first free run that holds the request.
    First,
}

/// mballoc's request normalisation for files still growing: round small requests up to
/// the next power of two (at least 16 blocks, at most 2048 or a group).
pub fn normalise(len: u32, blocks_per_group: u32) -> u32 {
    if len >= 2048 {
        return len;
    }
    len.max(SMALL_FILE_BLOCKS)
        .next_power_of_two()
        .min(2048)
        .min(blocks_per_group)
        .max(len)
}
