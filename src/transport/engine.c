/* SPDX-License-Identifier: MIT */
/* The etcd client engine: the handle, its one file descriptor (an epoll set
 * holding the connection's socket, an eventfd for elector_etcd_wakeup() and a
 * timerfd), and the loop's pass, elector__etcd_process(): socket I/O, the
 * callbacks that result, due timers, then whatever the callbacks queued. The
 * engine's timeout is the earliest timer (timer.c), or now when work is pending.
 *
 * Freeing follows the rule of callbacks and freeing (transport_internal.h): the
 * loop holds the client while it runs callbacks, so elector__etcd_free() from a
 * callback only marks it, and the memory goes when the pass ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "transport_private.h"

/* ---------------------------------------------------------------- errors, misc */

int elector__etcd_err(const elector_etcd *e)
{
    return e ? e->err : ELECTOR_ENOMEM;
}

const char *elector__etcd_errstr(const elector_etcd *e)
{
    return e ? e->errstr : "out of memory";
}

int elector__etcd_fd(const elector_etcd *e)
{
    return e->epfd;
}

void elector__etcd_get_stats(const elector_etcd *e, elector_etcd_stats *out)
{
    *out = e->stats;
}

int elector__etcd_unusable(elector_etcd *e, int err, const char *why)
{
    return e->init_err = elector__set_err(e, err, "%s", why);
}

void *elector__etcd_owner(const elector_etcd *e)
{
    return e->owner;
}

void elector__etcd_set_owner(elector_etcd *e, void *owner)
{
    e->owner = owner;
}

void elector__etcd_enter(elector_etcd *e)
{
    elector__hold(&e->life);
}

bool elector__etcd_leave(elector_etcd *e)
{
    elector__unhold(&e->life); /* the loop's own hold outlives this one */
    return e->life.closed;
}

/* ---------------------------------------------------------------- exts */

elector__ext *elector__ext_find(elector_etcd *e, const void *kind)
{
    for (elector__ext *x = e->exts; x; x = x->next)
        if (x->kind == kind) return x;
    return NULL;
}

elector__ext *elector__ext_get(elector_etcd *e, const void *kind, size_t size,
                               void (*free_fn)(elector__ext *x))
{
    elector__ext *x = elector__ext_find(e, kind);
    if (x) return x;
    x = calloc(1, size);
    if (!x) return NULL;
    x->kind = kind;
    x->free = free_fn;
    x->next = e->exts;
    e->exts = x;
    return x;
}

/* ---------------------------------------------------------------- config, new */

void elector_etcd_config_init(elector_etcd_config *c)
{
    memset(c, 0, sizeof(*c));
    c->endpoints = "127.0.0.1:2379";
    c->dial_timeout_ms = 5000;
    c->request_timeout_ms = 5000;
    c->keepalive_time_ms = 1000;
    c->keepalive_idle_ms = 10000;
    c->keepalive_timeout_ms = 2000;
    c->backoff_min_ms = 50;
    c->backoff_max_ms = 2000;
    c->stall_ms = 1000;
}

