/* SPDX-License-Identifier: MIT */
/* Switchover, the requester: `elector switchover NAME --to VALUE` (see
 * switchover.h). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/app.h"
#include "text/output.h"
#include "switchover/switchover.h"

/* The requester's reads, each within ms (app_request_ms). */
static int range_prefix(elector_etcd *e, int64_t ms, const char *prefix, bool sorted,
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
    elector_call_opts co = {.timeout_ms = ms};
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &rr.base, &co,
                                    (ProtobufCMessage **)out);
    free(end);
    return rc;
}

static int range_key(elector_etcd *e, int64_t ms, const uint8_t *key, size_t klen,
                     Etcdserverpb__RangeResponse **out)
{
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key.data = (uint8_t *)key;
    rr.key.len = klen;
    elector_call_opts co = {.timeout_ms = ms};
    return elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &rr.base, &co,
                                  (ProtobufCMessage **)out);
}

static void free_msg(void *m)
{
    if (m) protobuf_c_message_free_unpacked(m, NULL);
}

/* The target as a message names it: --to '' (a lock holder) is not a blank. */
static const char *target_said(const char *to)
{
    return *to ? to : "the candidate with the empty value";
}

static bool kv_value_is(const Mvccpb__KeyValue *kv, const char *v)
{
    /* An empty value comes without data (NULL): no memcmp on it. */
    return kv->value.len == strlen(v) &&
           (!kv->value.len || !memcmp(kv->value.data, v, kv->value.len));
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
    sw_perm_hint(hint, sizeof(hint), a->creds.user, a->o->name);
    const char *detail = elector_etcd_errstr(a->etcd);
    tool_log(LOG_ERROR, "%s: %s; %s", what, *detail ? detail : elector_strerror(rc),
             hint);
    a->exit_code = EXIT_ERROR;
    a->done = true;
    return EXIT_ERROR;
}

