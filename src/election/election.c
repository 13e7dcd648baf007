/* Elections: campaign, wait for the predecessor, lead, proclaim, resign.
 *
 * States: IDLE -> CAMPAIGN (campaign Txn, or waiting for the session's lease)
 * -> WAIT (checking or watching the predecessor) -> LEADER -> IDLE. Every state
 * change bumps `gen`; replies that belong to an older generation are ignored, so
 * a resign never races with an old check that would make us leader again.
 *
 * The check Txn joins the two questions of the protocol in one round trip:
 * "does our key still exist with our create revision?" (compare) and "who is
 * the nearest key created before ours?" (Range in the success branch). Leadership
 * is declared only when the key is ours at that revision, no predecessor exists,
 * and the session's validity deadline has not passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "election_private.h"

enum el_state { E_IDLE, E_CAMPAIGN, E_WAIT, E_LEADER };

struct elector_election {
    struct elector_election *next; /* in the session's list */
    elector_session *s;
    elector_etcd *etcd;
    char *name;
    uint8_t *prefix, *key, *value, *pred;
    size_t plen, klen, vlen, pred_len;
    int64_t key_lease; /* the lease named in `key` (and attached to it) */
    int64_t rev;
    /* A campaign Txn of this campaign was answered with a transient error: it may
     * have created our key, at a revision we do not know. */
    bool maybe_key;
    bool campaign_waits; /* campaigning, Txn not sent: no lease yet, or deletes */
    int deletes;         /* our delete Txns in flight (resign, cleanup) */
    /* The session is over (or was when the owner let go): our key goes with the
     * lease, when its owner releases it (manual_release), never by a delete. */
    bool keep_key;
    enum el_state state;
    unsigned gen;
    bool proclaiming;
    elector_watch *watch;
    elector__timer retry;
    elector__timer notify; /* delivers FAILED for a resign before our key existed */
    int64_t notify_ns; /* CLOCK_MONOTONIC, as the event carries it */
    /* A resign whose delete failed for a transient reason is sent again: the key
     * must go, or the next candidate waits for our whole session. resign_rev is
     * the guard (0: our key's create revision is unknown; guard by our lease). */
    elector__timer resign_timer;
    int64_t resign_rev, resign_ns; /* resign_ns: CLOCK_MONOTONIC */
    bool resign_pending, resign_was_leader;
    int resign_tries;
    int retries;
    int refs;   /* owner + in-flight operations + callbacks running */
    bool freed; /* the owner let go; memory stays until refs reach 0 */
    unsigned walked; /* the session walk that visited it last (see walk()) */
    int outcome; /* for campaign_sync: 1 elected, < 0 failed */
    elector_election_cb cb, log;
    void *ud, *log_ud;
};

struct op {
    elector_election *el;
    unsigned gen;
    elector_txn_cb ucb; /* guarded_txn only */
    void *uud;
    uint8_t *value;
    size_t vlen;
};

static void send_check(elector_election *el);
static int delete_key(elector_election *el, int64_t rev, struct op *o, elector_etcd_cb done);
static void stray_deleted(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud);
static void send_campaign(elector_election *el);

/* ---------------------------------------------------------------- helpers */

