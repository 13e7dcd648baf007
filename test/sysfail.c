/* SPDX-License-Identifier: MIT */
/* A system-call failure injector, loaded with LD_PRELOAD (test_etcd_sysfail):
 * the calls named in ELECTOR_TEST_SYSFAIL fail with the errno given, as a
 * kernel or libc short of memory, descriptors or processes, or without a
 * system call, would fail them.
 *
 *   ELECTOR_TEST_SYSFAIL="posix_spawn:EAGAIN:1,pidfd_open:ENOSYS,poll:ENOMEM:2+"
 *
 * Each entry is CALL:ERRNO[:N]: without N every call of CALL fails; with N the
 * Nth only (counted from when the variable last changed, from 1); with N+ the
 * Nth and every later one. ERRNO is a name (EAGAIN) or a number. CALL is one
 * of the names of the table below; pidfd_open is syscall(SYS_pidfd_open),
 * fcntl_dupfd is fcntl(F_DUPFD / F_DUPFD_CLOEXEC) (other fcntl commands pass).
 * The posix_spawn* functions return the error number, the others -1 with errno.
 * One entry is no failure: connect_at_once:1 (the number is not used) makes
 * a connect() on a non-blocking socket complete before it returns (0), as
 * POSIX allows and Linux does not do for TCP.
 *
 * The variable is read at every call, so that a test arms and disarms it with
 * setenv()/unsetenv() around the call it aims at. The constructor removes
 * LD_PRELOAD from the environment: the processes the program starts (etcd,
 * etcdctl, the release helper) are not injected unless a test asks for it.
 * elector_test_sysfail_failed() returns how many calls were failed (the test
 * knows so that the injection happened, found with dlsym); at a normal exit
 * "PID COUNT" is appended to ELECTOR_TEST_SYSFAIL_LOG if set.
 *
 * Only calls from the program and the libraries it loads reach here; libc's
 * calls to itself do not. Not thread-safe (getenv against setenv): the
 * library's core has no threads, and the tests arm it while single-threaded.
 * Nothing of this is in the shipped binaries. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NEXT(type, name) ((type)dlsym(RTLD_NEXT, name))

enum {
    F_POSIX_SPAWN,
    F_FA_INIT,
    F_FA_ADDDUP2,
    F_FA_ADDOPEN,
    F_FA_ADDCLOSEFROM,
    F_AT_INIT,
    F_AT_SETFLAGS,
    F_AT_SETSIGMASK,
    F_AT_SETSIGDEFAULT,
    F_PIDFD_OPEN,
    F_SOCKETPAIR,
    F_FCNTL_DUPFD,
    F_SEND,
    F_RECV,
    F_READ,
    F_WRITE,
    F_POLL,
    F_WAITPID,
    F_KILL,
    F_SOCKET,
    F_CONNECT,
    F_SETSOCKOPT,
    F_EPOLL_CREATE1,
    F_EPOLL_CTL,
    F_EPOLL_WAIT,
    F_EVENTFD,
    F_TIMERFD_CREATE,
    F_TIMERFD_SETTIME,
    F_NANOSLEEP,
    F_CONNECT_AT_ONCE,
    F_COUNT
};

static const char *const names[F_COUNT] = {
    "posix_spawn",
    "posix_spawn_file_actions_init",
    "posix_spawn_file_actions_adddup2",
    "posix_spawn_file_actions_addopen",
    "posix_spawn_file_actions_addclosefrom_np",
    "posix_spawnattr_init",
    "posix_spawnattr_setflags",
    "posix_spawnattr_setsigmask",
    "posix_spawnattr_setsigdefault",
    "pidfd_open",
    "socketpair",
    "fcntl_dupfd",
    "send",
    "recv",
    "read",
    "write",
    "poll",
    "waitpid",
    "kill",
    "socket",
    "connect",
    "setsockopt",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "eventfd",
    "timerfd_create",
    "timerfd_settime",
    "nanosleep",
    "connect_at_once",
};

typedef struct rule {
    int err;            /* 0: no rule for this call */
    unsigned long nth;  /* 0: every call */
    int and_later;      /* N+ */
    unsigned long seen; /* calls since the spec was read */
} rule;

