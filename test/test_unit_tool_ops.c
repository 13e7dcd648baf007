/* SPDX-License-Identifier: MIT */
/* The tool's operations helpers without etcd: systemd's notification protocol
 * (notify.c) against a unix datagram socket this test owns, the process_*
 * figures (process_metrics.c) against what the test itself can see, and the
 * loop's table of watchers (loop.c) on a pipe. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "elector/election.h"
#include "ops/loop.h"
#include "ops/notify.h"
#include "ops/process_metrics.h"
#include "testlib.h"

/* A datagram socket bound to path (a file path, or "@name": abstract). */
static int listen_dgram(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    memcpy(a.sun_path, path, len);
    if (path[0] == '@') a.sun_path[0] = 0;
    socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                               (path[0] == '@' ? 0 : 1));
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, al));
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* One datagram as a string ("" after the 2 s timeout). */
static const char *recv_msg(int fd)
{
    static char buf[1024];
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

TEST(notify_sends_to_a_path_and_unsets_the_environment)
{
    char *dir = tl_tmpdir("notify"), path[512], err[300];
    snprintf(path, sizeof(path), "%s/notify.sock", dir);
    int fd = listen_dgram(path);
    setenv("NOTIFY_SOCKET", path, 1);
    setenv("WATCHDOG_USEC", "300000", 1);
    tool_notify *n = tool_notify_open(err, sizeof(err));
    ASSERT_NOT_NULL(n);
    ASSERT_STREQ("", err);
    /* A command that `run` starts must not inherit them. */
    ASSERT_NULL(getenv("NOTIFY_SOCKET"));
    ASSERT_NULL(getenv("WATCHDOG_USEC"));
    ASSERT_OK(tool_notify_send(n, "READY=1\nSTATUS=waiting"));
    ASSERT_STREQ("READY=1\nSTATUS=waiting", recv_msg(fd));
    /* The watchdog: half of WATCHDOG_USEC, due at once, then every 150 ms. */
    ASSERT_EQ(150, tool_notify_watchdog_ms(n));
    int64_t t0 = now_ms();
    ASSERT_EQ(0, tool_notify_timeout(n, t0));
    tool_notify_tick(n, t0);
    ASSERT_STREQ("WATCHDOG=1", recv_msg(fd));
    ASSERT_EQ(150, tool_notify_timeout(n, t0));
    ASSERT_EQ(50, tool_notify_timeout(n, t0 + 100));
    tool_notify_tick(n, t0 + 100); /* not yet due: nothing sent */
    tool_notify_tick(n, t0 + 150);
    ASSERT_STREQ("WATCHDOG=1", recv_msg(fd));
    tool_notify_free(n);
    close(fd);
    free(dir);
}

TEST(notify_reaches_an_abstract_socket)
{
    char name[64], err[300];
    snprintf(name, sizeof(name), "@elector-test-%d", (int)getpid());
    int fd = listen_dgram(name);
    setenv("NOTIFY_SOCKET", name, 1);
    unsetenv("WATCHDOG_USEC");
    tool_notify *n = tool_notify_open(err, sizeof(err));
    ASSERT_NOT_NULL(n);
    ASSERT_EQ(0, tool_notify_watchdog_ms(n));
    ASSERT_EQ(-1, tool_notify_timeout(n, now_ms()));
    ASSERT_OK(tool_notify_send(n, "STOPPING=1"));
    ASSERT_STREQ("STOPPING=1", recv_msg(fd));
    tool_notify_free(n);
    close(fd);
}

TEST(notify_watchdog_only_for_its_pid_and_bad_sockets_are_said)
{
    char name[64], err[300];
    snprintf(name, sizeof(name), "@elector-test-pid-%d", (int)getpid());
    int fd = listen_dgram(name);
    setenv("NOTIFY_SOCKET", name, 1);
    setenv("WATCHDOG_USEC", "1000000", 1);
    setenv("WATCHDOG_PID", "1", 1); /* another process's watchdog */
    tool_notify *n = tool_notify_open(err, sizeof(err));
    ASSERT_NOT_NULL(n);
    ASSERT_EQ(0, tool_notify_watchdog_ms(n));
    ASSERT_NULL(getenv("WATCHDOG_PID"));
    tool_notify_free(n);
    char pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    setenv("NOTIFY_SOCKET", name, 1);
    setenv("WATCHDOG_USEC", "1000000", 1);
    setenv("WATCHDOG_PID", pid, 1);
    n = tool_notify_open(err, sizeof(err));
    ASSERT_EQ(500, tool_notify_watchdog_ms(n));
    tool_notify_free(n);
    close(fd);

    unsetenv("NOTIFY_SOCKET"); /* not under systemd: nothing, no message */
    ASSERT_NULL(tool_notify_open(err, sizeof(err)));
    ASSERT_STREQ("", err);
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    ASSERT_NULL(tool_notify_open(err, sizeof(err)));
    ASSERT_CONTAINS(err, "relative/path");
    ASSERT_NULL(getenv("NOTIFY_SOCKET"));
    /* A socket nobody listens on: sending fails, the tool goes on. */
    setenv("NOTIFY_SOCKET", "@elector-test-nobody-listens", 1);
    n = tool_notify_open(err, sizeof(err));
    ASSERT_NOT_NULL(n);
    ASSERT_EQ(-1, tool_notify_send(n, "READY=1"));
    tool_notify_free(n);
}

TEST(process_stats_match_what_the_process_can_see)
{
    tool_process_stats s;
    ASSERT_OK(tool_process_stats_read(&s));
    int fds[2];
    ASSERT_OK(pipe(fds));
    tool_process_stats s2;
    ASSERT_OK(tool_process_stats_read(&s2));
    ASSERT_EQ(s.open_fds + 2, s2.open_fds); /* exactly the pipe's two ends */
    close(fds[0]);
    close(fds[1]);
    struct rlimit rl;
    ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
    ASSERT_EQ((int64_t)rl.rlim_cur, s.max_fds);
    double now = (double)time(NULL);
    tl_log("start %.2f (now %.0f), cpu %.3f s, rss %lld, vsz %lld, fds %lld/%lld",
           s.start_time_s, now, s.cpu_seconds, (long long)s.resident_bytes,
           (long long)s.virtual_bytes, (long long)s.open_fds, (long long)s.max_fds);
    ASSERT(s.start_time_s > now - 120 && s.start_time_s <= now + 1);
    ASSERT(s.cpu_seconds >= 0 && s.cpu_seconds < 120);
    /* 4 MiB of fresh pages touched: the resident size grows by about that much. */
    size_t big = 4 << 20;
    char *p = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(p != MAP_FAILED);
    memset(p, 1, big);
    ASSERT_OK(tool_process_stats_read(&s2));
    ASSERT_GE(s2.resident_bytes - s.resident_bytes, (int64_t)(3 << 20));
    ASSERT_GE(s2.virtual_bytes, s2.resident_bytes);
    munmap(p, big);
    char *m = tool_process_metrics();
    ASSERT_NOT_NULL(m);
    ASSERT_CONTAINS(m, "# TYPE process_open_fds gauge\nprocess_open_fds ");
    free(m);
}

/* ---------------------------------------------------------------- the loop */

struct probe {
    int id, fd;      /* fd -1: none */
    int64_t timeout; /* -1: none */
    short revents;   /* as last processed */
    int *seen, *nseen;
    bool *done;
    int stop_after; /* passes before it sets *done (0: never) */
    int passes;
};

static int probe_fd(void *ud, short *events)
{
    struct probe *p = ud;
    *events = POLLIN;
    return p->fd;
}

static int64_t probe_timeout(void *ud)
{
    return ((struct probe *)ud)->timeout;
}

static void probe_process(void *ud, short revents)
{
    struct probe *p = ud;
    p->revents = revents;
    p->seen[(*p->nseen)++ % 16] = p->id;
    if (p->stop_after && ++p->passes == p->stop_after) *p->done = true;
}

TEST(loop_polls_the_watchers_fds_and_processes_them_in_order)
{
    int pfd[2];
    ASSERT_OK(pipe(pfd));
    int seen[16], nseen = 0;
    bool done = false;
    struct probe a = {1, pfd[0], -1, 0, seen, &nseen, &done, 0, 0};
    struct probe b = {2, -1, 200, 0, seen, &nseen, &done, 0, 0};
    struct probe c = {3, -1, 30, 0, seen, &nseen, &done, 2, 0};
    tool_loop l = {.n = 0};
    ASSERT_OK(
        tool_loop_add(&l, (tool_watcher){&a, probe_fd, probe_timeout, probe_process}));
    ASSERT_OK(tool_loop_add(&l, (tool_watcher){&b, NULL, probe_timeout, probe_process}));
    ASSERT_OK(tool_loop_add(&l, (tool_watcher){&c, NULL, probe_timeout, probe_process}));
    ASSERT_EQ(30, tool_loop_timeout(&l)); /* the nearest; -1 is none */
    /* Nothing to read: the pass sleeps until the nearest timeout, not longer. */
    int64_t t0 = elector_now_ns();
    tool_loop_pass(&l);
    int64_t ms = (elector_now_ns() - t0) / 1000000;
    ASSERT_GE(ms, 25);
    ASSERT_LT(ms, 190);
    ASSERT_EQ(3, nseen);
    ASSERT_EQ(1, seen[0]);
    ASSERT_EQ(2, seen[1]);
    ASSERT_EQ(3, seen[2]);
    ASSERT_EQ(0, a.revents);
    /* A byte to read: only its watcher sees POLLIN, and the pass does not sleep. */
    ASSERT_EQ(1, (int)write(pfd[1], "x", 1));
    c.timeout = 5000;
    t0 = elector_now_ns();
    tool_loop_run(&l, &done); /* c ends it at its second pass */
    ASSERT_LT((elector_now_ns() - t0) / 1000000, 1000);
    ASSERT_EQ(6, nseen);
    ASSERT(a.revents & POLLIN);
    ASSERT_EQ(0, b.revents);
    ASSERT_EQ(0, c.revents);
    close(pfd[0]);
    close(pfd[1]);
}

TEST(loop_refuses_a_watcher_beyond_its_table_or_without_process)
{
    tool_loop l = {.n = 0};
    int seen[16], nseen = 0;
    bool done = false;
    struct probe p = {1, -1, -1, 0, seen, &nseen, &done, 0, 0};
    ASSERT_EQ(-1, tool_loop_add(&l, (tool_watcher){&p, NULL, NULL, NULL}));
    for (int i = 0; i < TOOL_LOOP_MAX; i++)
        ASSERT_OK(tool_loop_add(&l, (tool_watcher){&p, NULL, NULL, probe_process}));
    ASSERT_EQ(-1, tool_loop_add(&l, (tool_watcher){&p, NULL, NULL, probe_process}));
    ASSERT_EQ(-1, tool_loop_timeout(&l)); /* no watcher has a timeout */
}
