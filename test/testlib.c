/* SPDX-License-Identifier: MIT */
/* Test runner and helpers; see testlib.h. */
/* pipe2(): close-on-exec atomically, as tests may fork from other threads. */
#define _GNU_SOURCE
#include "testlib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define TL_MAX_TESTS 256
#define TL_DEFAULT_TIMEOUT 120
/* How long the runner waits for a test's leftovers to die after SIGKILL. */
#define TL_REAP_WAIT_S 10.0

typedef struct tl_test {
    const char *name;
    tl_test_fn fn;
    int timeout_s;
} tl_test;

static tl_test tl_tests[TL_MAX_TESTS];
static int tl_ntests;

/* State of the test child (meaningful only inside it). */
static char tl_root[4096]; /* per-test temporary root, made by the runner */
static double tl_start;
static unsigned tl_tmp_counter;

/* Runner state shared with its signal handler. */
static volatile sig_atomic_t tl_current_pgid;
static volatile sig_atomic_t tl_interrupted; /* SIGINT/SIGTERM received */

void tl_register(const char *name, tl_test_fn fn, int timeout_s)
{
    if (tl_ntests == TL_MAX_TESTS) {
        fprintf(stderr, "testlib: more than %d tests\n", TL_MAX_TESTS);
        abort();
    }
    tl_tests[tl_ntests++] = (tl_test){name, fn, timeout_s};
}

/* ---------------------------------------------------------------- time */

int64_t tl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double tl_now(void)
{
    return (double)tl_now_ns() / 1e9;
}

void tl_msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

void tl_log(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%8.3fs] %s\n", tl_now() - tl_start, msg);
}

/* ----------------------------------------------------------- assertions */

static _Noreturn void tl_die(void)
{
    fflush(stdout);
    fflush(stderr);
    exit(1); /* not _exit: atexit handlers stop etcd members */
}

void tl_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: %s failed\n", file, line, what);
    tl_die();
}

/* Formats a compared value the way it was compared. */
static void tl_fmt_num(char *buf, size_t n, long double v, int is_float)
{
    if (is_float)
        snprintf(buf, n, "%.6Lg", v);
    else
        snprintf(buf, n, "%lld", (long long)v);
}

void tl_fail_num(const char *file, int line, const char *macro, const char *a_expr,
                 const char *b_expr, long double a, long double b, int is_float)
{
    char av[64], bv[64];
    tl_fmt_num(av, sizeof av, a, is_float);
    tl_fmt_num(bv, sizeof bv, b, is_float);
    fprintf(stderr, "%s:%d: ", file, line);
    if (strcmp(macro, "ASSERT_OK") == 0)
        fprintf(stderr, "ASSERT_OK(%s) failed: got %s\n", b_expr, bv);
    else if (strcmp(macro, "ASSERT_EQ") == 0)
        fprintf(stderr, "ASSERT_EQ(%s, %s) failed: expected %s, got %s\n", a_expr, b_expr,
                av, bv);
    else
        fprintf(stderr, "%s(%s, %s) failed: left %s, right %s\n", macro, a_expr, b_expr,
                av, bv);
    tl_die();
}

/* Prints s quoted, or NULL. */
static void tl_print_str(const char *s)
{
    if (s == NULL)
        fputs("NULL", stderr);
    else
        fprintf(stderr, "\"%s\"", s);
}

void tl_fail_str(const char *file, int line, const char *macro, const char *a_expr,
                 const char *b_expr, const char *a, const char *b)
{
    int eq = strcmp(macro, "ASSERT_STREQ") == 0;
    fprintf(stderr, "%s:%d: %s(%s, %s) failed:\n  %s ", file, line, macro, a_expr, b_expr,
            eq ? "expected" : "haystack");
    tl_print_str(a);
    fprintf(stderr, "\n  %s ", eq ? "got     " : "needle  ");
    tl_print_str(b);
    fputc('\n', stderr);
    tl_die();
}

int tl_streq(const char *a, const char *b)
{
    if (a == NULL || b == NULL) return a == b;
    return strcmp(a, b) == 0;
}

int tl_contains(const char *hay, const char *needle)
{
    return hay != NULL && needle != NULL && strstr(hay, needle) != NULL;
}

/* ------------------------------------------------------- temp directories */

static const char *tl_tmpbase(void)
{
    const char *t = getenv("TMPDIR");
    return t != NULL && t[0] != '\0' ? t : "/tmp";
}

