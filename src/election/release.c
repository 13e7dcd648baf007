/* SPDX-License-Identifier: MIT */
/* The release helper of a session (release_on_exit): a process, elector-release,
 * that revokes the session's lease as soon as its owner is gone, so that the
 * next candidate need not wait for the TTL after a crash.
 *
 * The owner spawns it (posix_spawn: safe in threaded programs, no fork of the
 * owner's memory) with
 *   fd 0  one end of a socketpair: the orders (below), then "D" at a normal end;
 *   fd 1  /dev/null; fd 2 the owner's stderr (a line when a revoke fails);
 *   fd 3  a pidfd of the owner, which becomes readable when the owner is gone;
 * no other descriptor, every signal default and unblocked, a session of its
 * own (a ^C to the owner's process group does not reach it), and an
 * environment without the owner's variables (only sanitizer options pass).
 * The orders carry the lease, its TTL and the client's settings, password
 * included: never in argv or the environment, which other users may read.
 *
 * The helper waits for one of:
 *   "D"               the session was closed: exit 0, revoke nothing;
 *   the pidfd         the owner is gone: revoke (retrying until the lease would
 *                     have expired anyway), exit;
 *   EOF without "D"   every copy of our socket is closed: the owner is dying (its
 *                     pidfd follows within microseconds: revoke) or it
 *                     exec'd, or closed the descriptor (the pidfd stays quiet
 *                     for 2 s: exit, the lease ends by its TTL).
 * A fork of the owner inherits the socket, not the watch: the helper follows
 * the owner's pid, and a forked child's close leaves the helper alone. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "election_private.h"

extern char **environ;

#define MAGIC "ELR1"
#define MAX_ORDERS (64 * 1024) /* the orders: a few hundred bytes in practice */
#define NSTR 6                 /* endpoints, cacert, cert, key, user, password */
#define NINT 12

