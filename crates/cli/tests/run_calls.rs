//! `usfs run` against a kernel mount, call by call: mmap of a virtual descriptor
//! (private writable copies, the kernel's errors for shared ones), splice and
//! copy_file_range out of an image, scandirat, F_GETFL, the terminal queries, and dlopen
//! of a library stored in an image. One C program (sections chosen by its first
//! argument) prints what each call returned; its output on a kernel mount of an ext4 and
//! an EROFS image must equal its output under `usfs run` of the same image.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The probe: `probe SECTION`, with the image at `$M`. Every line is a call and what it
/// returned (errno names by strerror).
const PROBE_C: &str = r#"#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <string.h>
#include <errno.h>
#include <dirent.h>
#include <dlfcn.h>
#include <termios.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
static const char *M;
static char *P(const char *rel) {
    static char b[8][4096]; static int i;
    i = (i + 1) % 8; snprintf(b[i], 4096, "%s/%s", M, rel); return b[i];
}
#define E(r) ((r) < 0 ? strerror(errno) : "ok")
static int visible(const struct dirent *d) { return d->d_name[0] != '.'; }

static void mmaps(int fd) {
    char b[4];
    char *m = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) { printf("private rw: %s\n", strerror(errno)); }
    else {
        printf("private rw: %.5s", m); m[0] = 'X'; m[8191] = 'Y';
        pread(fd, b, 2, 0);
        printf(" mapping %c%c file %c%c\n", m[0], m[8191], b[0], b[1]); munmap(m, 8192);
    }
    m = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 4096);
    printf("private rw at 4096: %s %.5s\n", m == MAP_FAILED ? strerror(errno) : "ok", m == MAP_FAILED ? "" : m);
    static const struct { const char *name; int prot, flags; long off; } c[] = {
        {"shared rw", PROT_READ | PROT_WRITE, MAP_SHARED, 0},
        {"shared_validate rw", PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE, 0},
        {"shared_validate r", PROT_READ, MAP_SHARED_VALIDATE, 0},
        {"shared_validate r MAP_SYNC", PROT_READ, MAP_SHARED_VALIDATE | MAP_SYNC, 0},
        {"shared r", PROT_READ, MAP_SHARED, 0},
        {"type 0", PROT_READ, 0, 0},
        {"private misaligned", PROT_READ, MAP_PRIVATE, 100},
    };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
        m = mmap(0, 4096, c[i].prot, c[i].flags, fd, c[i].off);
        printf("%s: %s\n", c[i].name, m == MAP_FAILED ? strerror(errno) : "ok");
    }
}

static void splices(int fd) {
    int p[2], q[2], h; char b[64]; loff_t o = 10; long r;
    pipe(p);
    r = splice(fd, &o, p[1], 0, 20, 0);
    printf("splice at 10: %ld %s off %lld pos %ld\n", r, E(r), (long long)o, (long)lseek(fd, 0, SEEK_CUR));
    if (r > 0) { r = read(p[0], b, r); printf("  [%.*s]\n", (int)r, b); }
    lseek(fd, 3, SEEK_SET);
    r = splice(fd, 0, p[1], 0, 7, SPLICE_F_NONBLOCK);
    printf("splice at pos: %ld %s pos %ld\n", r, E(r), (long)lseek(fd, 0, SEEK_CUR));
    if (r > 0) { r = read(p[0], b, r); printf("  [%.*s]\n", (int)r, b); }
    o = 1 << 30; r = splice(fd, &o, p[1], 0, 7, 0); printf("splice past end: %ld %s\n", r, E(r));
    o = -1; r = splice(fd, &o, p[1], 0, 7, 0); printf("splice negative: %ld %s\n", r, E(r));
    h = open("/dev/null", O_WRONLY);
    r = splice(fd, 0, h, 0, 7, 0); printf("splice to a file: %ld %s\n", r, E(r));
    write(p[1], "abc", 3);
    r = splice(p[0], 0, fd, 0, 3, 0); printf("splice into it: %ld %s\n", r, E(r));
    r = splice(fd, 0, p[0], 0, 3, 0); printf("splice to a read end: %ld %s\n", r, E(r));
    o = 0; r = splice(fd, 0, p[1], &o, 3, 0); printf("splice with off_out: %ld %s\n", r, E(r));
    r = splice(fd, 0, p[1], 0, 0, 0); printf("splice len 0: %ld %s\n", r, E(r));
    pipe2(q, O_NONBLOCK); long tot = 0; o = 0;
    for (int i = 0; i < 100; i++) { r = splice(fd, &o, q[1], 0, 65536, 0); if (r <= 0) break; tot += r; }
    printf("splice until full: %ld then %ld %s\n", tot, r, E(r));
    int d = open(M, O_RDONLY | O_DIRECTORY);
    r = splice(d, 0, p[1], 0, 3, 0); printf("splice a directory: %ld %s\n", r, E(r));
    o = 0; r = sendfile(p[1], fd, &o, 5); printf("sendfile to a pipe: %ld %s off %lld\n", r, E(r), (long long)o);
    h = open("/dev/shm", O_TMPFILE | O_RDWR, 0600);
    o = 0; r = copy_file_range(fd, &o, p[1], 0, 5, 0); printf("copy_file_range to a pipe: %ld %s\n", r, E(r));
    o = 0; r = copy_file_range(fd, &o, h, 0, 5, 0); printf("copy_file_range to a file: %ld %s off %lld\n", r, E(r), (long long)o);
    o = 1 << 30; r = copy_file_range(fd, &o, h, 0, 5, 0); printf("copy_file_range past end: %ld %s\n", r, E(r));
    r = copy_file_range(h, 0, fd, 0, 5, 0); printf("copy_file_range into it: %ld %s\n", r, E(r));
    r = copy_file_range(d, 0, h, 0, 5, 0); printf("copy_file_range a directory: %ld %s\n", r, E(r));
    o = 0; r = sendfile(h, fd, &o, 1 << 20); printf("sendfile to a file: %ld %s off %lld\n", r, E(r), (long long)o);
}

