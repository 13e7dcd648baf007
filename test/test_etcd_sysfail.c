/* SPDX-License-Identifier: MIT */
/* System calls that fail: the program runs with test/sysfail.c preloaded (it
 * executes itself again with LD_PRELOAD when started without it), and each
 * test arms ELECTOR_TEST_SYSFAIL around the call it aims at.
 *
 * The release helper's start (posix_spawn and its set-up, socketpair,
 * pidfd_open, the move of low descriptors, the sending of the orders) and stop
 * (poll on its pidfd, waitpid, a helper that does not exit), the helper's own
 * reads and polls, and the client's epoll/eventfd/timerfd and socket calls.
 * What is asserted: the error the caller gets (and its text), no descriptor
 * and no child left behind, the helper never told to go (nor revoking) while
 * its owner lives, and a session without a helper that still works. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "election_private.h"
#include "etcd_harness.h"
#include "testlib.h"

/* Started without the injector: again with it (and, in the sanitizer build,
 * allowed to come before the sanitizer's runtime). */
__attribute__((constructor)) static void with_injector(int argc, char **argv)
{
    (void)argc;
    if (dlsym(RTLD_DEFAULT, "elector_test_sysfail_failed")) return;
    if (getenv("ELECTOR_TEST_SYSFAIL_REEXEC")) return; /* tried: the tests say so */
    setenv("ELECTOR_TEST_SYSFAIL_REEXEC", "1", 1);
    setenv("LD_PRELOAD", SYSFAIL_LIB, 1);
    const char *ao = getenv("ASAN_OPTIONS");
    char asan[1024];
    snprintf(asan, sizeof(asan), "%s%sverify_asan_link_order=0", ao ? ao : "",
             ao && *ao ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
    execv("/proc/self/exe", argv);
}

/* How many calls the injector failed in this process so far. */
static unsigned long failed(void)
{
    unsigned long (*f)(void) =
        (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "elector_test_sysfail_failed");
    if (!f) tl_fail(__FILE__, __LINE__, "test/sysfail.c is not preloaded");
    return f();
}

static void arm(const char *spec)
{
    setenv("ELECTOR_TEST_SYSFAIL", spec, 1);
}

static void disarm(void)
{
    unsetenv("ELECTOR_TEST_SYSFAIL");
}

/* Open descriptors of this process. */
static int nfds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* No child left, reaped or not (a test's process has none of its own). */
static void assert_no_child(void)
{
    errno = 0;
    ASSERT_EQ(-1, waitpid(-1, NULL, WNOHANG));
    ASSERT_EQ(ECHILD, errno);
}

static void setup(void)
{
    setenv("ELECTOR_RELEASE_HELPER", RELEASE_HELPER_BIN, 1);
    setenv("ASAN_OPTIONS", "exitcode=99", 0);
    failed(); /* the injector is there */
}

/* A client that never connects (nothing listens on port 1): the helper's
 * orders are made from its settings, and it would fail any revoke (exit 1,
 * with a message) -- so a helper that exits 0 and says nothing revoked nothing. */
static elector_etcd *offline_client(void)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

/* Starts a helper with spec armed; returns r.pid (the helper's pid, or why
 * there is none). */
static int start_with(elector__release *r, elector_etcd *e, const char *spec)
{
    unsigned long before = failed();
    arm(spec);
    elector__release_start(r, e, 0x1234, 10, false);
    disarm();
    if (failed() == before) {
        char what[300];
        snprintf(what, sizeof(what), "\"%s\" failed no call", spec);
        tl_fail(__FILE__, __LINE__, what);
    }
    return r->pid;
}

/* Stops r with spec armed (the stop returns at once: it never waits for the
 * helper), then runs e's loop until its reaper is done with pid (at most
 * 3 s); asserts the helper is gone and reaped. Returns the seconds it took. */
static double stop_with(elector__release *r, elector_etcd *e, const char *spec, int pid)
{
    unsigned long before = failed();
    if (spec) arm(spec);
    double t0 = tl_now();
    elector__release_stop(r, e);
    double in_stop = tl_now() - t0;
    while (elector__release_reaping(e, pid) && tl_now() - t0 < 3.0)
        elector_etcd_run_once(e, 20);
    disarm();
    if (spec) ASSERT_GT(failed(), before);
    ASSERT_LT(in_stop, 0.05); /* no wait in the loop */
    ASSERT_EQ(0, r->pid);
    errno = 0;
    ASSERT_EQ(-1, kill(pid, 0)); /* gone, and reaped: not even a zombie */
    ASSERT_EQ(ESRCH, errno);
    return tl_now() - t0;
}

/* ---------------------------------------------------------------- the helper's start */

/* Each call of the start that can fail, failed: no helper, the reason as the
 * session reports it (elector_session_helper()): ELECTOR_ENOMEM when out of
 * memory, processes or descriptors (it may work later), ELECTOR_EINVAL when it
 * cannot work here (no pidfds, a spawn refused); no descriptor and no child
 * left behind, and the stop that follows does nothing. */
TEST(release_start_each_failure_leaves_nothing_behind)
{
    setup();
    static const struct {
        const char *spec;
        int want;
    } cases[] = {
        {"posix_spawn_file_actions_init:ENOMEM", ELECTOR_ENOMEM},
        {"posix_spawnattr_init:ENOMEM", ELECTOR_ENOMEM},
        {"posix_spawn_file_actions_adddup2:ENOMEM:1", ELECTOR_ENOMEM},
        {"posix_spawn_file_actions_addopen:ENOMEM", ELECTOR_ENOMEM},
        {"posix_spawn_file_actions_adddup2:EBADF:2", ELECTOR_EINVAL},
        {"posix_spawn_file_actions_addclosefrom_np:EINVAL", ELECTOR_EINVAL},
        {"posix_spawnattr_setflags:EINVAL", ELECTOR_EINVAL},
        {"posix_spawnattr_setsigmask:EINVAL", ELECTOR_EINVAL},
        {"posix_spawnattr_setsigdefault:EINVAL", ELECTOR_EINVAL},
        {"posix_spawn:EAGAIN", ELECTOR_ENOMEM},
        {"posix_spawn:ENOMEM", ELECTOR_ENOMEM},
        {"posix_spawn:ENFILE", ELECTOR_ENOMEM},
        {"posix_spawn:EMFILE", ELECTOR_ENOMEM},
        {"posix_spawn:EACCES", ELECTOR_EINVAL},
        {"socketpair:EMFILE", ELECTOR_ENOMEM},
        /* Linux before 5.3, or a seccomp filter: no pidfds, no helper. */
        {"pidfd_open:ENOSYS:1", ELECTOR_EINVAL},
        {"pidfd_open:EPERM:1", ELECTOR_EINVAL},
        /* Out of descriptors: may work later. */
        {"pidfd_open:EMFILE:1", ELECTOR_ENOMEM},
    };
    elector_etcd *e = offline_client();
    int fds = nfds();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        elector__release r;
        int pid = start_with(&r, e, cases[i].spec);
        tl_log("%s: %d", cases[i].spec, pid);
        ASSERT_EQ(cases[i].want, pid);
        ASSERT_EQ(-1, r.sock);
        ASSERT_EQ(fds, nfds());
        assert_no_child();
        elector__release_stop(&r, e);
        ASSERT_EQ(0, r.pid);
    }
    /* And without a failure, the same client gets its helper. */
    elector__release r;
    elector__release_start(&r, e, 0x1234, 10, false);
    ASSERT_GT(r.pid, 0);
    stop_with(&r, e, NULL, r.pid);
    ASSERT_EQ(fds, nfds());
    assert_no_child();
    elector_etcd_free(e);
}

/* The socket and the pidfd made at fds 0 and 3 (free in a program that closed
 * them), and no descriptor above 3 to move them to: no helper (out of
 * descriptors), and nothing left open. */
TEST(release_start_cannot_move_low_descriptors)
{
    setup();
    elector_etcd *e = offline_client();
    int keep0 = fcntl(0, F_DUPFD_CLOEXEC, 10), keep3 = fcntl(3, F_DUPFD_CLOEXEC, 10);
    close(0);
    close(3);
    int fds = nfds();
    /* Every move failing (the socket's end at 0 first), the one of the
     * socket's other end at 3, the one of the pidfd (made at 0 then). */
    const char *specs[] = {"fcntl_dupfd:EMFILE", "fcntl_dupfd:EMFILE:2",
                           "fcntl_dupfd:EMFILE:3"};
    int pid[3], after[3], low0[3], low3[3];
    for (int i = 0; i < 3; i++) {
        elector__release r;
        pid[i] = start_with(&r, e, specs[i]);
        low0[i] = fcntl(0, F_GETFD), low3[i] = fcntl(3, F_GETFD);
        after[i] = nfds();
    }
    if (keep0 >= 0) dup2(keep0, 0), close(keep0);
    if (keep3 >= 0) dup2(keep3, 3), close(keep3);
    for (int i = 0; i < 3; i++) {
        tl_log("%s: %d", specs[i], pid[i]);
        ASSERT_EQ(ELECTOR_ENOMEM, pid[i]);
        ASSERT_EQ(fds, after[i]);
        ASSERT_EQ(-1, low0[i]); /* closed again */
        ASSERT_EQ(-1, low3[i]);
    }
    assert_no_child();
    elector_etcd_free(e);
}

/* The helper took no orders (the send fails: it died, or the socket broke):
 * it is killed and reaped -- also when the wait for it is interrupted, or when
 * the program ignores SIGCHLD (the kernel reaps it: ECHILD) -- and the session
 * has no helper (ELECTOR_EINVAL). A send interrupted once is sent again. */
TEST(release_orders_not_sent_reaps_the_helper)
{
    setup();
    elector_etcd *e = offline_client();
    int fds = nfds();
    elector__release r;
    ASSERT_EQ(ELECTOR_EINVAL, start_with(&r, e, "send:EPIPE"));
    ASSERT_EQ(fds, nfds());
    assert_no_child();
    ASSERT_EQ(ELECTOR_EINVAL, start_with(&r, e, "send:ECONNRESET,waitpid:EINTR:1"));
    ASSERT_EQ(fds, nfds());
    assert_no_child();
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    ASSERT_OK(sigaction(SIGCHLD, &ign, &old));
    ASSERT_EQ(ELECTOR_EINVAL, start_with(&r, e, "send:EPIPE"));
    ASSERT_OK(sigaction(SIGCHLD, &old, NULL));
    ASSERT_EQ(fds, nfds());
    assert_no_child();
    /* Interrupted once: sent again, the helper runs. */
    int pid = start_with(&r, e, "send:EINTR:1");
    ASSERT_GT(pid, 0);
    ASSERT_EQ(0, kill(pid, 0));
    stop_with(&r, e, NULL, pid);
    ASSERT_EQ(fds, nfds());
    assert_no_child();
    elector_etcd_free(e);
}

/* Starts a helper for real and checks it runs: its pid. */
static int start_ok(elector__release *r, elector_etcd *e, const char *spec)
{
    int pid = spec ? start_with(r, e, spec)
                   : (elector__release_start(r, e, 0x1234, 10, false), r->pid);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(0, kill(pid, 0));
    return pid;
}

/* The reaper's waitpid interrupted (retried): the helper is reaped. With
 * SIGCHLD ignored the kernel reaps it (waitpid: ECHILD, not retried). */
TEST(release_stop_waitpid_failures)
{
    setup();
    elector_etcd *e = offline_client();
    int fds = nfds();
    const char *specs[] = {"waitpid:EINTR:1"};
    for (int i = 0; i < 1; i++) {
        elector__release r;
        int pid = start_ok(&r, e, NULL);
        stop_with(&r, e, specs[i], pid);
        ASSERT_EQ(fds, nfds());
        assert_no_child();
    }
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    ASSERT_OK(sigaction(SIGCHLD, &ign, &old));
    elector__release r;
    int pid = start_ok(&r, e, NULL);
    stop_with(&r, e, NULL, pid);
    ASSERT_OK(sigaction(SIGCHLD, &old, NULL));
    ASSERT_EQ(fds, nfds());
    assert_no_child();
    elector_etcd_free(e);
}

/* A helper that does not exit when told (stopped): after 2 s it is killed
 * and reaped, never left behind to revoke later. */
TEST(release_stop_kills_a_stopped_helper)
{
    setup();
    elector_etcd *e = offline_client();
    elector__release r;
    int pid = start_ok(&r, e, NULL);
    ASSERT_OK(kill(pid, SIGSTOP));
    double s = stop_with(&r, e, NULL, pid);
    tl_log("a stopped helper killed after %.2f s (the stop itself did not wait)", s);
    ASSERT_GE(s, 1.9); /* it was given its 2 s */
    assert_no_child();
    elector_etcd_free(e);
}

/* A forked child of the owner that closes its copy of the session: the
 * helper is not told to go (the owner lives on), only the child's copy of
 * the socket is closed; the owner's stop then ends it. */
TEST(release_stop_in_a_forked_child_leaves_the_helper)
{
    setup();
    elector_etcd *e = offline_client();
    elector__release r;
    int pid = start_ok(&r, e, NULL);
    fflush(NULL);
    pid_t ch = fork();
    ASSERT(ch >= 0);
    if (ch == 0) {
        elector__release copy = r;
        elector__release_stop(&copy, e);
        exit(copy.pid == 0 && kill(pid, 0) == 0 ? 0 : 3);
    }
    int st;
    ASSERT_EQ(ch, waitpid(ch, &st, 0));
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
    tl_msleep(100);
    ASSERT_EQ(0, kill(pid, 0)); /* still there */
    ASSERT_EQ(0, waitpid(pid, NULL, WNOHANG));
    stop_with(&r, e, NULL, pid);
    assert_no_child();
    elector_etcd_free(e);
}

/* ---------------------------------------------------------------- the helper's calls */

/* Orders as the library encodes them (see test_etcd_release): "ELR2", the
 * body's length, 13 int64, 7 strings; the endpoint is a closed port, so that
 * a revoke would fail (exit 1 and a message). Returns the length. */
static size_t make_orders_for(uint8_t *buf, const char *ep, int64_t lease)
{
    int64_t v[13] = {lease, 10, 1000, 1000, 0, 0, 0, 50, 500, 0, 0, 0, 0};
    size_t n = 8;
    memcpy(buf + n, v, sizeof(v));
    n += sizeof(v);
    for (int i = 0; i < 7; i++) {
        uint32_t l = i ? UINT32_MAX : (uint32_t)strlen(ep);
        memcpy(buf + n, &l, 4);
        n += 4;
        if (!i) memcpy(buf + n, ep, l), n += l;
    }
    uint32_t body = (uint32_t)(n - 8);
    memcpy(buf, "ELR2", 4);
    memcpy(buf + 4, &body, 4);
    return n;
}

static size_t make_orders(uint8_t *buf)
{
    return make_orders_for(buf, "127.0.0.1:1", 0x1234);
}

typedef struct helper_run {
    const uint8_t *orders;
    size_t n;
    const char *after; /* bytes sent one at a time after the orders */
    bool eof;          /* our end closed after them (else: once it exits) */
    bool no_fd0;       /* the helper started with fd 0 closed */
    const char *spec;  /* ELECTOR_TEST_SYSFAIL in the helper */
    char errs[2048];   /* its stderr */
    long injected;     /* calls failed in it (-1: it wrote no count) */
    double secs;
} helper_run;

static void helper_child(int sock, int self, int errfd, const helper_run *h,
                         const char *log)
{
    /* Above 3 first, so that the dup2s below cannot overwrite them. */
    int s = fcntl(sock, F_DUPFD, 10), p = fcntl(self, F_DUPFD, 10),
        e = fcntl(errfd, F_DUPFD, 10);
    if (s < 0 || p < 0 || e < 0 || dup2(s, 0) < 0 || dup2(e, 2) < 0 || dup2(p, 3) < 0)
        _exit(120);
    close(s), close(p), close(e);
    if (h->no_fd0) close(0);
    char asan[1024];
    const char *ao = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof(asan), "%s%sverify_asan_link_order=0", ao ? ao : "",
             ao && *ao ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
    setenv("LD_PRELOAD", SYSFAIL_LIB, 1);
    setenv("ELECTOR_TEST_SYSFAIL_LOG", log, 1);
    setenv("ELECTOR_TEST_SYSFAIL", h->spec, 1);
    execl(RELEASE_HELPER_BIN, "elector-release", (char *)NULL);
    _exit(127);
}

/* Runs the helper as libelector would (fd 0 a socket, fd 3 our pidfd: quiet
 * while we live) with the injector armed in it; returns its exit status. */
static int run_helper(helper_run *h)
{
    char *dir = tl_tmpdir("sysfail");
    ASSERT_NOT_NULL(dir);
    char log[512];
    snprintf(log, sizeof(log), "%s/log", dir);
    free(dir);
    int sv[2], pe[2];
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
    ASSERT_OK(pipe2(pe, O_CLOEXEC));
    int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
    ASSERT(self >= 0);
    fflush(NULL);
    double t0 = tl_now();
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) helper_child(sv[1], self, pe[1], h, log);
    close(sv[1]);
    close(pe[1]);
    close(self);
    ASSERT_EQ((ssize_t)h->n, write(sv[0], h->orders, h->n));
    for (int i = 0; h->after && h->after[i]; i++) {
        tl_msleep(50); /* one read each */
        ASSERT_EQ(1, write(sv[0], h->after + i, 1));
    }
    if (h->eof) close(sv[0]);
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof(h->errs) &&
           (r = read(pe[0], h->errs + len, sizeof(h->errs) - 1 - len)) > 0)
        len += (size_t)r;
    h->errs[len] = 0;
    close(pe[0]);
    if (!h->eof) close(sv[0]);
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    h->secs = tl_now() - t0;
    h->injected = -1;
    FILE *f = fopen(log, "r");
    if (f) {
        int p;
        long k;
        while (fscanf(f, "%d %ld", &p, &k) == 2)
            if (p == (int)pid) h->injected = k;
        fclose(f);
    }
    tl_log("helper with \"%s\": status %d, %ld failed, %.2f s, said \"%s\"", h->spec,
           WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), h->injected, h->secs,
           h->errs);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The helper's reads and polls interrupted: each is made again, and the helper
 * goes on as without them -- "D" ends it at once with exit 0, nothing said
 * (a revoke would have failed: exit 1 and a message). */