char *tl_tmpdir(const char *prefix)
{
    char path[4096];
    /* Outside the runner (no per-test root) fall back to $TMPDIR. */
    const char *base = tl_root[0] != '\0' ? tl_root : tl_tmpbase();
    int n = snprintf(path, sizeof path, "%s/%s-%u-XXXXXX", base,
                     prefix != NULL ? prefix : "tmp", tl_tmp_counter++);
    if (n < 0 || (size_t)n >= sizeof path) return NULL;
    if (mkdtemp(path) == NULL) {
        fprintf(stderr, "tl_tmpdir: mkdtemp %s: %s\n", path, strerror(errno));
        return NULL;
    }
    return strdup(path);
}

static int tl_rmtree_at(int dirfd, const char *name);

/* Removes the contents of the open directory fd, then closes it. */
static int tl_rm_contents(int fd)
{
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (tl_rmtree_at(dirfd(d), e->d_name) != 0) rc = -1;
    }
    closedir(d);
    return rc;
}

static int tl_rmtree_at(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return unlinkat(dirfd, name, 0);
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = tl_rm_contents(fd);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0) rc = -1;
    return rc;
}

int tl_rmtree(const char *path)
{
    return tl_rmtree_at(AT_FDCWD, path);
}

/* ------------------------------------------------------ child processes */

int tl_reap(pid_t pid, int sig, double timeout_s)
{
    if (pid <= 0) return -1;
    if (sig != 0) kill(pid, sig);
    double deadline = tl_now() + timeout_s;
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0 && errno != EINTR) return -1;
        if (tl_now() >= deadline) break;
        tl_msleep(5);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return st;
}

/* Default signal dispositions and an empty mask for spawned programs, so
 * they do not inherit whatever the test (or the runner) set up. */
static void tl_spawnattr_init(posix_spawnattr_t *attr)
{
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_init(attr);
    posix_spawnattr_setsigdefault(attr, &all);
    posix_spawnattr_setsigmask(attr, &none);
    posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
}

/* out_fd/err_fd: -1 inherit, -2 /dev/null, else dup'ed onto 1/2. */
static pid_t tl_spawn_fds(const char *const argv[], const char *const *envp, int out_fd,
                          int err_fd)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (out_fd == -2)
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    else if (out_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    if (err_fd == -2)
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    else if (err_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    tl_spawnattr_init(&attr);
    char *const *env = envp != NULL ? (char *const *)envp : environ;
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, &attr, (char *const *)argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        fprintf(stderr, "testlib: cannot spawn %s: %s\n", argv[0], strerror(rc));
        return -1;
    }
    return pid;
}

pid_t tl_spawn(const char *const argv[], int *stdout_fd)
{
    int p[2] = {-1, -1};
    if (stdout_fd != NULL && pipe2(p, O_CLOEXEC) != 0) return -1;
    pid_t pid = tl_spawn_fds(argv, NULL, stdout_fd != NULL ? p[1] : -1, -1);
    if (stdout_fd != NULL) {
        close(p[1]);
        if (pid < 0)
            close(p[0]);
        else
            *stdout_fd = p[0];
    }
    return pid;
}

typedef struct tl_buf {
    char *data;
    size_t len, cap;
} tl_buf;

