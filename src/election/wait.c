/* SPDX-License-Identifier: MIT */
/* The wait: after the campaign Txn made our key, check it and find our
 * predecessor, watch the predecessor's key for its deletion, check again; lead
 * when the key is ours and no predecessor is left; as leader, watch our own key.
 *
 * The check Txn joins the two questions of the protocol in one round trip:
 * "does our key still exist with our create revision?" (compare) and "who is
 * the nearest key created before ours?" (Range in the success branch). Leadership
 * is declared only when the key is ours at that revision, no predecessor exists,
 * and the session's validity deadline has not passed. */
#include <stdio.h>
#include <string.h>
#include "election_private.h"
#ifdef ELECTOR_BENCH_PLANT_DELAY_US
#include <time.h>
#endif

/* The DELETE event of our predecessor: its revision R, and where it came from. */
struct deleted {
    int64_t rev;
    uint64_t member, cluster, conn;
};
static void send_fast_check(elector_election *el, const struct deleted *ev);

elector__check_knobs elector__check_test;

/* ---------------------------------------------------------------- retry */

static void retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_election *el = ud;
    if (el->state == E_WAIT || el->state == E_LEADER) elector__send_check(el);
}

/* The pause before a retry, counted. Jittered: thousands of elections that
 * failed together (etcd busy, the connection lost) do not come back
 * together. */
int64_t elector__retry_delay(elector_election *el)
{
    int64_t d =
        elector__backoff_ms(el->retries + 1, 50, 1600, elector__next_rnd(el->etcd));
    el->retries++;
    el->checks.retries++;
    return d;
}

/* A read or watch failed for a reason that may heal (connection, no leader):
 * check again after a short, growing pause. The session's deadline bounds how
 * long this can go on. */
void elector__schedule_retry(elector_election *el)
{
    int64_t d = elector__retry_delay(el);
    elector__timer_arm(el->etcd, &el->retry, elector__now_ms() + d, retry_fired, el);
}

/* ---------------------------------------------------------------- watching */

/* Whether a DELETE event on the watched predecessor is one etcd can send: the
 * predecessor's key, deleted at a revision R from the watch's start on, in a
 * response whose header revision is at least R. Only such an event gives the
 * serializable check its R; any other (a broken or lying server) is followed
 * by the linearizable check, which decides whatever the event said. */
static bool event_consistent(const elector_election *el,
                             const Etcdserverpb__WatchResponse *r,
                             const Mvccpb__KeyValue *kv)
{
    return kv && r->header && el->pred && kv->key.len == el->pred_len &&
           (!el->pred_len || !memcmp(kv->key.data, el->pred, el->pred_len)) &&
           kv->mod_revision >= el->watch_from && r->header->revision >= kv->mod_revision;
}

/* Ends the predecessor's watch (or a leader's on its key); not the waiting
 * candidate's watch on its own key. */
static void stop_pred_watch(elector_election *el)
{
    if (el->watch) elector_watch_cancel(el->watch);
    el->watch = NULL;
    el->watch_ok = false;
}

static bool is_our_key(const elector_election *el, const Mvccpb__KeyValue *kv)
{
    return kv && kv->key.len == el->klen &&
           (!el->klen || !memcmp(kv->key.data, el->key, el->klen));
}

/* The waiting candidate's watch on its own key: created once etcd showed the
 * key (the check at hrev), kept while the predecessors change. */
static void own_watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                         void *ud);
static void watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                     void *ud);

/* A watch for the deletion of `key` from revision `from` (NOPUT). */
static elector_watch *watch_deletes(elector_election *el, const uint8_t *key, size_t klen,
                                    int64_t from, elector_watch_cb cb)
{
    Etcdserverpb__WatchCreateRequest wc = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    Etcdserverpb__WatchCreateRequest__FilterType f =
        ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT;
    wc.key.data = (uint8_t *)key;
    wc.key.len = klen;
    wc.start_revision = from;
    wc.n_filters = 1;
    wc.filters = &f;
    return elector_etcd_watch(el->etcd, &wc, cb, el);
}

static void watch_own_key(elector_election *el, int64_t hrev)
{
    if (el->own_watch || elector__check_test.no_own_watch) return;
    el->own_from = hrev + 1;
    el->own_ok = false;
    el->own_asked_ns = elector_now_ns();
    /* Without it (out of memory) the wait goes on as before: the check after
     * the predecessor's deletion still finds our key gone. */
    el->own_watch = watch_deletes(el, el->key, el->klen, hrev + 1, own_watch_cb);
}