TEST(release_helper_interrupted_calls_are_retried)
{
    setup();
    uint8_t buf[512];
    size_t n = make_orders(buf);
    /* Polls: 1 the check of fds 0 and 3, 2 and 3 the orders' header and body,
     * 4 the wait; reads: 1 and 2 the orders, 3 the "D". */
    const char *specs[] = {"poll:EINTR:2,read:EINTR:1", "poll:EINTR:4,read:EINTR:3"};
    for (int i = 0; i < 2; i++) {
        helper_run h = {.orders = buf, .n = n, .after = "D", .spec = specs[i]};
        ASSERT_EQ(0, run_helper(&h));
        ASSERT_STREQ("", h.errs);
        ASSERT_EQ(2, h.injected);
    }
}

/* The helper's polls failing: before the orders, it says so and exits 2; while
 * it waits, it exits 0 at once without revoking (the lease ends by its TTL: a
 * helper that cannot watch its owner must not release the lease early). */
TEST(release_helper_failed_polls_never_revoke)
{
    setup();
    uint8_t buf[512];
    size_t n = make_orders(buf);
    helper_run h = {.orders = buf, .n = n, .spec = "poll:ENOMEM:1"};
    ASSERT_EQ(2, run_helper(&h));
    ASSERT_CONTAINS(h.errs, "fd 0 or 3 is missing");
    ASSERT_EQ(1, h.injected);
    helper_run h2 = {.orders = buf, .n = n, .spec = "poll:ENOMEM:2"};
    ASSERT_EQ(2, run_helper(&h2));
    ASSERT_CONTAINS(h2.errs, "no orders on fd 0");
    ASSERT_EQ(1, h2.injected);
    /* No "D" and our end open: only the failure ends it (exit 0, silent). */
    helper_run h3 = {.orders = buf, .n = n, .spec = "poll:ENOMEM:4"};
    ASSERT_EQ(0, run_helper(&h3));
    ASSERT_STREQ("", h3.errs);
    ASSERT_EQ(1, h3.injected);
    /* The body's poll failing: malformed (incomplete) orders. */
    helper_run h6 = {.orders = buf, .n = n, .spec = "poll:ENOMEM:3"};
    ASSERT_EQ(2, run_helper(&h6));
    ASSERT_CONTAINS(h6.errs, "malformed orders");
    ASSERT_EQ(1, h6.injected);
    /* A read of the orders failing: no orders. */
    helper_run h4 = {.orders = buf, .n = n, .spec = "read:EIO:1"};
    ASSERT_EQ(2, run_helper(&h4));
    ASSERT_CONTAINS(h4.errs, "no orders on fd 0");
    ASSERT_EQ(1, h4.injected);
    /* No fd 0 at all. */
    helper_run h5 = {.orders = buf, .n = n, .no_fd0 = true, .spec = ""};
    ASSERT_EQ(2, run_helper(&h5));
    ASSERT_CONTAINS(h5.errs, "fd 0 or 3 is missing");
}