static void scandirats(int fd) {
    struct dirent **nl; int n;
    int d = open(M, O_RDONLY | O_DIRECTORY);
    int host = open("/", O_RDONLY | O_DIRECTORY);
    struct { const char *name; int dfd; const char *path; int sort; } c[] = {
        {"dirfd", d, "dir", 1}, {"AT_FDCWD absolute", AT_FDCWD, P("dir"), 2},
        {"a file", d, "hello.txt", 0}, {"missing", d, "nonex", 0}, {"file dirfd", fd, "x", 0},
        {"host dirfd", host, P("dir/sub") + 1, 1},
    };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
        n = scandirat(c[i].dfd, c[i].path, &nl, c[i].sort == 1 ? NULL : visible,
                      c[i].sort == 2 ? versionsort : alphasort);
        printf("scandirat %s: %d %s\n", c[i].name, n, E(n));
        for (int j = 0; j < n; j++) { printf("  %s\n", nl[j]->d_name); free(nl[j]); }
        if (n >= 0) free(nl);
    }
    n = scandirat64(d, "dir/sub", (struct dirent64 ***)&nl, visible, alphasort64);
    printf("scandirat64: %d %s\n", n, E(n));
}

static void getfl(int fd) {
    printf("file %x\n", fcntl(fd, F_GETFL));
    printf("directory %x\n", fcntl(open(M, O_RDONLY | O_DIRECTORY), F_GETFL));
    printf("nonblock nofollow noatime cloexec %x\n",
           fcntl(open(P("dir"), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOATIME | O_CLOEXEC), F_GETFL));
    printf("O_PATH %x\n", fcntl(open(P("hello.txt"), O_PATH | O_NOFOLLOW | O_CLOEXEC), F_GETFL));
    int t = open(P("hello.txt"), O_RDONLY | O_NOCTTY | O_SYNC);
    printf("noctty sync %x\n", fcntl(t, F_GETFL));
    fcntl(t, F_SETFL, O_NONBLOCK | O_APPEND);
    printf("after F_SETFL %x\n", fcntl(t, F_GETFL));
    printf("opendir %x\n", fcntl(dirfd(opendir(P("dir"))), F_GETFL));
    printf("fopen %x\n", fcntl(fileno(fopen(P("hello.txt"), "r")), F_GETFL));
}

