//! `usfs`: build, check and read ext4 and EROFS images in user space.

mod cmd_cat;
mod cmd_fsck;
mod cmd_fsck_erofs;
mod cmd_info;
mod cmd_ls;
mod cmd_mkfs_erofs;
mod cmd_mkfs_ext4;
mod cmd_mount;
mod cmd_run;
mod cmd_run_rw;
mod cmd_stat;
mod cmd_undo;
mod display;
mod edit;
mod export;
mod fsck_ask;
mod fsck_backup;
mod fsck_repair;
mod image;
mod progress;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// File systems in user space: read ext4 images without root, kernel mounts or FUSE.
#[derive(Parser)]
#[command(name = "usfs", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print a superblock summary of an image (like `dumpe2fs -h`).
    Info {
        /// The image (format detected by its magic number).
        image: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        dev: image::DeviceArgs,
    },
    /// List a directory inside an image.
    Ls {
        /// Long listing: mode, links, owner, group, size, mtime, name (-> target).
        #[arg(short = 'l')]
        long: bool,
        /// Also list `.` and `..`.
        #[arg(short = 'a')]
        all: bool,
        /// List subdirectories recursively.
        #[arg(short = 'R')]
        recursive: bool,
        /// Show inode numbers.
        #[arg(short = 'i')]
        inode: bool,
        /// Do not sort: list entries in directory order, as readdir(3) returns them on a
        /// kernel mount (`ls -U`; with -a, `.` and `..` where the kernel puts them).
        #[arg(short = 'U')]
        unsorted: bool,
        /// The image.
        image: PathBuf,
        /// Path inside the image (default `/`).
        #[arg(default_value = "/")]
        path: String,
        #[command(flatten)]
        dev: image::DeviceArgs,
    },
    /// Write a file from inside an image to standard output.
    Cat {
        /// The image.
        image: PathBuf,
        /// Path inside the image (symbolic links are followed).
        path: String,
        #[command(flatten)]
        dev: image::DeviceArgs,
    },
    /// Show the attributes of a file inside an image.
    Stat {
        /// Do not follow a symbolic link at the end of the path.
        #[arg(short = 'L', long = "no-dereference")]
        no_follow: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The image.
        image: PathBuf,
        /// Path inside the image.
        path: String,
        #[command(flatten)]
        dev: image::DeviceArgs,
    },
    /// Extract the whole tree of an image into a directory.
    Export(export::ExportArgs),
    /// Check an ext4 image in parallel, like `e2fsck -fn`, or repair it with -y / -p
    /// (the fixes so far: see the README); e2fsck's exit codes: 0 clean, 1 errors
    /// corrected, 4 errors left, 8 operational error, 16 usage. An EROFS image is
    /// checked as fsck.erofs does (every inode, directory, xattr and compression index;
    /// every pcluster decompressed; --extract=DIR), with its exit codes: 0 clean, 1 not.
    Fsck(cmd_fsck::FsckArgs),
    /// Put an image back from an undo file (`usfs fsck -z`, e2fsck/tune2fs/resize2fs
    /// -z), as e2undo does: `usfs undo fsck.e2undo disk.img`.
    Undo(cmd_undo::UndoArgs),
    /// Build an EROFS image from a directory or (`--tar`) a tar stream (mkfs.erofs's
    /// options; fixed-size output compression with LZ4/LZ4HC, MicroLZMA, DEFLATE or
    /// Zstandard).
    #[command(name = "mkfs.erofs")]
    MkfsErofs(cmd_mkfs_erofs::MkfsErofsArgs),
    /// Run a command that sees images at host paths, through an LD_PRELOAD library (no
    /// root, no kernel mount, no FUSE): `usfs run --mount /mnt/img=IMAGE -- ls /mnt/img`.
    Run(cmd_run::RunArgs),
    /// Mount an image through FUSE (`-o cache` or `-o direct_io`, `-o threads=N`).
    Mount(cmd_mount::MountArgs),
    /// Unmount a `usfs mount`.
    Umount(cmd_mount::UmountArgs),
    /// Make an ext4 image by itself (no mke2fs), optionally filled from a directory
    /// (-d), with an mballoc-style allocator; options named as mke2fs's.
    #[command(name = "mkfs.ext4")]
    MkfsExt4(cmd_mkfs_ext4::MkfsExt4Args),
    /// Copy files into, out of or between ext4 images (`IMAGE:PATH` names a place in an
    /// image): `usfs cp -r dir disk.img:/dest`, `usfs cp disk.img:/etc/hosts .`.
    Cp(edit::cp::CpArgs),
    /// Make directories in an ext4 image: `usfs mkdir -p disk.img:/a/b`.
    Mkdir(edit::simple::MkdirArgs),
    /// Remove files (and with -r directories) from an ext4 image.
    Rm(edit::simple::RmArgs),
    /// Rename or move a file inside an ext4 image: `usfs mv disk.img:/a disk.img:/b`.
    Mv(edit::simple::MvArgs),
    /// Make a hard link (or with -s a symbolic link) in an ext4 image.
    Ln(edit::simple::LnArgs),
    /// Change permission bits in an ext4 image: `usfs chmod 0755 disk.img:/bin/tool`.
    Chmod(edit::simple::ChmodArgs),
    /// Change owner (and group) in an ext4 image: `usfs chown 1000:1000 disk.img:/home/u`.
    Chown(edit::simple::ChownArgs),
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            if !e.use_stderr() {
                return ExitCode::SUCCESS; // --help, --version
            }
            // Usage errors: e2fsck's code for fsck, the usual 2 elsewhere.
            let fsck = std::env::args().nth(1).as_deref() == Some("fsck");
            return ExitCode::from(if fsck { cmd_fsck::EXIT_USAGE } else { 2 });
        }
    };
    let result = match cli.cmd {
        Cmd::Info { image, json, dev } => cmd_info::run(&image, json, &dev),
        Cmd::Ls {
            long,
            all,
            recursive,
            inode,
            unsorted,
            image,
            path,
            dev,
        } => cmd_ls::run(
            &image,
            &path,
            &dev,
            cmd_ls::LsOptions {
                long,
                all,
                recursive,
                inode,
                unsorted,
            },
        ),
        Cmd::Cat { image, path, dev } => cmd_cat::run(&image, &path, &dev),
        Cmd::Stat {
            no_follow,
            json,
            image,
            path,
            dev,
        } => cmd_stat::run(&image, &path, !no_follow, json, &dev),
        Cmd::Export(args) => export::run(&args),
        Cmd::Fsck(args) => cmd_fsck::run(&args),
        Cmd::Undo(args) => cmd_undo::run(&args),
        Cmd::MkfsErofs(args) => cmd_mkfs_erofs::run(&args),
        Cmd::Run(args) => cmd_run::run(&args),
        Cmd::Mount(args) => cmd_mount::run(&args),
        Cmd::Umount(args) => cmd_mount::run_umount(&args),
        Cmd::MkfsExt4(args) => cmd_mkfs_ext4::run(&args),
        Cmd::Cp(args) => edit::cp::run(&args),
        Cmd::Mkdir(args) => edit::simple::mkdir(&args),
        Cmd::Rm(args) => edit::simple::rm(&args),
        Cmd::Mv(args) => edit::simple::mv(&args),
        Cmd::Ln(args) => edit::simple::ln(&args),
        Cmd::Chmod(args) => edit::simple::chmod(&args),
        Cmd::Chown(args) => edit::simple::chown(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("usfs: {e}");
            ExitCode::from(1)
        }
    }
}

/// Lets a closed pipe end the program quietly, as it does for C tools (`usfs ls | head`).
/// Rust ignores SIGPIPE, which would turn the write error into a panic in `println!`.
fn restore_sigpipe() {
    // SAFETY: setting a signal's disposition back to the default, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