/* Its socket fails (a read error: as an EOF) while we, the owner, live, and
 * every later poll of its wait for the pidfd is interrupted: it waits out its
 * 2 s, does not revoke (the owner may still run) and exits 0. The wait's poll
 * failing after a real EOF: it exits at once, again without revoking. */
TEST(release_helper_eof_with_the_owner_alive)
{
    setup();
    uint8_t buf[512];
    size_t n = make_orders(buf);
    helper_run h = {
        .orders = buf, .n = n, .after = "x", .spec = "read:EIO:3,poll:EINTR:5+"};
    ASSERT_EQ(0, run_helper(&h));
    ASSERT_STREQ("", h.errs);
    ASSERT_GT(h.injected, 2);
    ASSERT_GE(h.secs, 1.9);
    helper_run h2 = {.orders = buf, .n = n, .eof = true, .spec = "poll:ENOMEM:5"};
    ASSERT_EQ(0, run_helper(&h2));
    ASSERT_STREQ("", h2.errs);
    ASSERT_EQ(1, h2.injected);
}

/* Orders whose header is wrong: not "ELR2" (no orders), a length over 64 KiB
 * or of 0 (malformed): exit 2 with the message, nothing revoked. */
TEST(release_helper_bad_headers)
{
    setup();
    uint8_t buf[512];
    size_t n = make_orders(buf);
    memcpy(buf, "ELR1", 4); /* the older format: refused */
    helper_run h = {.orders = buf, .n = n, .spec = ""};
    ASSERT_EQ(2, run_helper(&h));
    ASSERT_CONTAINS(h.errs, "no orders on fd 0");
    n = make_orders(buf);
    uint32_t big = 64 * 1024 + 1;
    memcpy(buf + 4, &big, 4);
    helper_run h2 = {.orders = buf, .n = n, .spec = ""};
    ASSERT_EQ(2, run_helper(&h2));
    ASSERT_CONTAINS(h2.errs, "malformed orders");
    uint32_t zero = 0;
    memcpy(buf + 4, &zero, 4);
    helper_run h3 = {.orders = buf, .n = 8, .spec = ""};
    ASSERT_EQ(2, run_helper(&h3));
    ASSERT_CONTAINS(h3.errs, "malformed orders");
    /* The endpoints' length past the end of the body. */
    n = make_orders(buf);
    uint32_t past = 200;
    memcpy(buf + 8 + 104, &past, 4);
    helper_run h4 = {.orders = buf, .n = n, .spec = ""};
    ASSERT_EQ(2, run_helper(&h4));
    ASSERT_CONTAINS(h4.errs, "malformed orders");
}

