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
    elector__release_start(r, e, 0x1234, 10);
    disarm();
    if (failed() == before) {
        char what[300];
        snprintf(what, sizeof(what), "\"%s\" failed no call", spec);
        tl_fail(__FILE__, __LINE__, what);
    }
    return r->pid;
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
        ASSERT_EQ(-1, r.pidfd);
        ASSERT_EQ(fds, nfds());
        assert_no_child();
        elector__release_stop(&r);
        ASSERT_EQ(0, r.pid);
    }
    /* And without a failure, the same client gets its helper. */
    elector__release r;
    elector__release_start(&r, e, 0x1234, 10);
    ASSERT_GT(r.pid, 0);
    elector__release_stop(&r);
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
    elector__release r;
    int pid = start_with(&r, e, "fcntl_dupfd:EMFILE");
    int low0 = fcntl(0, F_GETFD), low3 = fcntl(3, F_GETFD);
    int after = nfds();
    if (keep0 >= 0) dup2(keep0, 0), close(keep0);
    if (keep3 >= 0) dup2(keep3, 3), close(keep3);
    ASSERT_EQ(ELECTOR_ENOMEM, pid);
    ASSERT_EQ(fds, after);
    ASSERT_EQ(-1, low0); /* closed again */
    ASSERT_EQ(-1, low3);
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
    elector__release_stop(&r);
    ASSERT_EQ(fds, nfds());
    assert_no_child();
    elector_etcd_free(e);
}

/* Starts a helper for real and checks it runs: its pid. */
static int start_ok(elector__release *r, elector_etcd *e, const char *spec)
{
    int pid = spec ? start_with(r, e, spec)
                   : (elector__release_start(r, e, 0x1234, 10), r->pid);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(0, kill(pid, 0));
    return pid;
}

/* Stops r with spec armed; asserts the helper is gone and reaped. */
static void stop_with(elector__release *r, const char *spec, int pid)
{
    unsigned long before = failed();
    if (spec) arm(spec);
    elector__release_stop(r);
    disarm();
    if (spec) ASSERT_GT(failed(), before);
    ASSERT_EQ(0, r->pid);
    errno = 0;
    ASSERT_EQ(-1, kill(pid, 0)); /* gone, and reaped: not even a zombie */
    ASSERT_EQ(ESRCH, errno);
}

/* No pidfd of the helper (pidfd_open fails for it, not for the owner): the
 * helper runs, and the stop waits for it with waitpid -- also when the
 * program ignores SIGCHLD (the kernel reaps it: ECHILD). */
TEST(release_without_the_helpers_pidfd_stops_by_waitpid)
{
    setup();
    elector_etcd *e = offline_client();
    int fds = nfds();
    elector__release r;
    int pid = start_ok(&r, e, "pidfd_open:EMFILE:2");
    ASSERT_EQ(-1, r.pidfd);
    ASSERT(r.sock >= 0);
    stop_with(&r, NULL, pid);
    ASSERT_EQ(fds, nfds());
    assert_no_child();

    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    ASSERT_OK(sigaction(SIGCHLD, &ign, &old));
    pid = start_ok(&r, e, "pidfd_open:EMFILE:2");
    ASSERT_EQ(-1, r.pidfd);
    stop_with(&r, NULL, pid);
    ASSERT_OK(sigaction(SIGCHLD, &old, NULL));
    ASSERT_EQ(fds, nfds());
    assert_no_child();
    elector_etcd_free(e);
}

/* The stop's poll on the helper's pidfd interrupted (retried) or failing
 * (then the helper is killed), its waitpid interrupted (retried): every time
 * the helper is gone and reaped when the stop returns. With SIGCHLD ignored the
 * kernel reaps it (waitpid: ECHILD, not retried). */
TEST(release_stop_poll_and_waitpid_failures)
{
    setup();
    elector_etcd *e = offline_client();
    int fds = nfds();
    const char *specs[] = {"poll:EINTR:1", "poll:ENOMEM", "waitpid:EINTR:1"};
    for (int i = 0; i < 3; i++) {
        elector__release r;
        int pid = start_ok(&r, e, NULL);
        ASSERT(r.pidfd >= 0);
        stop_with(&r, specs[i], pid);
        ASSERT_EQ(fds, nfds());
        assert_no_child();
    }
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    ASSERT_OK(sigaction(SIGCHLD, &ign, &old));
    elector__release r;
    int pid = start_ok(&r, e, NULL);
    stop_with(&r, NULL, pid);
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
    double t0 = tl_now();
    stop_with(&r, NULL, pid);
    double s = tl_now() - t0;
    tl_log("a stopped helper killed after %.2f s", s);
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
        elector__release_stop(&copy);
        exit(copy.pid == 0 && kill(pid, 0) == 0 ? 0 : 3);
    }
    int st;
    ASSERT_EQ(ch, waitpid(ch, &st, 0));
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
    tl_msleep(100);
    ASSERT_EQ(0, kill(pid, 0)); /* still there */
    ASSERT_EQ(0, waitpid(pid, NULL, WNOHANG));
    stop_with(&r, NULL, pid);
    assert_no_child();
    elector_etcd_free(e);
}
