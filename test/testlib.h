/* SPDX-License-Identifier: MIT */
/* Tiny test framework, in the spirit of libuv's test runner.
 *
 * A test file defines tests with TEST(name) { ... } and has no main(): the
 * runner in testlib.c runs every test in its own forked child process (its own
 * process group) with a timeout, kills and reaps whatever the test left
 * behind, and prints one line per test plus a final "N passed, M failed".
 *
 * Command line: [--list] [substring...]  (substrings filter test names).
 * Environment:  TEST_TIMEOUT=seconds overrides every test's timeout (default
 *               120 s, or the one given to TEST_WITH_TIMEOUT);
 *               TL_KEEP_TMP=1 keeps each test's temporary directory.
 *
 * A failed assertion prints file:line, the expression and the values, then
 * calls exit(1): atexit handlers (the etcd harness registers one) still run.
 * ASSERT_EQ & co compare integers, or floating point if either side is.
 */
#ifndef ELECTOR_TESTLIB_H
#define ELECTOR_TESTLIB_H

#include <stdint.h>
#include <sys/types.h>

typedef void (*tl_test_fn)(void);

void tl_register(const char *name, tl_test_fn fn, int timeout_s);

/* Defines and registers a test; timeout_s <= 0 means the default. */
#define TEST_WITH_TIMEOUT(name, timeout_s)                                               \
    static void tl_test_##name(void);                                                    \
    __attribute__((constructor)) static void tl_register_##name(void)                    \
    {                                                                                    \
        tl_register(#name, tl_test_##name, (timeout_s));                                 \
    }                                                                                    \
    static void tl_test_##name(void)

#define TEST(name) TEST_WITH_TIMEOUT(name, 0)

/* ---- assertions (each exits the test process with status 1) ---- */

_Noreturn void tl_fail(const char *file, int line, const char *what);
_Noreturn void tl_fail_num(const char *file, int line, const char *macro,
                           const char *a_expr, const char *b_expr, long double a,
                           long double b, int is_float);
_Noreturn void tl_fail_str(const char *file, int line, const char *macro,
                           const char *a_expr, const char *b_expr, const char *a,
                           const char *b);
/* Ends the test as skipped (exit status TL_SKIP_STATUS): the runner prints
 * "SKIP name: why" and counts it apart from passes. For a test that has
 * nothing to check here (e.g. a feature the etcd under test lacks). */
#define TL_SKIP_STATUS 77
_Noreturn void tl_skip(const char *why);
int tl_streq(const char *a, const char *b);           /* NULL-safe */
int tl_contains(const char *hay, const char *needle); /* NULL-safe */

#define ASSERT(cond)                                                                     \
    do {                                                                                 \
        if (!(cond)) tl_fail(__FILE__, __LINE__, "ASSERT(" #cond ")");                   \
    } while (0)

/* Numeric comparisons: both sides evaluated once. Integers are compared and
 * printed as long long; if either side is floating point (e.g. a duration
 * from tl_now()), as long double. The expressions are stringified here,
 * before macro expansion. For pointers use ASSERT(p == q) / ASSERT_NULL. */
/* (clang-format mangles _Generic) */
/* clang-format off */
#define TL_IS_FLOAT(x) _Generic((x), float: 1, double: 1, long double: 1, default: 0)
#define TL_AS_LD(x)                                                                      \
    ((long double)_Generic((x), float: (x), double: (x), long double: (x),               \
                           default: (long long)(x)))
/* clang-format on */
#define TL_ASSERT_CMP(macro, a_str, b_str, a, op, b)                                     \
    do {                                                                                 \
        int tl_f_ = TL_IS_FLOAT(a) || TL_IS_FLOAT(b);                                    \
        long double tl_a_ = TL_AS_LD(a);                                                 \
        long double tl_b_ = TL_AS_LD(b);                                                 \
        if (!(tl_a_ op tl_b_))                                                           \
            tl_fail_num(__FILE__, __LINE__, macro, a_str, b_str, tl_a_, tl_b_, tl_f_);   \
    } while (0)

#define ASSERT_EQ(expected, actual)                                                      \
    TL_ASSERT_CMP("ASSERT_EQ", #expected, #actual, expected, ==, actual)
#define ASSERT_NE(a, b) TL_ASSERT_CMP("ASSERT_NE", #a, #b, a, !=, b)
#define ASSERT_GE(a, b) TL_ASSERT_CMP("ASSERT_GE", #a, #b, a, >=, b)
#define ASSERT_LE(a, b) TL_ASSERT_CMP("ASSERT_LE", #a, #b, a, <=, b)
#define ASSERT_GT(a, b) TL_ASSERT_CMP("ASSERT_GT", #a, #b, a, >, b)
#define ASSERT_LT(a, b) TL_ASSERT_CMP("ASSERT_LT", #a, #b, a, <, b)
#define ASSERT_OK(expr) TL_ASSERT_CMP("ASSERT_OK", "0", #expr, 0, ==, expr)

#define ASSERT_NULL(p) ASSERT((p) == NULL)
#define ASSERT_NOT_NULL(p) ASSERT((p) != NULL)

#define TL_ASSERT_STR(macro, a_str, b_str, a, b, ok_fn)                                  \
    do {                                                                                 \
        const char *tl_sa_ = (a);                                                        \
        const char *tl_sb_ = (b);                                                        \
        if (!ok_fn(tl_sa_, tl_sb_))                                                      \
            tl_fail_str(__FILE__, __LINE__, macro, a_str, b_str, tl_sa_, tl_sb_);        \
    } while (0)

/* NULL-safe: two NULLs are equal. */
#define ASSERT_STREQ(expected, actual)                                                   \
    TL_ASSERT_STR("ASSERT_STREQ", #expected, #actual, expected, actual, tl_streq)

/* Substring check, e.g. for error output. */
#define ASSERT_CONTAINS(haystack, needle)                                                \
    TL_ASSERT_STR("ASSERT_CONTAINS", #haystack, #needle, haystack, needle, tl_contains)

/* ---- helpers ---- */

double tl_now(void);     /* CLOCK_MONOTONIC seconds */
int64_t tl_now_ns(void); /* CLOCK_MONOTONIC nanoseconds */
void tl_msleep(int ms);  /* restarts after EINTR */

/* Prints "[  1.234s] message" to stderr, time relative to the test start. */
void tl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Creates a fresh directory (mode 0700) and returns its malloc'd path, which
 * the caller frees. It lives under the test's own temporary root, which the
 * runner removes recursively when the test ends, however it ends. NULL on
 * error. */
char *tl_tmpdir(const char *prefix);

/* 1 if TL_KEEP_TMP asks to keep temporary directories for inspection. */
int tl_keep_tmp(void);

/* rm -rf, without following symlinks. 0 on success. */
int tl_rmtree(const char *path);

typedef struct tl_run_opts {
    const char *const *envp; /* NULL: inherit this process's environment */
    char **err;              /* non-NULL: capture stderr here (malloc'd) */
    int merge_stderr;        /* capture stderr into *out too (ignores err) */
    int quiet_stderr;        /* stderr not captured goes to /dev/null */
    double timeout_s;        /* <= 0: 60 s; on expiry SIGKILL, return -1 */
} tl_run_opts;

/* Runs argv (PATH searched) with stdin on /dev/null and waits for it.
 * Captures stdout into a malloc'd NUL-terminated *out (when out is non-NULL;
 * otherwise stdout is discarded); stderr is inherited unless opts say
 * otherwise. Returns the exit status, or -1 if it could not be started, was
 * killed by a signal or timed out (*out is still set, possibly partial). */
int tl_run(char **out, const char *const argv[]);
int tl_run_ex(char **out, const char *const argv[], const tl_run_opts *opts);

/* Starts a long-running child (PATH searched), stdin on /dev/null, in the
 * test's process group. With stdout_fd non-NULL its stdout is a pipe whose
 * read end (close-on-exec) is stored there; otherwise stdout is inherited.
 * Returns the pid or -1. The caller reaps it, e.g. with tl_reap(). */
pid_t tl_spawn(const char *const argv[], int *stdout_fd);

/* Sends sig to pid (if sig != 0), waits up to timeout_s for it to exit, sends
 * SIGKILL if it has not, and reaps it. Returns the raw wait status, or -1. */
int tl_reap(pid_t pid, int sig, double timeout_s);

/* A pids cgroup that lets at most max processes exist in it (cgroup v1's pids
 * hierarchy, else a cgroup v2 with the pids controller), made under dir (cap
 * bytes); moves the calling process (a forked child: its forks fail with
 * EAGAIN past max) into it. 0, or -1 if this machine offers none. The caller's
 * parent removes dir (rmdir) once that child is gone. */
int tl_pids_cgroup(char *dir, size_t cap, int max);
/* Removes the pids cgroup that process pid made with tl_pids_cgroup, if any
 * (retrying a while: its last members may still be exiting). */
void tl_pids_cgroup_remove(pid_t pid);

#endif /* ELECTOR_TESTLIB_H */