const char *elector_event_name(elector_event_type t)
{
    static const char *names[] = {"",         "waiting", "elected", "proclaimed",
                                  "lost",     "resigned", "failed", "leader",
                                  "no_leader", "session_lost"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

uint8_t *elector__name_prefix(const char *name, size_t *len)
{
    size_t n = strlen(name);
    uint8_t *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, name, n);
    p[n] = '/';
    *len = n + 1;
    return p;
}

void elector__leader_range(Etcdserverpb__RangeRequest *r, const uint8_t *prefix, size_t plen,
                           uint8_t *end_buf)
{
    etcdserverpb__range_request__init(r);
    r->key.data = (uint8_t *)prefix;
    r->key.len = plen;
    r->range_end.data = end_buf;
    r->range_end.len = elector_prefix_end(prefix, plen, end_buf);
    r->sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    r->sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    r->limit = 1;
}

static void el_unref(elector_election *el)
{
    if (--el->refs > 0 || !el->freed) return;
    elector__timer_disarm(el->etcd, &el->retry);
    elector__timer_disarm(el->etcd, &el->notify);
    elector__timer_disarm(el->etcd, &el->resign_timer);
    free(el->name);
    free(el->prefix);
    free(el->key);
    free(el->value);
    free(el->pred);
    free(el);
}

/* Delivers an event to the log hook and the callback; mono_ns: CLOCK_MONOTONIC,
 * 0 = now. Returns false if the election was freed meanwhile (the caller must
 * stop touching it). */
static bool emit(elector_election *el, elector_event_type type, int reason,
                 const char *detail, int64_t mono_ns)
{
    elector_event ev = {.type = type,
                        .reason = reason,
                        .detail = detail ? detail : "",
                        .name = el->name,
                        .key = type == ELECTOR_EV_WAITING ? el->pred : el->key,
                        .key_len = type == ELECTOR_EV_WAITING ? el->pred_len : el->klen,
                        .value = el->value,
                        .value_len = el->vlen,
                        .token = el->rev,
                        .lease = el->s ? el->s->lease : 0,
                        .mono_ns = mono_ns ? mono_ns : elector__mono_ns()};
    el->refs++;
    bool logged = type == ELECTOR_EV_ELECTED || type == ELECTOR_EV_LOST ||
                  type == ELECTOR_EV_RESIGNED || type == ELECTOR_EV_PROCLAIMED;
    if (el->log && logged && !el->freed) el->log(el, &ev, el->log_ud);
    if (el->cb && !el->freed) el->cb(el, &ev, el->ud);
    bool alive = !el->freed;
    el_unref(el);
    return alive;
}

static struct op *op_new(elector_election *el)
{
    struct op *o = calloc(1, sizeof(*o));
    if (!o) return NULL;
    o->el = el;
    o->gen = el->gen;
    el->refs++;
    return o;
}

/* Ends an operation's hold; returns the election if the reply is still current.
 * A current election is not freed, so the owner's reference keeps it alive. */
static elector_election *op_end(struct op *o)
{
    elector_election *el = o->el;
    bool current = !el->freed && o->gen == el->gen;
    free(o->value);
    free(o);
    if (!current) {
        el_unref(el);
        return NULL;
    }
    el->refs--;
    return el;
}

static void stop_watch(elector_election *el)
{
    if (el->watch) elector_watch_cancel(el->watch);
    el->watch = NULL;
}

static void cmp_create(Etcdserverpb__Compare *c, const uint8_t *key, size_t klen, int64_t rev)
{
    etcdserverpb__compare__init(c);
    c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    c->key.data = (uint8_t *)key;
    c->key.len = klen;
    c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    c->create_revision = rev;
}

static void cmp_lease(Etcdserverpb__Compare *c, const uint8_t *key, size_t klen, int64_t lease)
{
    etcdserverpb__compare__init(c);
    c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE;
    c->key.data = (uint8_t *)key;
    c->key.len = klen;
    c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
    c->lease = lease;
}

static void put_op(Etcdserverpb__RequestOp *op, Etcdserverpb__PutRequest *put,
                   const elector_election *el, const uint8_t *v, size_t vlen)
{
    etcdserverpb__put_request__init(put);
    put->key.data = el->key;
    put->key.len = el->klen;
    put->value.data = (uint8_t *)v;
    put->value.len = vlen;
    put->lease = el->s->lease;
    etcdserverpb__request_op__init(op);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op->request_put = put;
}

static void range_key_op(Etcdserverpb__RequestOp *op, Etcdserverpb__RangeRequest *r,
                         const elector_election *el)
{
    etcdserverpb__range_request__init(r);
    r->key.data = el->key;
    r->key.len = el->klen;
    etcdserverpb__request_op__init(op);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    op->request_range = r;
}

/* A Txn guarded by one compare (always ours), with the given success ops. */
static void txn_init(Etcdserverpb__TxnRequest *t, Etcdserverpb__Compare **cmp,
                     Etcdserverpb__RequestOp **succ, size_t nsucc)
{
    etcdserverpb__txn_request__init(t);
    t->n_compare = 1;
    t->compare = cmp;
    t->n_success = nsucc;
    t->success = succ;
}

static int send_txn(elector_election *el, Etcdserverpb__TxnRequest *txn, struct op *o,
                    elector_etcd_cb done)
{
    int rc = elector_etcd_call(el->etcd, ELECTOR_RPC_TXN, &txn->base, NULL, done, o);
    if (rc) op_end(o);
    return rc;
}

/* The Range result at position i of a Txn reply, or NULL (with an EPROTO detail
 * on the client) when the server put anything else there. The client already
 * checks each Txn reply against its request; never read a oneof unchecked. */
static const Etcdserverpb__RangeResponse *txn_range(elector_etcd *e,
                                                    const Etcdserverpb__TxnResponse *r,
                                                    size_t i)
{
    const Etcdserverpb__ResponseOp *op = i < r->n_responses ? r->responses[i] : NULL;
    if (op && op->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
        op->response_range)
        return op->response_range;
    elector__set_err(e, ELECTOR_EPROTO, "%s: malformed reply from %s: no Range result at %zu",
                     elector_rpc_path(ELECTOR_RPC_TXN), elector_etcd_current_endpoint(e), i + 1);
    return NULL;
}

/* ---------------------------------------------------------------- endings */

/* Our campaign is over without leadership. */
static void fail(elector_election *el, int reason, const char *detail)
{
    el->campaign_waits = false;
    stop_watch(el);
    elector__timer_disarm(el->etcd, &el->retry);
    el->state = E_IDLE;
    el->gen++;
    el->outcome = reason ? reason : ELECTOR_ECANCELED;
    emit(el, ELECTOR_EV_FAILED, reason, detail, 0);
}

/* We led and no longer do. at_ns: when the belief ended, on the deadline clock
 * (0 = now). It is never later than the validity deadline: elector_is_leader()
 * turned false then, even if this process was frozen and only notices now. The
 * event carries that instant on CLOCK_MONOTONIC. */
static void lose(elector_election *el, int reason, const char *detail, int64_t at_ns)
{
    if (!at_ns) at_ns = elector_now_ns();
    if (el->s && el->s->deadline_ns && el->s->deadline_ns < at_ns) at_ns = el->s->deadline_ns;
    int64_t mono_ns = elector__mono_of(at_ns);
    stop_watch(el);
    elector__timer_disarm(el->etcd, &el->retry);
    el->state = E_IDLE;
    el->gen++;
    el->outcome = reason;
    emit(el, ELECTOR_EV_LOST, reason, detail, mono_ns);
}

/* Visits every election of the session once, holding a reference on the one
 * being visited. A callback may free any election (not only the visited one)
 * or close the session, so the walk never keeps a pointer across a callback
 * other than the visited election's: if that one is still in the list, its
 * `next` is current; if it left the list, the walk starts again at the head and
 * skips what this walk already visited. Elections created meanwhile carry the
 * current stamp and are skipped too. */
static void walk(elector_session *s, void (*fn)(elector_election *el, void *arg), void *arg)
{
    unsigned stamp = ++s->walks;
    elector_election *el = s->elections;
    while (el) {
        if (el->walked == stamp) {
            el = el->next;
            continue;
        }
        el->walked = stamp;
        el->refs++;
        fn(el, arg);
        elector_election *next = el->s == s ? el->next : s->elections;
        el_unref(el);
        el = next;
    }
}

struct ended {
    int reason;
    const char *detail;
    int64_t end_ns;
};

static void end_one(elector_election *el, void *arg)
{
    const struct ended *a = arg;
    el->keep_key = true;
    if (el->state == E_LEADER) lose(el, a->reason, a->detail, a->end_ns);
    else if (el->state != E_IDLE) fail(el, a->reason, a->detail);
}

/* Session hook: the session died or was closed. */
void elector__elections_session_ended(elector_session *s, int reason, const char *detail,
                                      int64_t end_ns)
{
    int64_t now = elector_now_ns();
    struct ended a = {reason, detail, end_ns && end_ns < now ? end_ns : now};
    walk(s, end_one, &a);
}

/* ---------------------------------------------------------------- retry */

static void retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_election *el = ud;
    if (el->state == E_CAMPAIGN && el->rev == 0) send_campaign(el);
    else if (el->state == E_WAIT || el->state == E_LEADER) send_check(el);
}

