//! `usfs cat`: file contents to standard output.

use crate::image::{self, CliError, CliResult};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(image_path: &Path, path: &str, dev: &image::DeviceArgs) -> CliResult {
    let fs = image::open(image_path, dev)?;
    let ino = image::resolve(&*fs, image_path, path, true)?;
    let err = |e: usfs_fs::Error| CliError(format!("{}:{path}: {e}", image_path.display()));
    let mut out = std::io::stdout().lock();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    loop {
        let n = fs.read_at(ino, off, &mut buf).map_err(err)?;
        if n == 0 {
            break;
        }
        match out.write_all(&buf[..n]) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
            Err(e) => return Err(CliError::at("standard output", e)),
        }
        off += n as u64;
    }
    out.flush()
        .map_err(|e| CliError::at("standard output", e))?;
    Ok(ExitCode::SUCCESS)
}