/* ---------------------------------------------------------------- the client's calls */

/* The client's loop cannot be made (epoll, eventfd or timerfd refused, or the
 * epoll set cannot take them): elector_etcd_new() returns a client in error,
 * ELECTOR_ENOMEM with the call and its reason; every call on it fails with
 * that error, and freeing it leaves no descriptor behind. */
TEST(client_without_its_loop_descriptors)
{
    setup();
    static const struct {
        const char *spec, *reason;
    } cases[] = {
        {"epoll_create1:EMFILE", "Too many open files"},
        {"eventfd:ENFILE", "Too many open files in system"},
        {"timerfd_create:ENOMEM", "Cannot allocate memory"},
        {"epoll_ctl:ENOSPC:1", "No space left on device"},
        {"epoll_ctl:ENOMEM:2", "Cannot allocate memory"},
    };
    int fds = nfds();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = "127.0.0.1:1";
        unsigned long before = failed();
        arm(cases[i].spec);
        elector_etcd *e = elector_etcd_new(&cfg);
        disarm();
        ASSERT_GT(failed(), before);
        ASSERT_NOT_NULL(e);
        tl_log("%s: %d %s", cases[i].spec, elector_etcd_err(e), elector_etcd_errstr(e));
        ASSERT_EQ(ELECTOR_ENOMEM, elector_etcd_err(e));
        ASSERT_CONTAINS(elector_etcd_errstr(e), "cannot create epoll/eventfd/timerfd: ");
        ASSERT_CONTAINS(elector_etcd_errstr(e), cases[i].reason);
        elector_leader_info info;
        ASSERT_EQ(ELECTOR_ENOMEM, elector_leader_sync(e, "x", 1000, &info));
        ASSERT_EQ(-1, elector_etcd_timeout(e)); /* no timer: nothing to wait for */
        elector_etcd_free(e);
        ASSERT_EQ(fds, nfds());
    }
}