/* Errors after which the same request may simply be sent again. */
static bool transient(int err)
{
    return err == ELECTOR_EUNAVAILABLE || err == ELECTOR_ETIMEDOUT || err == ELECTOR_ENOLEADER ||
           err == ELECTOR_ECONNECT;
}

/* A read or watch failed for a reason that may heal (connection, no leader):
 * check again after a short, growing pause. The session's deadline bounds how
 * long this can go on. */
static void schedule_retry(elector_election *el)
{
    int64_t d = 50 << (el->retries < 5 ? el->retries : 5);
    el->retries++;
    elector__timer_arm(el->etcd, &el->retry, elector__now_ms() + d, retry_fired, el);
}

/* ---------------------------------------------------------------- watching */

static void watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r, void *ud)
{
    (void)w;
    elector_election *el = ud;
    if (err) {
        /* A broken or compacted watch never counts as a win: re-read first. */
        stop_watch(el);
        if (err == ELECTOR_EPROTO) {
            /* A server that breaks the protocol will not heal by a retry. */
            if (el->state == E_LEADER) lose(el, err, elector_etcd_errstr(el->etcd), 0);
            else fail(el, err, elector_etcd_errstr(el->etcd));
            return;
        }
        if (err == ELECTOR_ECOMPACTED) send_check(el);
        else schedule_retry(el);
        return;
    }
    for (size_t i = 0; i < r->n_events; i++) {
        if (r->events[i]->type != MVCCPB__EVENT__EVENT_TYPE__DELETE) continue;
        stop_watch(el);
        if (el->state == E_LEADER) {
            char detail[64 + 256];
            snprintf(detail, sizeof(detail), "our key %.*s was deleted", (int)el->klen, el->key);
            lose(el, ELECTOR_ENOTLEADER, detail, 0);
        } else {
            send_check(el);
        }
        return;
    }
}