static rule rules[F_COUNT];
static char spec_now[1024];
static unsigned long failed;

static const struct {
    const char *name;
    int err;
} errnos[] = {
    {"EPERM", EPERM},
    {"ENOENT", ENOENT},
    {"EINTR", EINTR},
    {"EIO", EIO},
    {"EBADF", EBADF},
    {"ECHILD", ECHILD},
    {"EAGAIN", EAGAIN},
    {"ENOMEM", ENOMEM},
    {"EACCES", EACCES},
    {"EINVAL", EINVAL},
    {"ENFILE", ENFILE},
    {"EMFILE", EMFILE},
    {"EPIPE", EPIPE},
    {"ENOSYS", ENOSYS},
    {"ENOBUFS", ENOBUFS},
    {"ENOEXEC", ENOEXEC},
    {"ECONNRESET", ECONNRESET},
    {"ENETUNREACH", ENETUNREACH},
    {"EADDRNOTAVAIL", EADDRNOTAVAIL},
    {"ECONNREFUSED", ECONNREFUSED},
    {"EAFNOSUPPORT", EAFNOSUPPORT},
    {"ENOPROTOOPT", ENOPROTOOPT},
    {"ENOSPC", ENOSPC},

};

static int errno_of(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
        if (strlen(errnos[i].name) == n && !strncmp(errnos[i].name, s, n))
            return errnos[i].err;
    return atoi(s); /* a number, or 0: no rule */
}

/* One entry CALL:ERRNO[:N[+]] of the spec. */
static void parse_entry(char *ent)
{
    char *c1 = strchr(ent, ':');
    if (!c1) return;
    *c1 = 0;
    char *er = c1 + 1, *c2 = strchr(er, ':');
    if (c2) *c2 = 0;
    for (int i = 0; i < F_COUNT; i++) {
        if (strcmp(names[i], ent)) continue;
        rules[i].err = errno_of(er, strlen(er));
        rules[i].nth = c2 ? strtoul(c2 + 1, NULL, 10) : 0;
        rules[i].and_later = c2 && strchr(c2 + 1, '+') != NULL;
    }
}

/* Re-reads the spec when it changed (counters start again then). */
static void refresh(void)
{
    const char *s = getenv("ELECTOR_TEST_SYSFAIL");
    if (!s) s = "";
    if (!strncmp(s, spec_now, sizeof(spec_now))) return;
    snprintf(spec_now, sizeof(spec_now), "%s", s);
    memset(rules, 0, sizeof(rules));
    char copy[1024];
    snprintf(copy, sizeof(copy), "%s", s);
    char *save = NULL;
    for (char *ent = strtok_r(copy, ",", &save); ent; ent = strtok_r(NULL, ",", &save))
        parse_entry(ent);
}

/* The errno call f fails with now, or 0. */
static int fails(int f)
{
    refresh();
    rule *r = &rules[f];
    if (!r->err) return 0;
    r->seen++;
    if (r->nth && r->seen != r->nth && !(r->and_later && r->seen > r->nth)) return 0;
    failed++;
    return r->err;
}

#define FAIL_ERRNO(f, ret)                                                               \
    do {                                                                                 \
        int e_ = fails(f);                                                               \
        if (e_) {                                                                        \
            errno = e_;                                                                  \
            return ret;                                                                  \
        }                                                                                \
    } while (0)

#define FAIL_RC(f)                                                                       \
    do {                                                                                 \
        int e_ = fails(f);                                                               \
        if (e_) return e_;                                                               \
    } while (0)

unsigned long elector_test_sysfail_failed(void);
unsigned long elector_test_sysfail_failed(void)
{
    return failed;
}

/* ---------------------------------------------------------------- posix_spawn */

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
    FAIL_RC(F_POSIX_SPAWN);
    return NEXT(int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]),
                "posix_spawn")(pid, path, fa, at, argv, envp);
}