static void tl_buf_add(tl_buf *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap != 0 ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (d == NULL) abort();
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

/* Hands the buffer to *dst (an empty string if nothing was read), or frees
 * it when dst is NULL. */
static void tl_buf_take(tl_buf *b, char **dst)
{
    if (dst == NULL) {
        free(b->data);
        return;
    }
    if (b->data == NULL) tl_buf_add(b, "", 0);
    *dst = b->data;
}

/* A child being collected by tl_run_ex. */
typedef struct tl_proc {
    pid_t pid;
    int fds[2]; /* stdout, stderr read ends; -1 when closed or unused */
    tl_buf bufs[2];
    int status, exited;
} tl_proc;

/* Reads whatever is ready on the open pipes; closes those at EOF. */
static void tl_read_ready(tl_proc *p, int wait_ms)
{
    struct pollfd pf[2];
    int n = 0, idx[2];
    for (int i = 0; i < 2; i++)
        if (p->fds[i] >= 0) {
            pf[n] = (struct pollfd){.fd = p->fds[i], .events = POLLIN};
            idx[n++] = i;
        }
    if (poll(pf, (nfds_t)n, wait_ms) <= 0) return;
    for (int k = 0; k < n; k++) {
        if (pf[k].revents == 0) continue;
        char chunk[4096];
        ssize_t got = read(pf[k].fd, chunk, sizeof chunk);
        if (got > 0) {
            tl_buf_add(&p->bufs[idx[k]], chunk, (size_t)got);
        } else if (got == 0 || errno != EINTR) {
            close(p->fds[idx[k]]);
            p->fds[idx[k]] = -1;
        }
    }
}

/* Collects output until EOF on every pipe and the child's exit. A background
 * grandchild may hold a pipe open after the child exited: then give up on EOF
 * after 1 s rather than wait for the grandchild. Returns 1 on timeout. */
static int tl_collect(tl_proc *p, double deadline)
{
    for (;;) {
        if (!p->exited && waitpid(p->pid, &p->status, WNOHANG) == p->pid) {
            p->exited = 1;
            if (deadline > tl_now() + 1.0) deadline = tl_now() + 1.0;
        }
        int open_pipes = (p->fds[0] >= 0) + (p->fds[1] >= 0);
        if (open_pipes == 0 && p->exited) return 0;
        double left = deadline - tl_now();
        if (left <= 0) return !p->exited;
        if (open_pipes == 0) {
            tl_msleep(left < 0.005 ? 1 : 5);
            continue;
        }
        /* Wake up now and then to notice the exit while pipes stay open. */
        tl_read_ready(p, left > 0.05 ? 50 : (int)(left * 1000) + 1);
    }
}

static int tl_exit_code(const char *prog, const tl_proc *p, int timed_out)
{
    if (timed_out) {
        fprintf(stderr, "testlib: %s timed out\n", prog);
        return -1;
    }
    if (WIFEXITED(p->status)) return WEXITSTATUS(p->status);
    fprintf(stderr, "testlib: %s killed by signal %d\n", prog, WTERMSIG(p->status));
    return -1;
}

/* Picks the child's stderr: -1 inherit, -2 /dev/null, else a pipe end. */
static int tl_err_target(const tl_run_opts *o, int out_w, int err_w)
{
    if (o->merge_stderr) return out_w;
    if (o->err != NULL) return err_w;
    return o->quiet_stderr ? -2 : -1;
}

int tl_run_ex(char **out, const char *const argv[], const tl_run_opts *o)
{
    static const tl_run_opts defaults = {0};
    if (o == NULL) o = &defaults;
    int capture_err = o->err != NULL && !o->merge_stderr;
    int po[2], pe[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) != 0) return -1;
    if (capture_err && pipe2(pe, O_CLOEXEC) != 0) {
        close(po[0]);
        close(po[1]);
        return -1;
    }
    tl_proc p = {.fds = {po[0], pe[0]}};
    p.pid = tl_spawn_fds(argv, o->envp, po[1], tl_err_target(o, po[1], pe[1]));
    close(po[1]);
    if (pe[1] >= 0) close(pe[1]);

    int rc = -1;
    if (p.pid > 0) {
        double timeout = o->timeout_s > 0 ? o->timeout_s : 60.0;
        int timed_out = tl_collect(&p, tl_now() + timeout);
        if (!p.exited) p.status = tl_reap(p.pid, SIGKILL, 0);
        rc = tl_exit_code(argv[0], &p, timed_out);
    }
    for (int i = 0; i < 2; i++)
        if (p.fds[i] >= 0) close(p.fds[i]);
    tl_buf_take(&p.bufs[0], out);
    tl_buf_take(&p.bufs[1], capture_err ? o->err : NULL);
    return rc;
}

int tl_run(char **out, const char *const argv[])
{
    return tl_run_ex(out, argv, NULL);
}

/* --------------------------------------------------------------- runner */

/* Runs inside the forked child: own process group (so the runner can kill
 * everything the test started with one kill(-pgid)), and dies with the
 * runner so nothing outlives an aborted run. */
static _Noreturn void tl_child(const tl_test *t, pid_t runner, const sigset_t *oldmask)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != runner) _exit(1); /* runner died before prctl */
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    tl_start = tl_now();
    t->fn();
    fflush(stdout);
    exit(0);
}

/* Waits for the test child until the deadline; SIGCHLD is blocked so that
 * sigtimedwait wakes us as soon as anything exits. Returns 1 on timeout or
 * interruption. */
static int tl_wait_test(pid_t pid, double deadline, int *status)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) return 0;
        if (r < 0 && errno != EINTR) return 0; /* cannot happen: it's our child */
        double left = deadline - tl_now();
        if (left <= 0 || tl_interrupted) return 1;
        if (left > 0.1) left = 0.1; /* also poll, in case a wakeup is missed */
        struct timespec ts = {0, (long)(left * 1e9)};
        sigtimedwait(&chld, NULL, &ts);
    }
}