/* Watches `key` for its deletion from revision `from`. */
static void watch_key(elector_election *el, const uint8_t *key, size_t klen, int64_t from)
{
    Etcdserverpb__WatchCreateRequest wc = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    Etcdserverpb__WatchCreateRequest__FilterType f =
        ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT;
    wc.key.data = (uint8_t *)key;
    wc.key.len = klen;
    wc.start_revision = from;
    wc.n_filters = 1;
    wc.filters = &f;
    stop_watch(el);
    el->watch = elector_etcd_watch(el->etcd, &wc, watch_cb, el);
    if (!el->watch) schedule_retry(el);
}

/* ---------------------------------------------------------------- check */

static bool set_pred(elector_election *el, const uint8_t *k, size_t n)
{
    if (el->pred && el->pred_len == n && (!n || !memcmp(el->pred, k, n))) return false;
    uint8_t *p = malloc(n ? n : 1);
    if (!p) return false;
    if (n) memcpy(p, k, n); /* an empty bytes field has data NULL */
    free(el->pred);
    el->pred = p;
    el->pred_len = n;
    return true;
}

static void become_leader(elector_election *el, int64_t header_rev)
{
    if (!elector_session_alive(el->s)) {
        /* Our lease cannot be proven alive: this is exactly the phantom
         * leadership the re-check exists to prevent. */
        fail(el, ELECTOR_ESESSION, "session not provably alive when our turn came");
        return;
    }
    el->state = E_LEADER;
    el->gen++;
    el->retries = 0;
    el->outcome = 1;
    if (!emit(el, ELECTOR_EV_ELECTED, 0, NULL, 0)) return;
    if (el->state == E_LEADER) watch_key(el, el->key, el->klen, header_rev + 1);
}

static void check_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    elector_election *el = op_end(ud);
    if (!el) return;
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    const Etcdserverpb__RangeResponse *rr = !err && r->succeeded ? txn_range(e, r, 0) : NULL;
    if (!err && r->succeeded && !rr) err = ELECTOR_EPROTO;
    if (err == ELECTOR_EPERM || err == ELECTOR_EAUTH || err == ELECTOR_EPROTO) {
        /* Will not heal by retrying. Our key exists (the campaign made it) and
         * would make every later candidate wait for our session: try to delete
         * it (we may be allowed to write our key, not to read the prefix). A
         * leader whose owner releases by hand (manual_release) keeps it: the
         * successor must not start before the owner has stopped acting. */
        bool owner_releases = el->state == E_LEADER && el->s->cfg.manual_release;
        if (!el->keep_key && !owner_releases) {
            struct op *d = op_new(el);
            if (d) delete_key(el, el->rev, d, stray_deleted);
        }
        if (el->state == E_LEADER) lose(el, err, elector_etcd_errstr(e), 0);
        else fail(el, err, elector_etcd_errstr(e));
        return;
    }
    if (err) {
        schedule_retry(el);
        return;
    }
    if (!r->succeeded) {
        if (el->state == E_LEADER) {
            lose(el, ELECTOR_ENOTLEADER, "our key is gone", 0);
        } else {
            fail(el, ELECTOR_ESESSION,
                 "our key vanished while waiting (lease expired or key deleted)");
        }
        return;
    }
    int64_t hrev = r->header ? r->header->revision : 0;
    el->retries = 0;
    if (el->state == E_LEADER) {
        watch_key(el, el->key, el->klen, hrev + 1);
        return;
    }
    if (rr->n_kvs == 0) {
        become_leader(el, hrev);
        return;
    }
    const Mvccpb__KeyValue *kv = rr->kvs[0];
    el->state = E_WAIT;
    if (set_pred(el, kv->key.data, kv->key.len) &&
        !emit(el, ELECTOR_EV_WAITING, 0, NULL, 0))
        return;
    if (el->state == E_WAIT) watch_key(el, kv->key.data, kv->key.len, hrev + 1);
}

static void send_check(elector_election *el)
{
    uint8_t end[el->plen];
    Etcdserverpb__Compare cmp, *cmps[1] = {&cmp};
    cmp_create(&cmp, el->key, el->klen, el->rev);
    Etcdserverpb__RangeRequest rr;
    elector__leader_range(&rr, el->prefix, el->plen, end);
    rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
    rr.max_create_revision = el->rev - 1;
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = {&op};
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    op.request_range = &rr;
    Etcdserverpb__TxnRequest txn;
    txn_init(&txn, cmps, ops, 1);
    struct op *o = op_new(el);
    if (!o || send_txn(el, &txn, o, check_done)) schedule_retry(el);
}

/* ---------------------------------------------------------------- campaign */

