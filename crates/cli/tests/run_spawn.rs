//! `usfs run` against a kernel mount for the calls glibc makes behind the preload
//! library's back: freopen of the library's own streams (fopencookie FILEs), and the
//! programs glibc starts with its internal exec and spawn (system, popen, execl/execle/
//! execlp, fexecve, execveat), which must see the virtual working directory and the
//! virtual descriptors.
//!
//! Each test compiles a C program, runs it on a kernel mount of a small ext4 image
//! (`mount -o loop,ro`) and under `usfs run` with the image at the same path, and wants
//! the same output and exit code.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The small image: `hello.txt`, `dir/big.txt` (bigger than a stdio buffer, numbered
/// lines), `dir/a.txt`, `dir/sub/`, `dir/run.sh` (an executable script) and `dir/link.sh`
/// (a link to it); and `host.txt` and `host.sh` next to the mount point (reached from
/// `$R/dir` as `../../host.txt`).
fn image(s: &Scratch) -> PathBuf {
    let src = s.path("src");
    std::fs::create_dir_all(src.join("dir/sub")).unwrap();
    std::fs::write(src.join("hello.txt"), "hello from usfs\nsecond line\n").unwrap();
    let big: String = (1..20000).map(|i| format!("{i}\n")).collect();
    std::fs::write(src.join("dir/big.txt"), big).unwrap();
    std::fs::write(src.join("dir/a.txt"), "a file\n").unwrap();
    std::fs::write(
        src.join("dir/run.sh"),
        "#!/bin/sh\necho \"script in image: $*\"\n",
    )
    .unwrap();
    sh(&format!("chmod 755 '{}'", src.join("dir/run.sh").display()));
    std::os::unix::fs::symlink("run.sh", src.join("dir/link.sh")).unwrap();
    std::fs::write(s.path("host.txt"), "host line 1\nhost line 2\n").unwrap();
    std::fs::write(s.path("host.sh"), "#!/bin/sh\necho \"host script: $*\"\n").unwrap();
    sh(&format!("chmod 755 '{}'", s.path("host.sh").display()));
    let img = s.path("image");
    mke2fs(&img, "64M", &["-t", "ext4", "-b", "4096"], Some(&src));
    img
}