/* Sends SIGKILL to every direct child of ours still alive. As a subreaper we
 * inherit the test's orphaned descendants, so these are processes the test
 * started that escaped its process group (e.g. via setsid). */
static int tl_kill_own_children(void)
{
    DIR *d = opendir("/proc");
    if (d == NULL) return 0;
    pid_t self = getpid();
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "re");
        if (f == NULL) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        char *rp = strrchr(buf, ')'); /* comm may contain spaces */
        char state;
        int ppid;
        if (rp == NULL || sscanf(rp + 1, " %c %d", &state, &ppid) != 2) continue;
        if (ppid == self && state != 'Z') {
            kill((pid_t)atoi(e->d_name), SIGKILL);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Kills the test's process group and reaps every remaining descendant
 * (ours, being a subreaper), bounded in time. */
static void tl_cleanup_test(pid_t pgid)
{
    kill(-pgid, SIGKILL);
    double start = tl_now(), deadline = start + TL_REAP_WAIT_S;
    int escaped_killed = 0;
    for (;;) {
        int st;
        pid_t r = waitpid(-1, &st, WNOHANG);
        if (r > 0) continue;
        if (r < 0 && errno == ECHILD) return;
        if (r < 0 && errno == EINTR) continue;
        if (!escaped_killed && tl_now() - start > 1.0) {
            int n = tl_kill_own_children();
            if (n > 0)
                fprintf(stderr,
                        "testlib: killed %d process(es) that left the test's "
                        "process group\n",
                        n);
            escaped_killed = 1;
        }
        if (tl_now() >= deadline) {
            fprintf(stderr, "testlib: gave up reaping leftover processes\n");
            return;
        }
        tl_msleep(5);
    }
}

static int tl_timeout_for(const tl_test *t)
{
    const char *env = getenv("TEST_TIMEOUT");
    if (env != NULL && atoi(env) > 0) return atoi(env);
    return t->timeout_s > 0 ? t->timeout_s : TL_DEFAULT_TIMEOUT;
}

static int tl_make_root(void)
{
    int n = snprintf(tl_root, sizeof tl_root, "%s/elector-test-XXXXXX", tl_tmpbase());
    if (n < 0 || (size_t)n >= sizeof tl_root || mkdtemp(tl_root) == NULL) {
        fprintf(stderr, "testlib: cannot create temp dir under %s\n", tl_tmpbase());
        tl_root[0] = '\0';
        return -1;
    }
    return 0;
}

int tl_keep_tmp(void)
{
    const char *keep = getenv("TL_KEEP_TMP");
    return keep != NULL && keep[0] != '\0' && keep[0] != '0';
}

static void tl_remove_root(void)
{
    if (tl_root[0] == '\0') return;
    if (tl_keep_tmp())
        fprintf(stderr, "testlib: kept %s\n", tl_root);
    else
        tl_rmtree(tl_root);
    tl_root[0] = '\0';
}

/* Where a skipped test leaves its reason for the runner (the test's root). */
static const char *tl_skip_path(void)
{
    static char p[sizeof tl_root + 8];
    snprintf(p, sizeof p, "%s/.skip", tl_root);
    return p;
}

void tl_skip(const char *why)
{
    FILE *f = fopen(tl_skip_path(), "w");
    if (f) {
        fputs(why, f);
        fclose(f);
    }
    fprintf(stderr, "skipped: %s\n", why);
    exit(TL_SKIP_STATUS);
}

static void tl_report(const tl_test *t, int timed_out, int st, double secs, int timeout_s)
{
    if (tl_interrupted)
        printf("INTERRUPTED %s (%.2fs)\n", t->name, secs);
    else if (timed_out)
        printf("TIMEOUT %s (%ds)\n", t->name, timeout_s);
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        printf("ok %s (%.2fs)\n", t->name, secs);
    else if (WIFEXITED(st) && WEXITSTATUS(st) == TL_SKIP_STATUS) {
        char why[512] = "";
        FILE *f = fopen(tl_skip_path(), "r");
        if (f) {
            size_t n = fread(why, 1, sizeof why - 1, f);
            why[n] = '\0';
            fclose(f);
        }
        printf("SKIP %s: %s (%.2fs)\n", t->name, why, secs);
    } else if (WIFEXITED(st))
        printf("FAIL %s (exit %d, %.2fs)\n", t->name, WEXITSTATUS(st), secs);
    else
        printf("FAIL %s (signal %d, %.2fs)\n", t->name, WTERMSIG(st), secs);
    fflush(stdout);
}

/* Returns 1 if the test passed, 2 if it was skipped, 0 if it failed. */
static int tl_run_one(const tl_test *t)
{
    int timeout_s = tl_timeout_for(t);
    tl_make_root();
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    fflush(stdout);
    fflush(stderr);
    pid_t runner = getpid();
    double start = tl_now();
    pid_t pid = fork();
    if (pid == 0) tl_child(t, runner, &old);
    int st = 0, timed_out = 0;
    if (pid < 0) {
        perror("testlib: fork");
        st = 1 << 8; /* exit status 1 */
    } else {
        setpgid(pid, pid); /* both sides call it: no race with the first spawn */
        tl_current_pgid = pid;
        timed_out = tl_wait_test(pid, start + timeout_s, &st);
        double secs = tl_now() - start;
        tl_cleanup_test(pid); /* also reaps pid itself after a timeout */
        tl_current_pgid = 0;
        tl_report(t, timed_out, st, secs, timeout_s);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    tl_remove_root();
    if (timed_out || pid <= 0 || !WIFEXITED(st)) return 0;
    if (WEXITSTATUS(st) == TL_SKIP_STATUS) return 2;
    return WEXITSTATUS(st) == 0;
}

/* Ctrl-C or ctest giving up: kill the running test's processes at once;
 * the main loop then reaps them, removes the temp dir and re-raises. */
static void tl_on_signal(int sig)
{
    tl_interrupted = sig;
    if (tl_current_pgid > 0) kill(-(pid_t)tl_current_pgid, SIGKILL);
}

static void tl_catch_signals(void)
{
    struct sigaction sa = {.sa_handler = tl_on_signal}; /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static _Noreturn void tl_reraise(void)
{
    int sig = tl_interrupted;
    fflush(stdout);
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(128 + sig);
}

static int tl_selected(const char *name, int argc, char **argv)
{
    int filters = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        filters++;
        if (strstr(name, argv[i]) != NULL) return 1;
    }
    return filters == 0;
}

int main(int argc, char **argv)
{
    int list = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            list = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--list] [name-substring...]\n", argv[0]);
            return 2;
        }
    }
    if (list) {
        for (int i = 0; i < tl_ntests; i++)
            puts(tl_tests[i].name);
        return 0;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    tl_catch_signals();
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < tl_ntests; i++) {
        if (tl_interrupted) tl_reraise();
        if (!tl_selected(tl_tests[i].name, argc, argv)) continue;
        int r = tl_run_one(&tl_tests[i]);
        if (r == 1)
            passed++;
        else if (r == 2)
            skipped++;
        else
            failed++;
    }
    if (tl_interrupted) tl_reraise();
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    if (passed + failed + skipped == 0 && argc > 1) {
        fprintf(stderr, "testlib: no test matches the given names\n");
        return 1;
    }
    return failed == 0 ? 0 : 1;
}

