/* SPDX-License-Identifier: MIT */
/* Switchover, the candidates' side: every elector candidate of run and campaign
 * takes requests (its member key), watches the request key, and steps back when
 * a request names a key created after its own (see switchover.h). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/app.h"
#include "text/output.h"
#include "switchover/switchover.h"

struct app_sw {
    struct app *a;
    char *req_key;       /* __elector/switchover/NAME */
    char *member_prefix; /* __elector/candidates/NAME/ */
    elector_watch *w;
    bool reading, closing, watch_failed;
    int64_t rewatch_at_ms;
    int64_t member_lease; /* the lease whose member key is in etcd */
    bool member_putting, warned, read_warned;
    bool request_readable; /* the request key was read: requests reach us */
    int64_t member_retry_ms;
    /* The request as last seen. */
    bool active;
    int64_t target_rev;
    uint8_t *target_key;
    size_t target_klen;
    bool checking;
    int64_t next_check_ms;
    /* The target's acknowledgement: "leads <token>" in its member key. */
    bool acking;
    int64_t acked_rev, ack_retry_ms;
};

/* Parses a request's value "<rev> <key>" into the state; false if malformed. */
static bool parse_request(struct app_sw *sw, const uint8_t *v, size_t n)
{
    free(sw->target_key);
    sw->target_key = NULL;
    sw->active = false;
    int64_t rev = 0;
    size_t i = 0;
    while (i < n && v[i] >= '0' && v[i] <= '9' && rev < INT64_MAX / 10)
        rev = rev * 10 + (v[i++] - '0');
    if (!rev || i >= n || v[i] != ' ') return false;
    i++;
    sw->target_key = malloc(n - i + 1);
    if (!sw->target_key) return false;
    memcpy(sw->target_key, v + i, n - i);
    sw->target_klen = n - i;
    sw->target_rev = rev;
    sw->active = true;
    tool_log(LOG_INFO, "switchover requested: to %.*s (token %lld)", (int)sw->target_klen,
             (const char *)sw->target_key, (long long)rev);
    return true;
}

static void clear_request(struct app_sw *sw)
{
    if (sw->active) tool_log(LOG_DEBUG, "switchover request withdrawn");
    sw->active = false;
}

/* ---------------------------------------------------------------- the watch */

static void on_watch(elector_watch *w, int err, const Etcdserverpb__WatchResponse *resp,
                     void *ud)
{
    (void)w;
    struct app_sw *sw = ud;
    if (sw->closing) return;
    if (err) {
        /* Ended (compacted, stream broken): read again and watch anew. */
        sw->rewatch_at_ms = app_now_ms() + 1000;
        sw->watch_failed = true; /* sw_process replaces it */
        return;
    }
    for (size_t i = 0; resp && i < resp->n_events; i++) {
        const Mvccpb__Event *ev = resp->events[i];
        if (!ev->kv) continue;
        if (ev->type == MVCCPB__EVENT__EVENT_TYPE__PUT)
            parse_request(sw, ev->kv->value.data, ev->kv->value.len);
        else
            clear_request(sw);
    }
}

static void on_read(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct app_sw *sw = ud;
    if (sw->closing) return;
    sw->reading = false;
    if (err) {
        /* Not permitted: seldom; anything else (etcd away): soon. Until it can
         * read the request, the candidate does not say it takes requests (no
         * member key): a requester refuses at once instead of waiting for a
         * step back that cannot come. */
        sw->rewatch_at_ms = app_now_ms() + (err == ELECTOR_EPERM ? 60000 : 1000);
        if (err == ELECTOR_EPERM && !sw->read_warned) {
            char hint[640];
            sw_perm_hint(hint, sizeof(hint), sw->a->creds.user, sw->a->o->name);
            tool_log(LOG_WARN,
                     "cannot read %s: %s; `elector switchover` cannot ask this candidate "
                     "to step back (leadership is not affected); %s; retrying every "
                     "minute",
                     sw->req_key,
                     *elector_etcd_errstr(e) ? elector_etcd_errstr(e)
                                             : elector_strerror(err),
                     hint);
            sw->read_warned = true;
        }
        return;
    }
    sw->request_readable = true;
    const Etcdserverpb__RangeResponse *r = (const void *)m;
    if (r->n_kvs)
        parse_request(sw, r->kvs[0]->value.data, r->kvs[0]->value.len);
    else
        clear_request(sw);
    Etcdserverpb__WatchCreateRequest wc = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    wc.key.data = (uint8_t *)sw->req_key;
    wc.key.len = strlen(sw->req_key);
    wc.start_revision = r->header ? r->header->revision + 1 : 0;
    sw->w = elector_etcd_watch(e, &wc, on_watch, sw);
    if (!sw->w) sw->rewatch_at_ms = app_now_ms() + 1000;
}