/// Compiles `source` to `NAME` in the scratch directory, runs `sh -c SCRIPT` (with `$P`
/// the program, `$R` the mount point, `$H` the scratch directory) on a kernel mount of
/// the image and under `usfs run`: both must exit the same way and print the same lines.
/// Returns the kernel's output.
fn agrees(s: &Scratch, name: &str, source: &str, script: &str) -> String {
    let lib = usfs().with_file_name("libusfs_preload.so");
    assert!(
        lib.is_file(),
        "{} is missing: build usfs-preload",
        lib.display()
    );
    let img = image(s);
    let root = s.path("root");
    let prog = s.path(name);
    std::fs::write(prog.with_extension("c"), source).unwrap();
    run_ok(
        Command::new("gcc")
            .args(["-Wall", "-o"])
            .arg(&prog)
            .arg(prog.with_extension("c")),
    );
    let run = |under_usfs: bool| {
        let mut c = if under_usfs {
            let mut c = Command::new(usfs());
            c.arg("run")
                .arg("--mount")
                .arg(format!("{}={}", root.display(), img.display()))
                .args(["--", "sh", "-c", script]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", script]);
            c
        };
        c.env("P", &prog)
            .env("R", &root)
            .env("H", &s.0)
            .env("USFS_SHARED_CACHE_DIR", s.path("zcache"))
            .env("LC_ALL", "C")
            .current_dir(&s.0);
        let (code, out, err) = run_limited(&mut c, Duration::from_secs(60));
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    };
    let kernel = {
        let _m = Mount::new(&img, &root, "ext4", "ro,noatime");
        run(false)
    };
    let usfs = run(true);
    assert_eq!(
        kernel.0, usfs.0,
        "exit codes differ\nkernel stdout:\n{}\nkernel stderr:\n{}\nusfs stdout:\n{}\nusfs stderr:\n{}",
        kernel.1, kernel.2, usfs.1, usfs.2
    );
    for (i, (k, u)) in kernel.1.lines().zip(usfs.1.lines()).enumerate() {
        assert_eq!(k, u, "line {i} differs (usfs stderr: {})", usfs.2);
    }
    assert_eq!(
        kernel.1.lines().count(),
        usfs.1.lines().count(),
        "the outputs differ in length\nkernel:\n{}\nusfs:\n{}",
        kernel.1,
        usfs.1
    );
    kernel.1
}

/// The freopen program: reopens streams the preload library made (an fopen of an image
/// file, stdin redirected from one) onto image files, host files, relative paths that
/// leave the image through `..`, the same file (a null path) and paths that fail; and a
/// host stream onto the same. Prints what each stream reads, its descriptor, size,
/// close-on-exec flag, offset and pushback.
const FREOPEN_C: &str = r#"#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static void show(const char *what, FILE *f, int fdnum) {
    char l[200];
    if (!f) { printf("%s: NULL %s\n", what, strerror(errno)); return; }
    int fd = fileno(f);
    struct stat sb;
    int sr = fstat(fd, &sb);
    int cloexec = fcntl(fd, F_GETFD) & FD_CLOEXEC;
    char *g = fgets(l, sizeof l, f);
    printf("%s: fd=%d size=%ld cloexec=%d line=%s", what, fdnum ? fd : -2, sr ? -1L : (long)sb.st_size,
           cloexec, g ? l : "(eof)\n");
    printf("  ftell=%ld", ftell(f));
    printf(" unget=%c", ungetc('Z', f));
    g = fgets(l, sizeof l, f);
    printf(" next=%s", g ? l : "(eof)\n");
}
int main(int argc, char **argv) {
    char *R = getenv("R"), *H = getenv("H"), p[4096], q[4096], l[200];
    (void)argc; (void)argv;
    snprintf(p, sizeof p, "%s/dir/big.txt", R);
    snprintf(q, sizeof q, "%s/host.txt", H);
    FILE *f = fopen(p, "r");
    show("image", f, 1);
    show("same file", freopen(NULL, "r", f), 1);
    show("host file", freopen(q, "re", f), 1);
    show("host, same file", freopen(NULL, "r", f), 1);
    snprintf(p, sizeof p, "%s/hello.txt", R);
    show("image again", freopen(p, "r", f), 1);
    fclose(f);

    /* Relative paths from a directory in the image, out of it through "..". */
    snprintf(p, sizeof p, "%s/dir", R);
    if (chdir(p)) perror("chdir");
    f = fopen("big.txt", "r");
    show("relative", f, 1);
    show("relative, leaves", freopen("../../host.txt", "r", f), 1);
    FILE *h = fopen(q, "r");
    show("host stream", h, 1);
    show("host stream, relative, leaves", freopen("../../host.txt", "r", h), 1);
    show("host stream to image", freopen("sub/../a.txt", "r", h), 1);
    fclose(h);

    /* stdin (redirected from the image): reopened, its descriptor stays 0. */
    if (!freopen("../hello.txt", "r", stdin)) perror("stdin");
    if (fgets(l, sizeof l, stdin)) printf("stdin: %s", l);
    printf("fd 0 at %ld\n", (long)lseek(0, 0, SEEK_CUR));
    if (!freopen(q, "r", stdin)) perror("stdin, host");
    if (fgets(l, sizeof l, stdin)) printf("stdin: %s", l);
    printf("fd 0 at %ld\n", (long)lseek(0, 0, SEEK_CUR));

    /* Failures close the stream; a later freopen opens it again. */
    FILE *g = freopen("a.txt", "w", f);
    printf("write mode: %s %s", g ? "ok" : "NULL", strerror(errno));
    printf(" fileno=%d\n", fileno(f));
    g = freopen("a.txt", "r", f);
    show("after a failure", g, 0);
    g = freopen("missing", "r", f);
    printf("missing: %s %s", g ? "ok" : "NULL", strerror(errno));
    printf(" fileno=%d\n", fileno(f));
    g = freopen("a.txt", "z", fopen("a.txt", "r"));
    printf("bad mode: %s %s\n", g ? "ok" : "NULL", strerror(errno));
    fclose(stdin);
    printf("fd 0 after fclose: %d\n", fcntl(0, F_GETFD));
    return 0;
}
"#;