static void own_watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                         void *ud)
{
    elector_election *el = ud;
    if (w == el->watch) {
        /* It became the leader's watch on our key (become_leader). */
        watch_cb(w, err, r, ud);
        return;
    }
    if (err) {
        /* Dropped; the next check makes it again. A broken connection or a
         * compaction breaks the predecessor's watch too (the same start
         * revision), which checks again; and the check after the
         * predecessor's deletion finds our key gone in any case. */
        elector_watch_cancel(w);
        el->own_watch = NULL;
        el->own_ok = false;
        return;
    }
    if (r->created) el->own_ok = true;
    for (size_t i = 0; i < r->n_events; i++) {
        if (r->events[i]->type != MVCCPB__EVENT__EVENT_TYPE__DELETE) continue;
        if (!is_our_key(el, r->events[i]->kv)) continue;
        char detail[64 + 256];
        snprintf(detail, sizeof(detail), "our key %.*s was deleted while waiting",
                 (int)el->klen, el->key);
        elector__fail(el, ELECTOR_ESESSION, detail);
        return;
    }
}

/* The predecessor's watch (or, once leader, the one on our key) ended with
 * err: a broken or compacted watch never counts as a win; the check goes
 * again (after the retry's pause, or at once), or err ends the campaign or
 * the leadership. */
static void watch_broken(elector_election *el, int err)
{
    stop_pred_watch(el);
    enum elector__watch_next next = elector__watch_next(err);
    if (next == ELECTOR__WATCH_RETRY)
        elector__schedule_retry(el);
    else if (next == ELECTOR__WATCH_REREAD)
        elector__send_check(el);
    else if (el->state == E_LEADER)
        elector__lose(el, err, elector__etcd_errstr(el->etcd), 0);
    else
        elector__fail(el, err, elector__etcd_errstr(el->etcd));
}

static void watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                     void *ud)
{
    (void)w;
    elector_election *el = ud;
    if (err) {
        watch_broken(el, err);
        return;
    }
    if (r->created && !el->watch_ok) {
        el->watch_ok = true;
        el->checks.watch_wait_ns = elector_now_ns() - el->watch_asked_ns;
    }
    for (size_t i = 0; i < r->n_events; i++) {
        if (r->events[i]->type != MVCCPB__EVENT__EVENT_TYPE__DELETE) continue;
        /* What the fast check needs of this response, taken before the watch
         * (and with it the response) goes. */
        const Mvccpb__KeyValue *kv = r->events[i]->kv;
        struct deleted ev = {0};
        if (event_consistent(el, r, kv)) {
            ev.rev = kv->mod_revision;
            ev.member = r->header->member_id;
            ev.cluster = r->header->cluster_id;
            ev.conn = elector__conn_serial(el->etcd);
        }
        stop_pred_watch(el);
        if (el->state == E_LEADER) {
            char detail[64 + 256];
            snprintf(detail, sizeof(detail), "our key %.*s was deleted", (int)el->klen,
                     el->key);
            elector__lose(el, ELECTOR_ENOTLEADER, detail, 0);
        } else {
#ifdef ELECTOR_BENCH_PLANT_DELAY_US
            /* A planted regression for the self-test of scripts/bench-gate.sh
             * (--self-test builds build-gate-plant with
             * -DELECTOR_BENCH_PLANT_DELAY_US=2000): the successor handles its
             * predecessor's DELETE this much later. Never in a normal build. */
            struct timespec plant = {ELECTOR_BENCH_PLANT_DELAY_US / 1000000,
                                     ELECTOR_BENCH_PLANT_DELAY_US % 1000000 * 1000L};
            nanosleep(&plant, NULL);
#endif
            send_fast_check(el, &ev);
        }
        return;
    }
}

/* Watches `key` for its deletion from revision `from`. */
static void watch_key(elector_election *el, const uint8_t *key, size_t klen, int64_t from)
{
    stop_pred_watch(el);
    el->watch_from = from;
    el->watch_asked_ns = elector_now_ns();
    el->watch = watch_deletes(el, key, klen, from, watch_cb);
    if (!el->watch) elector__schedule_retry(el);
}

/* ---------------------------------------------------------------- check */

/* Our predecessor is k: 1 if it is a new one, 0 if it was already, or
 * ELECTOR_ENOMEM if it cannot be stored. */
static int set_pred(elector_election *el, const uint8_t *k, size_t n)
{
    if (el->pred && el->pred_len == n && (!n || !memcmp(el->pred, k, n))) return 0;
    int rc = elector__memdup(&el->pred, &el->pred_len, k, n);
    return rc ? rc : 1;
}