static void start_watch(struct app_sw *sw)
{
    if (sw->w) elector_watch_cancel(sw->w);
    sw->w = NULL;
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key.data = (uint8_t *)sw->req_key;
    rr.key.len = strlen(sw->req_key);
    if (elector_etcd_call(sw->a->etcd, ELECTOR_RPC_RANGE, &rr.base, NULL, on_read, sw) ==
        0)
        sw->reading = true;
    else
        sw->rewatch_at_ms = app_now_ms() + 1000;
}

/* ---------------------------------------------------------------- membership */

static void on_member_put(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m;
    struct app_sw *sw = ud;
    if (sw->closing) return;
    sw->member_putting = false;
    if (!err) return;
    sw->member_lease = 0;
    /* Not permitted: seldom; anything else (etcd away): soon. */
    sw->member_retry_ms = app_now_ms() + (err == ELECTOR_EPERM ? 60000 : 2000);
    if (!sw->warned) {
        char hint[640] = "";
        if (err == ELECTOR_EPERM)
            sw_perm_hint(hint, sizeof(hint), sw->a->creds.user, sw->a->o->name);
        tool_log(LOG_WARN,
                 "cannot write %s...: %s; `elector switchover` cannot ask this "
                 "candidate to step back (leadership is not affected)%s%s; retrying%s",
                 sw->member_prefix,
                 *elector_etcd_errstr(e) ? elector_etcd_errstr(e) : elector_strerror(err),
                 *hint ? "; " : "", hint, err == ELECTOR_EPERM ? " every minute" : "");
    }
    sw->warned = true;
}

static void put_member(struct app_sw *sw, int64_t lease)
{
    char *key;
    if (asprintf(&key, "%s%" PRIx64, sw->member_prefix, (uint64_t)lease) < 0) return;
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.lease = lease;
    if (elector_etcd_call(sw->a->etcd, ELECTOR_RPC_PUT, &p.base, NULL, on_member_put,
                          sw) == 0) {
        sw->member_lease = lease;
        sw->member_putting = true;
    }
    free(key);
}

/* ---------------------------------------------------------------- stepping back */

static void on_check(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    struct app_sw *sw = ud;
    if (sw->closing) return;
    sw->checking = false;
    struct app *a = sw->a;
    if (err || !sw->active || !a->el || !elector_is_leader(a->el)) return;
    const Etcdserverpb__RangeResponse *r = (const void *)m;
    size_t kl;
    const uint8_t *k = elector_election_key(a->el, &kl);
    /* We lead (first) and the target is next: step down now. */
    if (r->n_kvs >= 2 && r->kvs[0]->key.len == kl &&
        !memcmp(r->kvs[0]->key.data, k, kl) &&
        r->kvs[1]->create_revision == sw->target_rev)
        app_step_down(a, "switchover: the target is next in line");
}

static void leader_check(struct app_sw *sw)
{
    size_t nl = strlen(sw->a->o->name);
    char *prefix = sw_cat(sw->a->o->name, "/");
    /* As long as the prefix: a NAME may be longer than any fixed buffer. */
    uint8_t *end = prefix ? malloc(nl + 1) : NULL;
    if (!end) {
        free(prefix);
        return;
    }
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key.data = (uint8_t *)prefix;
    rr.key.len = nl + 1;
    rr.range_end.data = end;
    rr.range_end.len = elector_prefix_end((const uint8_t *)prefix, nl + 1, end);
    rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    rr.limit = 2;
    rr.keys_only = true;
    if (elector_etcd_call(sw->a->etcd, ELECTOR_RPC_RANGE, &rr.base, NULL, on_check, sw) ==
        0)
        sw->checking = true;
    free(end);
    free(prefix);
}

/* What a candidate does about an active request. */
static void step_back(struct app_sw *sw)
{
    struct app *a = sw->a;
    if (!sw->active || !a->el || a->stopping || a->hc.health_out || a->sd_state) return;
    int64_t tok = elector_election_token(a->el);
    size_t kl;
    const uint8_t *k = elector_election_key(a->el, &kl);
    if (!tok || tok >= sw->target_rev) return; /* behind the target, or it */
    if (kl == sw->target_klen && !memcmp(k, sw->target_key, kl)) return;
    if (!elector_is_leader(a->el)) {
        app_step_down(a, "switchover: stepping back behind the target");
        return;
    }
    int64_t now = app_now_ms();
    if (sw->checking || now < sw->next_check_ms) return;
    sw->next_check_ms = now + 200;
    leader_check(sw);
}

