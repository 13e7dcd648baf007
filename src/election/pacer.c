/* SPDX-License-Identifier: MIT */
/* The pacer, the operations in flight (struct op: a request of an election,
 * holding it until answered) that it spaces, and the deletes of our key (by a
 * resign, after a refused check, after a campaign Txn that a resign or free
 * overtook, when the handle is freed), which it paces and sends. Above
 * election.c (the handle's holds); below campaign.c, wait.c and leader.c,
 * which send through it. A slot freed for a queued delete sends it (here);
 * one freed for a waiting election, or the last delete a new campaign waits
 * for, calls the election's turn (el->turn: what the one that waits, the
 * campaign or the check, sends then). */
#include <stdlib.h>
#include "election_private.h"

/* Setting up many elections at once sends a campaign and a check Txn for each.
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

/* Deletes our key, guarded by its create revision; or, when that is unknown
 * (rev 0: a campaign Txn was applied but not answered), by our lease: the key
 * is ours by its name (prefix + our lease) and by its lease. Returns 0 or the
 * send error (then `o` is released and `done` is not called). */
int elector__send_delete(struct op *o)
{
    elector_election *el = o->el;
    elector__txn t;
    if (o->del_rev)
        elector__cmp_create(&t.cmp, el->key, el->klen, o->del_rev);
    else
        elector__cmp_lease(&t.cmp, el->key, el->klen, el->key_lease);
    elector__op_delete(&t.op[0], &t.del, el->key, el->klen);
    elector__txn_init(&t, 1);
    return elector_etcd_call(el->etcd, ELECTOR_RPC_TXN, &t.txn.base, NULL, o->done, o);
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
        int rc = elector__send_delete(o);
        if (rc) o->done(p->etcd, rc, NULL, o); /* ends o, frees its slot */
    }
    while (p->head && pace_fits(p, pace_weight(p, p->head))) {
        elector_election *el = p->head;
        pace_unqueue(p, el);
        elector__el_hold(el);
        el->turn(el);
        elector__el_unhold(el);
    }
}

/* True when el must wait for a slot (it is queued, to send what its state then
 * asks for); false when it may send now. */
bool elector__pace_wait(elector_election *el, elector__turn_fn turn)
{
    el->turn = turn;
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

/* ---------------------------------------------------------------- operations */

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

int elector__send_txn(elector_election *el, Etcdserverpb__TxnRequest *txn, struct op *o,
                      elector_etcd_cb done)
{
    int rc = elector_etcd_call(el->etcd, ELECTOR_RPC_TXN, &txn->base, NULL, done, o);
    if (rc) elector__op_end(o);
    return rc;
}

/* ---------------------------------------------------------------- deleting our key */

/* By a resign (leader.c), after a refused check (wait.c), after a campaign Txn
 * that a resign or free overtook and when the handle is freed (campaign.c). */

int elector__delete_key(elector_election *el, int64_t rev, struct op *o,
                        elector_etcd_cb done)
{
    o->del_rev = rev;
    o->done = done;
    if (!elector__pace_delete(o)) {
        int rc = elector__send_delete(o);
        if (rc) {
            elector__op_end(o);
            return rc;
        }
    }
    el->deletes++; /* o holds el */
    return 0;
}

/* A delete of our key was answered. A campaign that waits for it goes now. */
void elector__delete_over(elector_election *el)
{
    el->deletes--;
    if (!el->deletes && el->state == E_CAMPAIGN && el->campaign_waits &&
        !el->life.closed && el->s && elector__session_phase(el->s) == ELECTOR__S_ALIVE)
        el->turn(el);
}

void elector__stray_deleted(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    struct op *o = ud;
    elector_election *el = o->el; /* the op holds the election */
    elector__delete_over(el);
    /* A delete guarded by our key's create revision is sent again after a
     * transient failure (it waits for the next connection): the key would make
     * every later candidate wait for our whole session. So for a freed
     * election, and for one that is idle (a resign overtook the campaign Txn
     * that made the key): nothing else would delete that key, and a free
     * later deletes nothing, the election holding no key. Not once it
     * campaigns again: the new campaign takes the key over (same name, same
     * lease). Never a delete guarded by the lease alone: a new election
     * object with the same name on this session may have made that key again
     * meanwhile. */
    bool owner_done =
        el->life.closed || (el->state == E_IDLE && !el->keep_key && elector__el_live(el));
    if (elector__transient(err) && owner_done && o->del_rev > 0 &&
        o->tries < RESIGN_TRIES) {
        struct op *d = elector__op_new(el);
        if (d) {
            d->tries = o->tries + 1;
            el->checks.retries++;
            elector__delete_key(el, o->del_rev, d, elector__stray_deleted);
        }
    }
    elector__op_end(o);
}