/* The client's socket calls failing, against a real etcd: a socket or connect
 * refused ends the call with ELECTOR_ECONNECT, a send or recv broken with
 * ELECTOR_EUNAVAILABLE, each with the call and its reason in errstr; a call
 * interrupted (EINTR) or that would block (EAGAIN), TCP_NODELAY refused or the
 * loop's wait interrupted are retried and change nothing, as does a connect
 * that completes at once (POSIX allows it; Linux's TCP never does). The same client
 * works afterwards (nobody leads "x": 1). */
TEST_WITH_TIMEOUT(client_socket_failures, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    static const struct {
        const char *spec;
        int rc;
        const char *why;
    } cases[] = {
        {"connect:ENETUNREACH", ELECTOR_ECONNECT, "connect: Network is unreachable"},
        {"socket:EMFILE", ELECTOR_ECONNECT, "socket: Too many open files"},
        {"send:ECONNRESET:1", ELECTOR_EUNAVAILABLE,
         "write failed: Connection reset by peer"},
        {"recv:ECONNRESET:1", ELECTOR_EUNAVAILABLE,
         "read failed: Connection reset by peer"},
        {"setsockopt:ENOPROTOOPT", 1, ""},
        {"recv:EINTR:1", 1, ""},
        {"recv:EAGAIN:1", 1, ""},
        {"send:EINTR:1", 1, ""},
        {"send:EAGAIN:1", 1, ""},
        {"epoll_wait:EINTR:1", 1, ""},
        {"connect_at_once:1", 1, ""}, /* connected before connect() returns */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        elector_etcd *e = elector_etcd_new(&cfg);
        ASSERT_NOT_NULL(e);
        unsigned long before = failed();
        elector_leader_info info;
        arm(cases[i].spec);
        int rc = elector_leader_sync(e, "x", 5000, &info);
        disarm();
        tl_log("%s: %d %s", cases[i].spec, rc, elector_etcd_errstr(e));
        ASSERT_GT(failed(), before);
        ASSERT_EQ(cases[i].rc, rc);
        if (*cases[i].why) {
            ASSERT_CONTAINS(elector_etcd_errstr(e), cases[i].why);
            ASSERT_CONTAINS(elector_etcd_errstr(e), eh_endpoints(c)); /* which one */
        }
        ASSERT_EQ(1, elector_leader_sync(e, "x", 5000, &info));
        elector_etcd_free(e);
    }
    eh_stop(c);
}