static void become_leader(elector_election *el, int64_t header_rev)
{
    if (!elector__session_alive(el->s)) {
        /* Our lease cannot be proven alive: this is exactly the phantom
         * leadership the re-check exists to prevent. */
        elector__fail(el, ELECTOR_ESESSION,
                      "session not provably alive when our turn came");
        return;
    }
    el->state = E_LEADER;
    el->gen++;
    el->retries = 0;
    el->outcome = 1;
    if (!elector__emit(el, ELECTOR_EV_ELECTED, 0, NULL, 0)) return;
    if (el->state != E_LEADER) return;
    if (el->own_watch) {
        /* The watch on our key we kept while waiting is the leader's now: no
         * new watch to ask for, and it is likely confirmed already. */
        stop_pred_watch(el);
        el->watch = el->own_watch;
        el->watch_ok = el->own_ok;
        el->watch_from = el->own_from;
        el->watch_asked_ns = el->own_asked_ns;
        el->own_watch = NULL;
        el->own_ok = false;
        return;
    }
    watch_key(el, el->key, el->klen, header_rev + 1);
}

/* The check was refused for good (EPERM, EAUTH, EPROTO). Our key exists (the
 * campaign made it) and would make every later candidate wait for our session:
 * try to delete it (we may be allowed to write our key, not to read the
 * prefix). A leader whose owner releases by hand (manual_release) keeps it:
 * the successor must not start before the owner has stopped acting. */
static void check_refused(elector_election *el, int err, const char *detail)
{
    bool owner_releases =
        el->state == E_LEADER && el->s && elector__session_manual_release(el->s);
    if (!el->keep_key && !owner_releases) {
        struct op *d = elector__op_new(el);
        if (d) elector__delete_key(el, el->rev, d, elector__stray_deleted);
    }
    if (el->state == E_LEADER)
        elector__lose(el, err, detail, 0);
    else
        elector__fail(el, err, detail);
}

/* Whether the answer to a serializable check may be taken (0), or which
 * fallback counter it goes to. The conditions and why they suffice:
 * docs/DESIGN.md, "Graceful handover: the serializable check". */
static uint64_t *fast_refused(elector_election *el, const struct op *o, int err,
                              const Etcdserverpb__TxnResponse *r)
{
    elector_election_stats *c = &el->checks;
    /* EPROTO: the transport's shape check refused the reply (a result missing,
     * extra, or of the wrong kind), or it could not be decoded. */
    if (err) return err == ELECTOR_EPROTO ? &c->fallback_reply : &c->fallback_error;
    const Etcdserverpb__ResponseHeader *h = r->header;
    if (!h || h->member_id != o->ev_member || h->cluster_id != o->ev_cluster)
        return &c->fallback_member;
    /* The same connection as the event: no reconnect (to the same member,
     * restarted perhaps) in between. */
    if (!o->ev_conn || elector__conn_serial(el->etcd) != o->ev_conn)
        return &c->fallback_conn;
    /* The member's state at h shows R: every answer is conclusive. */
    if (h->revision < o->ev_rev) return &c->fallback_stale;
    if (r->succeeded) {
        const Etcdserverpb__ResponseOp *op = r->n_responses ? r->responses[0] : NULL;
        if (!op ||
            op->response_case != ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE ||
            !op->response_range)
            return &c->fallback_reply;
    }
    return NULL;
}

/* The check found kv before our key (at revision hrev): we wait for its
 * deletion, told once per predecessor (WAITING), watching it. */
static void wait_behind(elector_election *el, const Mvccpb__KeyValue *kv, int64_t hrev)
{
    el->state = E_WAIT;
    int pred = set_pred(el, kv->key.data, kv->key.len);
    if (pred < 0) {
        /* Out of memory: WAITING would go untold; check again later. */
        elector__schedule_retry(el);
        return;
    }
    /* A predecessor without a lease never goes by itself: WAITING says so. */
    char blocked[ELECTOR__BLOCKED_DETAIL] = "";
    if (pred && !kv->lease)
        elector__blocked_detail(blocked, sizeof(blocked), el->name, kv->key.data,
                                kv->key.len);
    if (pred && !elector__emit(el, ELECTOR_EV_WAITING, *blocked ? ELECTOR_EBLOCKED : 0,
                               blocked, 0))
        return;
    if (el->state != E_WAIT) return;
    watch_key(el, kv->key.data, kv->key.len, hrev + 1); /* first: the one that wakes us */
    watch_own_key(el, hrev);
}