static void ttys(int fd) {
    char b[64]; struct termios t; int r, e;
    int d = open(M, O_RDONLY | O_DIRECTORY), op = open(P("hello.txt"), O_PATH);
    int fds[] = {fd, d, op};
    for (int i = 0; i < 3; i++) {
        errno = 0; r = isatty(fds[i]); printf("isatty %d %s\n", r, strerror(errno));
        errno = 0; char *n = ttyname(fds[i]); printf("ttyname %s %s\n", n ? n : "NULL", strerror(errno));
        e = ttyname_r(fds[i], b, sizeof b); printf("ttyname_r %s\n", strerror(e));
        r = tcgetattr(fds[i], &t); printf("tcgetattr %d %s\n", r, E(r));
        r = tcgetpgrp(fds[i]); printf("tcgetpgrp %d %s\n", r, E(r));
    }
    e = ttyname_r(fd, b, 4); printf("ttyname_r short %s\n", strerror(e));
}

static void dlopens(void) {
    void *h = dlopen(P("mods/libusfs_calls.so"), RTLD_NOW);
    if (!h) { printf("dlopen: %s\n", dlerror()); return; }
    int (*answer)(int) = (int (*)(int))dlsym(h, "usfs_answer");
    printf("dlopen ok, answer %d\n", answer ? answer(20) : -1);
    void *again = dlopen(P("mods/../mods/libusfs_calls.so"), RTLD_NOW | RTLD_NOLOAD);
    printf("same handle %d\n", again == h);
    void *dep = dlopen(P("mods/libusfs_user.so"), RTLD_LAZY);
    int (*twice)(int) = dep ? (int (*)(int))dlsym(dep, "usfs_twice") : 0;
    printf("with a dependency: %s %d\n", dep ? "ok" : dlerror(), twice ? twice(4) : -1);
    printf("missing: %s\n", dlopen(P("mods/nonex.so"), RTLD_NOW) ? "ok" : "NULL");
    printf("not a library: %s\n", dlopen(P("hello.txt"), RTLD_NOW) ? "ok" : "NULL");
    printf("dlclose %d\n", dlclose(h) | dlclose(again));
    h = dlopen(P("mods/libusfs_calls.so"), RTLD_NOW);
    answer = h ? (int (*)(int))dlsym(h, "usfs_answer") : 0;
    printf("dlopen again %d\n", answer ? answer(1) : -1);
    printf("libm by name %d\n", dlopen("libm.so.6", RTLD_NOW) != NULL);
    /* Found only through the program's own RUNPATH: glibc must see the program as the
       caller. */
    printf("host library by RUNPATH %d\n", dlopen("libusfs_host.so", RTLD_NOW) != NULL);
}

int main(int argc, char **argv) {
    M = getenv("M");
    if (argc < 2) return 2;
    int fd = open(P("dir/big.txt"), O_RDONLY);
    if (fd < 0) { perror("open"); return 1; }
    if (!strcmp(argv[1], "mmap")) mmaps(fd);
    else if (!strcmp(argv[1], "splice")) splices(fd);
    else if (!strcmp(argv[1], "scandirat")) scandirats(fd);
    else if (!strcmp(argv[1], "getfl")) getfl(fd);
    else if (!strcmp(argv[1], "tty")) ttys(fd);
    else if (!strcmp(argv[1], "dlopen")) dlopens();
    else if (!strcmp(argv[1], "pyext")) {
        /* Python imports a C extension module stored in the image (copied there from
           the host's lib-dynload when it has one). */
        fflush(stdout);
        execlp("python3", "python3", "-c",
               "import glob, os, sys\n"
               "M = os.environ['M']\n"
               "if not glob.glob(M + '/mods/_json*.so'): print('no _json'); sys.exit(0)\n"
               "sys.path.insert(0, M + '/mods')\n"
               "import _json\n"
               "print(_json.__file__.startswith(M), _json.encode_basestring_ascii('caf\\xe9'))\n",
               (char *)0);
        return 3;
    }
    else return 2;
    return 0;
}
"#;

/// A library for dlopen: `usfs_answer`, and a second library that needs the first (by
/// soname; its RUNPATH `$ORIGIN` finds it on a kernel mount, the loaded copy under `usfs
/// run`).
const LIB_C: &str = "int usfs_answer(int x) { return 2 * x + 2; }\n";
const USER_C: &str =
    "extern int usfs_answer(int); int usfs_twice(int x) { return usfs_answer(x) * 2; }\n";

