//! Allocator tests: no double allocation, exact free counts, buddy invariants, random
//! alloc/free sequences checked against a plain model.

use super::*;

/// xorshift64*: deterministic randomness for property tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn geo(groups: u32, bpg: u32, stripe: u32) -> AllocGeometry {
    AllocGeometry {
        first_data_block: 1,
        blocks_count: 1 + groups as u64 * bpg as u64 - 37,
        blocks_per_group: bpg,
        groups_per_flex: 4,
        stripe,
    }
}

fn heads(g: &AllocGeometry) -> Vec<u32> {
    (0..g.group_count())
        .map(|i| if i % 3 == 0 { 5 } else { 0 })
        .collect()
}

/// A model: one bool per block.
fn model_of(a: &BlockAllocator) -> Vec<bool> {
    let g = a.geometry();
    (0..g.blocks_count)
        .map(|b| b >= g.first_data_block && a.is_used(b))
        .collect()
}

#[test]
fn random_alloc_free_sequences_keep_every_invariant() {
    for seed in 1..=12u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let stripe = if seed % 3 == 0 { 16 } else { 0 };
        let g = geo(6, 1024, stripe);
        let mut a = BlockAllocator::new(g.clone(), heads(&g));
        let mut model = model_of(&a);
        let mut live: Vec<(u64, u32)> = Vec::new();
        for step in 0..1500 {
            let free_model = model[g.first_data_block as usize..]
                .iter()
                .filter(|&&u| !u)
                .count() as u64;
            assert_eq!(
                a.free_blocks() + a.preallocated(),
                free_model,
                "seed {seed} step {step}"
            );
            if rng.below(3) > 0 || live.is_empty() {
                let span = if rng.below(4) == 0 { 3000 } else { 20 };
                let len = 1 + rng.below(span) as u32;
                let goal = g.first_data_block + rng.below(g.blocks_count - 1);
                let purpose = match rng.below(3) {
                    0 => Purpose::Metadata,
                    1 => Purpose::Data {
                        owner: rng.below(50) as u32,
                        final_blocks: Some(len as u64),
                    },
                    _ => Purpose::Data {
                        owner: rng.below(50) as u32,
                        final_blocks: None,
                    },
                };
                let before = a.free_blocks() + a.preallocated();
                match a.alloc(&Request { goal, len, purpose }) {
                    Ok((s, l)) => {
                        assert!(l >= 1 && l <= len, "seed {seed}: got {l} of {len}");
                        for b in s..s + l as u64 {
                            assert!(
                                !model[b as usize],
                                "seed {seed} step {step}: block {b} allocated twice"
                            );
                            model[b as usize] = true;
                        }
                        live.push((s, l));
                        // Preallocations move blocks from free to reserved, never lose them.
                        assert_eq!(
                            a.free_blocks() + a.preallocated() + l as u64,
                            before,
                            "seed {seed} step {step}"
                        );
                    }
                    Err(e) => {
                        assert_eq!(a.free_blocks(), 0, "seed {seed}: {e} while blocks are free")
                    }
                }
            } else {
                let i = rng.below(live.len() as u64) as usize;
                let (s, l) = live.swap_remove(i);
                a.free(s, l as u64).unwrap();
                for b in s..s + l as u64 {
                    model[b as usize] = false;
                }
                assert!(a.free(s, 1).is_err(), "double free must be refused");
            }
            if step % 100 == 0 {
                a.check().unwrap();
            }
        }
        a.release_all();
        a.check().unwrap();
        // After releasing preallocations, the allocator's view equals the model.
        let now = model_of(&a);
        assert_eq!(now, model, "seed {seed}: bitmaps differ from the model");
        for (s, l) in live {
            a.free(s, l as u64).unwrap();
        }
        a.check().unwrap();
        let total: u64 = (0..g.group_count())
            .map(|i| (g.group_blocks(i) - heads(&g)[i as usize]) as u64)
            .sum();
        assert_eq!(a.free_blocks(), total, "seed {seed}: everything freed");
    }
}

#[test]
fn buddy_matches_a_fresh_build_after_random_changes() {
    let mut rng = Rng(7);
    let mut used = BitSet::new(3000);
    used.fill(0, 3, true);
    let mut b = buddy::Buddy::build(&used);
    for _ in 0..2000 {
        let s = rng.below(2990) as u32;
        let l = 1 + rng.below(40.min(3000 - s as u64)) as u32;
        if used.count_ones(s, s + l) == 0 {
            b.mark_used(s, l);
            used.fill(s, s + l, true);
        } else if used.count_ones(s, s + l) == l {
            b.mark_free(s, l);
            used.fill(s, s + l, false);
        }
        b.check(&used).unwrap();
    }
    let fresh = buddy::Buddy::build(&used);
    for k in 0..=buddy::MAX_ORDER {
        assert_eq!(b.counter(k), fresh.counter(k), "order {k}");
    }
}

