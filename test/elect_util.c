/* SPDX-License-Identifier: MIT */
#include "elect_util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testlib.h"

#define MAX_CLIENTS 64
static elector_etcd *clients[MAX_CLIENTS];
static eu_cand *cands[MAX_CLIENTS];

/* Remembers each candidate's latest session deadline while pumping, so a test
 * can compare a LOST event with the deadline that was in force. */
static void note_deadlines(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (cands[i] && cands[i]->s && elector_session_deadline_ns(cands[i]->s))
            cands[i]->deadline_seen = elector_session_deadline_ns(cands[i]->s);
}

void eu_register_client(elector_etcd *e)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (!clients[i]) {
            clients[i] = e;
            return;
        }
    tl_fail(__FILE__, __LINE__, "too many clients");
}

void eu_unregister_client(elector_etcd *e)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (clients[i] == e) clients[i] = NULL;
}

elector_etcd *eu_client(const char *endpoints)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 3000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

void eu_cand_cb(elector_election *el, const elector_event *ev, void *ud)
{
    eu_cand *c = ud;
    if (c->n < EU_MAX_EVENTS) {
        c->types[c->n] = ev->type;
        c->reasons[c->n] = ev->reason;
        c->tokens[c->n] = ev->token;
        c->mono[c->n] = ev->mono_ns;
        c->delivered[c->n] = elector_now_ns();
        c->leader_in_cb[c->n] = elector_is_leader(el);
        c->n++;
    }
    snprintf(c->last_key, sizeof(c->last_key), "%.*s", (int)ev->key_len,
             (const char *)ev->key);
    snprintf(c->last_value, sizeof(c->last_value), "%.*s", (int)ev->value_len,
             (const char *)ev->value);
}

eu_cand *eu_cand_new(const char *endpoints, const char *name, int ttl_s)
{
    return eu_cand_new_client(eu_client(endpoints), name, ttl_s);
}

eu_cand *eu_cand_new_client(elector_etcd *etcd, const char *name, int ttl_s)
{
    eu_cand *c = calloc(1, sizeof(*c));
    ASSERT_NOT_NULL(c);
    c->etcd = etcd;
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = ttl_s;
    c->s = elector_session_new(c->etcd, &sc, NULL, NULL);
    ASSERT_NOT_NULL(c->s);
    int rc = elector_session_wait(c->s, 10000);
    if (rc)
        tl_log("session_wait: %s (%s)", elector_strerror(rc),
               elector_etcd_errstr(c->etcd));
    ASSERT_OK(rc);
    c->el = elector_election_new(c->s, name, eu_cand_cb, c);
    ASSERT_NOT_NULL(c->el);
    eu_register_client(c->etcd);
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (!cands[i]) {
            cands[i] = c;
            break;
        }
    return c;
}

void eu_cand_free(eu_cand *c)
{
    if (!c) return;
    eu_unregister_client(c->etcd);
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (cands[i] == c) cands[i] = NULL;
    elector_election_free(c->el);
    if (c->s) elector_session_close_sync(c->s, 2000);
    elector_etcd_free(c->etcd);
    free(c);
}

bool eu_pump_until(int ms, bool (*pred)(void *), void *arg)
{
    double end = tl_now() + ms / 1000.0;
    for (;;) {
        if (pred && pred(arg)) return true;
        double left = end - tl_now();
        if (left <= 0) return pred ? pred(arg) : false;
        struct pollfd pfd[MAX_CLIENTS];
        elector_etcd *who[MAX_CLIENTS];
        int n = 0;
        int64_t wait = (int64_t)(left * 1000) + 1;
        for (int i = 0; i < MAX_CLIENTS; i++) {
            if (!clients[i]) continue;
            int64_t t = elector_etcd_timeout(clients[i]);
            if (t >= 0 && t < wait) wait = t;
            pfd[n].fd = elector_etcd_fd(clients[i]);
            pfd[n].events = POLLIN;
            who[n++] = clients[i];
        }
        if (wait > 20) wait = 20;
        poll(pfd, (nfds_t)n, (int)wait);
        for (int i = 0; i < n; i++)
            elector_etcd_process(who[i]);
        note_deadlines();
    }
}

void eu_pump(int ms)
{
    eu_pump_until(ms, NULL, NULL);
}

struct wait_arg {
    eu_cand *c;
    int from;
    elector_event_type type;
    int found;
};

static bool has_event(void *p)
{
    struct wait_arg *w = p;
    for (int i = w->from; i < w->c->n; i++)
        if (w->c->types[i] == w->type) {
            w->found = i;
            return true;
        }
    return false;
}

int eu_wait_event(eu_cand *c, int from, elector_event_type type, int ms)
{
    struct wait_arg w = {c, from, type, -1};
    eu_pump_until(ms, has_event, &w);
    return w.found;
}