/* The timerfd cannot be armed (timerfd_settime fails every time): the
 * deadlines still hold, as the loop's own wait is bounded by the next timer --
 * a call to a server that accepts and never answers ends with ETIMEDOUT. */
TEST_WITH_TIMEOUT(client_deadlines_without_the_timerfd, 60)
{
    setup();
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ASSERT_OK(bind(l, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(l, 4)); /* never accepted: the kernel completes the handshake */
    socklen_t al = sizeof(a);
    ASSERT_OK(getsockname(l, (struct sockaddr *)&a, &al));
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", ntohs(a.sin_port));
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = ep;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_leader_info info;
    unsigned long before = failed();
    double t0 = tl_now();
    arm("timerfd_settime:EINVAL");
    int rc = elector_leader_sync(e, "x", 500, &info);
    disarm();
    double s = tl_now() - t0;
    tl_log("no timerfd: rc %d (%s) after %.2f s, %lu failed", rc, elector_etcd_errstr(e),
           s, failed() - before);
    ASSERT_GT(failed(), before);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, rc);
    ASSERT_GE(s, 0.45);
    elector_etcd_free(e);
    close(l);
}

/* A session with release_on_exit on a kernel without pidfds (pidfd_open:
 * ENOSYS): granted and alive without a helper (ELECTOR_EINVAL), no child; its
 * lease stays in etcd until the close revokes it. And a session whose helper
 * runs, closed while the reaper's waitpid is interrupted: the helper is reaped
 * all the same before the close returns, and the close revokes the lease (0). */