#[test]
fn small_files_pack_without_gaps() {
    let g = geo(4, 8192, 0);
    let mut a = BlockAllocator::new(g.clone(), vec![0; 4]);
    let mut next = None;
    for owner in 0..200u32 {
        let len = 1 + owner % 7;
        let (s, l) = a
            .alloc(&Request {
                goal: 100,
                len,
                purpose: Purpose::Data {
                    owner,
                    final_blocks: Some(len as u64),
                },
            })
            .unwrap();
        assert_eq!(l, len);
        if let Some(n) = next {
            assert_eq!(
                s, n,
                "small file {owner} is not right after the previous one"
            );
        }
        next = Some(s + l as u64);
    }
    assert!(a.stats.lg_hits > 150);
}

#[test]
fn large_files_get_one_extent_per_group() {
    let g = AllocGeometry {
        first_data_block: 0,
        blocks_count: 16 * 32768,
        blocks_per_group: 32768,
        groups_per_flex: 16,
        stripe: 0,
    };
    let mut a = BlockAllocator::new(
        g.clone(),
        (0..16).map(|i| if i < 2 { 100 } else { 0 }).collect(),
    );
    // 300 000 blocks: the groups without a head give whole 32768-block extents.
    let maps = plan_extents(&mut a, 12, 0, &[(0, 300_000)]).unwrap();
    let total: u64 = maps.iter().map(|m| m.len as u64).sum();
    assert_eq!(total, 300_000);
    assert!(maps.len() <= 11, "{} extents: {maps:?}", maps.len());
    let mut groups: Vec<u32> = maps.iter().map(|m| g.group_of(m.pblk)).collect();
    groups.dedup();
    assert_eq!(
        groups.len(),
        maps.len(),
        "two extents in one group: {maps:?}"
    );
}

#[test]
fn stripe_alignment() {
    let g = AllocGeometry {
        first_data_block: 0,
        blocks_count: 4 * 32768,
        blocks_per_group: 32768,
        groups_per_flex: 1,
        stripe: 64,
    };
    let mut a = BlockAllocator::new(g, vec![3; 4]);
    for i in 0..20 {
        let (s, l) = a
            .alloc(&Request {
                goal: 0,
                len: 100 + i,
                purpose: Purpose::Data {
                    owner: i,
                    final_blocks: Some(100 + i as u64),
                },
            })
            .unwrap();
        assert_eq!(s % 64, 0, "extent at {s} not stripe-aligned");
        assert_eq!(l, 100 + i);
    }
}

#[test]
fn streaming_preallocation_is_used_then_released() {
    let g = geo(2, 8192, 0);
    let mut a = BlockAllocator::new(g.clone(), vec![0; 2]);
    let free0 = a.free_blocks();
    let p = Purpose::Data {
        owner: 5,
        final_blocks: None,
    };
    let (s, l) = a
        .alloc(&Request {
            goal: 10,
            len: 3,
            purpose: p,
        })
        .unwrap();
    assert_eq!(l, 3);
    assert_eq!(a.preallocated(), 13, "3 normalised to 16");
    let (s2, l2) = a
        .alloc(&Request {
            goal: s + 3,
            len: 5,
            purpose: p,
        })
        .unwrap();
    assert_eq!(
        (s2, l2),
        (s + 3, 5),
        "the next write continues in the preallocation"
    );
    a.release_inode(5);
    assert_eq!(a.free_blocks(), free0 - 8);
    a.check().unwrap();
}

#[test]
fn full_disk_is_a_clean_error_with_exact_counts() {
    let g = geo(2, 256, 0);
    let mut a = BlockAllocator::new(g.clone(), vec![0; 2]);
    let total = a.free_blocks();
    let mut got = 0u64;
    loop {
        match a.alloc(&Request {
            goal: 1,
            len: 37,
            purpose: Purpose::Metadata,
        }) {
            Ok((_, l)) => got += l as u64,
            Err(e) => {
                assert_eq!(e.free, 0);
                break;
            }
        }
    }
    assert_eq!(got, total);
    assert_eq!(a.free_blocks(), 0);
    a.check().unwrap();
    // plan_extents rolls back on failure.
    a.free(10, 20).unwrap();
    let before = a.free_blocks();
    assert!(plan_extents(&mut a, 1, 0, &[(0, 50)]).is_err());
    assert_eq!(a.free_blocks(), before);
}