/// freopen of the library's own streams works as on a kernel mount (it used to crash the
/// program: glibc's freopen cannot take a fopencookie FILE), and relative paths that leave
/// the image from a virtual working directory reach the right host file.
#[test]
fn freopen_of_our_streams_matches_the_kernel() {
    let test = "run_spawn-freopen";
    if !need_root(test) || !need_tool(test, "gcc") {
        return;
    }
    let s = Scratch::new(test);
    let k = agrees(&s, "freopen", FREOPEN_C, r#""$P" < "$R/hello.txt""#);
    assert!(
        k.contains("relative, leaves: fd=3 size=24") && k.contains("stdin: host line 1"),
        "{k}"
    );
}

/// The spawn program: with descriptor 3 open on an image file and later from a working
/// directory inside the image, starts programs through system, popen, execl, execle,
/// execlp, fexecve and execveat (host programs and programs stored in the image), and
/// prints what they print and their statuses; system's signal handling (SIGINT ignored
/// and SIGCHLD blocked while the shell runs, both put back) and popen's modes and
/// descriptors are compared too.
const SPAWN_C: &str = r#"#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
static volatile int ints, chlds;
static void on_int(int s) { (void)s; ints++; }
static void on_chld(int s) { (void)s; chlds++; }
/* Runs BODY in a child (which prints errno if BODY returns), waits, prints the status. */
#define CHILD(what, body) do { fflush(stdout); pid_t p_ = fork(); \
    if (p_ == 0) { body; printf("%s: %s\n", what, strerror(errno)); fflush(stdout); _exit(127); } \
    int st_; waitpid(p_, &st_, 0); printf("%s: status %d\n", what, st_); } while (0)