TEST_WITH_TIMEOUT(session_without_pidfds_and_close_with_poll_failing, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    for (int round = 0; round < 2; round++) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        elector_etcd *e = elector_etcd_new(&cfg);
        ASSERT_NOT_NULL(e);
        elector_session_config sc;
        elector_session_config_init(&sc);
        sc.release_on_exit = true;
        unsigned long before = failed();
        if (round == 0) arm("pidfd_open:ENOSYS");
        elector_session *s = elector_session_new(e, &sc, NULL, NULL);
        ASSERT_NOT_NULL(s);
        int rc = elector_session_wait(s, 10000);
        disarm();
        ASSERT_EQ(0, rc);
        ASSERT(elector_session_alive(s));
        int helper = elector_session_helper(s);
        char hex[32];
        snprintf(hex, sizeof(hex), "%llx", (unsigned long long)elector_session_lease(s));
        char *out = NULL;
        ASSERT_EQ(0,
                  tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eh_endpoints(c),
                                                "lease", "list", NULL}));
        ASSERT_CONTAINS(out, hex);
        free(out);
        if (round == 0) {
            ASSERT_GT(failed(), before);
            ASSERT_EQ(ELECTOR_EINVAL, helper);
            ASSERT_EQ(0, waitpid(-1, NULL, WNOHANG) > 0); /* no helper to reap */
            ASSERT_EQ(0, elector_session_close_sync(s, 5000));
        } else {
            ASSERT_GT(helper, 0);
            arm("waitpid:EINTR:1");
            rc = elector_session_close_sync(s, 5000);
            disarm();
            ASSERT_GT(failed(), before);
            ASSERT_EQ(0, rc);
            errno = 0;
            ASSERT_EQ(-1, kill(helper, 0)); /* exited and reaped: close_sync waits */
            ASSERT_EQ(ESRCH, errno);
        }
        elector_etcd_free(e);
        out = NULL;
        ASSERT_EQ(0,
                  tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eh_endpoints(c),
                                                "lease", "list", NULL}));
        ASSERT(!strstr(out, hex)); /* revoked by the close */
        free(out);
    }
    eh_stop(c);
}

/* The helper's environment: only the sanitizers' options, three at most, none
 * of the owner's other variables however many; a helper path set but empty is
 * as unset: the one beside the library (this test's build tree,
 * build/lib/elector/) is found. */
TEST(release_helper_environment_and_default_path)
{
    setup();
    elector_etcd *e = offline_client();
    setenv("UBSAN_OPTIONS", "print_stacktrace=1", 1);
    setenv("LSAN_OPTIONS", "report_objects=0", 1);
    setenv("ELECTOR_TEST_AFTER_THE_SANITIZERS", "1", 1); /* the loop stops before */
    elector__release r;
    int pid = start_ok(&r, e, NULL);
    stop_with(&r, e, NULL, pid);
    assert_no_child();
    char *old = strdup(getenv("ELECTOR_RELEASE_HELPER"));
    setenv("ELECTOR_RELEASE_HELPER", "", 1);
    elector__release_start(&r, e, 0x1234, 10, false);
    setenv("ELECTOR_RELEASE_HELPER", old, 1);
    free(old);
    ASSERT_GT(r.pid, 0);
    stop_with(&r, e, NULL, r.pid);
    assert_no_child();
    elector_etcd_free(e);
}

/* Over TLS (the library's socket BIO): a recv or send broken after the
 * handshake ends the call with ELECTOR_EUNAVAILABLE, "TLS read failed" or
 * "TLS write failed" and the reason; one interrupted or that would block is
 * retried through OpenSSL (want read / want write) and changes nothing. The
 * client works afterwards. Each case on a connection made first (a call
 * answered), so that the failed call is the first of its kind after the
 * handshake. */
TEST_WITH_TIMEOUT(client_tls_socket_failures, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){.tls = 1});
    ASSERT_NOT_NULL(c);
    static const struct {
        const char *spec;
        int rc;
        const char *why;
    } cases[] = {
        {"recv:ECONNRESET:1", ELECTOR_EUNAVAILABLE,
         "TLS read failed: Connection reset by peer"},
        {"send:EPIPE:1", ELECTOR_EUNAVAILABLE, "TLS write failed: Broken pipe"},
        {"recv:EINTR:1", 1, ""},
        {"recv:EAGAIN:1", 1, ""},
        {"send:EINTR:1", 1, ""},
        {"send:EAGAIN:1", 1, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        cfg.cacert = eh_cacert(c);
        cfg.cert = eh_cert(c);
        cfg.key = eh_key(c);
        elector_etcd *e = elector_etcd_new(&cfg);
        ASSERT_NOT_NULL(e);
        elector_leader_info info;
        ASSERT_EQ(1, elector_leader_sync(e, "x", 10000, &info)); /* connected */
        unsigned long before = failed();
        arm(cases[i].spec);
        int rc = elector_leader_sync(e, "x", 5000, &info);
        disarm();
        tl_log("%s: %d %s", cases[i].spec, rc, elector_etcd_errstr(e));
        ASSERT_GT(failed(), before);
        ASSERT_EQ(cases[i].rc, rc);
        if (*cases[i].why) ASSERT_CONTAINS(elector_etcd_errstr(e), cases[i].why);
        ASSERT_EQ(1, elector_leader_sync(e, "x", 10000, &info));
        elector_etcd_free(e);
    }
    eh_stop(c);
}