int posix_spawn_file_actions_init(posix_spawn_file_actions_t *fa)
{
    FAIL_RC(F_FA_INIT);
    return NEXT(int (*)(posix_spawn_file_actions_t *),
                "posix_spawn_file_actions_init")(fa);
}

int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int to)
{
    FAIL_RC(F_FA_ADDDUP2);
    return NEXT(int (*)(posix_spawn_file_actions_t *, int, int),
                "posix_spawn_file_actions_adddup2")(fa, fd, to);
}

int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd,
                                     const char *path, int fl, mode_t mode)
{
    FAIL_RC(F_FA_ADDOPEN);
    return NEXT(int (*)(posix_spawn_file_actions_t *, int, const char *, int, mode_t),
                "posix_spawn_file_actions_addopen")(fa, fd, path, fl, mode);
}

int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *fa, int from)
{
    FAIL_RC(F_FA_ADDCLOSEFROM);
    return NEXT(int (*)(posix_spawn_file_actions_t *, int),
                "posix_spawn_file_actions_addclosefrom_np")(fa, from);
}

int posix_spawnattr_init(posix_spawnattr_t *at)
{
    FAIL_RC(F_AT_INIT);
    return NEXT(int (*)(posix_spawnattr_t *), "posix_spawnattr_init")(at);
}

int posix_spawnattr_setflags(posix_spawnattr_t *at, short fl)
{
    FAIL_RC(F_AT_SETFLAGS);
    return NEXT(int (*)(posix_spawnattr_t *, short), "posix_spawnattr_setflags")(at, fl);
}

int posix_spawnattr_setsigmask(posix_spawnattr_t *at, const sigset_t *m)
{
    FAIL_RC(F_AT_SETSIGMASK);
    return NEXT(int (*)(posix_spawnattr_t *, const sigset_t *),
                "posix_spawnattr_setsigmask")(at, m);
}

int posix_spawnattr_setsigdefault(posix_spawnattr_t *at, const sigset_t *m)
{
    FAIL_RC(F_AT_SETSIGDEFAULT);
    return NEXT(int (*)(posix_spawnattr_t *, const sigset_t *),
                "posix_spawnattr_setsigdefault")(at, m);
}

/* ---------------------------------------------------------------- descriptors */

long syscall(long n, ...)
{
    va_list ap;
    va_start(ap, n);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_pidfd_open) FAIL_ERRNO(F_PIDFD_OPEN, -1);
    return NEXT(long (*)(long, ...), "syscall")(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int socketpair(int dom, int type, int proto, int sv[2])
{
    FAIL_ERRNO(F_SOCKETPAIR, -1);
    return NEXT(int (*)(int, int, int, int[2]), "socketpair")(dom, type, proto, sv);
}

int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long); /* an int or a pointer: a long holds either */
    va_end(ap);
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) FAIL_ERRNO(F_FCNTL_DUPFD, -1);
    return NEXT(int (*)(int, int, ...), "fcntl")(fd, cmd, arg);
}

int socket(int dom, int type, int proto)
{
    FAIL_ERRNO(F_SOCKET, -1);
    return NEXT(int (*)(int, int, int), "socket")(dom, type, proto);
}

int connect(int fd, const struct sockaddr *a, socklen_t n)
{
    FAIL_ERRNO(F_CONNECT, -1);
    int (*real)(int, const struct sockaddr *, socklen_t) =
        NEXT(int (*)(int, const struct sockaddr *, socklen_t), "connect");
    if (fails(F_CONNECT_AT_ONCE)) { /* blocking for this call only */
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) return -1;
        int r = real(fd, a, n), e = errno;
        fcntl(fd, F_SETFL, fl);
        errno = e;
        return r;
    }
    return real(fd, a, n);
}

int setsockopt(int fd, int lvl, int opt, const void *v, socklen_t n)
{
    FAIL_ERRNO(F_SETSOCKOPT, -1);
    return NEXT(int (*)(int, int, int, const void *, socklen_t), "setsockopt")(fd, lvl,
                                                                               opt, v, n);
}

