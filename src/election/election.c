/* SPDX-License-Identifier: MIT */
/* Elections: campaign, wait for the predecessor, lead. (What a leader does, and
 * how a resign ends a campaign, is in leader.c.)
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
 * and the session's validity deadline has not passed.
 *
 * An election hears of its session through a listener (session.c) and reads it
 * only through functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "election_private.h"

static void send_check(elector_election *el);

/* The DELETE event of our predecessor: its revision R, and where it came from. */
struct deleted {
    int64_t rev;
    uint64_t member, cluster, conn;
};
static void send_fast_check(elector_election *el, const struct deleted *ev);

elector__check_knobs elector__check_test;

/* ---------------------------------------------------------------- helpers */

const char *elector_event_name(elector_event_type t)
{
    static const char *names[] = {"",          "waiting",     "elected", "proclaimed",
                                  "lost",      "resigned",    "failed",  "leader",
                                  "no_leader", "session_lost"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

void elector__el_hold(elector_election *el)
{
    elector__hold(&el->life);
}

static void el_release(elector_election *el)
{
    elector__timer_disarm(el->etcd, &el->retry);
    elector__timer_disarm(el->etcd, &el->notify);
    elector__timer_disarm(el->etcd, &el->resign_timer);
    free(el->name);
    elector__prefix_free(&el->prefix);
    free(el->key);
    free(el->value);
    free(el->pred);
    free(el);
}

void elector__el_unhold(elector_election *el)
{
    if (elector__unhold(&el->life)) el_release(el);
}

static int64_t session_lease(const elector_election *el)
{
    return el->s ? elector_session_lease(el->s) : 0;
}

/* The session is alive and its lease granted: requests that need it may go. */
static bool session_live(const elector_election *el)
{
    return el->s && elector__session_phase(el->s) == ELECTOR__S_ALIVE;
}

/* Delivers an event to the log hook and the callback; mono_ns: CLOCK_MONOTONIC,
 * 0 = now. Returns false if the election was freed meanwhile (the caller must
 * stop touching it). */
bool elector__emit(elector_election *el, elector_event_type type, int reason,
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
                        .lease = session_lease(el),
                        .mono_ns = mono_ns ? mono_ns : elector__mono_ns()};
    elector__el_hold(el);
    bool logged = type == ELECTOR_EV_ELECTED || type == ELECTOR_EV_LOST ||
                  type == ELECTOR_EV_RESIGNED || type == ELECTOR_EV_PROCLAIMED;
    if (el->log && logged && !el->life.closed) el->log(el, &ev, el->log_ud);
    if (el->cb && !el->life.closed) el->cb(el, &ev, el->ud);
    bool alive = !el->life.closed;
    elector__el_unhold(el);
    return alive;
}

/* ---------------------------------------------------------------- the pacer
 *
 * Setting up many elections at once sends a campaign and a check Txn for each.
 * Handed to the transport all at once, 100,000 of them are 100,000 HTTP/2
 * streams that etcd serves in parallel: the lease's keepalive waits behind
 * them until the lease expires, and etcd refuses proposals ("too many
 * requests"). So these two bulk requests hold a slot of a pacer, one per
 * client, while in flight: at most `limit` at a time. An election that finds
 * no slot waits in a FIFO; a slot freed by a reply goes to it from the loop (a
 * timer due now), never from inside another election's callback. Deletes of
 * our keys (resign, free) are paced too, in a FIFO of their own served first:
 * freeing 100,000 elections at once is as much bulk as setting them up.
 * Keepalives, proclaims, guarded Txns and the check after a predecessor's
 * delete are not paced.
 *
 * The limit follows etcd's pace (additive increase, multiplicative decrease):
 * a paced reply that took longer than PACE_SLOW_MS cuts it by a quarter (once
 * per PACE_SLOW_MS), any other raises it by one, between PACE_MIN and
 * ELECTOR__PACE_MAX. etcd renews a lease only once it has applied what it had
 * committed before, so the keepalive waits behind etcd's backlog of applies:
 * keeping the replies under a second keeps that backlog short, on a fast
 * member as on a slow one. (A lower mark starved setup on a busy disk, where
 * every Txn waits 100-250 ms for the WAL's fsync however few are in flight:
 * the window fell to its minimum and stayed there.)
 *
 * A check costs etcd more the more candidates its election has: etcd 3.4
 * reads, filters and sorts every key under the prefix before the limit of 1.
 * 1,024 checks in flight over 10,000 candidates kept etcd busy enough that
 * renewals came late and a session at TTL 10 s was lost. So a check holds
 * 1 + K / PACE_KEYS_PER_SLOT slots, K the key count (RangeResponse.count) of
 * the latest check answered on this client; a campaign or a delete holds one.
 * An operation that needs more slots than are free waits, unless nothing is
 * in flight. */
#define ELECTOR__PACE_MAX 256
#define PACE_MIN 4
#define PACE_SLOW_MS 1000
#define PACE_KEYS_PER_SLOT 256

enum { PACE_CAMPAIGN = 1, PACE_CHECK };

typedef struct pacer {
    elector__ext ext; /* first: the client's handle on it */
    elector_etcd *etcd;
    int in_flight, limit;
    int64_t cut_ms;     /* when the limit was last cut */
    int64_t check_keys; /* keys under the prefix, as the latest check saw */
    elector_election *head, *tail;
    struct op *dhead, *dtail; /* deletes waiting for a slot (they go first) */
    elector__timer timer;
} pacer;

static const char pacer_kind = 'P';

static void pacer_free(elector__ext *x)
{
    pacer *p = (pacer *)x;
    elector__timer_disarm(p->etcd, &p->timer);
    /* The client is being freed: deletes never sent are dropped (their
     * elections' holds too; nothing is called back). */
    while (p->dhead) {
        struct op *o = p->dhead;
        p->dhead = o->qnext;
        o->el->deletes--;
        elector__op_end(o);
    }
    free(p);
}

static void pace_unqueue(pacer *p, elector_election *el)
{
    if (!el->pace_queued) return;
    if (el->pace_prev)
        el->pace_prev->pace_next = el->pace_next;
    else
        p->head = el->pace_next;
    if (el->pace_next)
        el->pace_next->pace_prev = el->pace_prev;
    else
        p->tail = el->pace_prev;
    el->pace_next = el->pace_prev = NULL;
    el->pace_queued = false;
}

static void pace_go(elector_election *el);
static void pace_take(struct op *o, int weight);

static int check_weight(const pacer *p)
{
    int64_t w = 1 + p->check_keys / PACE_KEYS_PER_SLOT;
    return w > ELECTOR__PACE_MAX ? ELECTOR__PACE_MAX : (int)w;
}

/* The slots el's next paced request holds (pace_go sends a campaign or a check). */
static int pace_weight(const pacer *p, const elector_election *el)
{
    if (el->state == E_CAMPAIGN && el->rev == 0) return 1;
    return el->pace_what == PACE_CHECK ? check_weight(p) : 1;
}

static bool pace_fits(const pacer *p, int weight)
{
    return p->in_flight == 0 || p->in_flight + weight <= p->limit;
}

static void pace_fired(elector__timer *t, void *ud)
{
    (void)t;
    pacer *p = ud;
    while (p->dhead && p->in_flight < p->limit) {
        struct op *o = p->dhead;
        p->dhead = o->qnext;
        if (!p->dhead) p->dtail = NULL;
        o->qnext = NULL;
        pace_take(o, 1);
        int rc = elector__send_delete(o);
        if (rc) o->done(p->etcd, rc, NULL, o); /* ends o, frees its slot */
    }
    while (p->head && pace_fits(p, pace_weight(p, p->head))) {
        elector_election *el = p->head;
        pace_unqueue(p, el);
        elector__el_hold(el);
        pace_go(el);
        elector__el_unhold(el);
    }
}

/* True when el must wait for a slot (it is queued, to send what its state then
 * asks for); false when it may send now. */
static bool pace_wait(elector_election *el)
{
    pacer *p =
        (pacer *)elector__ext_get(el->etcd, &pacer_kind, sizeof(pacer), pacer_free);
    if (!p) return false; /* out of memory: unpaced */
    p->etcd = el->etcd;
    if (!p->limit) p->limit = ELECTOR__PACE_MAX;
    if (pace_fits(p, pace_weight(p, el))) {
        pace_unqueue(p, el);
        return false;
    }
    if (el->pace_queued) return true;
    el->pace_queued = true;
    el->pace_next = NULL;
    el->pace_prev = p->tail;
    if (p->tail)
        p->tail->pace_next = el;
    else
        p->head = el;
    p->tail = el;
    return true;
}

/* o (a campaign or check Txn, a delete) holds `weight` slots until
 * elector__op_end(). */
static void pace_take(struct op *o, int weight)
{
    pacer *p = (pacer *)elector__ext_find(o->el->etcd, &pacer_kind);
    if (!p) return;
    o->paced = true;
    o->weight = weight;
    o->sent_ms = elector__now_ms();
    p->in_flight += weight;
}

static void pace_release(elector_election *el, const struct op *o)
{
    pacer *p = (pacer *)elector__ext_find(el->etcd, &pacer_kind);
    if (!p) return;
    p->in_flight -= o->weight;
    int64_t now = elector__now_ms();
    if (now - o->sent_ms > PACE_SLOW_MS) {
        if (now - p->cut_ms > PACE_SLOW_MS && p->limit > PACE_MIN) {
            p->limit -= p->limit / 4 ? p->limit / 4 : 1;
            if (p->limit < PACE_MIN) p->limit = PACE_MIN;
            p->cut_ms = now;
        }
    } else if (p->limit < ELECTOR__PACE_MAX) {
        p->limit++;
    }
    if ((p->head || p->dhead) && p->in_flight < p->limit && !p->timer.armed)
        elector__timer_arm(p->etcd, &p->timer, elector__now_ms(), pace_fired, p);
}

bool elector__pace_delete(struct op *o)
{
    pacer *p =
        (pacer *)elector__ext_get(o->el->etcd, &pacer_kind, sizeof(pacer), pacer_free);
    if (!p) return false; /* out of memory: unpaced */
    p->etcd = o->el->etcd;
    if (!p->limit) p->limit = ELECTOR__PACE_MAX;
    if (p->in_flight < p->limit) {
        pace_take(o, 1);
        return false;
    }
    o->qnext = NULL;
    if (p->dtail)
        p->dtail->qnext = o;
    else
        p->dhead = o;
    p->dtail = o;
    return true;
}

/* Leaves the queue for good (the election is freed). */
static void pace_forget(elector_election *el)
{
    pacer *p = el->pace_queued ? (pacer *)elector__ext_find(el->etcd, &pacer_kind) : NULL;
    if (p) pace_unqueue(p, el);
}

struct op *elector__op_new(elector_election *el)
{
    struct op *o = calloc(1, sizeof(*o));
    if (!o) return NULL;
    o->el = el;
    o->gen = el->gen;
    elector__el_hold(el);
    return o;
}

/* Ends an operation's hold; returns the election if the reply is still current.
 * A current election is not closed, so dropping the hold cannot free it. */
elector_election *elector__op_end(struct op *o)
{
    elector_election *el = o->el;
    bool current = !el->life.closed && o->gen == el->gen;
    if (o->paced) pace_release(el, o);
    free(o->value);
    free(o);
    elector__el_unhold(el);
    return current ? el : NULL;
}

void elector__stop_watch(elector_election *el)
{
    if (el->watch) elector_watch_cancel(el->watch);
    el->watch = NULL;
    el->watch_ok = false;
}

int elector__send_txn(elector_election *el, Etcdserverpb__TxnRequest *txn, struct op *o,
                      elector_etcd_cb done)
{
    int rc = elector_etcd_call(el->etcd, ELECTOR_RPC_TXN, &txn->base, NULL, done, o);
    if (rc) elector__op_end(o);
    return rc;
}

/* ---------------------------------------------------------------- endings */

/* Our campaign is over without leadership. */
static void fail(elector_election *el, int reason, const char *detail)
{
    el->campaign_waits = false;
    elector__stop_watch(el);
    elector__timer_disarm(el->etcd, &el->retry);
    el->state = E_IDLE;
    el->gen++;
    el->outcome = reason ? reason : ELECTOR_ECANCELED;
    elector__emit(el, ELECTOR_EV_FAILED, reason, detail, 0);
}

/* We led and no longer do. at_ns: when the belief ended, on the deadline clock
 * (0 = now). It is never later than the validity deadline: elector_is_leader()
 * turned false then, even if this process was frozen and only notices now. The
 * event carries that instant on CLOCK_MONOTONIC. */
void elector__lose(elector_election *el, int reason, const char *detail, int64_t at_ns)
{
    if (!at_ns) at_ns = elector_now_ns();
    int64_t deadline = el->s ? elector__session_deadline_raw_ns(el->s) : 0;
    if (deadline && deadline < at_ns) at_ns = deadline;
    int64_t mono_ns = elector__mono_of(at_ns);
    elector__stop_watch(el);
    elector__timer_disarm(el->etcd, &el->retry);
    el->state = E_IDLE;
    el->gen++;
    el->outcome = reason;
    elector__emit(el, ELECTOR_EV_LOST, reason, detail, mono_ns);
}

/* ---------------------------------------------------------------- the session */

static elector_election *of_listener(elector__session_listener *l)
{
    return (elector_election *)((char *)l - offsetof(elector_election, listener));
}

static void on_session_ready(elector__session_listener *l)
{
    elector_election *el = of_listener(l);
    elector__el_hold(el);
    if (el->state == E_CAMPAIGN && el->campaign_waits && !el->deletes)
        elector__send_campaign(el);
    elector__el_unhold(el);
}

static void on_session_ended(elector__session_listener *l, int reason, const char *detail,
                             int64_t end_ns)
{
    elector_election *el = of_listener(l);
    elector__el_hold(el);
    el->keep_key = true;
    if (el->state == E_LEADER)
        elector__lose(el, reason, detail, end_ns);
    else if (el->state != E_IDLE)
        fail(el, reason, detail);
    elector__el_unhold(el);
}

/* The session is closing: elections forget it (they report ESESSION). */
static void on_session_detached(elector__session_listener *l)
{
    of_listener(l)->s = NULL;
}

static const elector__session_events session_events = {on_session_ready, on_session_ended,
                                                       on_session_detached};

/* ---------------------------------------------------------------- retry */

static void retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_election *el = ud;
    if (el->state == E_CAMPAIGN && el->rev == 0)
        elector__send_campaign(el);
    else if (el->state == E_WAIT || el->state == E_LEADER)
        send_check(el);
}