/* The revoke's pause between attempts (nothing listens: each is refused)
 * interrupted (slept again), or failing every time: it goes on until the
 * moment given, then returns the last error. */
TEST(revoke_pause_interrupted_or_failing)
{
    setup();
    const char *specs[] = {"nanosleep:EINTR:1", "nanosleep:EINVAL"};
    for (int i = 0; i < 2; i++) {
        elector_etcd *e = offline_client();
        unsigned long before = failed();
        double t0 = tl_now();
        arm(specs[i]);
        int rc = elector_etcd_lease_revoke_sync(e, 0x1234, elector_now_ns() + 300000000);
        disarm();
        double s = tl_now() - t0;
        tl_log("%s: %d (%s) after %.2f s, %lu failed", specs[i], rc,
               elector_etcd_errstr(e), s, failed() - before);
        ASSERT_GT(failed(), before);
        /* Refused, or no connection by the deadline (no pause: more attempts). */
        ASSERT(rc == ELECTOR_ECONNECT || rc == ELECTOR_ETIMEDOUT);
        ASSERT_GE(s, 0.25); /* retried until then, not given up at the first failure */
        ASSERT_LT(s, 10.0); /* and not much past it */
        elector_etcd_free(e);
    }
}

/* Against a real etcd and a real lease (a session's, no helper of its own):
 * a helper whose wait fails (poll) exits 0 and leaves the lease alone while
 * its owner (we) lives; the session still holds it. */
TEST_WITH_TIMEOUT(release_helper_failing_wait_leaves_the_lease, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(0, elector_session_wait(s, 10000));
    int64_t lease = elector_session_lease(s);
    uint8_t buf[512];
    size_t n = make_orders_for(buf, eh_endpoints(c), lease);
    helper_run h = {.orders = buf, .n = n, .spec = "poll:ENOMEM:4"};
    ASSERT_EQ(0, run_helper(&h));
    ASSERT_STREQ("", h.errs);
    ASSERT_EQ(1, h.injected);
    char hex[32];
    snprintf(hex, sizeof(hex), "%llx", (unsigned long long)lease);
    char *out = NULL;
    ASSERT_EQ(0, tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eh_endpoints(c),
                                               "lease", "list", NULL}));
    ASSERT_CONTAINS(out, hex);
    free(out);
    ASSERT(elector_session_alive(s));
    ASSERT_EQ(0, elector_session_close_sync(s, 5000));
    elector_etcd_free(e);
    eh_stop(c);
}

/* The lease's revoke (the helper's and the guard's path): a first attempt
 * broken by the connection (send or recv reset: ELECTOR_EUNAVAILABLE) is
 * made again, and the lease is gone; an attempt that fails once the moment
 * given has passed is the last. */
TEST_WITH_TIMEOUT(revoke_retried_after_a_broken_connection, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    const char *specs[] = {"send:ECONNRESET:1", "recv:ECONNRESET:1"};
    for (int i = 0; i < 2; i++) {
        char *out = NULL;
        ASSERT_EQ(0,
                  tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eh_endpoints(c),
                                                "lease", "grant", "60", NULL}));
        unsigned long long id = 0;
        ASSERT_EQ(1, sscanf(out, "lease %llx granted", &id));
        free(out);
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        elector_etcd *e = elector_etcd_new(&cfg);
        ASSERT_NOT_NULL(e);
        unsigned long before = failed();
        arm(specs[i]);
        int rc =
            elector_etcd_lease_revoke_sync(e, (int64_t)id, elector_now_ns() + 5000000000);
        disarm();
        tl_log("%s: revoke %d", specs[i], rc);
        ASSERT_GT(failed(), before);
        ASSERT_EQ(0, rc);
        elector_etcd_free(e);
        char hex[32];
        snprintf(hex, sizeof(hex), "%llx", id);
        out = NULL;
        ASSERT_EQ(0,
                  tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eh_endpoints(c),
                                                "lease", "list", NULL}));
        ASSERT(!strstr(out, hex)); /* revoked by the second attempt */
        free(out);
    }
    /* Nothing listens, and the moment is now: one attempt, its error. */
    elector_etcd *e = offline_client();
    ASSERT_EQ(ELECTOR_ECONNECT,
              elector_etcd_lease_revoke_sync(e, 0x1234, elector_now_ns()));
    elector_etcd_free(e);
    eh_stop(c);
}