/// The source tree of the images, with the probe's libraries in `mods`.
fn make_source(s: &Scratch) -> PathBuf {
    let src = s.path("src");
    std::fs::create_dir_all(src.join("dir/sub")).unwrap();
    std::fs::create_dir_all(src.join("mods")).unwrap();
    std::fs::write(src.join("hello.txt"), "hello from usfs\n").unwrap();
    let big: String = (1..=30000).map(|i| format!("{i}\n")).collect();
    std::fs::write(src.join("dir/big.txt"), big).unwrap();
    for f in ["dir/g9", "dir/g10", "dir/sub/f"] {
        std::fs::write(src.join(f), "g\n").unwrap();
    }
    let lib = src.join("mods/libusfs_calls.so");
    std::fs::write(s.path("lib.c"), LIB_C).unwrap();
    std::fs::write(s.path("user.c"), USER_C).unwrap();
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libusfs_calls.so", "-o"])
            .arg(&lib)
            .arg(s.path("lib.c")),
    );
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-rpath,$ORIGIN", "-o"])
            .arg(src.join("mods/libusfs_user.so"))
            .arg(s.path("user.c"))
            .arg("-L")
            .arg(src.join("mods"))
            .arg("-lusfs_calls"),
    );
    // A C extension module of the host's Python, if it has one as a file.
    let ext = Command::new("sh")
        .arg("-c")
        .arg("ls /usr/lib/python3*/lib-dynload/_json*.so 2>/dev/null | head -1")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if !ext.is_empty() {
        let name = Path::new(&ext).file_name().unwrap();
        std::fs::copy(&ext, src.join("mods").join(name)).unwrap();
    }
    src
}

/// The preload library must sit next to the usfs binary.
fn check_preload_built() {
    let lib = usfs().with_file_name("libusfs_preload.so");
    assert!(lib.is_file(), "{} is missing", lib.display());
}

/// Runs `probe SECTION` with `$M` = `root` (under `usfs run` of `img` when `img` is
/// given); returns its stdout, asserting exit 0.
fn run_probe(prog: &Path, section: &str, root: &Path, img: Option<&Path>) -> String {
    let mut c = match img {
        Some(img) => {
            check_preload_built();
            let mut c = Command::new(usfs());
            c.arg("run")
                .arg("--mount")
                .arg(format!("{}={}", root.display(), img.display()))
                .arg("--")
                .arg(prog);
            c
        }
        None => Command::new(prog),
    };
    c.arg(section)
        .env("M", root)
        .env("USFS_SHARED_CACHE_DIR", root.with_file_name("zcache"))
        .env("LC_ALL", "C");
    let (code, out, err) = run_limited(&mut c, Duration::from_secs(60));
    let how = if img.is_some() { "usfs run" } else { "kernel" };
    assert_eq!(
        code,
        Some(0),
        "{how}: probe {section} failed: {}",
        String::from_utf8_lossy(&err)
    );
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs the probe's `section` on a kernel mount and under `usfs run` of an ext4 image
/// (`mke2fs -d`) and an EROFS image (`mkfs.erofs -zlz4hc`, when installed) of the same
/// tree: the outputs must be equal. Returns the kernel's output on ext4, or None when
/// skipped (not root, no gcc).
fn probe_agrees(test: &str, section: &str) -> Option<String> {
    if !need_root(test) || !need_tool(test, "gcc") {
        return None;
    }
    let s = Scratch::new(test);
    let src = make_source(&s);
    let prog = s.path("probe");
    std::fs::write(s.path("probe.c"), PROBE_C).unwrap();
    // A host library the probe finds by name through its RUNPATH only.
    let hostlib = s.path("hostlib");
    std::fs::create_dir_all(&hostlib).unwrap();
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(hostlib.join("libusfs_host.so"))
            .arg(s.path("lib.c")),
    );
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(&prog)
            .arg(s.path("probe.c"))
            .arg("-Wl,--enable-new-dtags")
            .arg(format!("-Wl,-rpath,{}", hostlib.display()))
            .arg("-ldl"),
    );
    let mut images = vec![("ext4", s.path("ext4.img"))];
    mke2fs(&images[0].1, "64M", &["-t", "ext4"], Some(&src));
    if need_tool(test, "mkfs.erofs") {
        let img = s.path("erofs.img");
        sh(&format!(
            "mkfs.erofs -zlz4hc '{}' '{}' >/dev/null",
            img.display(),
            src.display()
        ));
        images.push(("erofs", img));
    }
    let root = s.path("root");
    let mut first = None;
    for (fstype, img) in &images {
        let kernel = {
            let _m = Mount::new(img, &root, fstype, "ro");
            run_probe(&prog, section, &root, None)
        };
        let run = run_probe(&prog, section, &root, Some(img));
        if let Some((i, (k, r))) = kernel
            .lines()
            .zip(run.lines())
            .enumerate()
            .find(|(_, (k, r))| k != r)
        {
            panic!("{fstype}: {section} line {i} differs:\n kernel:   {k}\n usfs run: {r}\nkernel output:\n{kernel}");
        }
        assert_eq!(
            kernel, run,
            "{fstype}: {section}: the outputs differ in length"
        );
        first.get_or_insert(kernel);
    }
    first
}

