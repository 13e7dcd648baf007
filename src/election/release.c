/* SPDX-License-Identifier: MIT */
/* The release helper of a session (release_on_exit): a process, elector-release,
 * that revokes the session's lease as soon as its owner is gone, so that the
 * next candidate need not wait for the TTL after a crash.
 *
 * The owner spawns it (posix_spawn: safe in threaded programs, no fork of the
 * owner's memory) with
 *   fd 0  one end of a socketpair: the orders (below), orders again whenever
 *         the client's endpoints or password change (auto-sync, the password
 *         file read again: the helper must reach the cluster as it is now), and
 *         "D" at a normal end;
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
 * the owner's pid, and a forked child's close leaves the helper alone.
 *
 * This file is the owner's side; release_helper.c the helper's. Stopping a
 * helper never waits in the loop: "D" is sent, and the client's reaper (below)
 * reaps it from a timer, SIGKILLing one that has not exited within 2 s (a
 * stopped one): the other sessions on the loop keep their keepalives. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "election_private.h"

extern char **environ;

static int pidfd_open_(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

void elector__release_init(elector__release *r)
{
    *r = (elector__release){.sock = -1};
}

/* ---------------------------------------------------------------- the orders */

static void put(uint8_t *buf, size_t *n, const void *p, size_t len)
{
    if (buf) memcpy(buf + *n, p, len);
    *n += len;
}

/* Serializes (buf NULL: measures). Strings as a 4-byte length (UINT32_MAX: NULL)
 * and the bytes. */