static int copy_config(elector_etcd *e, const elector_etcd_config *cfg)
{
    e->cfg = *cfg;
    e->s_endpoints = elector__strdup(cfg->endpoints ? cfg->endpoints : "127.0.0.1:2379");
    e->s_cacert = elector__strdup(cfg->cacert);
    e->s_cert = elector__strdup(cfg->cert);
    e->s_key = elector__strdup(cfg->key);
    e->s_user = elector__strdup(cfg->user);
    e->s_password = elector__strdup(cfg->password ? cfg->password : "");
    e->s_password_file = elector__strdup(cfg->password_file);
    if (cfg->password_file && !e->s_password_file) return ELECTOR_ENOMEM;
    if (!e->s_endpoints || (cfg->cacert && !e->s_cacert) || (cfg->cert && !e->s_cert) ||
        (cfg->key && !e->s_key) || (cfg->user && !e->s_user) || !e->s_password)
        return ELECTOR_ENOMEM;
    if (e->cfg.dial_timeout_ms <= 0) e->cfg.dial_timeout_ms = 5000;
    if (e->cfg.request_timeout_ms <= 0) e->cfg.request_timeout_ms = 5000;
    if (e->cfg.keepalive_time_ms <= 0) e->cfg.keepalive_time_ms = 1000;
    if (e->cfg.keepalive_idle_ms <= 0) e->cfg.keepalive_idle_ms = 10000;
    if (e->cfg.keepalive_timeout_ms <= 0) e->cfg.keepalive_timeout_ms = 2000;
    if (e->cfg.backoff_min_ms <= 0) e->cfg.backoff_min_ms = 50;
    if (e->cfg.backoff_max_ms < e->cfg.backoff_min_ms) e->cfg.backoff_max_ms = 2000;
    if (e->cfg.max_recv_msg_bytes == 0)
        e->cfg.max_recv_msg_bytes = ELECTOR__RECV_MSG_DEFAULT;
    if (e->cfg.max_recv_msg_bytes > ELECTOR__GRPC_MAX_MSG)
        e->cfg.max_recv_msg_bytes = ELECTOR__GRPC_MAX_MSG;
    if (e->cfg.max_decode_bytes == 0)
        e->cfg.max_decode_bytes = e->cfg.max_recv_msg_bytes * ELECTOR__DECODE_FACTOR;
    return 0;
}

void elector__etcd_settings(const elector_etcd *e, elector_etcd_config *out)
{
    *out = e->cfg;
    out->endpoints = e->s_endpoints;
    out->cacert = e->s_cacert;
    out->cert = e->s_cert;
    out->key = e->s_key;
    out->user = e->s_user;
    out->password = e->s_password;
    out->password_file = e->s_password_file;
}

char *elector__endpoints_now(const elector_etcd *e)
{
    size_t cap = 1;
    for (int i = 0; i < e->nep; i++)
        cap += strlen(e->eps[i].authority) + sizeof("https://,");
    char *out = malloc(cap), *o = out;
    if (!out) return NULL;
    *o = 0;
    for (int i = 0; i < e->nep; i++)
        o += snprintf(o, cap - (size_t)(o - out), "%s%s://%s", i ? "," : "",
                      e->eps[i].tls ? "https" : "http", e->eps[i].authority);
    return out;
}

uint64_t elector__settings_gen(const elector_etcd *e)
{
    return e->settings_gen;
}

/* ---------------------------------------------------------------- what the pass found */

/* What the lower files recorded during the pump, the dispatch and the timers of
 * a pass, acted on here: the server's SETTINGS came (h2.c: the connection is
 * up), a learner refused a call (reply.c: leave it by a timer, autosync.c), a
 * PING went unanswered (ping.c: the connection is dead). */
static void conn_news(elector_etcd *e)
{
    if (e->conn_up_news) {
        e->conn_up_news = false;
        elector__restore_probe(e);
        elector__conn_rearm(e);
        elector__ping_rearm(e);
    }
    if (e->learner && !e->leave_timer.armed) elector__learner_leave_arm(e);
    if (e->ping_dead) {
        e->ping_dead = false;
        elector__conn_fail(e, ELECTOR_EUNAVAILABLE, "no answer to PING within %lld ms",
                           (long long)e->cfg.keepalive_timeout_ms);
    }
}

/* The endpoint list given, parsed, and the TLS it asks for. With require_tls
 * a cleartext endpoint is refused, and a list refused (or malformed) leaves no
 * endpoints. Returns 0 or the error, also set on the handle. */
