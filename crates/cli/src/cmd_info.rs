//! `usfs info`: superblock summary.

use crate::image::{self, CliResult};
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, json: bool, dev: &image::DeviceArgs) -> CliResult {
    let fs = image::open(path, dev)?;
    let d = fs.describe();
    if json {
        let mut m = serde_json::Map::new();
        m.insert("format".into(), fs.format_name().into());
        for (k, v) in d {
            m.insert(k, v.into());
        }
        println!("{}", serde_json::Value::Object(m));
    } else {
        println!("{:<26}{}", "Format:", fs.format_name());
        for (k, v) in d {
            println!("{:<26}{v}", format!("{k}:"));
        }
    }
    Ok(ExitCode::SUCCESS)
}
