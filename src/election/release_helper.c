/* SPDX-License-Identifier: MIT */
/* The release helper's side (release.c is the owner's, and says how it is
 * started): elector-release reads its orders, makes a client from them, and
 * waits for its owner's end. Orders that come later replace the client (the
 * owner's endpoints or password changed: auto-sync, a password file read
 * again); "D" ends it quietly; the owner's pidfd (fd 3) readable means the
 * owner is gone: revoke the lease. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "election_private.h"

enum { NSTR = ELECTOR__ORDERS_NSTR };

/* Parses body (the bytes after the 8-byte header) into o, whose strings become
 * NUL-terminated copies in *store. Returns 0 or -1 (malformed). */
static int decode(const uint8_t *body, size_t len, elector__orders *o, char **store)
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

/* The client's settings from the orders (its strings are the orders'). */
static void config_of(const elector__orders *o, elector_etcd_config *c)
{
    elector_etcd_config_init(c);
    c->dial_timeout_ms = o->v[2];
    c->request_timeout_ms = o->v[3];
    c->keepalive_time_ms = o->v[4];
    c->keepalive_idle_ms = o->v[5];
    c->keepalive_timeout_ms = o->v[6];
    c->backoff_min_ms = o->v[7];
    c->backoff_max_ms = o->v[8];
    c->max_recv_msg_bytes = (size_t)o->v[9];
    c->max_decode_bytes = (size_t)o->v[10];
    c->insecure_skip_verify = o->v[11] != 0;
    c->require_tls = o->v[12] != 0;
    c->endpoints = o->s[0];
    c->cacert = o->s[1];
    c->cert = o->s[2];
    c->key = o->s[3];
    c->user = o->s[4];
    c->password = o->s[5];
    c->password_file = o->s[6]; /* read again before it authenticates */
}

/* A client made from orders whose first `have` bytes (of the magic) were read
 * already; the lease and TTL into *lease and *ttl_s. NULL with a message when
 * they are malformed or unusable. */
static elector_etcd *read_orders(size_t have, int64_t *lease, int64_t *ttl_s)
{
    uint8_t head[8] = "E";
    int64_t end = elector__now_ms() + 10000;
    if (read_full(head + have, 8 - have, end) || memcmp(head, ELECTOR__ORDERS_MAGIC, 4)) {
        fprintf(stderr, "elector-release: no orders on fd 0; this program is started "
                        "by libelector for a session with release_on_exit\n");
        return NULL;
    }
    uint32_t len;
    memcpy(&len, head + 4, 4);
    uint8_t *body = len <= ELECTOR__ORDERS_MAX ? malloc(len ? len : 1) : NULL;
    elector__orders o;
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
    config_of(&o, &c);
    *lease = o.v[0];
    *ttl_s = o.v[1];
    /* Reads the TLS files now, as the owner did not long ago. */
    elector_etcd *e = elector__etcd_new(&c);
    size_t slen = 0;
    for (int i = 0; i < NSTR; i++)
        if (o.s[i]) slen = (size_t)(o.s[i] - store) + strlen(o.s[i]) + 1;
    explicit_bzero(store, slen);
    free(store);
    if (!e || elector__etcd_err(e)) {
        say("lease %llx: cannot use the settings (%s); it ends by its TTL",
            e ? elector__etcd_errstr(e) : "out of memory", (unsigned long long)*lease);
        elector__etcd_free(e);
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
            *elector__etcd_errstr(e) ? elector__etcd_errstr(e) : elector_strerror(rc),
            (unsigned long long)lease);
    return rc ? 1 : 0;
}

/* Every copy of our socket is closed: the owner is dying (its pidfd follows
 * within microseconds: revoke) or it exec'd, or closed the descriptor (the
 * pidfd stays quiet for 2 s: exit, the lease ends by its TTL). */
static int socket_closed(elector_etcd *e, int64_t lease, int64_t ttl_s)
{
    struct pollfd p = {.fd = 3, .events = POLLIN};
    int64_t end = elector__now_ms() + 2000;
    int w;
    do
        w = poll(&p, 1, (int)(end - elector__now_ms()));
    while (w < 0 && errno == EINTR && elector__now_ms() < end);
    return w > 0 ? revoke_now(e, lease, ttl_s) : 0;
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
    elector_etcd *e = read_orders(0, &lease, &ttl_s);
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
        if (!pf[0].revents) continue;
        char b;
        ssize_t n = read(0, &b, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            status = socket_closed(e, lease, ttl_s);
            break;
        }
        if (b == 'D') break; /* closed normally */
        if (b != 'E') continue;
        /* New orders (the first byte of the magic is read): they replace the
         * client; ones that do not parse leave the old one. */
        int64_t l2, t2;
        elector_etcd *e2 = read_orders(1, &l2, &t2);
        if (!e2) continue;
        elector__etcd_free(e);
        e = e2;
        lease = l2;
        ttl_s = t2;
    }
    elector__etcd_free(e);
    return status;
}