static int endpoints_setup(elector_etcd *e)
{
    bool tls_default = e->s_cacert || e->s_cert || e->cfg.require_tls;
    char msg[300];
    int n =
        elector__endpoints_parse(e->s_endpoints, tls_default, &e->eps, msg, sizeof(msg));
    if (n < 0) return elector__set_err(e, n, "%s", msg);
    e->nep = n;
    bool any_tls = false;
    for (int i = 0; i < n; i++) {
        any_tls |= e->eps[i].tls;
        if (e->cfg.require_tls && !e->eps[i].tls) {
            int err = elector__set_err(
                e, ELECTOR_EINVAL,
                "endpoint http://%s is cleartext, and TLS is required "
                "(require_tls, --insecure-transport=false): use https://",
                e->eps[i].authority);
            elector__endpoints_free(e->eps, e->nep);
            e->eps = NULL;
            e->nep = 0;
            return err;
        }
    }
    /* A list with a TLS endpoint is a TLS setup: what the cluster reports
     * later (auto-sync) must not take the client, and its password, to
     * cleartext. */
    e->tls_only = any_tls;
    if (!any_tls) return 0;
    /* noted before reading: a change meanwhile is seen later */
    int err = elector__tls_files_note(e);
    return err ? err : elector__tls_setup(e);
}

elector_etcd *elector__etcd_new(const elector_etcd_config *cfg)
{
    elector_etcd_config defaults;
    if (!cfg) {
        elector_etcd_config_init(&defaults);
        cfg = &defaults;
    }
    elector_etcd *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->fd = e->evfd = e->epfd = e->tfd = -1;
    e->wake_ms = INT64_MAX;
    e->rnd = (uint32_t)elector_now_ns() | 1u;
    if (copy_config(e, cfg)) {
        e->init_err = elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
        return e;
    }
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->tfd = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = e->evfd};
    struct epoll_event tev = {.events = EPOLLIN, .data.fd = e->tfd};
    if (e->epfd < 0 || e->evfd < 0 || e->tfd < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &ev) < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->tfd, &tev) < 0) {
        e->init_err =
            elector__set_err(e, ELECTOR_ENOMEM, "cannot create epoll/eventfd/timerfd: %s",
                             strerror(errno));
        return e;
    }
    e->init_err = endpoints_setup(e);
    if (!e->init_err && e->s_password_file) elector__password_refresh(e);
    if (!e->init_err) e->init_err = elector__autosync_start(e);
    return e;
}

/* ---------------------------------------------------------------- timeout */

/* Work that the next pass does at once: replies to deliver, calls to send on a
 * ready connection, a drained connection to leave, bytes queued outside the
 * loop (a message sent on an open stream) for flush() to hand to the socket. */
static bool work_pending(const elector_etcd *e)
{
    return e->ready_head || elector__calls_sendable(e) || elector__conn_drain_due(e) ||
           (!e->want_write && elector__h2_want_write(e));
}

/* When elector__etcd_process() must run next (absolute ms on the deadline clock;
 * INT64_MAX: nothing is due). */
static int64_t next_due(const elector_etcd *e, int64_t now)
{
    return work_pending(e) ? now : elector__timers_next(e);
}

int64_t elector__etcd_timeout(elector_etcd *e)
{
    int64_t now = elector__now_ms();
    e->now_ms = now;
    int64_t t = next_due(e, now);
    elector__wake_at(e, t);
    if (t == INT64_MAX) return -1;
    return t <= now ? 0 : t - now;
}

/* ---------------------------------------------------------------- process */

static void real_free(elector_etcd *e);

static void take_events(elector_etcd *e, struct epoll_event *evs, int nev)
{
    e->readable = e->writable = false;
    for (int i = 0; i < nev; i++) {
        if (evs[i].data.fd == e->evfd) {
            uint64_t v;
            if (read(e->evfd, &v, sizeof(v)) < 0) { /* nothing to do */
            }
            e->ev_posted = false;
        } else if (evs[i].data.fd == e->tfd) {
            uint64_t v;
            if (read(e->tfd, &v, sizeof(v)) < 0) { /* not expired after all */
            }
            e->wake_ms = INT64_MAX; /* fired: re-armed below */
        } else if (evs[i].data.fd == e->fd) {
            e->readable = evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP);
            e->writable = evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP);
        }
    }
}