static void rewind3(void) { lseek(3, 0, SEEK_SET); }
int main(void) {
    char *R = getenv("R"), p[4096], cmd[4096], l[256];
    snprintf(p, sizeof p, "%s/hello.txt", R);
    int fd = open(p, O_RDONLY);
    if (fd != 3) { dup2(fd, 3); close(fd); }
    signal(SIGINT, on_int);
    signal(SIGCHLD, on_chld);

    printf("system(NULL) %d\n", system(NULL) != 0);
    printf("system exit 3: %d\n", system("exit 3"));
    fflush(stdout);
    int r = system("cat <&3; echo rc=$?");
    printf("system cat: %d\n", r);
    fflush(stdout);
    r = system("kill -INT $PPID; echo sent");
    printf("system kill: %d ints=%d\n", r, ints);
    r = system("kill -TERM $$");
    printf("system killed: signaled=%d sig=%d\n", WIFSIGNALED(r), WTERMSIG(r));
    struct sigaction sa;
    sigaction(SIGINT, NULL, &sa);
    printf("SIGINT handler restored: %d, chlds>0: %d\n", sa.sa_handler == on_int, chlds > 0);
    sigset_t m;
    sigprocmask(SIG_BLOCK, NULL, &m);
    printf("SIGCHLD blocked after: %d\n", sigismember(&m, SIGCHLD));

    rewind3();
    FILE *f = popen("cat <&3; exit 5", "r");
    while (fgets(l, sizeof l, f)) printf("popen r: %s", l);
    r = pclose(f);
    printf("pclose: exited=%d code=%d\n", WIFEXITED(r), WEXITSTATUS(r));
    fflush(stdout);
    f = popen("tr a-z A-Z", "w");
    fputs("written through popen\n", f);
    printf("pclose w: %d\n", pclose(f));
    f = popen("true", "rw");
    printf("popen rw: %s %s\n", f ? "ok" : "NULL", strerror(errno));
    f = popen("true", "x");
    printf("popen x: %s %s\n", f ? "ok" : "NULL", strerror(errno));
    f = popen("cat >/dev/null", "w");
    FILE *g = popen("cat", "re");
    printf("cloexec: w=%d re=%d\n", fcntl(fileno(f), F_GETFD), fcntl(fileno(g), F_GETFD));
    snprintf(cmd, sizeof cmd,
             "[ -e /proc/$$/fd/%d ] && echo first open in third || echo first closed in third",
             fileno(f));
    FILE *h = popen(cmd, "r");
    if (fgets(l, sizeof l, h)) printf("%s", l);
    printf("pclose %d, ", pclose(h));
    printf("fclose of a popen stream %d, ", fclose(g));
    printf("pclose %d\n", pclose(f));

    snprintf(p, sizeof p, "%s/dir", R);
    if (chdir(p)) perror("chdir");
    f = popen("pwd; ls", "r");
    while (fgets(l, sizeof l, f)) printf("popen in image: %s", l);
    pclose(f);
    fflush(stdout);
    printf("system in image: %d\n", system("pwd; ls; cat a.txt"));

    rewind3();
    CHILD("execl", execl("/bin/cat", "cat", "/dev/fd/3", (char *)0));
    rewind3();
    char *env[] = { "FOO=bar", NULL };
    CHILD("execle", execle("/bin/sh", "sh", "-c", "echo FOO=$FOO; pwd; cat <&3", (char *)0, env));
    CHILD("execlp", execlp("sh", "sh", "-c", "pwd; ls", (char *)0));
    CHILD("execl image", execl("./run.sh", "run.sh", "one", "two", (char *)0));
    CHILD("execl missing", execl("./missing", "missing", (char *)0));
    CHILD("execl many", execl("/bin/echo", "echo", "1", "2", "3", "4", "5", "6", "7", "8", "9",
                              "10", "11", "12", (char *)0));
    snprintf(cmd, sizeof cmd, "%s/dir:/bin:/usr/bin", R);
    setenv("PATH", cmd, 1);
    CHILD("execlp image", execlp("run.sh", "run.sh", "path", (char *)0));

    char *sh_argv[] = { "sh", "-c", "pwd; cat <&3", NULL };
    char *img_argv[] = { "run.sh", "by fd", NULL };
    rewind3();
    int hostfd = open("/bin/sh", O_RDONLY);
    CHILD("fexecve host", fexecve(hostfd, sh_argv, environ));
    int imgfd = open("run.sh", O_RDONLY);
    CHILD("fexecve image", fexecve(imgfd, img_argv, environ));
    int dirfd = open(".", O_RDONLY | O_DIRECTORY);
    CHILD("fexecve dir", fexecve(dirfd, img_argv, environ));
    CHILD("execveat cwd", execveat(AT_FDCWD, "run.sh", img_argv, environ, 0));
    CHILD("execveat dirfd", execveat(dirfd, "run.sh", img_argv, environ, 0));
    CHILD("execveat nofollow", execveat(dirfd, "link.sh", img_argv, environ, AT_SYMLINK_NOFOLLOW));
    CHILD("execveat follow", execveat(dirfd, "link.sh", img_argv, environ, 0));
    rewind3();
    int bin = open("/bin", O_RDONLY | O_DIRECTORY);
    CHILD("execveat host dir", execveat(bin, "sh", sh_argv, environ, 0));
    CHILD("execveat empty", execveat(imgfd, "", img_argv, environ, AT_EMPTY_PATH));
    CHILD("execveat leaves", execveat(AT_FDCWD, "../../host.sh", img_argv, environ, 0));
    return 0;
}
"#;

/// Programs started through glibc's internal exec and spawn (system, popen, the execl
/// family, fexecve, execveat) get the virtual working directory and descriptors, as on a
/// kernel mount: `system("ls")` from a directory in the image lists the image (it used to
/// list the kernel's working directory: a `system("rm -rf *")` would have acted on the
/// host), `cat <&3` reads the image file, programs stored in the image run.
#[test]
fn system_popen_and_exec_family_see_the_virtual_cwd_and_descriptors() {
    let test = "run_spawn-spawn";
    if !need_root(test) || !need_tool(test, "gcc") || !need_tool(test, "awk") {
        return;
    }
    let s = Scratch::new(test);
    let k = agrees(
        &s,
        "spawn",
        SPAWN_C,
        r#""$P"; cd "$R/dir" && awk 'BEGIN { system("pwd; ls") }'"#,
    );
    assert!(
        k.contains("popen in image: run.sh")
            && k.contains("execveat host dir: status 0")
            && k.ends_with("sub\n"),
        "{k}"
    );
}
