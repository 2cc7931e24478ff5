//! `usfs mkfs.ext4`: format an ext4 image by itself (no mke2fs) and optionally fill it
//! from a directory (-d), with the mballoc-style allocator of usfs-ext4.

use crate::image::{CliError, CliResult};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use usfs_ext4::write::{format, populate, MkfsOptions, PopulateOptions, Writer};

/// Options of `usfs mkfs.ext4`, named as mke2fs's.
#[derive(clap::Args)]
#[command(
    after_help = "Feature set: mke2fs 1.47's ext4 default (has_journal, ext_attr, dir_index, \
filetype, extent, 64bit, flex_bg, sparse_super, large_file, huge_file, dir_nlink, extra_isize, \
metadata_csum) WITHOUT resize_inode: no reserved GDT blocks, so the file system cannot be \
grown online. -O can turn off has_journal, dir_index, 64bit, flex_bg, sparse_super, huge_file, \
dir_nlink, extra_isize, metadata_csum and turn on metadata_csum_seed or uninit_bg.\n\
The image file is created, or truncated and rewritten (written sparsely); block devices are \
refused. -d keeps nanosecond times, holes, hard links, xattrs (in the inode, then one \
shared block) and POSIX ACLs; directories larger than a block become htrees."
)]
pub(crate) struct MkfsExt4Args {
    /// Block size in bytes (1024..65536; default 1024 below 512 MiB, else 4096).
    #[arg(short = 'b')]
    block_size: Option<u32>,
    /// Number of inodes.
    #[arg(short = 'N', conflicts_with = "bytes_per_inode")]
    inodes: Option<u64>,
    /// Bytes per inode (default 4096 below 512 MiB, 16384 below 4 TiB, then 32768/65536).
    #[arg(short = 'i')]
    bytes_per_inode: Option<u64>,
    /// Inode size in bytes (256, 512 or 1024).
    #[arg(short = 'I', default_value_t = 256)]
    inode_size: u32,
    /// Percentage of blocks reserved for the super-user.
    #[arg(short = 'm', default_value_t = 5.0)]
    reserved_percent: f64,
    /// Volume label (at most 16 bytes).
    #[arg(short = 'L')]
    label: Option<String>,
    /// Volume UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, or "random"). A given UUID also
    /// fixes the directory hash seed, so the same input gives the same image.
    #[arg(short = 'U')]
    uuid: Option<String>,
    /// Features to turn on (name) or off (^name), comma separated.
    #[arg(short = 'O')]
    features: Vec<String>,
    /// Extended options: stride=N, stripe_width=N (RAID geometry in blocks: large
    /// allocations are stripe-aligned), root_owner=UID:GID.
    #[arg(short = 'E')]
    extended: Vec<String>,
    /// Creation time as seconds since the epoch (superblock, root and lost+found times).
    #[arg(short = 'T')]
    time: Option<i64>,
    /// Make every file of the -d tree owned by root.
    #[arg(long = "all-root")]
    all_root: bool,
    /// Copy this directory tree into the new file system (or the tree of this tar file,
    /// plain, gzip or zstd; `-`: a tar on standard input).
    #[arg(short = 'd')]
    root_dir: Option<PathBuf>,
    /// Threads reading the source for -d (default: eight per CPU, 8 to 64: reading a
    /// source that is not cached waits on the disk more than on the CPU; the copy to
    /// the image uses at most two per CPU).
    #[arg(short = 'j', long = "threads")]
    threads: Option<usize>,
    /// Quiet: print nothing on success.
    #[arg(short = 'q')]
    quiet: bool,
    /// The image file.
    image: PathBuf,
    /// Size: a number with a suffix k, m, g or t (powers of 1024); without a suffix,
    /// KiB, or blocks when -b is given. Default: the existing image's size.
    size: Option<String>,
}

fn parse_size(s: &str, block_size: Option<u32>) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_lowercase() {
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                's' => 512,
                _ => return Err(format!("bad size suffix in '{s}'")),
            };
            (&s[..i], m)
        }
        _ => (s, block_size.map_or(1024, u64::from)),
    };
    let n: u64 = num.parse().map_err(|_| format!("bad size '{s}'"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' too large"))
}

fn parse_uuid(s: &str) -> Result<Option<[u8; 16]>, String> {
    if s == "random" {
        return Ok(None);
    }
    let hex: String = s.chars().filter(|&c| c != '-').collect();
    if hex.len() != 32 {
        return Err(format!("bad UUID '{s}'"));
    }
    let mut u = [0u8; 16];
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16)
            .map_err(|_| format!("bad UUID '{s}'"))?;
    }
    Ok(Some(u))
}

fn apply_extended(opts: &mut MkfsOptions, ext: &[String]) -> Result<(), String> {
    for item in ext
        .iter()
        .flat_map(|e| e.split(','))
        .filter(|s| !s.is_empty())
    {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        let num = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| format!("bad value in -E {item}"))
        };
        match k {
            "stride" => opts.stride = num(v)?,
            "stripe_width" | "stripe-width" => opts.stripe_width = num(v)?,
            "root_owner" => {
                let (u, g) = v
                    .split_once(':')
                    .ok_or(format!("-E {item}: want UID:GID"))?;
                opts.root_owner = Some((num(u)?, num(g)?));
            }
            _ => return Err(format!("unknown extended option '{k}'")),
        }
    }
    Ok(())
}