#[test]
fn delayed_file_allocates_at_flush() {
    let g = geo(2, 8192, 0);
    let mut a = BlockAllocator::new(g.clone(), vec![0; 2]);
    let mut f = DelayedFile::new(1024);
    f.write(0, &[1u8; 3000]);
    f.write(10 * 1024, &[2u8; 10]);
    assert_eq!(a.stats.requests, 0, "writing allocates nothing");
    assert_eq!(f.reserved_blocks(), 4);
    let out = f.flush(&mut a, 7, 500).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].0.len, 3);
    assert_eq!(out[1].0.lblk, 10);
    assert_eq!(out[1].1[0], 2);
}

#[test]
fn orlov_spreads_top_level_dirs_and_files_follow_parents() {
    let mut ia = InodeAllocator::new(64, 128, 16);
    let free = |_f: u32| 1000u64;
    let total = |_f: u32| 2000u64;
    let mut flexes = Vec::new();
    for _ in 0..4 {
        let ino = ia.alloc(InodeKind::TopDir, 0, &free, &total).unwrap();
        flexes.push((ino - 1) / 128 / 16);
    }
    flexes.sort();
    assert_eq!(
        flexes,
        vec![0, 1, 2, 3],
        "top-level directories spread over flex groups"
    );
    let f = ia.alloc(InodeKind::File, 33, &free, &total).unwrap();
    assert_eq!((f - 1) / 128, 33, "a file goes to its parent's group");
    // A flex group short of free blocks is skipped.
    let low = |f: u32| if f == 2 { 10 } else { 1000 };
    let f = ia.alloc(InodeKind::File, 33, &low, &total).unwrap();
    assert_eq!((f - 1) / 128 / 16, 3);
    let before = ia.free_inodes();
    ia.free(f, false).unwrap();
    assert!(ia.free(f, false).is_err());
    assert_eq!(ia.free_inodes(), before + 1);
}

/// Free runs of the whole file system (maximal runs of free blocks, group heads break
/// them as on disk).
fn free_runs(a: &BlockAllocator) -> usize {
    let g = a.geometry();
    let mut runs = 0;
    let mut prev_free = false;
    for b in g.first_data_block..g.blocks_count {
        let free = !a.is_used(b);
        if free && !prev_free {
            runs += 1;
        }
        prev_free = free;
    }
    runs
}

#[test]
fn files_of_known_size_leave_no_free_space_gaps() {
    for seed in 1..=6u64 {
        let mut rng = Rng(seed * 0x1234_5678_9ABC_DEF1);
        let g = AllocGeometry {
            first_data_block: 0,
            blocks_count: 8 * 8192,
            blocks_per_group: 8192,
            groups_per_flex: 8,
            stripe: 0,
        };
        // Backup heads in groups 0, 1, 3, 5, 7 break runs as on disk.
        let heads: Vec<u32> = (0..8)
            .map(|i| if [0, 1, 3, 5, 7].contains(&i) { 3 } else { 0 })
            .collect();
        let mut a = BlockAllocator::new(g.clone(), heads);
        let mut total = 0u64;
        for owner in 0..600u32 {
            let len = if rng.below(5) == 0 {
                16 + rng.below(400)
            } else {
                1 + rng.below(15)
            };
            total += len;
            plan_extents(&mut a, owner, 0, &[(0, len)]).unwrap();
        }
        a.release_all();
        a.check().unwrap();
        let runs = free_runs(&a);
        // The used space is one stretch from the start: free space is what follows it,
        // split only by the group heads after it (and at most one gap where the last
        // locality-group stream was given back).
        let last_used = (0..g.blocks_count)
            .rev()
            .find(|&b| a.is_used(b) && b % 8192 >= 3)
            .unwrap();
        let heads_after = [1u64, 3, 5, 7]
            .iter()
            .filter(|&&h| h * 8192 > last_used)
            .count();
        let ideal = heads_after + 1;
        if runs > ideal + 1 {
            let mut v = Vec::new();
            let mut start = None;
            for b in 0..g.blocks_count {
                match (a.is_used(b), start) {
                    (false, None) => start = Some(b),
                    (true, Some(s0)) => {
                        v.push((s0, b - s0));
                        start = None;
                    }
                    _ => {}
                }
            }
            eprintln!("runs {v:?} last_used {last_used}");
        }
        assert!(
            runs <= ideal + 1,
            "seed {seed}: {runs} free runs after {total} blocks of files (ideal {ideal})"
        );
    }
}