static int pidfd_open_(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

void elector__release_init(elector__release *r)
{
    r->pid = 0;
    r->sock = r->pidfd = -1;
    r->owner = 0;
}

/* ---------------------------------------------------------------- the orders */

typedef struct orders {
    int64_t v[NINT]; /* lease, ttl, then the client's times and bounds */
    const char *s[NSTR];
    uint32_t slen[NSTR];
} orders;

static void put(uint8_t *buf, size_t *n, const void *p, size_t len)
{
    if (buf) memcpy(buf + *n, p, len);
    *n += len;
}

/* Serializes (buf NULL: measures). Strings as a 4-byte length (UINT32_MAX: NULL)
 * and the bytes. */
static size_t encode(const orders *o, uint8_t *buf)
{
    size_t n = 0;
    uint32_t total = 0;
    put(buf, &n, MAGIC, 4);
    put(buf, &n, &total, 4); /* patched below */
    put(buf, &n, o->v, sizeof(o->v));
    for (int i = 0; i < NSTR; i++) {
        uint32_t len = o->s[i] ? o->slen[i] : UINT32_MAX;
        put(buf, &n, &len, 4);
        if (o->s[i]) put(buf, &n, o->s[i], o->slen[i]);
    }
    if (buf) {
        total = (uint32_t)(n - 8);
        memcpy(buf + 4, &total, 4);
    }
    return n;
}

/* Parses body (the bytes after the 8-byte header) into o, whose strings become
 * NUL-terminated copies in *store. Returns 0 or -1 (malformed). */
static int decode(const uint8_t *body, size_t len, orders *o, char **store)
{
    size_t n = sizeof(o->v);
    if (len < n) return -1;
    memcpy(o->v, body, n);
    char *st = malloc(len + NSTR);
    if (!st) return -1;
    size_t sn = 0;
    for (int i = 0; i < NSTR; i++) {
        uint32_t sl;
        if (len - n < 4) goto bad;
        memcpy(&sl, body + n, 4);
        n += 4;
        if (sl == UINT32_MAX) {
            o->s[i] = NULL;
            continue;
        }
        if (sl > len - n || memchr(body + n, 0, sl)) goto bad;
        memcpy(st + sn, body + n, sl);
        st[sn + sl] = 0;
        o->s[i] = st + sn;
        sn += sl + 1;
        n += sl;
    }
    if (n != len) goto bad;
    *store = st;
    return 0;
bad:
    explicit_bzero(st, len + NSTR);
    free(st);
    return -1;
}

/* ---------------------------------------------------------------- the owner's side */

/* fd moved to a number above 3 (close-on-exec), so that the spawn's dup2 to 0
 * and 3 cannot overwrite another of ours; -1 on failure (fd closed). */
static int high_fd(int fd)
{
    if (fd < 0 || fd > 3) return fd;
    int h = fcntl(fd, F_DUPFD_CLOEXEC, 4);
    close(fd);
    return h;
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The helper's environment: only the sanitizers' options, so that a helper
 * built with them behaves as the tests ask. Nothing of the owner's. */
static void helper_env(char **env, int cap)
{
    static const char *const keep[] = {
        "ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS="};
    int n = 0;
    for (char **e = environ; e && *e && n < cap - 1; e++)
        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
            if (!strncmp(*e, keep[i], strlen(keep[i]))) env[n++] = *e;
    env[n] = NULL;
}

static int spawn_helper(const char *path, int sock, int self, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    if (posix_spawn_file_actions_init(&fa)) return ENOMEM;
    if (posix_spawnattr_init(&at)) {
        posix_spawn_file_actions_destroy(&fa);
        return ENOMEM;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    int rc = posix_spawn_file_actions_adddup2(&fa, sock, 0);
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, self, 3);
    if (!rc) rc = posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    if (!rc)
        rc = posix_spawnattr_setflags(
            &at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
    if (!rc) rc = posix_spawnattr_setsigmask(&at, &none);
    if (!rc) rc = posix_spawnattr_setsigdefault(&at, &all);
    char *env[4];
    helper_env(env, 4);
    char *argv[] = {"elector-release", NULL};
    if (!rc) rc = posix_spawn(pid, path, &fa, &at, argv, env);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* The helper's orders: the lease, its TTL and the client's settings (the
 * strings borrowed from the client). */
static void orders_of(elector_etcd *e, int64_t lease, int64_t ttl_s, orders *o)
{
    elector_etcd_config c;
    elector__etcd_settings(e, &c);
    *o = (orders){.v = {lease, ttl_s, c.dial_timeout_ms, c.request_timeout_ms,
                        c.keepalive_time_ms, c.keepalive_idle_ms, c.keepalive_timeout_ms,
                        c.backoff_min_ms, c.backoff_max_ms, (int64_t)c.max_recv_msg_bytes,
                        (int64_t)c.max_decode_bytes, c.insecure_skip_verify},
                  .s = {c.endpoints, c.cacert, c.cert, c.key, c.user, c.password}};
    for (int i = 0; i < NSTR; i++)
        o->slen[i] = o->s[i] ? (uint32_t)strnlen(o->s[i], MAX_ORDERS) : 0;
}

void elector__release_start(elector__release *r, elector_etcd *e, int64_t lease,
                            int64_t ttl_s)
{
    elector__release_init(r);
    char path[PATH_MAX];
    if (elector__release_find(e, path, sizeof(path))) {
        r->pid = ELECTOR_EINVAL;
        return;
    }
    orders o;
    orders_of(e, lease, ttl_s, &o);
    size_t n = encode(&o, NULL);
    if (n > MAX_ORDERS) {
        r->pid = ELECTOR_EINVAL;
        return;
    }
    uint8_t *buf = malloc(n);
    int sv[2] = {-1, -1};
    int self = -1;
    if (!buf || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        free(buf);
        r->pid = ELECTOR_ENOMEM;
        return;
    }
    encode(&o, buf);
    sv[0] = high_fd(sv[0]);
    sv[1] = high_fd(sv[1]);
    self = pidfd_open_(getpid()); /* pidfds are close-on-exec */
    /* No pidfds (Linux before 5.3, a seccomp filter): no helper. */
    int nopidfd = self < 0 && (errno == ENOSYS || errno == EPERM);
    self = high_fd(self);
    pid_t pid = 0;
    int rc = nopidfd                              ? EINVAL
             : sv[0] < 0 || sv[1] < 0 || self < 0 ? EMFILE
                                                  : spawn_helper(path, sv[1], self, &pid);
    if (sv[1] >= 0) close(sv[1]);
    if (self >= 0) close(self);
    if (!rc && send_all(sv[0], buf, n)) {
        /* The helper died before it read its orders: reap it. */
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        rc = EPIPE;
    }
    explicit_bzero(buf, n);
    free(buf);
    if (rc) {
        if (sv[0] >= 0) close(sv[0]);
        r->pid = rc == ENOMEM || rc == EAGAIN || rc == EMFILE || rc == ENFILE
                     ? ELECTOR_ENOMEM
                     : ELECTOR_EINVAL;
        return;
    }
    r->sock = sv[0];
    r->pidfd = high_fd(pidfd_open_(pid));
    r->pid = pid;
    r->owner = getpid();
}

void elector__release_stop(elector__release *r)
{
    if (r->pid <= 0) {
        r->pid = 0;
        return;
    }
    pid_t pid = r->pid;
    bool mine = getpid() == r->owner;
    if (mine) send(r->sock, "D", 1, MSG_NOSIGNAL);
    close(r->sock);
    if (mine) {
        /* It exits at once on "D"; a helper that does not (stopped) is killed. */
        bool gone = false;
        int64_t end = elector__now_ms() + 2000;
        for (;;) {
            int left = (int)(end - elector__now_ms());
            if (left <= 0) break;
            if (r->pidfd >= 0) {
                struct pollfd p = {.fd = r->pidfd, .events = POLLIN};
                int k = poll(&p, 1, left);
                if (k > 0) {
                    gone = true;
                    break;
                }
                if (k < 0 && errno != EINTR) break;
            } else {
                int st;
                pid_t w = waitpid(pid, &st, WNOHANG);
                if (w == pid || (w < 0 && errno == ECHILD)) {
                    gone = true;
                    pid = 0; /* reaped */
                    break;
                }
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
        }
        if (pid) {
            if (!gone) kill(pid, SIGKILL);
            /* Reaped here, unless the application's SIGCHLD handling did it. */
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
            }
        }
    }
    if (r->pidfd >= 0) close(r->pidfd);
    elector__release_init(r);
}

/* ---------------------------------------------------------------- the helper */

static void say(const char *fmt, const char *a, unsigned long long lease)
{
    fprintf(stderr, "elector-release: ");
    fprintf(stderr, fmt, lease, a);
    fputc('\n', stderr);
}

/* Reads exactly n bytes from fd 0 within the time left; 0 or -1. */
static int read_full(uint8_t *p, size_t n, int64_t end_ms)
{
    while (n) {
        int left = (int)(end_ms - elector__now_ms());
        if (left <= 0) return -1;
        struct pollfd pf = {.fd = 0, .events = POLLIN};
        int k = poll(&pf, 1, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        ssize_t got = read(0, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* The helper's client, made from the orders on fd 0; NULL (with a message) when
 * they are missing or malformed. */
static elector_etcd *read_orders(int64_t *lease, int64_t *ttl_s)
{
    uint8_t head[8];
    int64_t end = elector__now_ms() + 10000;
    if (read_full(head, 8, end) || memcmp(head, MAGIC, 4)) {
        fprintf(stderr, "elector-release: no orders on fd 0; this program is started "
                        "by libelector for a session with release_on_exit\n");
        return NULL;
    }
    uint32_t len;
    memcpy(&len, head + 4, 4);
    uint8_t *body = len <= MAX_ORDERS ? malloc(len ? len : 1) : NULL;
    orders o;
    char *store = NULL;
    int rc = !body || read_full(body, len, end) || decode(body, len, &o, &store);
    if (body) {
        explicit_bzero(body, len);
        free(body);
    }
    if (rc) {
        fprintf(stderr, "elector-release: malformed orders on fd 0\n");
        return NULL;
    }
    elector_etcd_config c;
    elector_etcd_config_init(&c);
    *lease = o.v[0];
    *ttl_s = o.v[1];
    c.dial_timeout_ms = o.v[2];
    c.request_timeout_ms = o.v[3];
    c.keepalive_time_ms = o.v[4];
    c.keepalive_idle_ms = o.v[5];
    c.keepalive_timeout_ms = o.v[6];
    c.backoff_min_ms = o.v[7];
    c.backoff_max_ms = o.v[8];
    c.max_recv_msg_bytes = (size_t)o.v[9];
    c.max_decode_bytes = (size_t)o.v[10];
    c.insecure_skip_verify = o.v[11] != 0;
    c.endpoints = o.s[0];
    c.cacert = o.s[1];
    c.cert = o.s[2];
    c.key = o.s[3];
    c.user = o.s[4];
    c.password = o.s[5];
    /* Reads the TLS files now, as the owner did not long ago. */
    elector_etcd *e = elector_etcd_new(&c);
    size_t slen = 0;
    for (int i = 0; i < NSTR; i++)
        if (o.s[i]) slen = (size_t)(o.s[i] - store) + strlen(o.s[i]) + 1;
    explicit_bzero(store, slen);
    free(store);
    if (!e || elector_etcd_err(e)) {
        say("lease %llx: cannot use the settings (%s); it ends by its TTL",
            e ? elector_etcd_errstr(e) : "out of memory", (unsigned long long)*lease);
        elector_etcd_free(e);
        return NULL;
    }
    return e;
}

/* The owner is gone: revoke, retrying until the lease would have expired anyway. */
static int revoke_now(elector_etcd *e, int64_t lease, int64_t ttl_s)
{
    int64_t until = elector_now_ns() + ttl_s * 1000000000;
    int rc = elector_etcd_lease_revoke_sync(e, lease, until);
    if (rc)
        say("lease %llx could not be revoked (%s); it ends by its TTL",
            *elector_etcd_errstr(e) ? elector_etcd_errstr(e) : elector_strerror(rc),
            (unsigned long long)lease);
    return rc ? 1 : 0;
}

int elector_release_helper_main(void)
{
    /* No core dump, no /proc/PID/mem or environ for other users: it holds a
     * password. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    struct pollfd pf[2] = {{.fd = 0, .events = POLLIN}, {.fd = 3, .events = POLLIN}};
    if (poll(pf, 2, 0) < 0 || (pf[0].revents & POLLNVAL) || (pf[1].revents & POLLNVAL)) {
        fprintf(stderr, "elector-release: fd 0 or 3 is missing; this program is started "
                        "by libelector for a session with release_on_exit\n");
        return 2;
    }
    int64_t lease = 0, ttl_s = 0;
    elector_etcd *e = read_orders(&lease, &ttl_s);
    if (!e) return 2;
    int status = 0;
    for (;;) {
        pf[0].revents = pf[1].revents = 0;
        int k = poll(pf, 2, -1);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) break;
        if (pf[1].revents) { /* the owner is gone */
            status = revoke_now(e, lease, ttl_s);
            break;
        }
        if (pf[0].revents) {
            char b[16];
            ssize_t n = read(0, b, sizeof(b));
            if (n < 0 && errno == EINTR) continue;
            if (n > 0 && memchr(b, 'D', (size_t)n)) break; /* closed normally */
            if (n > 0) continue;
            /* EOF: the owner is dying (its pidfd follows), or it exec'd. */
            struct pollfd p = {.fd = 3, .events = POLLIN};
            int64_t end = elector__now_ms() + 2000;
            int w;
            do
                w = poll(&p, 1, (int)(end - elector__now_ms()));
            while (w < 0 && errno == EINTR && elector__now_ms() < end);
            if (w > 0) status = revoke_now(e, lease, ttl_s);
            break;
        }
    }
    elector_etcd_free(e);
    return status;
}
