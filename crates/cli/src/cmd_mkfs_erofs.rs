//! `usfs mkfs.erofs`: build an EROFS image from a directory or (`--tar`) a tar stream,
//! with mkfs.erofs's option names.

use crate::image::{CliError, CliResult};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use usfs_erofs::compress::{
    Algorithm, DEFLATE_DEFAULT_LEVEL, LZ4HC_DEFAULT_LEVEL, LZMA_DEFAULT_LEVEL, ZSTD_DEFAULT_LEVEL,
};
use usfs_erofs::mkfs::{self, Options};

/// Arguments of `usfs mkfs.erofs`.
#[derive(clap::Args)]
pub(crate) struct MkfsErofsArgs {
    /// Compression (default: none): `lz4`; `lz4hc[,LEVEL]` (1-12, default 9);
    /// `lzma[,LEVEL]` (MicroLZMA: 0-9, or 100-109 for the extreme presets; default 6);
    /// `deflate[,LEVEL]` (libdeflate's 0-12, default 1); `zstd[,LEVEL]` (0-22, default 3).
    /// `ALG,level=LEVEL` works too; `dictsize=` is not taken yet. Several algorithms,
    /// `-z lz4hc:lzma,9`, for --compress-hints (the first is every other file's).
    #[arg(short = 'z', value_name = "ALG[,LEVEL][:ALG...]")]
    compress: Option<String>,
    /// A compression hints file, as mkfs.erofs's: lines `PCLUSTER_BYTES [ALG_INDEX]
    /// REGEX`; a file whose path (relative to SOURCE) matches a line's POSIX extended
    /// expression (the first that does) takes its pcluster size (0: not compressed) and
    /// the ALG_INDEX-th `-z` algorithm (default the first); `#` starts a comment.
    #[arg(long = "compress-hints", value_name = "FILE")]
    compress_hints: Option<PathBuf>,
    /// Largest physical cluster in bytes (multiple of 4096; more than 4096 = big pclusters).
    #[arg(short = 'C', value_name = "BYTES", default_value_t = 4096)]
    pcluster: u32,
    /// Extended options, comma separated: ztailpacking, fragments, dedupe, legacy-compress.
    #[arg(short = 'E', value_name = "OPTS", action = clap::ArgAction::Append)]
    extended: Vec<String>,
    /// Set every timestamp (and the build time) to this UNIX time.
    #[arg(short = 'T', value_name = "EPOCH")]
    timestamp: Option<i64>,
    /// Volume UUID.
    #[arg(short = 'U', value_name = "UUID")]
    uuid: Option<String>,
    /// Volume label (up to 16 bytes).
    #[arg(short = 'L', value_name = "LABEL")]
    label: Option<String>,
    /// Xattrs used by more than this many inodes are shared; negative disables xattrs.
    #[arg(
        short = 'x',
        value_name = "N",
        default_value_t = 2,
        allow_hyphen_values = true
    )]
    xattr_tolerance: i32,
    /// Make every file owned by root.
    #[arg(long)]
    all_root: bool,
    /// Set every file's uid.
    #[arg(long, value_name = "UID")]
    force_uid: Option<u32>,
    /// Set every file's gid.
    #[arg(long, value_name = "GID")]
    force_gid: Option<u32>,
    /// Compression threads (default: CPU count); the image is the same for any number.
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Print nothing on success.
    #[arg(long)]
    quiet: bool,
    /// Print wall and CPU time per build phase to standard error.
    #[arg(long)]
    timing: bool,
    /// SOURCE is a tar stream (plain, gzip or zstd, found by magic; `-` or no SOURCE:
    /// standard input): `f` (the default) copies file data into the image; `i` writes
    /// metadata only, with 512-byte blocks, each file referring to its bytes in the tar
    /// (an uncompressed tar file), the image's extra device: mount it with `-o
    /// device=/dev/loopN` (a loop device over the tar), read it with `usfs ls --device TARFILE
    /// IMAGE` (any reading command).
    #[arg(long, value_name = "f|i", num_args = 0..=1, require_equals = true, default_missing_value = "f")]
    tar: Option<String>,
    /// Block size in bytes: 512, 1024, 2048 or 4096 (the default); below 4096 for
    /// uncompressed images only. `--tar=i` images have 512-byte blocks whatever it says.
    #[arg(short = 'b', value_name = "BYTES", default_value_t = 4096)]
    block_size: u32,
    /// Store regular files as chunk-based inodes with chunks of this many bytes (a power
    /// of two, at least the block size): identical chunks are stored once, all-zero ones
    /// are holes, chunks that lie one after another are merged. Not with -z or --tar=i.
    #[arg(long, value_name = "BYTES")]
    chunksize: Option<u64>,
    /// Leave out the file or directory at this path (relative to SOURCE, exact);
    /// repeatable. Directory sources only, as mkfs.erofs.
    #[arg(long = "exclude-path", value_name = "PATH")]
    exclude_path: Vec<String>,
    /// Leave out files and directories whose path relative to SOURCE matches this POSIX
    /// extended regular expression; repeatable. Directory sources only.
    #[arg(long = "exclude-regex", value_name = "REGEX")]
    exclude_regex: Vec<String>,
    /// With --tar: turn aufs whiteouts (`.wh.NAME`, `.wh..wh..opq`) into overlayfs ones
    /// (0/0 character devices, trusted.overlay.opaque=y).
    #[arg(long)]
    aufs: bool,
    /// With --tar: strip overlayfs metadata (whiteouts made by --aufs, the opaque and
    /// origin xattrs); `--ovlfs-strip` alone is `=1`.
    #[arg(long, value_name = "0|1", num_args = 0..=1, require_equals = true, default_missing_value = "1")]
    ovlfs_strip: Option<String>,
    /// With --tar: accepted for mkfs.erofs compatibility (gzip is detected anyway).
    #[arg(long)]
    ungzip: bool,
    /// The image to write.
    image: PathBuf,
    /// The directory to put in it (with --tar: the tar file, `-` or none for stdin).
    source: Option<PathBuf>,
}

