/* The bodies of execl, execle and execlp for libusfs_preload.so (h_execl.rs exports
 * them under their public names).
 *
 * Why C: these are C variadic functions, which stable Rust can call but not define.
 * glibc's own execl family calls its internal __execve/__execvpe, which no preload
 * library sees, so a program that uses them would start its child without the
 * handover of the virtual working directory and descriptors. These definitions do what
 * glibc's do (collect the arguments into an array on the stack: no malloc, as exec may
 * run in a child of a multithreaded fork) and call this library's execve and execvp
 * hooks (h_exec.rs), which do the rest. Nothing else belongs in this file.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

/* execve and execvp below are this library's hooks (h_exec.rs): the dynamic linker
   binds them to the first definition, and this library is preloaded. */
extern char **environ;

/* Counts the arguments after `arg` up to the NULL that ends them (glibc's loop, with
   its E2BIG limit); -1 when there are too many. */
#define COUNT_ARGS(argc, arg)                                                  \
    do {                                                                       \
        va_list ap;                                                            \
        va_start(ap, arg);                                                     \
        for (argc = 1; va_arg(ap, const char *); argc++) {                     \
            if (argc == INT_MAX) {                                             \
                va_end(ap);                                                    \
                errno = E2BIG;                                                 \
                return -1;                                                     \
            }                                                                  \
        }                                                                      \
        va_end(ap);                                                            \
    } while (0)

/* Reads the `argc` arguments after `arg` (the NULL that ends them included) from `ap`
   into `argv`, which holds argc + 1 entries. */
static void collect(char **argv, const char *arg, ptrdiff_t argc, va_list *ap) {
    argv[0] = (char *)arg;
    for (ptrdiff_t i = 1; i <= argc; i++)
        argv[i] = va_arg(*ap, char *);
}

/* execl(3): execve with the arguments as argv and the current environment. */
__attribute__((visibility("hidden"))) int usfs_execl(const char *path, const char *arg, ...) {
    ptrdiff_t argc;
    COUNT_ARGS(argc, arg);
    char *argv[argc + 1];
    va_list ap;
    va_start(ap, arg);
    collect(argv, arg, argc, &ap);
    va_end(ap);
    return execve(path, argv, environ);
}

/* execle(3): execve with the arguments as argv and the environment after the NULL. */
__attribute__((visibility("hidden"))) int usfs_execle(const char *path, const char *arg, ...) {
    ptrdiff_t argc;
    COUNT_ARGS(argc, arg);
    char *argv[argc + 1];
    va_list ap;
    va_start(ap, arg);
    collect(argv, arg, argc, &ap);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}

/* execlp(3): execvp with the arguments as argv (PATH search). */
__attribute__((visibility("hidden"))) int usfs_execlp(const char *file, const char *arg, ...) {
    ptrdiff_t argc;
    COUNT_ARGS(argc, arg);
    char *argv[argc + 1];
    va_list ap;
    va_start(ap, arg);
    collect(argv, arg, argc, &ap);
    va_end(ap);
    return execvp(file, argv);
}
