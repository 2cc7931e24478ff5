//! `usfs stat`: attributes of one file.

use crate::display::{major_minor, mode_string, show_name};
use crate::image::{self, CliError, CliResult};
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;
use usfs_fs::FileType;

pub(crate) fn run(
    image_path: &Path,
    path: &str,
    follow: bool,
    as_json: bool,
    dev: &image::DeviceArgs,
) -> CliResult {
    let fs = image::open(image_path, dev)?;
    let ino = image::resolve(&*fs, image_path, path, follow)?;
    let err = |e: usfs_fs::Error| CliError(format!("{}:{path}: {e}", image_path.display()));
    let m = fs.getattr(ino).map_err(err)?;
    let target = if m.file_type == FileType::Symlink {
        Some(fs.readlink(ino).map_err(err)?)
    } else {
        None
    };
    let xattrs = fs.list_xattrs(ino).map_err(err)?;
    let (major, minor) = major_minor(m.rdev);
    let kind = match m.file_type {
        FileType::Regular if m.size == 0 => "regular empty file",
        FileType::Regular => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::CharDevice => "character special file",
        FileType::BlockDevice => "block special file",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
    };
    if as_json {
        let t = |t: usfs_fs::Timestamp| json!({"sec": t.sec, "nsec": t.nsec});
        let v = json!({
            "path": path,
            "ino": m.ino,
            "type": kind,
            "mode": format!("{:o}", m.mode()),
            "uid": m.uid,
            "gid": m.gid,
            "nlink": m.nlink,
            "size": m.size,
            "blocks": m.blocks,
            "blksize": m.blksize,
            "rdev": [major, minor],
            "atime": t(m.atime),
            "mtime": t(m.mtime),
            "ctime": t(m.ctime),
            "crtime": m.crtime.map(t),
            "generation": m.generation,
            "target": target.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()),
            "xattrs": xattrs.iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
    match &target {
        Some(t) => println!("  File: {} -> {}", path, show_name(t)),
        None => println!("  File: {path}"),
    }
    println!(
        "  Size: {:<15} Blocks: {:<10} IO Block: {:<6} {kind}",
        m.size, m.blocks, m.blksize
    );
    let dev = if matches!(m.file_type, FileType::CharDevice | FileType::BlockDevice) {
        format!(" Device type: {major},{minor}")
    } else {
        String::new()
    };
    println!("Inode: {:<15} Links: {:<5}{dev}", m.ino, m.nlink);
    println!(
        "Access: ({:04o}/{})  Uid: {:>5}   Gid: {:>5}",
        m.perm,
        mode_string(&m),
        m.uid,
        m.gid
    );
    println!("Access: {}", m.atime.to_utc_string());
    println!("Modify: {}", m.mtime.to_utc_string());
    println!("Change: {}", m.ctime.to_utc_string());
    println!(
        " Birth: {}",
        m.crtime.map_or("-".into(), |t| t.to_utc_string())
    );
    for x in &xattrs {
        let v = fs.get_xattr(ino, x).map_err(err)?;
        println!(" Xattr: {} ({} bytes)", show_name(x), v.len());
    }
    Ok(ExitCode::SUCCESS)
}