/// What the image is built from.
enum Input {
    /// A host directory.
    Dir(PathBuf),
    /// A tar stream (`-`: standard input), how to read it, and whether the image only
    /// refers to its data (`--tar=i`).
    Tar(PathBuf, usfs_source::TarOptions, bool),
}

fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = s.bytes().filter(|&b| b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut u = [0u8; 16];
    for (i, c) in hex.chunks(2).enumerate() {
        u[i] = u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok()?;
    }
    Some(u)
}

/// Parses a compression hints file as mkfs.erofs 1.9.3 reads one: per line a pcluster
/// size, an optional algorithm index, then the expression (the rest of the line);
/// blank lines and lines starting with `#` are skipped.
fn parse_hints(text: &str) -> Result<Vec<mkfs::CompressHint>, String> {
    let mut out = Vec::new();
    for (k, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut f = line.splitn(2, [' ', '\t']);
        let size = f.next().unwrap_or("").trim();
        let rest = f.next().unwrap_or("").trim_start_matches([' ', '\t']);
        let pcluster_bytes = size
            .parse()
            .map_err(|_| format!("line {}: pcluster size {size:?}", k + 1))?;
        let mut g = rest.splitn(2, [' ', '\t']);
        let first = g.next().unwrap_or("");
        let (alg, pattern) = match g.next() {
            Some(p) => (first.parse().unwrap_or(0), p),
            None => (0, first),
        };
        if pattern.is_empty() {
            return Err(format!("line {}: no expression", k + 1));
        }
        out.push(mkfs::CompressHint {
            pcluster_bytes,
            alg,
            pattern: pattern.to_string(),
        });
    }
    Ok(out)
}

/// Parses `-z ALG[,LEVEL|,level=LEVEL]` as mkfs.erofs 1.9.3 spells it.
fn parse_compressor(z: &str) -> Result<Algorithm, String> {
    let mut parts = z.split(',');
    let alg = parts.next().unwrap_or("");
    let mut level = None;
    for p in parts {
        let v = p.strip_prefix("level=").unwrap_or(p);
        if p.starts_with("dictsize=") {
            return Err(format!(
                "-z {z}: dictsize= is not supported yet (the default is used)"
            ));
        }
        level = Some(
            v.parse::<i32>()
                .map_err(|_| format!("bad option {p:?} in -z {z}"))?,
        );
    }
    let check = |range: std::ops::RangeInclusive<i32>, default: i32| {
        let l = level.unwrap_or(default);
        if range.contains(&l) {
            Ok(l)
        } else {
            Err(format!(
                "{alg} level {l} out of {}..{}",
                range.start(),
                range.end()
            ))
        }
    };
    Ok(match alg {
        "lz4" => Algorithm::Lz4,
        "lz4hc" => Algorithm::Lz4Hc(check(1..=12, LZ4HC_DEFAULT_LEVEL)?),
        "lzma" => {
            let l = level.unwrap_or(LZMA_DEFAULT_LEVEL as i32);
            if !(0..=9).contains(&l) && !(100..=109).contains(&l) {
                return Err(format!("lzma level {l} out of 0..9 and 100..109"));
            }
            Algorithm::Lzma(l as u32)
        }
        "deflate" => Algorithm::Deflate(check(0..=12, DEFLATE_DEFAULT_LEVEL)?),
        "zstd" => Algorithm::Zstd(check(0..=22, ZSTD_DEFAULT_LEVEL)?),
        _ => {
            return Err(format!(
                "unsupported compressor {alg} (lz4, lz4hc, lzma, deflate, zstd)"
            ))
        }
    })
}