/// A private writable mapping of a file in an image is a copy the program may write
/// (the image and later reads stay as they were); shared writable mappings are EACCES
/// (the descriptor is read-only), unknown MAP_SHARED_VALIDATE flags EOPNOTSUPP, a missing
/// map type and a misaligned offset EINVAL: all as on a kernel mount.
#[test]
fn mmap_of_a_virtual_descriptor_matches_the_kernel() {
    if let Some(k) = probe_agrees("run_calls-mmap", "mmap") {
        assert!(k.contains("mapping XY file 1\n"), "{k}");
    }
}

/// splice from a file in an image into a pipe moves the bytes (at an offset or the file
/// position, as much as the pipe holds, EAGAIN when full and non-blocking); splice into
/// one is EBADF, to a non-pipe EINVAL; copy_file_range out of an image is EXDEV (EINVAL to
/// a pipe); sendfile works: all as on a kernel mount.
#[test]
fn splice_and_copy_file_range_match_the_kernel() {
    if let Some(k) = probe_agrees("run_calls-splice", "splice") {
        assert!(k.contains("splice at 10: 20 ok off 30 pos 0"), "{k}");
        assert!(
            k.contains("copy_file_range to a file: -1 Invalid cross-device link"),
            "{k}"
        );
    }
}

/// scandirat reads directories in an image through a virtual directory descriptor, an
/// absolute path, or a path relative to a host directory above the mount.
#[test]
fn scandirat_reads_directories_in_an_image() {
    if let Some(k) = probe_agrees("run_calls-scandirat", "scandirat") {
        assert!(
            k.contains("scandirat dirfd: 6 ok\n  .\n  ..\n  big.txt\n  g10\n"),
            "{k}"
        );
    }
}

/// F_GETFL reports what the kernel reports: O_LARGEFILE added, creation flags dropped,
/// O_PATH descriptors with only their path flags, opendir's O_NONBLOCK.
#[test]
fn fcntl_getfl_matches_the_kernel() {
    if let Some(k) = probe_agrees("run_calls-getfl", "getfl") {
        assert!(k.contains("file 8000\n"), "{k}");
    }
}

/// isatty, ttyname(_r), tcgetattr and tcgetpgrp on a file in an image: ENOTTY (EBADF for
/// an O_PATH descriptor), as on a kernel mount.
#[test]
fn terminal_queries_say_enotty() {
    if let Some(k) = probe_agrees("run_calls-tty", "tty") {
        assert!(k.contains("isatty 0 Inappropriate ioctl for device"), "{k}");
    }
}

/// dlopen of a library stored in an image loads it (from a memfd copy): its symbols work,
/// a second dlopen (RTLD_NOLOAD, another spelling of the path) gives the same handle, a
/// library needing it resolves it, a missing file and a file that is not a library fail,
/// it loads again after dlclose, and names without '/' still go to glibc's search.
#[test]
fn dlopen_loads_libraries_stored_in_an_image() {
    if let Some(k) = probe_agrees("run_calls-dlopen", "dlopen") {
        assert!(k.contains("dlopen ok, answer 42\nsame handle 1\n"), "{k}");
        assert!(k.contains("with a dependency: ok 20"), "{k}");
        assert!(k.contains("host library by RUNPATH 1\n"), "{k}");
    }
}

/// Python imports a C extension module stored in an image, as on a kernel mount.
#[test]
fn python_imports_a_c_extension_from_an_image() {
    if !need_tool("run_calls-pyext", "python3") {
        return;
    }
    if let Some(k) = probe_agrees("run_calls-pyext", "pyext") {
        assert!(k.contains("True") || k.contains("no _json"), "{k}");
    }
}