/* ---------------------------------------------------------------- children */

static int child_fd = -1;
static bool child_was_leader;
static elector_election *child_el;

static void child_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)ud;
    char line[512];
    int n = 0;
    switch (ev->type) {
    case ELECTOR_EV_ELECTED:
        n = snprintf(line, sizeof(line), "elected %lld %lld\n", (long long)ev->token,
                     (long long)ev->mono_ns);
        break;
    case ELECTOR_EV_LOST:
        n = snprintf(line, sizeof(line), "lost %d %lld\nproclaim %d\n", ev->reason,
                     (long long)ev->mono_ns, elector_proclaim(el, "x", 1));
        break;
    case ELECTOR_EV_FAILED:
        n = snprintf(line, sizeof(line), "failed %d %lld\n", ev->reason,
                     (long long)ev->mono_ns);
        break;
    case ELECTOR_EV_WAITING:
        n = snprintf(line, sizeof(line), "waiting %.*s\n", (int)ev->key_len, ev->key);
        break;
    default:
        return;
    }
    if (write(child_fd, line, (size_t)n) < 0) _exit(3);
}

static void child_main(const char *endpoints, const char *name, const char *value,
                       int ttl)
{
    elector_etcd *e = eu_client(endpoints);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = ttl;
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    if (!s || elector_session_wait(s, 10000)) _exit(4);
    child_el = elector_election_new(s, name, child_cb, NULL);
    if (!child_el || elector_campaign(child_el, value, strlen(value))) _exit(5);
    for (;;) {
        /* Report every change of the clock-checked belief, including the one a
         * SIGCONT reveals before any event is processed. */
        bool l = elector_is_leader(child_el);
        if (l != child_was_leader) {
            char line[64];
            int n = snprintf(line, sizeof(line), "leader %d %lld\n", l,
                             (long long)tl_now_ns());
            if (write(child_fd, line, (size_t)n) < 0) _exit(3);
            child_was_leader = l;
        }
        elector_etcd_run_once(e, 5);
    }
}

int eu_child_start(eu_child *ch, const char *endpoints, const char *name,
                   const char *value, int ttl_s)
{
    int p[2];
    if (pipe(p)) return -1;
    memset(ch, 0, sizeof(*ch));
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        child_fd = p[1];
        child_main(endpoints, name, value, ttl_s);
        _exit(0);
    }
    close(p[1]);
    ch->pid = pid;
    ch->fd = p[0];
    return 0;
}

int eu_child_expect(eu_child *ch, const char *prefix, char *line, size_t cap, int ms)
{
    double end = tl_now() + ms / 1000.0;
    for (;;) {
        char *nl;
        while ((nl = memchr(ch->buf, '\n', ch->len))) {
            size_t n = (size_t)(nl - ch->buf);
            if (ch->on_line) {
                *nl = 0;
                ch->on_line(ch->buf);
                *nl = '\n';
            }
            bool match = strncmp(ch->buf, prefix, strlen(prefix)) == 0;
            if (match) snprintf(line, cap, "%.*s", (int)n, ch->buf);
            memmove(ch->buf, nl + 1, ch->len - n - 1);
            ch->len -= n + 1;
            if (match) return 0;
        }
        double left = end - tl_now();
        if (left <= 0) return -1;
        struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
        /* Keep in-process candidates moving while we wait for the child. */
        eu_pump(0);
        if (poll(&pfd, 1, left > 0.02 ? 20 : (int)(left * 1000) + 1) <= 0) continue;
        ssize_t r = read(ch->fd, ch->buf + ch->len, sizeof(ch->buf) - ch->len - 1);
        if (r <= 0) return -1;
        ch->len += (size_t)r;
    }
}

void eu_child_wrap(eu_child *ch, pid_t pid, int fd)
{
    memset(ch, 0, sizeof(*ch));
    ch->pid = pid;
    ch->fd = fd;
}

void eu_child_kill(eu_child *ch)
{
    if (ch->pid > 0) {
        kill(ch->pid, SIGKILL);
        waitpid(ch->pid, NULL, 0);
    }
    if (ch->fd >= 0) close(ch->fd);
    ch->pid = 0;
    ch->fd = -1;
}

int eu_own_new(const elector_etcd_config *cfg, const eu_stall *sc, elector_etcd **out)
{
    elector_etcd_config c;
    if (cfg)
        c = *cfg;
    else
        elector_etcd_config_init(&c);
    c.own_thread = true;
    if (sc) {
        c.stall_ms = sc->stall_ms;
        c.on_stall = sc->on_stall;
        c.stall_ud = sc->ud;
    }
    *out = elector_etcd_new(&c);
    if (!*out) return ELECTOR_ENOMEM;
    int rc = elector_etcd_err(*out);
    if (rc) {
        elector_etcd_free(*out);
        *out = NULL;
    }
    return rc;
}