/* A delete of our key was answered. A campaign that waits for it goes now. */
static void delete_over(elector_election *el)
{
    el->deletes--;
    if (!el->deletes && el->state == E_CAMPAIGN && el->campaign_waits && !el->freed && el->s &&
        el->s->state == S_ALIVE)
        send_campaign(el);
}

static void stray_deleted(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)err, (void)m;
    struct op *o = ud;
    delete_over(o->el); /* the op holds the election */
    op_end(o);
}

static void campaign_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct op *o = ud;
    elector_election *owner = o->el;
    unsigned gen = o->gen;
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    int64_t rev = 0;
    if (!err && r->succeeded && r->header) rev = r->header->revision;
    if (!err && !r->succeeded) {
        const Etcdserverpb__RangeResponse *rr = txn_range(e, r, 1);
        if (!rr) err = ELECTOR_EPROTO;
        else if (rr->n_kvs) rev = rr->kvs[0]->create_revision;
    }
    if ((rev || transient(err)) && gen != owner->gen && (owner->freed || owner->state == E_IDLE) &&
        !owner->keep_key) {
        /* Resigned or freed while the campaign Txn was in flight: remove the key it
         * made (or may have made: a transient error leaves that unknown), so it
         * does not block the election until the lease ends. The op keeps the
         * (possibly freed) election's memory, and its key, alive. */
        struct op *d = op_new(owner);
        if (d) delete_key(owner, rev, d, stray_deleted);
    }
    elector_election *el = op_end(o);
    if (!el) return;
    if (transient(err) && el->s && el->s->state == S_ALIVE) {
        /* The campaign Txn is safe to repeat: if the first one was applied, the
         * repeat finds our key and reads its create revision. The session's
         * deadline bounds the retries. Until then our key may exist at a
         * revision we do not know: a resign or free deletes it by name. */
        el->maybe_key = true;
        schedule_retry(el);
        return;
    }
    if (err) {
        char detail[600];
        snprintf(detail, sizeof(detail), "campaign request failed: %s", elector_etcd_errstr(e));
        fail(el, err, detail);
        return;
    }
    if (rev <= 0) {
        /* A fencing token must be a real revision (etcd's start at 1). */
        char detail[200];
        snprintf(detail, sizeof(detail), "%s: campaign reply from %s without a valid "
                 "revision (%lld)", elector_rpc_path(ELECTOR_RPC_TXN),
                 elector_etcd_current_endpoint(e), (long long)rev);
        fail(el, ELECTOR_EPROTO, detail);
        return;
    }
    el->rev = rev;
    el->state = E_WAIT;
    send_check(el);
}

static int make_key(elector_election *el)
{
    char hex[17];
    int n = snprintf(hex, sizeof(hex), "%llx", (unsigned long long)el->s->lease);
    uint8_t *k = malloc(el->plen + (size_t)n);
    if (!k) return ELECTOR_ENOMEM;
    memcpy(k, el->prefix, el->plen);
    memcpy(k + el->plen, hex, (size_t)n);
    free(el->key);
    el->key = k;
    el->key_lease = el->s->lease;
    el->klen = el->plen + (size_t)n;
    return 0;
}

/* Campaign Txn: create our key if absent; if present (same lease: a second
 * campaign, or etcdctl's), overwrite its value and read its create revision. */
static void send_campaign(elector_election *el)
{
    el->campaign_waits = false;
    if (make_key(el)) {
        fail(el, ELECTOR_ENOMEM, "out of memory");
        return;
    }
    Etcdserverpb__Compare cmp, *cmps[1] = {&cmp};
    cmp_create(&cmp, el->key, el->klen, 0);
    Etcdserverpb__PutRequest put;
    Etcdserverpb__RangeRequest rr;
    Etcdserverpb__RequestOp put_o, range_o, *succ[1] = {&put_o}, *fail_ops[2] = {&put_o, &range_o};
    put_op(&put_o, &put, el, el->value, el->vlen);
    range_key_op(&range_o, &rr, el);
    Etcdserverpb__TxnRequest txn;
    txn_init(&txn, cmps, succ, 1);
    txn.n_failure = 2;
    txn.failure = fail_ops;
    struct op *o = op_new(el);
    int rc = o ? send_txn(el, &txn, o, campaign_done) : ELECTOR_ENOMEM;
    if (rc) fail(el, rc, elector_etcd_errstr(el->etcd));
}

static void ready_one(elector_election *el, void *arg)
{
    (void)arg;
    if (el->state == E_CAMPAIGN && el->campaign_waits && !el->deletes) send_campaign(el);
}

void elector__elections_session_ready(elector_session *s)
{
    walk(s, ready_one, NULL);
}

static int set_value(uint8_t **dst, size_t *dlen, const void *v, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p) return ELECTOR_ENOMEM;
    if (n) memcpy(p, v, n);
    free(*dst);
    *dst = p;
    *dlen = n;
    return 0;
}