fn usage(msg: String) -> CliResult {
    eprintln!("usfs mkfs.ext4: {msg}");
    Ok(ExitCode::from(2))
}

pub(crate) fn run(a: &MkfsExt4Args) -> CliResult {
    let size = match &a.size {
        Some(s) => match parse_size(s, a.block_size) {
            Ok(n) => n,
            Err(e) => return usage(e),
        },
        None => match std::fs::metadata(&a.image) {
            Ok(m) if m.is_file() => m.len(),
            _ => return usage("no SIZE given and no existing image to take it from".into()),
        },
    };
    let mut opts = MkfsOptions::new(size);
    opts.block_size = a.block_size;
    opts.inodes = a.inodes;
    opts.bytes_per_inode = a.bytes_per_inode;
    opts.inode_size = a.inode_size;
    opts.reserved_percent = a.reserved_percent;
    opts.label = a.label.clone().unwrap_or_default().into_bytes();
    opts.features = a.features.clone();
    opts.time = a.time;
    match a.uuid.as_deref().map(parse_uuid).transpose() {
        Ok(u) => opts.uuid = u.flatten(),
        Err(e) => return usage(e),
    }
    if let Err(e) = apply_extended(&mut opts, &a.extended) {
        return usage(e);
    }
    if let Ok(m) = std::fs::metadata(&a.image) {
        if !m.is_file() {
            return usage(format!(
                "{}: not a regular file (usfs writes image files only)",
                a.image.display()
            ));
        }
    }
    let shown = a.image.display().to_string();
    let at = |e: &dyn std::fmt::Display| CliError::at(&shown, e);
    let start = Instant::now();
    // Format writes a complete empty file system; -d then opens it and fills it.
    let fresh = || -> CliResult<Box<dyn usfs_dev::Device>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&a.image)
            .map_err(|e| at(&e))?;
        file.set_len(size).map_err(|e| at(&e))?;
        let dev = usfs_dev::FileDevice::from_file(file, true).map_err(|e| at(&e))?;
        format(Box::new(dev), &opts).map_err(|e| at(&e))
    };
    let mut w = Writer::open(fresh()?).map_err(|e| at(&e))?;
    let report = match &a.root_dir {
        Some(src) => {
            let p = PopulateOptions {
                all_root: a.all_root,
                threads: a.threads.unwrap_or(0),
                root_owner: opts.root_owner,
                ..PopulateOptions::default()
            };
            let source = tree_source(src, &a.image)?;
            match populate(&mut w, &*source, &p) {
                Ok(r) => Some(r),
                Err(e) => {
                    // Never leave a half-written image: make it a valid empty file system.
                    drop(w);
                    drop(fresh()?);
                    return Err(CliError(format!(
                        "{shown}: {e} (the image holds an empty file system)"
                    )));
                }
            }
        }
        None => None,
    };
    let geo = w.geometry().clone();
    let stats = w.blocks.stats.clone();
    let free_inodes = w.inodes.free_inodes();
    let t_finish = Instant::now();
    if report.is_some() {
        drop(w.finish().map_err(|e| at(&e))?);
    }
    let finish_ms = t_finish.elapsed().as_millis();
    if !a.quiet {
        println!(
            "{}: ext4, {} blocks of {} bytes, {} inodes, {} groups",
            a.image.display(),
            geo.blocks_count,
            geo.block_size,
            geo.inodes_count,
            geo.group_count
        );
        if let Some(r) = report {
            println!("populated: {r}");
            println!(
                "stages (running at once) ended at: scan {} ms, placement {} ms, copy {} ms; {} MiB of memory kept small files",
                r.phase_ms[0],
                r.phase_ms[1],
                r.phase_ms[2],
                r.hold_bytes >> 20
            );
            println!(
                "allocator: {} requests, {} at goal, {} from locality-group preallocation, {} partial",
                stats.requests, stats.goal_hits, stats.lg_hits, stats.partial
            );
        }
        println!(
            "{} inodes free; metadata written and synced in {} ms; done in {:.2} s",
            free_inodes,
            finish_ms,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What `-d` names: a directory, or a tar file (`-`: standard input) read as
/// `usfs mkfs.erofs --tar` reads it, its data spooled next to the image when it must be.
fn tree_source(src: &Path, image: &Path) -> CliResult<Box<dyn usfs_source::Source>> {
    let is_tar = src == Path::new("-") || std::fs::metadata(src).is_ok_and(|m| !m.is_dir());
    if !is_tar {
        return Ok(Box::new(usfs_source::HostDir::new(src)));
    }
    let spool_dir = match image.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let opts = usfs_source::TarOptions {
        spool_dir: Some(spool_dir),
        root_mtime: now,
        ..Default::default()
    };
    let t = usfs_source::TarSource::open(src, &opts)
        .map_err(|e| CliError(format!("mkfs.ext4: -d: {e}")))?;
    for w in t.warnings() {
        eprintln!("usfs mkfs.ext4: warning: {w}");
    }
    Ok(Box::new(t))
}