static void check_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct op *o = ud;
    struct op fast = *o;
    elector_election *el = elector__op_end(o);
    if (!el) return;
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    if (fast.fast) {
        uint64_t *why = fast_refused(el, &fast, err, r);
        if (why) {
            /* Not conclusive: today's linearizable check decides, at once. */
            (*why)++;
            elector__send_check(el);
            return;
        }
        el->checks.serializable_taken++;
    }
    if (!err) el->checks.last_decided_by = fast.fast ? 2 : 1;
    const Etcdserverpb__RangeResponse *rr =
        !err && r->succeeded ? elector__txn_range(e, r, 0) : NULL;
    if (!err && r->succeeded && !rr) err = ELECTOR_EPROTO;
    if (rr && !fast.fast) elector__pace_note_keys(e, rr->count);
    if (err == ELECTOR_EPERM || err == ELECTOR_EAUTH || err == ELECTOR_EPROTO) {
        check_refused(el, err, elector__etcd_errstr(e));
        return;
    }
    if (err) {
        elector__schedule_retry(el);
        return;
    }
    if (!r->succeeded) {
        if (el->state == E_LEADER)
            elector__lose(el, ELECTOR_ENOTLEADER, "our key is gone", 0);
        else
            elector__fail(
                el, ELECTOR_ESESSION,
                "our key vanished while waiting (lease expired or key deleted)");
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
    wait_behind(el, rr->kvs[0], hrev);
}

/* A slot of the pacer is free for el, queued by elector__send_check(): the
 * check goes, unless it is no longer wanted (resigned, failed, a reply came). */
static void check_turn(elector_election *el)
{
    if (el->life.closed) return;
    if ((el->state == E_WAIT || el->state == E_LEADER) && el->pace_what == PACE_CHECK &&
        el->pace_gen == el->gen)
        elector__send_check(el);
}

/* The check Txn (docs/DESIGN.md, "Elections"): if CreateRevision(key) == rev,
 * Range(the newest key under p created before rev) -- our predecessor, if any
 * (check_done reads it: result 0). serializable: a serializable Range, so the
 * Txn is read-only and made only of serializable ranges, and the member
 * answers it from its own state without a round through the Raft leader
 * (etcd's isTxnSerializable). */
static void txn_check(elector__txn *t, const elector_election *el, bool serializable)
{
    elector__cmp_create(&t->cmp, el->key, el->klen, el->rev);
    elector__leader_range(&t->range, &el->prefix);
    t->range.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
    t->range.max_create_revision = el->rev - 1;
    t->range.serializable = serializable;
    etcdserverpb__request_op__init(&t->op[0]);
    t->op[0].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    t->op[0].request_range = &t->range;
    elector__txn_init(t, 1);
}

void elector__send_check(elector_election *el)
{
    el->pace_what = PACE_CHECK;
    el->pace_gen = el->gen;
    if (elector__pace_wait(el, check_turn)) return;
    elector__txn t;
    txn_check(&t, el, false);
    struct op *o = elector__op_new(el);
    if (o) elector__pace_take_check(o);
    el->checks.checks_linearizable++;
    if (!o || elector__send_txn(el, &t.txn, o, check_done)) elector__schedule_retry(el);
}

/* The check after our predecessor's DELETE event at revision R: the same
 * question as a serializable read-only Txn, answered by the member from its
 * own state. Its answer is taken only from the member that delivered the
 * event, on the same connection, at a header revision >= R; anything else
 * falls back to elector__send_check() (check_done). */
static void send_fast_check(elector_election *el, const struct deleted *ev)
{
    const elector__check_knobs *k = &elector__check_test;
    if (k->off || ev->rev <= 0 || !ev->conn || !ev->member) {
        elector__send_check(el);
        return;
    }
    elector__txn t;
    txn_check(&t, el, true);
    struct op *o = elector__op_new(el);
    if (!o) {
        elector__schedule_retry(el);
        return;
    }
    o->fast = true;
    o->ev_rev = ev->rev + k->rev_shift;
    o->ev_member = ev->member;
    o->ev_cluster = ev->cluster;
    o->ev_conn = ev->conn;
    el->checks.checks_serializable++;
    if (k->before_send) k->before_send(el->etcd, k->ud);
    if (elector__send_txn(el, &t.txn, o, check_done)) {
        elector__send_check(el);
        return;
    }
    if (k->after_send) k->after_send(el->etcd, k->ud);
}
