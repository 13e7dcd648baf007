/* SPDX-License-Identifier: MIT */
/* Switchover: `elector switchover NAME --to VALUE` (the requester) and the part
 * every elector candidate of run and campaign plays (docs/DESIGN.md,
 * "Switchover").
 *
 * Keys, beside the election's NAME/<lease hex>, under a root of their own: not
 * under NAME/ (so that `etcdctl elect` and etcd's Go client see an ordinary
 * election) nor under any other election's prefix (a name-derived key such as
 * NAME:x would sit in the queue of an election that is a prefix of NAME):
 *   __elector/candidates/NAME/<lease hex>  "this candidate takes switchover
 *                             requests": put by each elector candidate with its
 *                             session's lease
 *   __elector/switchover/NAME  the request: "<create revision> <key>" of the
 *                             target, put by the requester with its own lease
 * A candidate whose key was created before the target's steps back: if it
 * waits, it leaves the queue and campaigns again (to the back); if it leads, it
 * waits until the target is next in line and then steps down as on any loss
 * (run: the command's tree is gone before the key is deleted). The successor is
 * elected by the usual protocol. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/app.h"
#include "text/output.h"

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

static char *cat(const char *a, const char *b)
{
    char *s;
    return asprintf(&s, "%s%s", a, b) < 0 ? NULL : s;
}

static char *request_key(const char *name)
{
    return cat("__elector/switchover/", name);
}

static char *member_prefix(const char *name)
{
    char *s;
    return asprintf(&s, "__elector/candidates/%s/", name) < 0 ? NULL : s;
}

/* What an etcd user needs for switchover, for messages about EPERM: the
 * candidates' and the requester's needs are the same two grants. */
static void perm_hint(char *buf, size_t cap, const struct app *a)
{
    const char *n = a->o->name;
    snprintf(buf, cap,
             "the etcd user '%s' needs readwrite on the prefix __elector/candidates/%s/ "
             "and on the key __elector/switchover/%s (etcdctl role grant-permission "
             "ROLE readwrite --prefix=true __elector/candidates/%s/; etcdctl role "
             "grant-permission ROLE readwrite __elector/switchover/%s)",
             a->creds.user ? a->creds.user : "", n, n, n, n);
}

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
        sw->watch_failed = true; /* app_sw_process replaces it */
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
            perm_hint(hint, sizeof(hint), sw->a);
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
        if (err == ELECTOR_EPERM) perm_hint(hint, sizeof(hint), sw->a);
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
    uint8_t end[1024];
    size_t nl = strlen(sw->a->o->name);
    char *prefix = cat(sw->a->o->name, "/");
    if (!prefix || nl + 1 > sizeof(end)) {
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
    free(prefix);
}

/* What a candidate does about an active request. */
static void step_back(struct app_sw *sw)
{
    struct app *a = sw->a;
    if (!sw->active || !a->el || a->stopping || a->health_out || a->sd_state) return;
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
    if (!elector_is_leader(a->el) || (app_supervised(a) && !a->child)) return;
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
    sw->req_key = request_key(a->o->name);
    sw->member_prefix = member_prefix(a->o->name);
    if (!sw->req_key || !sw->member_prefix) {
        free(sw->req_key);
        free(sw->member_prefix);
        free(sw);
        return;
    }
    a->sw = sw;
    start_watch(sw);
}

