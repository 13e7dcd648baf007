/* SPDX-License-Identifier: MIT */
/* An LD_PRELOAD library for test_tool_eintr: every other call that would block
 * (sleep) fails with EINTR before it sleeps, as when a signal with a handler installed
 * without SA_RESTART arrives (a profiler's timer, an application's SIGCHLD or
 * SIGUSR1 handler, Python's or a runtime's own) -- poll() and epoll_wait() fail
 * so whatever the flags.
 *
 * "Would block": poll/epoll_wait with a timeout other than 0 and nothing ready
 * now; waitpid without WNOHANG and no child to report now; nanosleep;
 * read/write/recv/send on a descriptor without O_NONBLOCK (recv/send also
 * without MSG_DONTWAIT) that is not ready now. A call that would not sleep is
 * never failed: the kernel would not fail it with EINTR either (and failing a
 * ready read every time its loop comes round would be a livelock of the
 * test's making). Nor is a call made with every signal blocked.
 *
 * Only calls from the program and the libraries it loads reach here; libc's
 * calls to itself do not (they are bound inside libc). How many calls were
 * failed is appended to ELECTOR_TEST_EINTR_LOG ("PID COUNT") when the process
 * exits normally, so the test knows the injection happened.
 *
 * Nothing of this is in the shipped binaries. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long calls, failed;

#define NEXT(type, name) ((type)dlsym(RTLD_NEXT, name))
#define REAL_POLL NEXT(int (*)(struct pollfd *, nfds_t, int), "poll")

/* Whether every signal is blocked: then no handler can run, and the kernel
 * fails no call with EINTR (the command of `run` waits for the guard's word so). */
static int all_blocked(void)
{
    sigset_t m;
    if (sigprocmask(SIG_BLOCK, NULL, &m)) return 0;
    for (int s = 1; s < 32; s++)
        if (s != SIGKILL && s != SIGSTOP && !sigismember(&m, s)) return 0;
    return 1;
}

/* Every other call that would block fails. */
static int interrupt(void)
{
    if (all_blocked() || calls++ % 2) return 0;
    failed++;
    errno = EINTR;
    return 1;
}

/* Whether a read (POLLIN) or write (POLLOUT) of fd would block: a descriptor
 * without O_NONBLOCK that is not ready now. */
static int would_block(int fd, short ev)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (fl & O_NONBLOCK)) return 0;
    struct pollfd p = {.fd = fd, .events = ev};
    return REAL_POLL(&p, 1, 0) == 0;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    if (timeout == 0) return REAL_POLL(fds, n, 0);
    int r = REAL_POLL(fds, n, 0); /* ready now: the call would not sleep */
    if (r != 0) return r;
    if (interrupt()) return -1;
    return REAL_POLL(fds, n, timeout);
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
    int (*real)(int, struct epoll_event *, int, int) =
        NEXT(int (*)(int, struct epoll_event *, int, int), "epoll_wait");
    if (timeout == 0) return real(ep, ev, max, 0);
    int r = real(ep, ev, max, 0);
    if (r != 0) return r;
    if (interrupt()) return -1;
    return real(ep, ev, max, timeout);
}

pid_t waitpid(pid_t pid, int *st, int opt)
{
    pid_t (*real)(pid_t, int *, int) = NEXT(pid_t(*)(pid_t, int *, int), "waitpid");
    if (opt & WNOHANG) return real(pid, st, opt);
    pid_t r = real(pid, st, opt | WNOHANG); /* a child to report now: no sleep */
    if (r != 0) return r;
    if (interrupt()) return -1;
    return real(pid, st, opt);
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    if (interrupt()) {
        if (rem) *rem = *req; /* nothing slept */
        return -1;
    }
    return NEXT(int (*)(const struct timespec *, struct timespec *), "nanosleep")(req,
                                                                                  rem);
}

ssize_t read(int fd, void *b, size_t n)
{
    if (would_block(fd, POLLIN) && interrupt()) return -1;
    return NEXT(ssize_t(*)(int, void *, size_t), "read")(fd, b, n);
}

ssize_t write(int fd, const void *b, size_t n)
{
    if (would_block(fd, POLLOUT) && interrupt()) return -1;
    return NEXT(ssize_t(*)(int, const void *, size_t), "write")(fd, b, n);
}

ssize_t recv(int fd, void *b, size_t n, int fl)
{
    if (!(fl & MSG_DONTWAIT) && would_block(fd, POLLIN) && interrupt()) return -1;
    return NEXT(ssize_t(*)(int, void *, size_t, int), "recv")(fd, b, n, fl);
}

ssize_t send(int fd, const void *b, size_t n, int fl)
{
    if (!(fl & MSG_DONTWAIT) && would_block(fd, POLLOUT) && interrupt()) return -1;
    return NEXT(ssize_t(*)(int, const void *, size_t, int), "send")(fd, b, n, fl);
}

/* Read at start: the program may change its environment (elector removes its
 * own ELECTOR_ variables before it starts a command). */
static char log_path[4096];

__attribute__((constructor)) static void start(void)
{
    const char *log = getenv("ELECTOR_TEST_EINTR_LOG");
    if (log) snprintf(log_path, sizeof(log_path), "%s", log);
}

__attribute__((destructor)) static void report(void)
{
    const char *log = log_path;
    if (!*log) return;
    /* The real write: ours would fail every other call. */
    ssize_t (*w)(int, const void *, size_t) =
        NEXT(ssize_t(*)(int, const void *, size_t), "write");
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    char line[64];
    int k = snprintf(line, sizeof(line), "%d %lu\n", (int)getpid(), failed);
    if (w(fd, line, (size_t)k) != k) { /* the test sees no line */
    }
    close(fd);
}