static int tl_write_file(const char *dir, const char *file, const char *s)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, s, strlen(s));
    close(fd);
    return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* cgroup v1's pids hierarchy, else the cgroup2 mount's root (where the pids
 * controller must be enabled for pids.max to appear). */
static const char *const tl_pids_bases[] = {"/sys/fs/cgroup/pids",
                                            "/sys/fs/cgroup/unified", "/sys/fs/cgroup"};

void tl_pids_cgroup_remove(pid_t pid)
{
    for (size_t i = 0; i < sizeof tl_pids_bases / sizeof tl_pids_bases[0]; i++) {
        char d[128];
        snprintf(d, sizeof d, "%s/elector-test-pids.%d", tl_pids_bases[i], (int)pid);
        for (int k = 0; k < 100 && rmdir(d) != 0 && errno == EBUSY; k++)
            tl_msleep(10);
    }
}

int tl_pids_cgroup(char *dir, size_t cap, int max)
{
    const char *const *bases = tl_pids_bases;
    char v[32];
    snprintf(v, sizeof v, "%d\n", max);
    for (size_t i = 0; i < sizeof tl_pids_bases / sizeof tl_pids_bases[0]; i++) {
        snprintf(dir, cap, "%s/elector-test-pids.%d", bases[i], (int)getpid());
        if (mkdir(dir, 0755) != 0) continue;
        if (tl_write_file(dir, "pids.max", v) == 0 &&
            tl_write_file(dir, "cgroup.procs", "0\n") == 0)
            return 0;
        rmdir(dir);
    }
    dir[0] = '\0';
    return -1;
}