int elector_campaign(elector_election *el, const void *value, size_t len)
{
    if (!el || el->freed) return ELECTOR_EINVAL;
    if (el->state != E_IDLE) return ELECTOR_EBUSY;
    if (!el->s || el->s->state == S_DEAD || el->s->state == S_CLOSED) return ELECTOR_ESESSION;
    if (len > ELECTOR__GRPC_MAX_MSG) return ELECTOR_ETOOLARGE;
    /* One key per name and session: a second election object with this name
     * would share (and delete) the first one's key. */
    for (elector_election *o = el->s->elections; o; o = o->next)
        if (o != el && (o->state != E_IDLE || o->resign_pending || o->deletes) &&
            !strcmp(o->name, el->name))
            return ELECTOR_EBUSY;
    if (set_value(&el->value, &el->vlen, value, len)) return ELECTOR_ENOMEM;
    /* Our key, if an old resign still waits to retry its delete, is reused by
     * the new campaign (same lease, same key): stop deleting it. A delete
     * already sent cannot be called back: the campaign Txn waits for its
     * answer, so that it cannot remove the key this campaign makes. */
    el->resign_pending = false;
    elector__timer_disarm(el->etcd, &el->resign_timer);
    el->state = E_CAMPAIGN;
    el->campaign_waits = true;
    el->maybe_key = false;
    el->gen++;
    el->rev = 0;
    el->outcome = 0;
    el->retries = 0;
    free(el->pred);
    el->pred = NULL;
    el->pred_len = 0;
    if (el->s->state == S_ALIVE && !el->deletes) send_campaign(el);
    return 0;
}

int elector_campaign_sync(elector_election *el, const void *value, size_t len,
                          int64_t timeout_ms)
{
    int rc = elector_campaign(el, value, len);
    if (rc) return rc;
    int64_t end = elector__now_ms() + timeout_ms;
    el->refs++;
    while (el->outcome == 0 && !el->freed) {
        int64_t left = end - elector__now_ms();
        if (timeout_ms >= 0 && left <= 0) {
            rc = ELECTOR_ETIMEDOUT;
            break;
        }
        rc = elector_etcd_run_once(el->etcd, timeout_ms >= 0 ? left : -1);
        if (rc) break;
    }
    if (!rc) rc = el->freed ? ELECTOR_ECLOSED : el->outcome == 1 ? 0 : el->outcome;
    el_unref(el);
    return rc;
}

/* ---------------------------------------------------------------- leader ops */

bool elector_is_leader(const elector_election *el)
{
    return el && !el->freed && el->state == E_LEADER && el->s &&
           elector_session_alive(el->s);
}

static void proclaim_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct op *o = ud;
    uint8_t *v = o->value;
    size_t vlen = o->vlen;
    o->value = NULL;
    o->el->proclaiming = false;
    elector_election *el = op_end(o);
    if (!el) {
        free(v);
        return;
    }
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    if (!err && !r->succeeded) {
        free(v);
        lose(el, ELECTOR_ENOTLEADER, "proclaim refused: our key is no longer ours", 0);
        return;
    }
    if (!err) {
        free(el->value);
        el->value = v;
        el->vlen = vlen;
    } else {
        free(v);
    }
    emit(el, ELECTOR_EV_PROCLAIMED, err, err ? elector_etcd_errstr(e) : NULL, 0);
}

int elector_proclaim(elector_election *el, const void *value, size_t len)
{
    if (!elector_is_leader(el)) return ELECTOR_ENOTLEADER;
    if (el->proclaiming) return ELECTOR_EBUSY;
    struct op *o = op_new(el);
    if (!o || set_value(&o->value, &o->vlen, value, len)) {
        if (o) op_end(o);
        return ELECTOR_ENOMEM;
    }
    Etcdserverpb__Compare cmp, *cmps[1] = {&cmp};
    cmp_create(&cmp, el->key, el->klen, el->rev);
    Etcdserverpb__PutRequest put;
    Etcdserverpb__RequestOp put_o, *succ[1] = {&put_o};
    put_op(&put_o, &put, el, o->value, o->vlen);
    Etcdserverpb__TxnRequest txn;
    txn_init(&txn, cmps, succ, 1);
    int rc = send_txn(el, &txn, o, proclaim_done);
    if (!rc) el->proclaiming = true;
    return rc;
}

/* Deletes our key, guarded by its create revision; or, when that is unknown
 * (rev 0: a campaign Txn was applied but not answered), by our lease: the key
 * is ours by its name (prefix + our lease) and by its lease. Returns 0 or the
 * send error (then `o` is released and `done` is not called). */