static int process_events(elector_etcd *e, struct epoll_event *evs, int nev)
{
    e->now_ms = elector__now_ms();
    take_events(e, evs, nev);
    elector__hold(&e->life);
    elector__conn_io(e);
    if (!e->life.closed) conn_news(e);
    elector__dispatch(e);
    if (!e->life.closed) conn_news(e);
    /* After dispatch: completing the last reply or requeueing a refused call
     * there is what makes a draining connection ready to be left. */
    if (!e->life.closed && elector__conn_drain_due(e))
        elector__conn_fail(e, ELECTOR_EUNAVAILABLE, "server is shutting down (GOAWAY)");
    elector__timers_run(e);
    if (!e->life.closed) conn_news(e);
    for (int round = 0; round < 4 && !e->life.closed; round++) {
        /* Callbacks may queue new calls: submit them in this same pass. */
        elector__calls_submit(e);
        if (e->h2) elector__conn_flush(e);
        if (!e->ready_head) break;
        elector__dispatch(e);
        if (!e->life.closed) conn_news(e);
    }
    if (elector__unhold(&e->life)) {
        real_free(e);
        return ELECTOR_ECLOSED;
    }
    if (e->life.closed) return ELECTOR_ECLOSED;
    elector__calls_reap(e);
    elector__conn_rearm(e);
    elector__ping_rearm(e);
    elector__set_interest(e);
    elector__wake_at(e, next_due(e, elector__now_ms()));
    return 0;
}

void elector__etcd_send_now(elector_etcd *e)
{
    if (e->cstate != C_READY || elector__held(&e->life)) return;
    e->now_ms = elector__now_ms();
    elector__hold(&e->life);
    elector__calls_submit(e);
    if (e->h2) elector__conn_flush(e);
    elector__unhold(&e->life);
    elector__set_interest(e);
    elector__ping_rearm(e);
}

int elector__etcd_process(elector_etcd *e)
{
    struct epoll_event evs[4];
    int n = epoll_wait(e->epfd, evs, 4, 0);
    return process_events(e, evs, n < 0 ? 0 : n);
}

int elector__etcd_run_once(elector_etcd *e, int64_t max_ms)
{
    int64_t t = elector__etcd_timeout(e);
    if (max_ms >= 0 && (t < 0 || t > max_ms)) t = max_ms;
    if (t > INT32_MAX) t = INT32_MAX;
    struct epoll_event evs[4];
    int n = epoll_wait(e->epfd, evs, 4, (int)t);
    return process_events(e, evs, n < 0 ? 0 : n);
}

void elector_etcd_wakeup(elector_etcd *e)
{
    uint64_t one = 1;
    if (write(e->evfd, &one, sizeof(one)) < 0) { /* counter full: already awake */
    }
}

/* ---------------------------------------------------------------- free */

static void real_free(elector_etcd *e)
{
    while (e->exts) {
        elector__ext *x = e->exts;
        e->exts = x->next;
        x->free(x);
    }
    elector__conn_close(e);
    elector__calls_free(e);
    elector__endpoints_free(e->eps, e->nep);
    elector__tls_free_ctx(e);
    elector__tls_files_free(e);
    elector__autosync_free(e);
    elector__timer_disarm(e, &e->leave_timer);
    elector__timer_disarm(e, &e->auth_timer);
    if (e->evfd >= 0) close(e->evfd);
    if (e->tfd >= 0) close(e->tfd);
    if (e->epfd >= 0) close(e->epfd);
    free(e->s_endpoints);
    free(e->s_cacert);
    free(e->s_cert);
    free(e->s_key);
    free(e->s_user);
    if (e->s_password) explicit_bzero(e->s_password, strlen(e->s_password));
    free(e->s_password);
    free(e->s_password_file);
    elector__drop_token(e);
    free(e);
}

void elector__etcd_free(elector_etcd *e)
{
    if (!e || e->life.closed) return;
    e->life.closed = true;
    /* Pending calls learn that they will never complete. */
    elector__hold(&e->life);
    for (call *c = e->calls; c; c = c->next)
        if (c->state != CS_DONE && !c->user_closed)
            elector__call_end(c, ELECTOR_ECANCELED, "client freed");
    if (elector__unhold(&e->life)) real_free(e);
}