/* A read or watch failed for a reason that may heal (connection, no leader):
 * check again after a short, growing pause. The session's deadline bounds how
 * long this can go on. */
static void schedule_retry(elector_election *el)
{
    /* Jittered: thousands of elections that failed together (etcd busy, the
     * connection lost) do not come back together. */
    int64_t d =
        elector__backoff_ms(el->retries + 1, 50, 1600, elector__next_rnd(el->etcd));
    el->retries++;
    el->checks.retries++;
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

static void watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                     void *ud)
{
    (void)w;
    elector_election *el = ud;
    if (err) {
        /* A broken or compacted watch never counts as a win: check again. */
        elector__stop_watch(el);
        enum elector__watch_next next = elector__watch_next(err);
        if (next == ELECTOR__WATCH_RETRY)
            schedule_retry(el);
        else if (next == ELECTOR__WATCH_REREAD)
            send_check(el);
        else if (el->state == E_LEADER)
            elector__lose(el, err, elector_etcd_errstr(el->etcd), 0);
        else
            fail(el, err, elector_etcd_errstr(el->etcd));
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
        elector__stop_watch(el);
        if (el->state == E_LEADER) {
            char detail[64 + 256];
            snprintf(detail, sizeof(detail), "our key %.*s was deleted", (int)el->klen,
                     el->key);
            elector__lose(el, ELECTOR_ENOTLEADER, detail, 0);
        } else {
            send_fast_check(el, &ev);
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
    elector__stop_watch(el);
    el->watch_from = from;
    el->watch_asked_ns = elector_now_ns();
    el->watch = elector_etcd_watch(el->etcd, &wc, watch_cb, el);
    if (!el->watch) schedule_retry(el);
}

/* ---------------------------------------------------------------- check */

/* Our predecessor is k; false if it was already (or cannot be stored). */
static bool set_pred(elector_election *el, const uint8_t *k, size_t n)
{
    if (el->pred && el->pred_len == n && (!n || !memcmp(el->pred, k, n))) return false;
    return elector__memdup(&el->pred, &el->pred_len, k, n) == 0;
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
    if (!elector__emit(el, ELECTOR_EV_ELECTED, 0, NULL, 0)) return;
    if (el->state == E_LEADER) watch_key(el, el->key, el->klen, header_rev + 1);
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
        fail(el, err, detail);
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
            send_check(el);
            return;
        }
        el->checks.serializable_taken++;
    }
    if (!err) el->checks.last_decided_by = fast.fast ? 2 : 1;
    const Etcdserverpb__RangeResponse *rr =
        !err && r->succeeded ? elector__txn_range(e, r, 0) : NULL;
    if (!err && r->succeeded && !rr) err = ELECTOR_EPROTO;
    if (rr && !fast.fast) {
        pacer *p = (pacer *)elector__ext_find(e, &pacer_kind);
        if (p) p->check_keys = rr->count;
    }
    if (err == ELECTOR_EPERM || err == ELECTOR_EAUTH || err == ELECTOR_EPROTO) {
        check_refused(el, err, elector_etcd_errstr(e));
        return;
    }
    if (err) {
        schedule_retry(el);
        return;
    }
    if (!r->succeeded) {
        if (el->state == E_LEADER)
            elector__lose(el, ELECTOR_ENOTLEADER, "our key is gone", 0);
        else
            fail(el, ELECTOR_ESESSION,
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
    const Mvccpb__KeyValue *kv = rr->kvs[0];
    el->state = E_WAIT;
    if (set_pred(el, kv->key.data, kv->key.len) &&
        !elector__emit(el, ELECTOR_EV_WAITING, 0, NULL, 0))
        return;
    if (el->state == E_WAIT) watch_key(el, kv->key.data, kv->key.len, hrev + 1);
}

static void send_check(elector_election *el)
{
    el->pace_what = PACE_CHECK;
    el->pace_gen = el->gen;
    if (pace_wait(el)) return;
    elector__txn t;
    elector__txn_check(&t, el->key, el->klen, el->rev, &el->prefix);
    struct op *o = elector__op_new(el);
    if (o) {
        pacer *p = (pacer *)elector__ext_find(el->etcd, &pacer_kind);
        pace_take(o, p ? check_weight(p) : 1);
    }
    el->checks.checks_linearizable++;
    if (!o || elector__send_txn(el, &t.txn, o, check_done)) schedule_retry(el);
}

/* A slot is free for el, queued by send_check() or elector__send_campaign():
 * it sends what its state asks for now (nothing, if that changed meanwhile:
 * resigned, failed, or a reply came). */
static void pace_go(elector_election *el)
{
    if (el->life.closed) return;
    if (el->state == E_CAMPAIGN && el->rev == 0) {
        if (el->campaign_waits && !el->deletes && session_live(el))
            elector__send_campaign(el);
    } else if (el->state == E_WAIT || el->state == E_LEADER) {
        if (el->pace_what == PACE_CHECK && el->pace_gen == el->gen) send_check(el);
    }
}

/* The check after our predecessor's DELETE event at revision R: the same
 * question as a serializable read-only Txn, answered by the member from its
 * own state. Its answer is taken only from the member that delivered the
 * event, on the same connection, at a header revision >= R; anything else
 * falls back to send_check() (check_done). */
static void send_fast_check(elector_election *el, const struct deleted *ev)
{
    const elector__check_knobs *k = &elector__check_test;
    if (k->off || ev->rev <= 0 || !ev->conn || !ev->member) {
        send_check(el);
        return;
    }
    elector__txn t;
    elector__txn_check_serializable(&t, el->key, el->klen, el->rev, &el->prefix);
    struct op *o = elector__op_new(el);
    if (!o) {
        schedule_retry(el);
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
        send_check(el);
        return;
    }
    if (k->after_send) k->after_send(el->etcd, k->ud);
}

void elector_election_get_stats(const elector_election *el, elector_election_stats *out)
{
    *out = el->checks;
    out->watching = el->watch && el->watch_ok;
}

/* ---------------------------------------------------------------- campaign */

/* The campaign Txn was answered (rev: our key's create revision, 0 if unknown). */
static void campaign_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct op *o = ud;
    elector_election *owner = o->el;
    unsigned gen = o->gen;
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    int64_t rev = 0;
    if (!err && r->succeeded && r->header) rev = r->header->revision;
    if (!err && !r->succeeded) {
        const Etcdserverpb__RangeResponse *rr = elector__txn_range(e, r, 1);
        if (!rr)
            err = ELECTOR_EPROTO;
        else if (rr->n_kvs)
            rev = rr->kvs[0]->create_revision;
    }
    if ((rev || elector__transient(err)) && gen != owner->gen &&
        (owner->life.closed || owner->state == E_IDLE) && !owner->keep_key) {
        /* Resigned or freed while the campaign Txn was in flight: remove the key it
         * made (or may have made: a transient error leaves that unknown), so it
         * does not block the election until the lease ends. The op keeps the
         * (possibly freed) election's memory, and its key, alive. */
        struct op *d = elector__op_new(owner);
        if (d) elector__delete_key(owner, rev, d, elector__stray_deleted);
    }
    elector_election *el = elector__op_end(o);
    if (!el) return;
    if (elector__transient(err) && session_live(el)) {
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
        snprintf(detail, sizeof(detail), "campaign request failed: %s",
                 elector_etcd_errstr(e));
        fail(el, err, detail);
        return;
    }
    if (rev <= 0) {
        /* A fencing token must be a real revision (etcd's start at 1). */
        char detail[200];
        snprintf(detail, sizeof(detail),
                 "%s: campaign reply from %s without a valid revision (%lld)",
                 elector_rpc_path(ELECTOR_RPC_TXN), elector_etcd_current_endpoint(e),
                 (long long)rev);
        fail(el, ELECTOR_EPROTO, detail);
        return;
    }
    el->rev = rev;
    el->state = E_WAIT;
    send_check(el);
}

/* Our key: the prefix and our lease in lowercase hex. */
static int make_key(elector_election *el)
{
    char hex[17];
    int64_t lease = session_lease(el);
    int n = snprintf(hex, sizeof(hex), "%llx", (unsigned long long)lease);
    uint8_t *k = malloc(el->prefix.len + (size_t)n);
    if (!k) return ELECTOR_ENOMEM;
    memcpy(k, el->prefix.key, el->prefix.len);
    memcpy(k + el->prefix.len, hex, (size_t)n);
    free(el->key);
    el->key = k;
    el->key_lease = lease;
    el->klen = el->prefix.len + (size_t)n;
    return 0;
}

/* Campaign Txn: create our key if absent; if present (same lease: a second
 * campaign, or etcdctl's), overwrite its value and read its create revision. */
void elector__send_campaign(elector_election *el)
{
    el->pace_what = PACE_CAMPAIGN;
    el->pace_gen = el->gen;
    if (pace_wait(el)) {
        el->campaign_waits = true; /* not sent yet */
        return;
    }
    el->campaign_waits = false;
    if (make_key(el)) {
        fail(el, ELECTOR_ENOMEM, "out of memory");
        return;
    }
    elector__txn t;
    elector__txn_campaign(&t, el->key, el->klen, el->value, el->vlen, el->key_lease);
    struct op *o = elector__op_new(el);
    if (o) pace_take(o, 1);
    int rc = o ? elector__send_txn(el, &t.txn, o, campaign_done) : ELECTOR_ENOMEM;
    if (rc) fail(el, rc, elector_etcd_errstr(el->etcd));
}

/* ---------------------------------------------------------------- names
 *
 * The client's elections by name, so that a campaign finds another election
 * object with its name without walking every election of its session (that
 * made setting up 100,000 elections quadratic: minutes of CPU with the loop
 * not running, and the session lost). */
typedef struct names {
    elector__ext ext; /* first */
    elector_election **tab;
    size_t cap, count;
} names;

static const char names_kind = 'N';

static void names_free(elector__ext *x)
{
    names *n = (names *)x;
    free(n->tab);
    free(n);
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static names *names_of(elector_etcd *e)
{
    return (names *)elector__ext_get(e, &names_kind, sizeof(names), names_free);
}

/* Adds el; false when out of memory. */
static bool name_add(elector_election *el)
{
    names *n = names_of(el->etcd);
    if (!n) return false;
    if (n->count >= n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 64;
        elector_election **t = calloc(cap, sizeof(*t));
        if (!t) return false;
        for (size_t i = 0; i < n->cap; i++) {
            for (elector_election *o = n->tab[i], *nx; o; o = nx) {
                nx = o->name_next;
                o->name_next = t[o->name_hash & (cap - 1)];
                t[o->name_hash & (cap - 1)] = o;
            }
        }
        free(n->tab);
        n->tab = t;
        n->cap = cap;
    }
    el->name_hash = name_hash(el->name);
    elector_election **b = &n->tab[el->name_hash & (n->cap - 1)];
    el->name_next = *b;
    *b = el;
    n->count++;
    el->named = true;
    return true;
}

static void name_remove(elector_election *el)
{
    names *n = el->named ? (names *)elector__ext_find(el->etcd, &names_kind) : NULL;
    if (!n) return;
    elector_election **pp = &n->tab[el->name_hash & (n->cap - 1)];
    while (*pp && *pp != el)
        pp = &(*pp)->name_next;
    if (*pp) {
        *pp = el->name_next;
        n->count--;
    }
    el->named = false;
}

/* Another election object with el's name campaigns, leads or deletes our key
 * on this session (one key per name and session). */
static bool name_busy(const elector_election *el)
{
    names *n = (names *)elector__ext_find(el->etcd, &names_kind);
    if (!n || !n->cap) return false;
    for (const elector_election *o = n->tab[el->name_hash & (n->cap - 1)]; o;
         o = o->name_next) {
        if (o != el && o->s == el->s &&
            (o->state != E_IDLE || o->resign_pending || o->deletes) &&
            !strcmp(o->name, el->name))
            return true;
    }
    return false;
}

int elector_campaign(elector_election *el, const void *value, size_t len)
{
    if (!el || el->life.closed) return ELECTOR_EINVAL;
    if (el->state != E_IDLE) return ELECTOR_EBUSY;
    if (!el->s || elector__session_phase(el->s) >= ELECTOR__S_DEAD)
        return ELECTOR_ESESSION;
    if (len > ELECTOR__GRPC_MAX_MSG) return ELECTOR_ETOOLARGE;
    /* A second election object with this name would share (and delete) our key. */
    if (name_busy(el)) return ELECTOR_EBUSY;
    if (elector__memdup(&el->value, &el->vlen, value, len)) return ELECTOR_ENOMEM;
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
    if (session_live(el) && !el->deletes) elector__send_campaign(el);
    return 0;
}

int elector_campaign_sync(elector_election *el, const void *value, size_t len,
                          int64_t timeout_ms)
{
    int rc = elector_campaign(el, value, len);
    if (rc) return rc;
    int64_t end = elector__now_ms() + timeout_ms;
    elector__el_hold(el);
    while (el->outcome == 0 && !el->life.closed) {
        int64_t left = end - elector__now_ms();
        if (timeout_ms >= 0 && left <= 0) {
            rc = ELECTOR_ETIMEDOUT;
            break;
        }
        rc = elector_etcd_run_once(el->etcd, timeout_ms >= 0 ? left : -1);
        if (rc) break;
    }
    if (!rc) rc = el->life.closed ? ELECTOR_ECLOSED : el->outcome == 1 ? 0 : el->outcome;
    elector__el_unhold(el);
    return rc;
}

/* ---------------------------------------------------------------- lifecycle */

elector_election *elector_election_new(elector_session *s, const char *name,
                                       elector_election_cb cb, void *ud)
{
    if (!s || !name || !*name || elector__session_phase(s) == ELECTOR__S_CLOSED)
        return NULL;
    elector_election *el = calloc(1, sizeof(*el));
    if (!el) return NULL;
    el->name = elector__strdup(name);
    if (!el->name || elector__prefix_init(&el->prefix, name)) {
        free(el->name);
        free(el);
        return NULL;
    }
    el->s = s;
    el->etcd = elector__session_etcd(s);
    el->cb = cb;
    el->ud = ud;
    if (!name_add(el)) {
        elector__prefix_free(&el->prefix);
        free(el->name);
        free(el);
        return NULL;
    }
    elector__session_listen(s, &el->listener, &session_events);
    return el;
}

static void detach(elector_election *el)
{
    if (!el->s) return;
    elector__session_unlisten(el->s, &el->listener);
    el->s = NULL;
}

void elector_election_free(elector_election *el)
{
    if (!el || el->life.closed) return;
    /* Best effort, one attempt: delete our key if we may hold one (by its
     * revision, or by name and lease when a lost answer left that unknown), or
     * if a resign still owes the delete. A campaign Txn in flight is handled
     * by campaign_done. Once the session is over the key goes with the lease. */
    if (!session_live(el)) el->keep_key = true;
    int64_t rev = -1;
    if (el->state != E_IDLE && (el->rev || el->maybe_key))
        rev = el->rev;
    else if (el->resign_pending)
        rev = el->resign_rev;
    if (rev >= 0 && !el->keep_key) {
        struct op *o = elector__op_new(el);
        if (o) elector__delete_key(el, rev, o, elector__stray_deleted);
    }
    elector__stop_watch(el);
    pace_forget(el);
    name_remove(el);
    elector__timer_disarm(el->etcd, &el->retry);
    elector__timer_disarm(el->etcd, &el->notify);
    elector__timer_disarm(el->etcd, &el->resign_timer);
    detach(el);
    el->state = E_IDLE;
    el->campaign_waits = false;
    el->resign_pending = false;
    el->gen++;
    el->cb = NULL;
    el->log = NULL;
    /* In-flight ops may still hold it; the last one frees. */
    if (elector__close(&el->life)) el_release(el);
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