static int delete_key(elector_election *el, int64_t rev, struct op *o, elector_etcd_cb done)
{
    Etcdserverpb__Compare cmp, *cmps[1] = {&cmp};
    if (rev) cmp_create(&cmp, el->key, el->klen, rev);
    else cmp_lease(&cmp, el->key, el->klen, el->key_lease);
    Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    del.key.data = el->key;
    del.key.len = el->klen;
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *succ[1] = {&op};
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    op.request_delete_range = &del;
    Etcdserverpb__TxnRequest txn;
    txn_init(&txn, cmps, succ, 1);
    int rc = elector_etcd_call(el->etcd, ELECTOR_RPC_TXN, &txn.base, NULL, done, o);
    if (rc) {
        op_end(o);
        return rc;
    }
    el->deletes++; /* o holds el */
    return 0;
}

static void resign_send(elector_election *el);
static void resign_settle(elector_election *el, int err, const char *detail);

static void resign_retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_election *el = ud;
    if (el->resign_tries >= 12 || !el->s || el->s->state != S_ALIVE || el->keep_key)
        resign_settle(el, ELECTOR_EUNAVAILABLE, "our key could not be deleted");
    else
        resign_send(el);
}

/* The resign's delete was answered (or could not be sent): retry a transient
 * failure while the session lives, else report the end of the campaign. */
static void resign_settle(elector_election *el, int err, const char *detail)
{
    bool transient = err && err != ELECTOR_EPERM && err != ELECTOR_EAUTH;
    if (transient && el->s && el->s->state == S_ALIVE && !el->keep_key && el->resign_tries < 12) {
        int64_t d = 50 << (el->resign_tries < 5 ? el->resign_tries : 5);
        el->resign_tries++;
        elector__timer_arm(el->etcd, &el->resign_timer, elector__now_ms() + d,
                           resign_retry_fired, el);
        return;
    }
    int64_t t = el->resign_ns;
    el->resign_pending = false;
    if (el->resign_was_leader)
        emit(el, ELECTOR_EV_RESIGNED, err, err ? detail : NULL, t);
    else
        emit(el, ELECTOR_EV_FAILED, ELECTOR_ECANCELED, "campaign canceled by resign", t);
}

static void resign_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m;
    struct op *o = ud;
    delete_over(o->el);
    elector_election *el = op_end(o);
    if (!el || !el->resign_pending) return; /* freed, or a new campaign took over */
    resign_settle(el, err, elector_etcd_errstr(e));
}

static void resign_send(elector_election *el)
{
    struct op *o = op_new(el);
    int rc = o ? delete_key(el, el->resign_rev, o, resign_done) : ELECTOR_ENOMEM;
    if (rc) {
        /* Not sent: try again from the loop (never report from inside the
         * caller's elector_resign()). */
        if (el->resign_tries < 12) el->resign_tries++;
        elector__timer_arm(el->etcd, &el->resign_timer, elector__now_ms() + 50,
                           resign_retry_fired, el);
    }
}

static void notify_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_election *el = ud;
    emit(el, ELECTOR_EV_FAILED, ELECTOR_ECANCELED, "campaign canceled by resign", el->notify_ns);
}

int elector_resign(elector_election *el)
{
    if (!el || el->freed || el->state == E_IDLE) return ELECTOR_EINVAL;
    bool was_leader = el->state == E_LEADER;
    int64_t rev = el->rev;
    int64_t now = elector__mono_ns();
    /* Our belief ends now, before anything is sent. */
    stop_watch(el);
    elector__timer_disarm(el->etcd, &el->retry);
    el->state = E_IDLE;
    el->campaign_waits = false;
    el->gen++;
    el->outcome = was_leader ? 1 : ELECTOR_ECANCELED;
    if (!rev && !el->maybe_key) {
        /* No key yet (campaign Txn in flight, or no lease yet): campaign_done
         * removes the key it makes. The event still comes from the loop. */
        el->notify_ns = now;
        elector__timer_arm(el->etcd, &el->notify, elector__now_ms(), notify_fired, el);
        return 0;
    }
    /* With rev 0 our key may exist (a campaign Txn applied, its answer lost):
     * delete it by name and lease. */
    el->resign_rev = rev;
    el->resign_pending = true;
    el->resign_ns = now;
    el->resign_was_leader = was_leader;
    el->resign_tries = 0;
    resign_send(el);
    return 0;
}

/* ---------------------------------------------------------------- fencing */

static void guarded_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct op *o = ud;
    elector_txn_cb ucb = o->ucb;
    void *uud = o->uud;
    o->gen = o->el->gen; /* the caller waits for this reply whatever happened since */
    elector_election *el = op_end(o);
    if (!el) return;
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    if (!err && !r->succeeded) {
        /* Our Range of our key is the last failure op. */
        const Etcdserverpb__RangeResponse *rr =
            txn_range(e, r, r->n_responses ? r->n_responses - 1 : 0);
        if (!rr) err = ELECTOR_EPROTO;
        else if (rr->n_kvs == 0 || rr->kvs[0]->create_revision != el->rev)
            err = ELECTOR_ENOTLEADER;
    }
    el->refs++;
    ucb(el, err, err && err != ELECTOR_ENOTLEADER ? NULL : r, uud);
    el_unref(el);
}