/* The new leader, on stdout as `leader` prints it. */
static void print_leader(const tool_opts *o, bool tty, const Mvccpb__KeyValue *kv)
{
    if (o->fmt == FMT_JSON) {
        int64_t mono = app_mono_ns();
        tool_event_out e = {.event = "leader",
                            .name = o->name,
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
        tool_write_kv(stdout, tty, o->hex, kv->key.data, kv->key.len, kv->value.data,
                      kv->value.len);
    }
}

/* Every candidate ahead of the target must take requests (an elector
 * candidate's member key): returns 0, or EXIT_REFUSED naming the first that
 * does not, or EXIT_ERROR. */
static int check_ahead(struct app *a, const Etcdserverpb__RangeResponse *c, size_t ti)
{
    char *mp = sw_member_prefix(a->o->name);
    Etcdserverpb__RangeResponse *m = NULL;
    int rc =
        mp ? range_prefix(a->etcd, app_request_ms(a->o), mp, false, &m) : ELECTOR_ENOMEM;
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
/* Another request is there (the request key rk as read, o): refused, left
 * alone. EXIT_REFUSED when o holds it, else 0. */
static int under_way(const char *name, const char *rk,
                     const Etcdserverpb__RangeResponse *o)
{
    if (!o || !o->n_kvs) return 0;
    tool_log(LOG_ERROR,
             "switchover: another switchover of %s is under way (%s holds '%.*s'); try "
             "again when it is over",
             name, rk, (int)o->kvs[0]->value.len, (const char *)o->kvs[0]->value.data);
    return EXIT_REFUSED;
}

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
    int out = r->succeeded
                  ? 0
                  : under_way(a->o->name, rk,
                              r->n_responses ? r->responses[0]->response_range : NULL);
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
static Etcdserverpb__RangeResponse *member_of(elector_etcd *e, const tool_opts *o,
                                              const Mvccpb__KeyValue *kv, int *rc)
{
    char *mk;
    Etcdserverpb__RangeResponse *m = NULL;
    if (asprintf(&mk, "__elector/candidates/%s/%" PRIx64, o->name, (uint64_t)kv->lease) <
        0) {
        *rc = ELECTOR_ENOMEM;
        return NULL;
    }
    *rc = range_key(e, app_request_ms(o), (const uint8_t *)mk, strlen(mk), &m);
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

/* The target's key is gone (c: the election as read): after the hand-over it
 * did not take over (EXIT_UNCONFIRMED), before it left (EXIT_REFUSED). */
static int target_gone(const tool_opts *o, const Mvccpb__KeyValue *t,
                       const Etcdserverpb__RangeResponse *c, struct seen *sn)
{
    if (!sn->handed_ms) {
        tool_log(LOG_ERROR, "switchover: the target %.*s left the election",
                 (int)t->key.len, (const char *)t->key.data);
        return EXIT_REFUSED;
    }
    describe_kv(sn->next, sizeof(sn->next), c->n_kvs ? c->kvs[0] : NULL);
    tool_log(LOG_ERROR,
             "switchover: handed over; %s did not take over within %.1f s (its "
             "key is gone: its lease ended or it resigned); the next in line is %s",
             target_said(o->to), (double)(app_now_ms() - sn->handed_ms) / 1000, sn->next);
    return EXIT_UNCONFIRMED;
}

/* The target's key is first in the election c (m: its member key as read, if
 * it has one): 0 when it confirmed that it leads, 1 not yet, EXIT_UNCONFIRMED
 * when it cannot confirm. */
static int target_first(const tool_opts *o, const Mvccpb__KeyValue *t,
                        const Etcdserverpb__RangeResponse *c,
                        const Etcdserverpb__RangeResponse *m, struct seen *sn)
{
    if (!sn->handed_ms) {
        sn->handed_ms = app_now_ms();
        tool_log(LOG_INFO, "switchover: %.*s is first in line; waiting for it to confirm",
                 (int)t->key.len, (const char *)t->key.data);
    }
    describe_kv(sn->next, sizeof(sn->next), c->n_kvs > 1 ? c->kvs[1] : NULL);
    if (!sn->member) {
        tool_log(LOG_ERROR,
                 "switchover: handed over; %.*s's key is first, but it takes no "
                 "switchover requests (no key under __elector/candidates/%s/), so its "
                 "taking over cannot be confirmed; the next in line is %s",
                 (int)t->key.len, (const char *)t->key.data, o->name, sn->next);
        return EXIT_UNCONFIRMED;
    }
    char want[40];
    snprintf(want, sizeof(want), "leads %" PRId64, t->create_revision);
    if (!m || !m->n_kvs || !kv_value_is(m->kvs[0], want)) return 1;
    tool_log(LOG_INFO, "switchover: %.*s leads %s (token %lld), confirmed",
             (int)t->key.len, (const char *)t->key.data, o->name,
             (long long)t->create_revision);
    return 0;
}

/* One look: the election, the target's key and, once it is first, its member
 * key read; 0 done (the target leads and confirmed it), 1 not yet, or an exit
 * status. */
static int look(struct app *a, const Mvccpb__KeyValue *t, struct seen *sn)
{
    int64_t ms = app_request_ms(a->o);
    char *prefix = sw_cat(a->o->name, "/");
    Etcdserverpb__RangeResponse *c = NULL, *tk = NULL, *m = NULL;
    int rc = prefix ? range_prefix(a->etcd, ms, prefix, true, &c) : ELECTOR_ENOMEM;
    free(prefix);
    if (!rc) rc = range_key(a->etcd, ms, t->key.data, t->key.len, &tk);
    bool first = !rc && c->n_kvs && c->kvs[0]->create_revision == t->create_revision;
    if (first && sn->member) m = member_of(a->etcd, a->o, t, &rc);
    int out = 1;
    if (rc)
        tool_log(LOG_WARN, "switchover: cannot read the election (%s); trying again",
                 elector_strerror(rc));
    else if (!tk->n_kvs || tk->kvs[0]->create_revision != t->create_revision)
        out = target_gone(a->o, t, c, sn);
    else if (first)
        out = target_first(a->o, t, c, m, sn);
    if (!out) print_leader(a->o, a->out.stdout_tty, c->kvs[0]); /* as `leader` does */
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
                target_said(a->o->to), (double)(app_now_ms() - sn->handed_ms) / 1000,
                sn->next);
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
    char *rk = sw_request_key(a->o->name);
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
        Etcdserverpb__RangeResponse *m = member_of(a->etcd, a->o, t, &mrc);
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

/* Another request first: while it is carried out the candidates move, so what
 * the election holds says nothing yet. The write (put_request) still refuses one
 * made meanwhile, and says what a user not permitted to read the key lacks:
 * refused here, this early look is skipped. 0, EXIT_REFUSED or EXIT_ERROR. */
static int another_request(struct app *a)
{
    char *rk = sw_request_key(a->o->name);
    Etcdserverpb__RangeResponse *c = NULL;
    int rc =
        rk ? range_key(a->etcd, app_request_ms(a->o), (const uint8_t *)rk, strlen(rk), &c)
           : ELECTOR_ENOMEM;
    int busy = rc ? 0 : under_way(a->o->name, rk, c);
    free(rk);
    free_msg(c);
    if (rc && rc != ELECTOR_EPERM)
        return etcd_error(a, rc, "switchover: cannot read the election");
    return busy;
}

int app_cmd_switchover(struct app *a)
{
    sigset_t set;
    tool_stop_signals(&set, false);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int64_t deadline = app_now_ms() + (a->o->timeout_ms ? a->o->timeout_ms : 60000);
    int rc = another_request(a);
    if (rc) return rc;
    Etcdserverpb__RangeResponse *c = NULL;
    char *prefix = sw_cat(a->o->name, "/");
    rc = prefix ? range_prefix(a->etcd, app_request_ms(a->o), prefix, true, &c)
                : ELECTOR_ENOMEM;
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
        tool_log(LOG_INFO, "switchover: %s already leads %s", target_said(a->o->to),
                 a->o->name);
        print_leader(a->o, a->out.stdout_tty, c->kvs[0]);
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