void app_sw_process(struct app *a)
{
    struct app_sw *sw = a->sw;
    if (!sw) return;
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

int64_t app_sw_timeout(const struct app *a)
{
    const struct app_sw *sw = a->sw;
    if (!sw) return -1;
    if (sw->active) return 100;
    return sw->w ? 1000 : 200;
}

void app_sw_free(struct app *a)
{
    struct app_sw *sw = a->sw;
    if (!sw) return;
    sw->closing = true;
    if (sw->w) elector_watch_cancel(sw->w);
    sw->w = NULL;
    /* The struct stays until the client is freed: a call may still answer. */
}

void app_sw_release(struct app *a)
{
    struct app_sw *sw = a->sw;
    if (!sw) return;
    free(sw->req_key);
    free(sw->member_prefix);
    free(sw->target_key);
    free(sw);
    a->sw = NULL;
}

/* ================================================================ the requester */

static int range_prefix(struct app *a, const char *prefix, bool sorted,
                        Etcdserverpb__RangeResponse **out)
{
    size_t n = strlen(prefix);
    uint8_t *end = malloc(n ? n : 1);
    if (!end) return ELECTOR_ENOMEM;
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key.data = (uint8_t *)prefix;
    rr.key.len = n;
    rr.range_end.data = end;
    rr.range_end.len = elector_prefix_end((const uint8_t *)prefix, n, end);
    if (sorted) {
        rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
        rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    }
    elector_call_opts co = {.timeout_ms = app_request_ms(a->o)};
    int rc = elector_etcd_call_sync(a->etcd, ELECTOR_RPC_RANGE, &rr.base, &co,
                                    (ProtobufCMessage **)out);
    free(end);
    return rc;
}

static int range_key(struct app *a, const uint8_t *key, size_t klen,
                     Etcdserverpb__RangeResponse **out)
{
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key.data = (uint8_t *)key;
    rr.key.len = klen;
    elector_call_opts co = {.timeout_ms = app_request_ms(a->o)};
    return elector_etcd_call_sync(a->etcd, ELECTOR_RPC_RANGE, &rr.base, &co,
                                  (ProtobufCMessage **)out);
}

static void free_msg(void *m)
{
    if (m) protobuf_c_message_free_unpacked(m, NULL);
}

static bool kv_value_is(const Mvccpb__KeyValue *kv, const char *v)
{
    return kv->value.len == strlen(v) && !memcmp(kv->value.data, v, kv->value.len);
}

static int etcd_error(struct app *a, int rc, const char *what)
{
    app_fatal_etcd(a, rc, what);
    return EXIT_ERROR;
}

/* An error on a key under __elector/: a refusal names the grants switchover
 * needs (app_hint's names only the election's prefix). */
static int sw_etcd_error(struct app *a, int rc, const char *what)
{
    if (rc != ELECTOR_EPERM || !a->creds.user) return etcd_error(a, rc, what);
    char hint[640];
    perm_hint(hint, sizeof(hint), a);
    const char *detail = elector_etcd_errstr(a->etcd);
    tool_log(LOG_ERROR, "%s: %s; %s", what, *detail ? detail : elector_strerror(rc),
             hint);
    a->exit_code = EXIT_ERROR;
    a->done = true;
    return EXIT_ERROR;
}

/* The new leader, on stdout as `leader` prints it. */
static void print_leader(struct app *a, const Mvccpb__KeyValue *kv)
{
    if (a->o->fmt == FMT_JSON) {
        int64_t mono = app_mono_ns();
        tool_event_out e = {.event = "leader",
                            .name = a->o->name,
                            .key = kv->key.data,
                            .key_len = kv->key.len,
                            .value = kv->value.len ? kv->value.data : (const uint8_t *)"",
                            .value_len = kv->value.len,
                            .token = kv->create_revision,
                            .lease = kv->lease,
                            .mono_ns = mono,
                            .unix_ms = tool_wall_ms()};
        char *line = tool_event_json(&e);
        if (line) tool_write_line(stdout, line);
        free(line);
    } else {
        tool_write_kv(stdout, a->stdout_tty, a->o->hex, kv->key.data, kv->key.len,
                      kv->value.data, kv->value.len);
    }
}

/* Every candidate ahead of the target must take requests (an elector
 * candidate's member key): returns 0, or EXIT_REFUSED naming the first that
 * does not, or EXIT_ERROR. */
static int check_ahead(struct app *a, const Etcdserverpb__RangeResponse *c, size_t ti)
{
    char *mp = member_prefix(a->o->name);
    Etcdserverpb__RangeResponse *m = NULL;
    int rc = mp ? range_prefix(a, mp, false, &m) : ELECTOR_ENOMEM;
    if (rc) {
        char what[512];
        snprintf(what, sizeof(what), "switchover: cannot read the candidates (%s)",
                 mp ? mp : "");
        free(mp);
        return sw_etcd_error(a, rc, what);
    }
    int out = 0;
    for (size_t i = 0; i < ti && !out; i++) {
        char want[64];
        snprintf(want, sizeof(want), "%" PRIx64, (uint64_t)c->kvs[i]->lease);
        bool found = false;
        for (size_t j = 0; j < m->n_kvs && !found; j++) {
            size_t pl = strlen(mp);
            found = m->kvs[j]->key.len == pl + strlen(want) &&
                    !memcmp(m->kvs[j]->key.data + pl, want, strlen(want)) &&
                    m->kvs[j]->lease == c->kvs[i]->lease;
        }
        if (!found) {
            tool_log(
                LOG_ERROR,
                "switchover: %.*s (lease %s) is ahead of the target and takes no "
                "switchover requests (no key %s%s): it is not an elector candidate "
                "(`etcdctl elect` or another client), or its etcd user may not write "
                "%s or read __elector/switchover/%s (it logs a warning saying so); it "
                "cannot be asked to step back: stop it first",
                (int)c->kvs[i]->key.len, (const char *)c->kvs[i]->key.data, want, mp,
                want, mp, a->o->name);
            out = EXIT_REFUSED;
        }
    }
    free_msg(m);
    free(mp);
    return out;
}

/* Puts the request if there is none; EXIT_REFUSED if another one is there. */
static int put_request(struct app *a, const char *rk, const Mvccpb__KeyValue *t,
                       int64_t lease)
{
    char *val;
    if (asprintf(&val, "%" PRId64 " %.*s", t->create_revision, (int)t->key.len,
                 (const char *)t->key.data) < 0)
        return etcd_error(a, ELECTOR_ENOMEM, "switchover");
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.key.data = (uint8_t *)rk;
    cmp.key.len = strlen(rk);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.create_revision = 0;
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key = cmp.key;
    put.value.data = (uint8_t *)val;
    put.value.len = strlen(val);
    put.lease = lease;
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op.request_put = &put;
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key = cmp.key;
    Etcdserverpb__RequestOp fop = ETCDSERVERPB__REQUEST_OP__INIT;
    fop.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    fop.request_range = &rr;
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__RequestOp *succ[] = {&op}, *fail[] = {&fop};
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_compare = 1;
    txn.compare = cmps;
    txn.n_success = 1;
    txn.success = succ;
    txn.n_failure = 1;
    txn.failure = fail;
    elector_call_opts co = {.timeout_ms = app_request_ms(a->o)};
    Etcdserverpb__TxnResponse *r = NULL;
    int rc = elector_etcd_call_sync(a->etcd, ELECTOR_RPC_TXN, &txn.base, &co,
                                    (ProtobufCMessage **)&r);
    free(val);
    if (rc) {
        char what[512];
        snprintf(what, sizeof(what), "switchover: cannot write the request %s", rk);
        return sw_etcd_error(a, rc, what);
    }
    int out = 0;
    if (!r->succeeded) {
        const Etcdserverpb__RangeResponse *o =
            r->n_responses ? r->responses[0]->response_range : NULL;
        tool_log(LOG_ERROR,
                 "switchover: another switchover of %s is under way (%s holds '%.*s'); "
                 "try again when it is over",
                 a->o->name, rk, o && o->n_kvs ? (int)o->kvs[0]->value.len : 0,
                 o && o->n_kvs ? (const char *)o->kvs[0]->value.data : "");
        out = EXIT_REFUSED;
    }
    free_msg(r);
    return out;
}

/* What the requester has seen of the target. */
struct seen {
    bool member;       /* the target has a member key: it can acknowledge */
    int64_t handed_ms; /* when its key was first seen first (0: not yet) */
    char next[256];    /* who is next in line, as last seen */
};

/* The member key of the candidate whose key kv is: its value, or NULL when
 * there is none; *rc an error. */
static Etcdserverpb__RangeResponse *member_of(struct app *a, const Mvccpb__KeyValue *kv,
                                              int *rc)
{
    char *mk;
    Etcdserverpb__RangeResponse *m = NULL;
    if (asprintf(&mk, "__elector/candidates/%s/%" PRIx64, a->o->name,
                 (uint64_t)kv->lease) < 0) {
        *rc = ELECTOR_ENOMEM;
        return NULL;
    }
    *rc = range_key(a, (const uint8_t *)mk, strlen(mk), &m);
    free(mk);
    return m;
}

/* "v3 (NAME/694d...)", or "nobody" */
static void describe_kv(char *buf, size_t cap, const Mvccpb__KeyValue *kv)
{
    if (!kv) {
        snprintf(buf, cap, "nobody");
        return;
    }
    snprintf(buf, cap, "%.*s (%.*s)", (int)(kv->value.len < 64 ? kv->value.len : 64),
             (const char *)kv->value.data, (int)kv->key.len, (const char *)kv->key.data);
}

/* One look: 0 done (the target leads and confirmed it), 1 not yet, or an exit
 * status. */
static int look(struct app *a, const Mvccpb__KeyValue *t, struct seen *sn)
{
    char *prefix = cat(a->o->name, "/");
    Etcdserverpb__RangeResponse *c = NULL, *tk = NULL, *m = NULL;
    int rc = prefix ? range_prefix(a, prefix, true, &c) : ELECTOR_ENOMEM;
    free(prefix);
    if (!rc) rc = range_key(a, t->key.data, t->key.len, &tk);
    bool first = !rc && c->n_kvs && c->kvs[0]->create_revision == t->create_revision;
    if (first && sn->member) m = member_of(a, t, &rc);
    int out = 1;
    if (rc) {
        tool_log(LOG_WARN, "switchover: cannot read the election (%s); trying again",
                 elector_strerror(rc));
    } else if (!tk->n_kvs || tk->kvs[0]->create_revision != t->create_revision) {
        if (sn->handed_ms) {
            describe_kv(sn->next, sizeof(sn->next), c->n_kvs ? c->kvs[0] : NULL);
            tool_log(
                LOG_ERROR,
                "switchover: handed over; %s did not take over within %.1f s (its "
                "key is gone: its lease ended or it resigned); the next in line is %s",
                a->o->to, (double)(app_now_ms() - sn->handed_ms) / 1000, sn->next);
            out = EXIT_UNCONFIRMED;
        } else {
            tool_log(LOG_ERROR, "switchover: the target %.*s left the election",
                     (int)t->key.len, (const char *)t->key.data);
            out = EXIT_REFUSED;
        }
    } else if (first) {
        if (!sn->handed_ms) {
            sn->handed_ms = app_now_ms();
            tool_log(LOG_INFO,
                     "switchover: %.*s is first in line; waiting for it to confirm",
                     (int)t->key.len, (const char *)t->key.data);
        }
        describe_kv(sn->next, sizeof(sn->next), c->n_kvs > 1 ? c->kvs[1] : NULL);
        char want[40];
        snprintf(want, sizeof(want), "leads %" PRId64, t->create_revision);
        if (!sn->member) {
            tool_log(
                LOG_ERROR,
                "switchover: handed over; %.*s's key is first, but it takes no "
                "switchover requests (no key under __elector/candidates/%s/), so its "
                "taking over cannot be confirmed; the next in line is %s",
                (int)t->key.len, (const char *)t->key.data, a->o->name, sn->next);
            out = EXIT_UNCONFIRMED;
        } else if (m && m->n_kvs && kv_value_is(m->kvs[0], want)) {
            tool_log(LOG_INFO, "switchover: %.*s leads %s (token %lld), confirmed",
                     (int)t->key.len, (const char *)t->key.data, a->o->name,
                     (long long)t->create_revision);
            print_leader(a, c->kvs[0]);
            out = 0;
        }
    }
    free_msg(c);
    free_msg(tk);
    free_msg(m);
    return out;
}

static bool interrupted(void)
{
    sigset_t set;
    tool_stop_signals(&set, false);
    struct timespec zero = {0, 0};
    int sig = sigtimedwait(&set, NULL, &zero);
    if (sig <= 0) return false;
    tool_log(LOG_WARN, "switchover: %s received: withdrawing the request",
             strsignal(sig));
    return true;
}

/* After the request is out: waits for the target to lead and confirm it. */
static int await(struct app *a, const Mvccpb__KeyValue *t, int64_t deadline_ms,
                 struct seen *sn)
{
    for (;;) {
        int rc = look(a, t, sn);
        if (rc != 1) return rc;
        if (interrupted()) return EXIT_ERROR;
        if (a->s && !elector_session_alive(a->s)) {
            tool_log(LOG_ERROR, "switchover: the request's lease was lost");
            return EXIT_ERROR;
        }
        if (app_now_ms() >= deadline_ms && sn->handed_ms) {
            tool_log(
                LOG_ERROR,
                "switchover: handed over; %s did not take over within %.1f s (its key "
                "is first, but its process has not confirmed: stopped, or cut off "
                "from etcd?); the next in line is %s",
                a->o->to, (double)(app_now_ms() - sn->handed_ms) / 1000, sn->next);
            return EXIT_UNCONFIRMED;
        }
        if (app_now_ms() >= deadline_ms) {
            tool_log(LOG_ERROR,
                     "switchover: %.*s does not lead after %lld ms; request withdrawn "
                     "(candidates that stepped back stay where they are now)",
                     (int)t->key.len, (const char *)t->key.data,
                     (long long)(a->o->timeout_ms ? a->o->timeout_ms : 60000));
            return EXIT_TIMEOUT;
        }
        elector_etcd_run_once(a->etcd, 100);
    }
}

/* The request under a lease of its own: put, waited on, withdrawn (the lease
 * revoked: the request key goes with it) in every outcome. */
static int request(struct app *a, const Mvccpb__KeyValue *t, int64_t deadline_ms)
{
    char *rk = request_key(a->o->name);
    if (!rk) return etcd_error(a, ELECTOR_ENOMEM, "switchover");
    elector_session_config sc;
    elector_session_config_init(&sc);
    if (a->o->ttl_s) sc.ttl_s = a->o->ttl_s;
    a->s = elector_session_new(a->etcd, &sc, NULL, NULL);
    int rc = a->s ? elector_session_wait(a->s, app_dial_ms(a->o) + app_request_ms(a->o))
                  : ELECTOR_ENOMEM;
    int out;
    if (rc)
        out = etcd_error(a, rc, "switchover: cannot grant a lease");
    else
        out = put_request(a, rk, t, elector_session_lease(a->s));
    struct seen sn = {0};
    if (!out) {
        int mrc;
        Etcdserverpb__RangeResponse *m = member_of(a, t, &mrc);
        sn.member = mrc || m->n_kvs; /* unread: assume it can, and wait */
        free_msg(m);
        if (!sn.member)
            tool_log(
                LOG_WARN,
                "switchover: the target %.*s takes no switchover requests (no key "
                "under __elector/candidates/%s/): it cannot confirm that it took over",
                (int)t->key.len, (const char *)t->key.data, a->o->name);
        tool_log(LOG_INFO, "switchover: asking the candidates ahead of %.*s to step back",
                 (int)t->key.len, (const char *)t->key.data);
        out = await(a, t, deadline_ms, &sn);
    }
    if (a->s) {
        int crc = elector_session_close_sync(a->s, app_request_ms(a->o));
        if (crc && crc != ELECTOR_ELEASE)
            tool_log(LOG_WARN,
                     "switchover: the request %s could not be withdrawn (%s); it ends "
                     "with its lease's TTL",
                     rk, elector_strerror(crc));
        a->s = NULL;
    }
    free(rk);
    return out;
}

int app_cmd_switchover(struct app *a)
{
    sigset_t set;
    tool_stop_signals(&set, false);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int64_t deadline = app_now_ms() + (a->o->timeout_ms ? a->o->timeout_ms : 60000);
    char *prefix = cat(a->o->name, "/");
    Etcdserverpb__RangeResponse *c = NULL;
    int rc = prefix ? range_prefix(a, prefix, true, &c) : ELECTOR_ENOMEM;
    free(prefix);
    if (rc) return etcd_error(a, rc, "switchover: cannot read the election");
    size_t ti = SIZE_MAX, matches = 0;
    for (size_t i = 0; i < c->n_kvs; i++) {
        if (!kv_value_is(c->kvs[i], a->o->to)) continue;
        if (ti == SIZE_MAX) ti = i;
        matches++;
    }
    int out;
    if (ti == 0) {
        tool_log(LOG_INFO, "switchover: %s already leads %s", a->o->to, a->o->name);
        print_leader(a, c->kvs[0]);
        out = EXIT_OK;
    } else if (!matches) {
        tool_log(LOG_ERROR,
                 "switchover: no candidate of %s has the value '%s' (%zu candidates; "
                 "`elector observe` or `etcdctl get --prefix %s/` lists them)",
                 a->o->name, a->o->to, c->n_kvs, a->o->name);
        out = EXIT_REFUSED;
    } else if (matches > 1) {
        tool_log(LOG_ERROR,
                 "switchover: %zu candidates of %s have the value '%s': give each "
                 "candidate a value of its own (--value)",
                 matches, a->o->name, a->o->to);
        out = EXIT_REFUSED;
    } else {
        out = check_ahead(a, c, ti);
        if (!out) out = request(a, c->kvs[ti], deadline);
    }
    free_msg(c);
    return out;
}