int epoll_create1(int fl)
{
    FAIL_ERRNO(F_EPOLL_CREATE1, -1);
    return NEXT(int (*)(int), "epoll_create1")(fl);
}

int epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
    FAIL_ERRNO(F_EPOLL_CTL, -1);
    return NEXT(int (*)(int, int, int, struct epoll_event *), "epoll_ctl")(ep, op, fd,
                                                                           ev);
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
    FAIL_ERRNO(F_EPOLL_WAIT, -1);
    return NEXT(int (*)(int, struct epoll_event *, int, int), "epoll_wait")(ep, ev, max,
                                                                            timeout);
}

int eventfd(unsigned int v, int fl)
{
    FAIL_ERRNO(F_EVENTFD, -1);
    return NEXT(int (*)(unsigned int, int), "eventfd")(v, fl);
}

int timerfd_create(int clk, int fl)
{
    FAIL_ERRNO(F_TIMERFD_CREATE, -1);
    return NEXT(int (*)(int, int), "timerfd_create")(clk, fl);
}

int timerfd_settime(int fd, int fl, const struct itimerspec *n, struct itimerspec *o)
{
    FAIL_ERRNO(F_TIMERFD_SETTIME, -1);
    return NEXT(int (*)(int, int, const struct itimerspec *, struct itimerspec *),
                "timerfd_settime")(fd, fl, n, o);
}

/* ---------------------------------------------------------------- I/O and waits */

ssize_t send(int fd, const void *b, size_t n, int fl)
{
    FAIL_ERRNO(F_SEND, -1);
    return NEXT(ssize_t(*)(int, const void *, size_t, int), "send")(fd, b, n, fl);
}

ssize_t recv(int fd, void *b, size_t n, int fl)
{
    FAIL_ERRNO(F_RECV, -1);
    return NEXT(ssize_t(*)(int, void *, size_t, int), "recv")(fd, b, n, fl);
}

ssize_t read(int fd, void *b, size_t n)
{
    FAIL_ERRNO(F_READ, -1);
    return NEXT(ssize_t(*)(int, void *, size_t), "read")(fd, b, n);
}

ssize_t write(int fd, const void *b, size_t n)
{
    FAIL_ERRNO(F_WRITE, -1);
    return NEXT(ssize_t(*)(int, const void *, size_t), "write")(fd, b, n);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    FAIL_ERRNO(F_POLL, -1);
    return NEXT(int (*)(struct pollfd *, nfds_t, int), "poll")(fds, n, timeout);
}

pid_t waitpid(pid_t pid, int *st, int opt)
{
    FAIL_ERRNO(F_WAITPID, -1);
    return NEXT(pid_t(*)(pid_t, int *, int), "waitpid")(pid, st, opt);
}

int kill(pid_t pid, int sig)
{
    FAIL_ERRNO(F_KILL, -1);
    return NEXT(int (*)(pid_t, int), "kill")(pid, sig);
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    FAIL_ERRNO(F_NANOSLEEP, -1);
    return NEXT(int (*)(const struct timespec *, struct timespec *), "nanosleep")(req,
                                                                                  rem);
}

/* ---------------------------------------------------------------- start and end */

static char log_path[4096];

__attribute__((constructor)) static void start(void)
{
    const char *log = getenv("ELECTOR_TEST_SYSFAIL_LOG");
    if (log) snprintf(log_path, sizeof(log_path), "%s", log);
    unsetenv("LD_PRELOAD");
}

__attribute__((destructor)) static void report(void)
{
    if (!*log_path) return;
    unsetenv("ELECTOR_TEST_SYSFAIL"); /* our own calls below must not fail */
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    char line[64];
    int k = snprintf(line, sizeof(line), "%d %lu\n", (int)getpid(), failed);
    if (write(fd, line, (size_t)k) != k) { /* the test sees no line */
    }
    close(fd);
}