static size_t encode(const elector__orders *o, uint8_t *buf)
{
    size_t n = 0;
    uint32_t total = 0;
    put(buf, &n, ELECTOR__ORDERS_MAGIC, 4);
    put(buf, &n, &total, 4); /* patched below */
    put(buf, &n, o->v, sizeof(o->v));
    for (int i = 0; i < ELECTOR__ORDERS_NSTR; i++) {
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

/* The helper's orders, encoded into *out (malloc'd, *n bytes; the caller wipes
 * and frees it): the lease, its TTL and the client's settings as they are
 * now: the endpoints in use (auto-sync may have replaced the ones given), the
 * password last read and the password file (the helper reads it again before
 * it authenticates), TLS only or not. 0, ELECTOR_ENOMEM, or ELECTOR_EINVAL
 * when the orders would pass ELECTOR__ORDERS_MAX. */
static int orders_now(elector_etcd *e, int64_t lease, int64_t ttl_s, uint8_t **out,
                      size_t *n)
{
    elector_etcd_config c;
    elector__etcd_settings(e, &c);
    char *eps = elector__endpoints_now(e);
    if (!eps) return ELECTOR_ENOMEM;
    elector__orders o = {
        .v = {lease, ttl_s, c.dial_timeout_ms, c.request_timeout_ms, c.keepalive_time_ms,
              c.keepalive_idle_ms, c.keepalive_timeout_ms, c.backoff_min_ms,
              c.backoff_max_ms, (int64_t)c.max_recv_msg_bytes,
              (int64_t)c.max_decode_bytes, c.insecure_skip_verify, c.require_tls},
        .s = {eps, c.cacert, c.cert, c.key, c.user, c.password, c.password_file}};
    for (int i = 0; i < ELECTOR__ORDERS_NSTR; i++)
        o.slen[i] = o.s[i] ? (uint32_t)strnlen(o.s[i], ELECTOR__ORDERS_MAX) : 0;
    *n = encode(&o, NULL);
    *out = *n <= ELECTOR__ORDERS_MAX ? malloc(*n) : NULL;
    if (*out) encode(&o, *out);
    free(eps);
    return *out ? 0 : *n > ELECTOR__ORDERS_MAX ? ELECTOR_EINVAL : ELECTOR_ENOMEM;
}

static void wipe_free(uint8_t *buf, size_t n)
{
    if (buf) explicit_bzero(buf, n);
    free(buf);
}

/* The helper at path started with one end of a socketpair on fd 0 and a pidfd
 * of ours on fd 3, its first orders (buf, n) sent: 0 with our end of the
 * socket and its pid, or ELECTOR_ENOMEM / ELECTOR_EINVAL with nothing left
 * open and no child behind. */
static int spawn_with_orders(const char *path, const uint8_t *buf, size_t n, int *sock,
                             pid_t *pid_out)
{
    int sv[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return ELECTOR_ENOMEM;
    sv[0] = high_fd(sv[0]);
    sv[1] = high_fd(sv[1]);
    int self = pidfd_open_(getpid()); /* pidfds are close-on-exec */
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
    if (rc) {
        if (sv[0] >= 0) close(sv[0]);
        return rc == ENOMEM || rc == EAGAIN || rc == EMFILE || rc == ENFILE
                   ? ELECTOR_ENOMEM
                   : ELECTOR_EINVAL;
    }
    *sock = sv[0];
    *pid_out = pid;
    return 0;
}

void elector__release_start(elector__release *r, elector_etcd *e, int64_t lease,
                            int64_t ttl_s, bool adopted)
{
    elector__release_init(r);
    /* An adopted lease (lease_id) may be another live process's: a helper of
     * ours would revoke it under that process when we die. */
    if (adopted) {
        elector__notice(e, ELECTOR_EINVAL,
                        "release_on_exit: no release helper for lease %llx, adopted "
                        "(lease_id): another process may use it, and the helper would "
                        "revoke it when this one dies",
                        (unsigned long long)lease);
        r->pid = ELECTOR_EINVAL;
        return;
    }
    char path[PATH_MAX];
    if (elector__release_find(e, path, sizeof(path))) {
        r->pid = ELECTOR_EINVAL;
        return;
    }
    uint8_t *buf = NULL;
    size_t n = 0;
    int err = orders_now(e, lease, ttl_s, &buf, &n);
    pid_t pid = 0;
    int sock = -1;
    if (!err) err = spawn_with_orders(path, buf, n, &sock, &pid);
    wipe_free(buf, n);
    if (err) {
        r->pid = err;
        return;
    }
    r->sock = sock;
    r->pid = pid;
    r->owner = getpid();
    r->lease = lease;
    r->ttl_s = ttl_s;
    r->gen = elector__settings_gen(e);
}

/* Sends what is left of r->out without waiting; true once all of it is out. */
static bool flush_out(elector__release *r)
{
    while (r->out_off < r->out_len) {
        ssize_t w = send(r->sock, r->out + r->out_off, r->out_len - r->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false; /* full (a stopped helper), or gone: later */
        r->out_off += (size_t)w;
    }
    wipe_free(r->out, r->out_len);
    r->out = NULL;
    r->out_len = r->out_off = 0;
    return true;
}

void elector__release_refresh(elector__release *r, elector_etcd *e)
{
    if (r->pid <= 0 || getpid() != r->owner) return;
    if (r->out && !flush_out(r)) return; /* the last update is not out yet */
    uint64_t gen = elector__settings_gen(e);
    if (gen == r->gen) return;
    size_t n = 0;
    uint8_t *buf = NULL;
    if (orders_now(e, r->lease, r->ttl_s, &buf, &n)) return; /* at the next renewal */
    r->gen = gen;
    r->out = buf;
    r->out_len = n;
    r->out_off = 0;
    flush_out(r);
}

/* ---------------------------------------------------------------- the reaper
 *
 * Helpers told to stop are reaped from a timer of the client, never waited
 * for in the loop: each is looked at every REAP_MS; one still there after
 * KILL_AFTER_MS (stopped, say) is SIGKILLed, and reaped at a later look. The
 * client's free kills and reaps what is left (a SIGKILLed process exits at
 * once: that wait is short). */
#define REAP_MS 10
#define KILL_AFTER_MS 2000

typedef struct dying {
    pid_t pid;
    int64_t kill_at_ms; /* 0: SIGKILLed already */
} dying;

typedef struct reaper {
    elector__ext x;
    elector_etcd *e;
    elector__timer timer;
    dying *d;
    int n, cap;
} reaper;

static const char reaper_kind;

/* Reaped (or reaped by the application's SIGCHLD handling: ECHILD). */
static bool reaped(pid_t pid)
{
    int st;
    pid_t w;
    do
        w = waitpid(pid, &st, WNOHANG);
    while (w < 0 && errno == EINTR);
    return w == pid || (w < 0 && errno == ECHILD);
}

static void reap_fired(elector__timer *t, void *ud)
{
    (void)t;
    reaper *rp = ud;
    int64_t now = elector__now_ms();
    for (int i = 0; i < rp->n;) {
        dying *d = &rp->d[i];
        if (reaped(d->pid)) {
            *d = rp->d[--rp->n];
            continue;
        }
        if (d->kill_at_ms && now >= d->kill_at_ms) {
            kill(d->pid, SIGKILL);
            d->kill_at_ms = 0;
        }
        i++;
    }
    if (rp->n) elector__timer_arm(rp->e, &rp->timer, now + REAP_MS, reap_fired, rp);
}

static void reaper_free(elector__ext *x)
{
    reaper *rp = (reaper *)x;
    elector__timer_disarm(rp->e, &rp->timer);
    for (int i = 0; i < rp->n; i++)
        if (!reaped(rp->d[i].pid)) {
            kill(rp->d[i].pid, SIGKILL);
            while (waitpid(rp->d[i].pid, NULL, 0) < 0 && errno == EINTR) {
            }
        }
    free(rp->d);
    free(rp);
}

/* Hands a stopping helper to the client's reaper; false when out of memory. */
static bool reap_later(elector_etcd *e, pid_t pid)
{
    reaper *rp = (reaper *)elector__ext_get(e, &reaper_kind, sizeof(reaper), reaper_free);
    if (!rp) return false;
    rp->e = e;
    if (rp->n == rp->cap) {
        int cap = rp->cap ? 2 * rp->cap : 4;
        dying *d = realloc(rp->d, (size_t)cap * sizeof(*d));
        if (!d) return false;
        rp->d = d;
        rp->cap = cap;
    }
    rp->d[rp->n++] = (dying){pid, elector__now_ms() + KILL_AFTER_MS};
    if (!rp->timer.armed)
        elector__timer_arm(e, &rp->timer, elector__now_ms() + REAP_MS, reap_fired, rp);
    return true;
}

bool elector__release_reaping(elector_etcd *e, int pid)
{
    reaper *rp = (reaper *)elector__ext_find(e, &reaper_kind);
    for (int i = 0; rp && i < rp->n; i++)
        if (rp->d[i].pid == pid) return true;
    return false;
}

void elector__release_stop(elector__release *r, elector_etcd *e)
{
    if (r->pid <= 0) {
        elector__release_init(r);
        return;
    }
    /* What r->out holds is sent now or never. */
    pid_t pid = r->pid;
    bool mine = getpid() == r->owner;
    /* "D" only after a whole update: else the helper would read it as part
     * of the orders. Without it the helper sees EOF, waits 2 s for a pidfd
     * that stays quiet, and exits without a revoke: the same end, later. */
    if (mine && (!r->out || flush_out(r)))
        send(r->sock, "D", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(r->sock);
    wipe_free(r->out, r->out_len);
    elector__release_init(r);
    /* A forked child's copy: the helper is the owner's to reap. */
    if (!mine || reaped(pid) || reap_later(e, pid)) return;
    /* Out of memory for the reaper: end it now (SIGKILL: a short wait). */
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}
