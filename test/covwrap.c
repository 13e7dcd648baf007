/* SPDX-License-Identifier: MIT */
/* Coverage builds only (-DELECTOR_COVERAGE=ON, scripts/coverage.sh): every
 * program is linked with -Wl,--wrap=_exit,--wrap=execl,... and this object, so
 * that a process that leaves through _exit(), replaces itself with exec*()
 * (forked guards, health checkers, children of `elector run`, test helpers) or
 * raise()s a fatal signal writes its gcov counters first. Without it their
 * lines count as never run: libgcov writes the counters from an atexit
 * handler, which none of these runs. Compiled without --coverage (it must not
 * count itself); the symbols are hidden, so each program and library has its
 * own copy. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>

#define COVWRAP_HIDDEN __attribute__((visibility("hidden")))

void __gcov_dump(void);
void __gcov_reset(void);

/* The real functions (the linker maps __real_X to X). */
void __real__exit(int status) __attribute__((noreturn));
int __real_execv(const char *path, char *const argv[]);
int __real_execvp(const char *file, char *const argv[]);
int __real_execve(const char *path, char *const argv[], char *const envp[]);
int __real_raise(int sig);

COVWRAP_HIDDEN void __wrap__exit(int status) __attribute__((noreturn));
COVWRAP_HIDDEN int __wrap_execv(const char *path, char *const argv[]);
COVWRAP_HIDDEN int __wrap_execvp(const char *file, char *const argv[]);
COVWRAP_HIDDEN int __wrap_execve(const char *path, char *const argv[],
                                 char *const envp[]);
COVWRAP_HIDDEN int __wrap_execl(const char *path, const char *arg, ...);
COVWRAP_HIDDEN int __wrap_raise(int sig);

/* Writes the counters so far and zeroes them: libgcov writes a process's
 * counters once (a later exit() would write nothing), so what runs after the
 * call (exec failed, the signal was handled) counts from zero and is added to
 * the file at the next write. */
static void flush(void)
{
    __gcov_dump();
    __gcov_reset();
}

void __wrap__exit(int status)
{
    flush();
    __real__exit(status);
}

/* raise() of a fatal signal (the health-check reaper's SIGALRM at its timeout,
 * a re-raised SIGTERM) ends the process without exit(). */
int __wrap_raise(int sig)
{
    flush();
    return __real_raise(sig);
}

int __wrap_execv(const char *path, char *const argv[])
{
    flush();
    return __real_execv(path, argv);
}

int __wrap_execvp(const char *file, char *const argv[])
{
    flush();
    return __real_execvp(file, argv);
}

int __wrap_execve(const char *path, char *const argv[], char *const envp[])
{
    flush();
    return __real_execve(path, argv, envp);
}

/* execl is variadic: its arguments are gathered into a vector for execv. */
int __wrap_execl(const char *path, const char *arg, ...)
{
    char *argv[256];
    size_t n = 0;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a; a = va_arg(ap, const char *)) {
        if (n == sizeof argv / sizeof argv[0] - 1) {
            va_end(ap);
            errno = E2BIG;
            return -1;
        }
        argv[n++] = (char *)a;
    }
    va_end(ap);
    argv[n] = NULL;
    flush();
    return __real_execv(path, argv);
}