/* The target, once it leads (run: its command started), says so in its member
 * key's value, "leads <token>": the requester's proof that the target's
 * process, not only its key, took over. */
static void on_ack(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    (void)m;
    struct app_sw *sw = ud;
    if (sw->closing) return;
    sw->acking = false;
    if (err) {
        sw->acked_rev = 0;
        sw->ack_retry_ms = app_now_ms() + 200;
        tool_log(LOG_WARN, "switchover: cannot acknowledge leading (%s); retrying",
                 elector_strerror(err));
    }
}

static void acknowledge(struct app_sw *sw)
{
    struct app *a = sw->a;
    if (!sw->active || sw->acking || !a->el || a->stopping || a->sd_state) return;
    if (!elector_is_leader(a->el) || (app_supervised(a->o) && !a->sup.child)) return;
    int64_t tok = elector_election_token(a->el);
    size_t kl;
    const uint8_t *k = elector_election_key(a->el, &kl);
    if (tok != sw->target_rev || sw->acked_rev == tok || kl != sw->target_klen ||
        memcmp(k, sw->target_key, kl) || app_now_ms() < sw->ack_retry_ms)
        return;
    int64_t lease = elector_session_lease(a->s);
    if (!lease || lease != sw->member_lease || sw->member_putting) return;
    char *key, *val;
    if (asprintf(&key, "%s%" PRIx64, sw->member_prefix, (uint64_t)lease) < 0) return;
    if (asprintf(&val, "leads %" PRId64, tok) < 0) {
        free(key);
        return;
    }
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.value.data = (uint8_t *)val;
    p.value.len = strlen(val);
    p.lease = lease;
    if (elector_etcd_call(a->etcd, ELECTOR_RPC_PUT, &p.base, NULL, on_ack, sw) == 0) {
        sw->acking = true;
        sw->acked_rev = tok;
        tool_log(LOG_INFO, "switchover: leading as requested; acknowledged in %s", key);
    }
    free(key);
    free(val);
}

void app_sw_start(struct app *a)
{
    struct app_sw *sw = calloc(1, sizeof(*sw));
    if (!sw) return;
    sw->a = a;
    sw->req_key = sw_request_key(a->o->name);
    sw->member_prefix = sw_member_prefix(a->o->name);
    if (!sw->req_key || !sw->member_prefix) {
        free(sw->req_key);
        free(sw->member_prefix);
        free(sw);
        return;
    }
    a->sw = sw;
    start_watch(sw);
}

static void sw_process(void *ud, short revents)
{
    (void)revents;
    struct app_sw *sw = ud;
    if (!sw) return;
    const struct app *a = sw->a;
    int64_t now = app_now_ms();
    if (sw->watch_failed && now >= sw->rewatch_at_ms) {
        sw->watch_failed = false; /* read and watch again */
        start_watch(sw);
    } else if (!sw->w && !sw->reading && !sw->watch_failed && now >= sw->rewatch_at_ms) {
        start_watch(sw);
    }
    int64_t lease = a->s && elector_session_alive(a->s) ? elector_session_lease(a->s) : 0;
    if (lease && lease != sw->member_lease && !sw->member_putting &&
        sw->request_readable && now >= sw->member_retry_ms)
        put_member(sw, lease);
    step_back(sw);
    acknowledge(sw);
}

static int64_t sw_timeout(void *ud)
{
    const struct app_sw *sw = ud;
    if (!sw) return -1;
    if (sw->active) return 100;
    return sw->w ? 1000 : 200;
}

tool_watcher app_sw_watcher(struct app_sw *sw)
{
    return (tool_watcher){sw, NULL, sw_timeout, sw_process};
}

void app_sw_free(struct app_sw *sw)
{
    if (!sw) return;
    sw->closing = true;
    if (sw->w) elector_watch_cancel(sw->w);
    sw->w = NULL;
    /* The struct stays until the client is freed: a call may still answer. */
}

void app_sw_release(struct app_sw *sw)
{
    if (!sw) return;
    free(sw->req_key);
    free(sw->member_prefix);
    free(sw->target_key);
    free(sw);
}