/// Runs `usfs mkfs.erofs`.
pub(crate) fn run(a: &MkfsErofsArgs) -> CliResult {
    let usage = |m: String| CliError(format!("mkfs.erofs: {m}"));
    let mut o = Options::default();
    if let Some(z) = &a.compress {
        let mut algs = z.split(':').map(parse_compressor);
        o.compression = algs.next().transpose().map_err(usage)?;
        o.extra_algorithms = algs.collect::<Result<_, _>>().map_err(usage)?;
    }
    if let Some(f) = &a.compress_hints {
        if a.compress.is_none() {
            return Err(usage("--compress-hints needs -z".into()));
        }
        let text = std::fs::read_to_string(f).map_err(|e| CliError::at(f.display(), e))?;
        o.compress_hints =
            parse_hints(&text).map_err(|m| usage(format!("{}: {m}", f.display())))?;
    }
    o.pcluster_bytes = a.pcluster;
    for e in a.extended.iter().flat_map(|s| s.split(',')) {
        match e {
            "ztailpacking" => o.ztailpacking = true,
            "fragments" => o.fragments = true,
            "dedupe" => o.dedupe = true,
            "legacy-compress" => o.legacy_compress = true,
            "" => {}
            _ => return Err(usage(format!("unknown extended option {e}"))),
        }
    }
    o.timestamp = a.timestamp;
    let input = input(a, &usage)?;
    if let Some(u) = &a.uuid {
        o.uuid = Some(parse_uuid(u).ok_or_else(|| usage(format!("bad UUID {u}")))?);
    }
    if let Some(l) = &a.label {
        if l.len() > 16 {
            return Err(usage("label longer than 16 bytes".into()));
        }
        o.label = l.as_bytes().to_vec();
    }
    o.xattr_tolerance = a.xattr_tolerance;
    o.all_root = a.all_root;
    o.force_uid = a.force_uid;
    o.force_gid = a.force_gid;
    o.block_size = a.block_size;
    if let Some(c) = a.chunksize {
        if !c.is_power_of_two() {
            return Err(usage(format!("chunksize {c} must be a power of two")));
        }
        o.chunk_bits = Some(c.trailing_zeros());
    }
    o.exclude_paths = a.exclude_path.clone();
    o.exclude_regexes = a.exclude_regex.clone();
    if let Some(w) = a.workers {
        o.workers = w.max(1);
    }
    let start = std::time::Instant::now();
    let r = build_file(&a.image, &input, &o, a.quiet)?;
    for w in &r.warnings {
        eprintln!("usfs mkfs.erofs: warning: {w}");
    }
    if !a.quiet {
        println!(
            "{}: {} inodes, {} blocks ({} bytes); {} files compressed, {} stored plain; {:.2} s",
            a.image.display(),
            r.inodes,
            r.blocks,
            r.blocks * u64::from(r.block_size),
            r.compressed_files,
            r.plain_files,
            start.elapsed().as_secs_f64()
        );
    }
    if a.timing {
        print_timing(&r.phases);
    }
    if o.dedupe && !a.quiet {
        println!(
            "dedupe: {} pclusters shared, {} blocks saved",
            r.shared_pclusters, r.shared_blocks
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The input the arguments name: a directory, or with `--tar` a tar stream.
fn input(a: &MkfsErofsArgs, usage: &dyn Fn(String) -> CliError) -> CliResult<Input> {
    if a.tar.is_some() && !(a.exclude_path.is_empty() && a.exclude_regex.is_empty()) {
        return Err(usage(
            "--exclude-path and --exclude-regex take a directory source, not --tar".into(),
        ));
    }
    let Some(mode) = &a.tar else {
        if a.aufs || a.ovlfs_strip.is_some() || a.ungzip {
            return Err(usage(
                "--aufs, --ovlfs-strip and --ungzip need --tar".into(),
            ));
        }
        let src = a
            .source
            .clone()
            .ok_or_else(|| usage("missing argument: SOURCE".into()))?;
        return Ok(Input::Dir(src));
    };
    let index = match mode.as_str() {
        "f" => false,
        "i" => true,
        m => return Err(usage(format!("--tar={m}: expected f or i"))),
    };
    let ovlfs_strip = match a.ovlfs_strip.as_deref() {
        None | Some("0") => false,
        Some("1") => true,
        Some(v) => return Err(usage(format!("--ovlfs-strip={v}: expected 0 or 1"))),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let spool_dir = match a.image.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let opts = usfs_source::TarOptions {
        aufs: a.aufs,
        ovlfs_strip,
        spool_dir: Some(spool_dir),
        root_mtime: a.timestamp.unwrap_or(now),
    };
    let path = a.source.clone().unwrap_or_else(|| PathBuf::from("-"));
    Ok(Input::Tar(path, opts, index))
}

/// Builds the image file `image`: the file is created or truncated (meanwhile the source is
/// scanned: freeing an old image's blocks takes a while), written through a device that
/// grows with it, and trimmed to the image's size.
fn build_file(image: &Path, input: &Input, o: &Options, quiet: bool) -> CliResult<mkfs::Report> {
    let mut o = o.clone();
    let at = |e: &dyn std::fmt::Display| CliError::at(image.display(), e);
    if let Ok(m) = std::fs::metadata(image) {
        if !m.is_file() {
            return Err(CliError(format!(
                "mkfs.erofs: {}: not a regular file (usfs writes image files only)",
                image.display()
            )));
        }
    }
    let src: Box<dyn usfs_source::Source> = match input {
        Input::Dir(dir) => Box::new(usfs_source::HostDir::new(dir)),
        Input::Tar(path, opts, index) => {
            let t = usfs_source::TarSource::open(path, opts)
                .map_err(|e| CliError(format!("mkfs.erofs: {e}")))?;
            if *index {
                // The image refers to the tar's bytes: they must be the file's own.
                if t.compression().is_some() || !t.data_in_place() {
                    return Err(CliError(format!(
                        "mkfs.erofs: --tar=i: {} must be an uncompressed tar file (the \
                         image refers to its bytes: it becomes the image's device)",
                        path.display()
                    )));
                }
                o.blob_blocks = Some(t.stream_len().div_ceil(512));
            }
            if !quiet {
                for w in t.warnings() {
                    eprintln!("usfs mkfs.erofs: warning: {w}");
                }
            }
            Box::new(t)
        }
    };
    let (opened, scan) = std::thread::scope(|s| {
        let open = s.spawn(|| open_image(image));
        let scan = mkfs::scan(&*src, &o);
        let opened = open
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("opening the image panicked")));
        (opened, scan)
    });
    let (file, dev) = opened.map_err(|e| at(&e))?;
    let built = scan.and_then(|scan| mkfs::write(&dev, scan));
    drop(dev);
    // Trim to the image (or to nothing when the build failed), then make that durable too.
    let len = built
        .as_ref()
        .map_or(0, |r| r.blocks * u64::from(r.block_size));
    let trimmed = file.set_len(len).and_then(|()| file.sync_all());
    let r = built.map_err(|e| at(&e))?;
    trimmed.map_err(|e| at(&e))?;
    Ok(r)
}

/// Creates or truncates the image file and opens it as a device that grows as the image
/// is written, up to [`mkfs::MAX_IMAGE_BYTES`] (readable too: `-E dedupe` reads written
/// pclusters back); returns a second handle to the file for trimming it afterwards.
fn open_image(image: &Path) -> std::io::Result<(File, usfs_dev::FileDevice)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(image)?;
    let dev = file
        .try_clone()
        .and_then(|f| usfs_dev::FileDevice::growable(f, mkfs::MAX_IMAGE_BYTES))?;
    Ok((file, dev))
}

/// Per phase: wall time, the writer thread's CPU time, all threads' CPU time, and how many
/// cores were busy on average (all CPU / wall).
fn print_timing(phases: &[mkfs::Phase]) {
    eprintln!(
        "{:<26} {:>8} {:>9} {:>8} {:>6}",
        "phase", "wall_s", "main_cpu", "all_cpu", "cores"
    );
    let (mut w, mut m, mut c) = (0.0, 0.0, 0.0);
    for p in phases {
        let (pw, pm, pc) = (
            p.wall.as_secs_f64(),
            p.main_cpu.as_secs_f64(),
            p.all_cpu.as_secs_f64(),
        );
        eprintln!(
            "{:<26} {pw:>8.3} {pm:>9.3} {pc:>8.3} {:>6.2}",
            p.name,
            pc / pw.max(1e-9)
        );
        w += pw;
        m += pm;
        c += pc;
    }
    eprintln!(
        "{:<26} {w:>8.3} {m:>9.3} {c:>8.3} {:>6.2}",
        "total",
        c / w.max(1e-9)
    );
}