int elector_guarded_txn(elector_election *el, const Etcdserverpb__TxnRequest *in,
                        elector_txn_cb cb, void *ud)
{
    if (!elector_is_leader(el)) return ELECTOR_ENOTLEADER;
    if (!in || !cb) return ELECTOR_EINVAL;
    size_t nc = in->n_compare + 1, nf = in->n_failure + 1;
    Etcdserverpb__Compare **cmps = calloc(nc, sizeof(*cmps));
    Etcdserverpb__RequestOp **fops = calloc(nf, sizeof(*fops));
    struct op *o = cmps && fops ? op_new(el) : NULL;
    int rc = ELECTOR_ENOMEM;
    if (o) {
        Etcdserverpb__Compare mine;
        cmp_create(&mine, el->key, el->klen, el->rev);
        cmps[0] = &mine;
        if (in->n_compare) memcpy(cmps + 1, in->compare, in->n_compare * sizeof(*cmps));
        Etcdserverpb__RangeRequest rr;
        Etcdserverpb__RequestOp rop;
        range_key_op(&rop, &rr, el);
        if (in->n_failure) memcpy(fops, in->failure, in->n_failure * sizeof(*fops));
        fops[nf - 1] = &rop;
        Etcdserverpb__TxnRequest txn = *in;
        txn.n_compare = nc;
        txn.compare = cmps;
        txn.n_failure = nf;
        txn.failure = fops;
        o->ucb = cb;
        o->uud = ud;
        rc = send_txn(el, &txn, o, guarded_done);
    }
    free(cmps);
    free(fops);
    return rc;
}

/* ---------------------------------------------------------------- lifecycle */

elector_election *elector_election_new(elector_session *s, const char *name,
                                       elector_election_cb cb, void *ud)
{
    if (!s || !name || !*name || s->state == S_CLOSED) return NULL;
    elector_election *el = calloc(1, sizeof(*el));
    if (!el) return NULL;
    el->name = elector__strdup(name);
    el->prefix = elector__name_prefix(name, &el->plen);
    if (!el->name || !el->prefix) {
        free(el->name);
        free(el->prefix);
        free(el);
        return NULL;
    }
    el->s = s;
    el->etcd = s->etcd;
    el->cb = cb;
    el->ud = ud;
    el->refs = 1;
    el->walked = s->walks; /* a walk under way does not visit it */
    el->next = s->elections;
    s->elections = el;
    return el;
}

static void detach(elector_election *el)
{
    if (!el->s) return;
    for (elector_election **pp = &el->s->elections; *pp; pp = &(*pp)->next)
        if (*pp == el) {
            *pp = el->next;
            break;
        }
    el->s = NULL;
}

void elector_election_free(elector_election *el)
{
    if (!el || el->freed) return;
    /* Best effort, one attempt: delete our key if we may hold one (by its
     * revision, or by name and lease when a lost answer left that unknown), or
     * if a resign still owes the delete. A campaign Txn in flight is handled
     * by campaign_done. Once the session is over the key goes with the lease. */
    if (!el->s || el->s->state != S_ALIVE) el->keep_key = true;
    int64_t rev = -1;
    if (el->state != E_IDLE && (el->rev || el->maybe_key)) rev = el->rev;
    else if (el->resign_pending) rev = el->resign_rev;
    if (rev >= 0 && !el->keep_key) {
        struct op *o = op_new(el);
        if (o) delete_key(el, rev, o, stray_deleted);
    }
    stop_watch(el);
    elector__timer_disarm(el->etcd, &el->retry);
    elector__timer_disarm(el->etcd, &el->notify);
    elector__timer_disarm(el->etcd, &el->resign_timer);
    detach(el);
    el->state = E_IDLE;
    el->campaign_waits = false;
    el->resign_pending = false;
    el->gen++;
    el->freed = true;
    el->cb = NULL;
    el->log = NULL;
    el_unref(el); /* in-flight ops may still hold it; the last one frees */
}

void elector__elections_detach_all(elector_session *s)
{
    while (s->elections) detach(s->elections);
}

void elector_election_set_log(elector_election *el, elector_election_cb log, void *ud)
{
    el->log = log;
    el->log_ud = ud;
}

const uint8_t *elector_election_key(const elector_election *el, size_t *key_len)
{
    if (key_len) *key_len = el->klen;
    return el->key;
}

int64_t elector_election_token(const elector_election *el)
{
    return el->rev;
}

const char *elector_election_name(const elector_election *el)
{
    return el->name;
}

elector_session *elector_election_session(const elector_election *el)
{
    return el->s;
}
