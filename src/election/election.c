/* SPDX-License-Identifier: MIT */
/* An election's handle and what every step of it uses: holds and the release
 * of its memory, events, operations in flight, the pacer that spaces the bulk
 * requests, and the two endings of a campaign (failed, lost). The steps
 * themselves are above: wait.c (check and watch the predecessor), delete.c
 * (delete our key), campaign.c (campaign and the handle's lifecycle), leader.c
 * (proclaim, resign, guarded Txns). Nothing here calls up: the pacer and a
 * finished delete start the next step through el->steps (campaign.c).
 *
 * States: IDLE -> CAMPAIGN (campaign Txn, or waiting for the session's lease)
 * -> WAIT (checking or watching the predecessor) -> LEADER -> IDLE. Every state
 * change bumps `gen`; replies that belong to an older generation are ignored, so
 * a resign never races with an old check that would make us leader again.
 *
 * An election hears of its session through a listener (session.c) and reads it
 * only through functions. */
#include <stdio.h>
#include <stdlib.h>
#include "election_private.h"

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
    if (el->named) el->steps->forget(el);
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

void elector__el_close(elector_election *el)
{
    if (elector__close(&el->life)) el_release(el);
}

int64_t elector__el_lease(const elector_election *el)
{
    return el->s ? elector__session_lease(el->s) : 0;
}

/* The session is alive and its lease granted: requests that need it may go. */
bool elector__el_live(const elector_election *el)
{
    return el->s && elector__session_phase(el->s) == ELECTOR__S_ALIVE;
}

/* Delivers an event to the log hook and the callback; mono_ns: CLOCK_MONOTONIC,
 * 0 = now. Returns false if the election was freed meanwhile (the caller must
 * stop touching it). */
void elector__blocked_detail(char *buf, size_t cap, const char *name, const uint8_t *key,
                             size_t klen)
{
    int n = klen > 200 ? 200 : (int)klen;
    snprintf(buf, cap,
             "a key without a lease, %.*s, blocks election %s: no candidate can lead "
             "until it is deleted (etcdctl del %.*s)",
             n, (const char *)key, name, n, (const char *)key);
}

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
                        .lease = elector__el_lease(el),
                        .mono_ns = mono_ns ? mono_ns : elector__mono_ns()};
    if (type == ELECTOR_EV_RESIGNED || type == ELECTOR_EV_FAILED) el->endings++;
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
        elector__pace_take(o, 1);
        int rc = o->el->steps->send_delete(o);
        if (rc) o->done(p->etcd, rc, NULL, o); /* ends o, frees its slot */
    }
    while (p->head && pace_fits(p, pace_weight(p, p->head))) {
        elector_election *el = p->head;
        pace_unqueue(p, el);
        elector__el_hold(el);
        el->steps->pace_go(el);
        elector__el_unhold(el);
    }
}

/* True when el must wait for a slot (it is queued, to send what its state then
 * asks for); false when it may send now. */
bool elector__pace_wait(elector_election *el)
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
void elector__pace_take(struct op *o, int weight)
{
    pacer *p = (pacer *)elector__ext_find(o->el->etcd, &pacer_kind);
    if (!p) return;
    o->paced = true;
    o->weight = weight;
    o->sent_ms = elector__now_ms();
    p->in_flight += weight;
}

int elector__pace_take_check(struct op *o)
{
    pacer *p = (pacer *)elector__ext_find(o->el->etcd, &pacer_kind);
    int weight = p ? check_weight(p) : 1;
    elector__pace_take(o, weight);
    return weight;
}

void elector__pace_note_keys(elector_etcd *e, int64_t keys)
{
    pacer *p = (pacer *)elector__ext_find(e, &pacer_kind);
    if (p) p->check_keys = keys;
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
        elector__pace_take(o, 1);
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

void elector__pace_forget(elector_election *el)
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

void elector__fail(elector_election *el, int reason, const char *detail)
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
 * (0 = now). It is never later than the validity deadline: elector__is_leader()
 * turned false then, even if this process was frozen and only notices now. The
 * event carries that instant on CLOCK_MONOTONIC. */
void elector__lose(elector_election *el, int reason, const char *detail, int64_t at_ns)
{
    if (!at_ns) at_ns = elector_now_ns();
    const char *why = NULL;
    if (reason == ELECTOR_ENOTLEADER && el->s && elector__session_restored(el->s, &why)) {
        /* Our key was found gone or not ours after etcd went back to an older
         * revision: the restore is the cause, and the token may be handed
         * out again (the session ends with the same reason at its next
         * keepalive answer). */
        reason = ELECTOR_ERESTORED;
        detail = why;
    }
    int64_t deadline = el->s ? elector__session_deadline_raw_ns(el->s) : 0;
    if (deadline && deadline < at_ns) {
        /* The validity deadline passed before we saw the key go (a frozen
         * process resumes with the DELETE and the expired timer together):
         * the session's expiry is the cause, whichever was read first. */
        at_ns = deadline;
        if (reason == ELECTOR_ENOTLEADER) reason = ELECTOR_ESESSION;
    }
    int64_t mono_ns = elector__mono_of(at_ns);
    elector__stop_watch(el);
    elector__timer_disarm(el->etcd, &el->retry);
    el->state = E_IDLE;
    el->gen++;
    el->outcome = reason;
    elector__emit(el, ELECTOR_EV_LOST, reason, detail, mono_ns);
}

/* ---------------------------------------------------------------- getters */

void elector__election_get_stats(const elector_election *el, elector_election_stats *out)
{
    *out = el->checks;
    out->watching = el->watch && el->watch_ok;
}

void elector__election_set_log(elector_election *el, elector_election_cb log, void *ud)
{
    el->log = log;
    el->log_ud = ud;
}

const uint8_t *elector__election_key(const elector_election *el, size_t *key_len)
{
    if (key_len) *key_len = el->klen;
    return el->key;
}

int64_t elector__election_token(const elector_election *el)
{
    return el->rev;
}

const char *elector_election_name(const elector_election *el)
{
    return el->name;
}

elector_session *elector__election_session(const elector_election *el)
{
    return el->s;
}
