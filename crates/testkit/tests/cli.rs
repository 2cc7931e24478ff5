//! The two binaries: exit codes and messages.

use std::process::Command;

use usfs_testkit::TempDir;

const GENTREE: &str = env!("CARGO_BIN_EXE_usfs-gentree");
const TREECMP: &str = env!("CARGO_BIN_EXE_usfs-treecmp");

fn run(cmd: &str, args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(cmd).args(args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn gentree_and_treecmp_exit_codes() {
    let tmp = TempDir::new("cli").unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for dir in [&a, &b] {
        let args = [
            "--seed",
            "9",
            "--files",
            "5",
            "--big-dir-entries",
            "5",
            "--max-file-size",
            "64K",
            "--json",
        ];
        let mut argv: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        argv.push(dir.as_os_str());
        let (code, out, err) = run(GENTREE, &argv);
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("{\"dirs\":"), "{out}");
    }
    let (code, out, _) = run(TREECMP, &[a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, 0);
    assert!(out.starts_with("trees are equal: "), "{out}");

    std::fs::set_permissions(
        b.join("modes/file-0644"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let (code, out, _) = run(TREECMP, &[a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, 1);
    assert_eq!(
        out.trim(),
        "modes/file-0644: mode differs: A: 0644; B: 0600"
    );

    let missing = tmp.path().join("missing");
    let (code, _, err) = run(TREECMP, &[a.as_os_str(), missing.as_os_str()]);
    assert_eq!(code, 2);
    assert!(err.contains("I/O error in B: stat:"), "{err}");

    let (code, _, err) = run(GENTREE, &["--seed".as_ref(), "1".as_ref(), a.as_os_str()]);
    assert_eq!(code, 1, "a non-empty directory is refused");
    assert!(err.contains("not empty"), "{err}");
    let (code, _, _) = run(
        GENTREE,
        &["--profile".as_ref(), "huge".as_ref(), a.as_os_str()],
    );
    assert_eq!(code, 2, "usage error");
}
