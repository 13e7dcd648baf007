/* SPDX-License-Identifier: MIT */
/* A campaign and the election's lifecycle: elector__campaign() makes our key
 * (the campaign Txn), then the wait (wait.c) takes over; the handle is made
 * and freed here, hears of its session here, and its name is kept unique per
 * session here. This is the top of src/election/'s campaign path: the pacer
 * (pacer.c) sends the campaign Txn of an election that waited for a slot or
 * for the deletes of its key through the turn it was given (campaign_turn). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "election_private.h"

/* ---------------------------------------------------------------- campaign */

static void campaign_turn(elector_election *el);

static void campaign_retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_election *el = ud;
    if (el->state == E_CAMPAIGN && el->rev == 0) elector__send_campaign(el);
}

/* The campaign Txn failed for a reason that may heal: it goes again after the
 * retry's pause (elector__retry_delay, the check's too). */
static void campaign_retry(elector_election *el)
{
    int64_t due = elector__now_ms() + elector__retry_delay(el);
    elector__timer_arm(el->etcd, &el->retry, due, campaign_retry_fired, el);
}

/* Our key's create revision in the campaign Txn's answer: the Txn's own
 * revision when it made the key, else what its Range read (result 1); 0 when
 * neither says. A reply without that Range sets *err to ELECTOR_EPROTO. */
static int64_t answered_rev(elector_etcd *e, const Etcdserverpb__TxnResponse *r, int *err)
{
    if (r->succeeded) return r->header ? r->header->revision : 0;
    const Etcdserverpb__RangeResponse *rr = elector__txn_range(e, r, 1);
    if (!rr) {
        *err = ELECTOR_EPROTO;
        return 0;
    }
    return rr->n_kvs ? rr->kvs[0]->create_revision : 0;
}

/* The campaign Txn was answered (rev: our key's create revision, 0 if unknown). */
static void campaign_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct op *o = ud;
    elector_election *owner = o->el;
    unsigned gen = o->gen;
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    /* Answered: a campaign that waits for this Txn (a new one after a resign
     * overtook this) goes now; it finds the key this one made (pacer.c). */
    elector__delete_over(owner);
    int64_t rev = err ? 0 : answered_rev(e, r, &err);
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
    if (elector__transient(err) && elector__el_live(el)) {
        /* The campaign Txn is safe to repeat: if the first one was applied, the
         * repeat finds our key and reads its create revision. The session's
         * deadline bounds the retries. Until then our key may exist at a
         * revision we do not know: a resign or free deletes it by name. */
        el->maybe_key = true;
        campaign_retry(el);
        return;
    }
    if (err) {
        char detail[600];
        snprintf(detail, sizeof(detail), "campaign request failed: %s",
                 elector__etcd_errstr(e));
        elector__fail(el, err, detail);
        return;
    }
    if (rev <= 0) {
        /* A fencing token must be a real revision (etcd's start at 1). */
        char detail[200];
        snprintf(detail, sizeof(detail),
                 "%s: campaign reply from %s without a valid revision (%lld)",
                 elector_rpc_path(ELECTOR_RPC_TXN), elector__etcd_current_endpoint(e),
                 (long long)rev);
        elector__fail(el, ELECTOR_EPROTO, detail);
        return;
    }
    el->rev = rev;
    el->state = E_WAIT;
    elector__send_check(el);
}

/* Our key: the prefix and our lease in lowercase hex. */
static int make_key(elector_election *el)
{
    char hex[17];
    int64_t lease = elector__el_lease(el);
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

/* The campaign Txn (docs/DESIGN.md, "Elections"; src/etcd/kv.c's pieces, keys
 * and values borrowed): if CreateRevision(key) == 0, Put(key, value, lease);
 * else the same Put (value updated, create revision kept), then the Range that
 * reads our create revision (campaign_done reads it: result 1). */
static void txn_campaign(elector__txn *t, const uint8_t *key, size_t klen,
                         const uint8_t *value, size_t vlen, int64_t lease)
{
    elector__cmp_create(&t->cmp, key, klen, 0);
    elector__op_put(&t->op[0], &t->put, key, klen, value, vlen, lease);
    elector__op_range_key(&t->op[1], &t->range, key, klen);
    elector__txn_init(t, 1);
    t->txn.n_failure = 2;
    t->txn.failure = t->ops;
    t->ops[1] = &t->op[1];
}

/* Campaign Txn: create our key if absent; if present (same lease: a second
 * campaign, or etcdctl's), overwrite its value and read its create revision. */
void elector__send_campaign(elector_election *el)
{
    el->pace_what = PACE_CAMPAIGN;
    el->pace_gen = el->gen;
    if (elector__pace_wait(el, campaign_turn)) {
        el->campaign_waits = true; /* not sent yet */
        return;
    }
    el->campaign_waits = false;
    if (make_key(el)) {
        elector__fail(el, ELECTOR_ENOMEM, "out of memory");
        return;
    }
    elector__txn t;
    txn_campaign(&t, el->key, el->klen, el->value, el->vlen, el->key_lease);
    struct op *o = elector__op_new(el);
    if (o) elector__pace_take(o, 1);
    int rc = o ? elector__send_txn(el, &t.txn, o, campaign_done) : ELECTOR_ENOMEM;
    if (rc)
        elector__fail(el, rc, elector__etcd_errstr(el->etcd));
    else
        el->deletes++; /* counted with our deletes: see `deletes` */
}

/* el's turn (el->turn): a slot of the pacer is free for it, queued by
 * elector__send_campaign(), or the last delete of our key it waited for was
 * answered. The campaign Txn goes, unless it is no longer wanted (resigned,
 * failed, a reply came). */
static void campaign_turn(elector_election *el)
{
    if (el->life.closed) return;
    if (el->state == E_CAMPAIGN && el->rev == 0 && el->campaign_waits && !el->deletes &&
        elector__el_live(el))
        elector__send_campaign(el);
}

/* ---------------------------------------------------------------- the session */

/* What the session tells its elections, in a walk over its listeners
 * (session_notify.c, above this file): its lease is ready, it ended, it is
 * closing. */

static elector_election *of_listener(elector__session_listener *l)
{
    return (elector_election *)((char *)l - offsetof(elector_election, listener));
}

void elector__campaign_session_ready(elector__session_listener *l)
{
    elector_election *el = of_listener(l);
    elector__el_hold(el);
    if (el->state == E_CAMPAIGN && el->campaign_waits && !el->deletes)
        elector__send_campaign(el);
    elector__el_unhold(el);
}

void elector__campaign_session_ended(elector__session_listener *l, int reason,
                                     const char *detail, int64_t end_ns)
{
    elector_election *el = of_listener(l);
    elector__el_hold(el);
    el->keep_key = true;
    if (el->state == E_LEADER)
        elector__lose(el, reason, detail, end_ns);
    else if (el->state != E_IDLE)
        elector__fail(el, reason, detail);
    elector__el_unhold(el);
}

/* The session is closing: elections forget it (they report ESESSION). */
void elector__campaign_session_detached(elector__session_listener *l)
{
    of_listener(l)->s = NULL;
}

/* ---------------------------------------------------------------- lifecycle */

int elector__campaign(elector_election *el, const void *value, size_t len)
{
    if (!el || el->life.closed) return ELECTOR_EINVAL;
    if (el->state != E_IDLE) return ELECTOR_EBUSY;
    if (!el->s || elector__session_phase(el->s) >= ELECTOR__S_DEAD)
        return ELECTOR_ESESSION;
    if (len > ELECTOR__GRPC_MAX_MSG) return ELECTOR_ETOOLARGE;
    /* A second election object with this name would share (and delete) our key. */
    if (elector__name_busy(el, elector__el_lease(el))) return ELECTOR_EBUSY;
    if (elector__memdup(&el->value, &el->vlen, value, len)) return ELECTOR_ENOMEM;
    /* Our key, if an old resign still waits to retry its delete, is reused by
     * the new campaign (same lease, same key): stop deleting it. A delete
     * already sent cannot be called back: the campaign Txn waits for its
     * answer, so that it cannot remove the key this campaign makes. */
    el->resign_pending = false;
    elector__timer_disarm(el->etcd, &el->resign_timer);
    el->state = E_CAMPAIGN;
    el->campaign_waits = true;
    el->turn = campaign_turn; /* also once the deletes of our key are over */
    el->maybe_key = false;
    el->gen++;
    el->rev = 0;
    el->outcome = 0;
    el->retries = 0;
    free(el->pred);
    el->pred = NULL;
    el->pred_len = 0;
    if (elector__el_live(el) && !el->deletes) elector__send_campaign(el);
    return 0;
}

/* The campaign has its outcome (leader, or the error that ended it), or the
 * election was freed. */
static bool campaign_over(const void *arg)
{
    const elector_election *el = arg;
    return el->outcome != 0 || el->life.closed;
}

int elector__campaign_sync(elector_election *el, const void *value, size_t len,
                           int64_t timeout_ms)
{
    int rc = elector__campaign(el, value, len);
    if (rc) return rc;
    elector__el_hold(el);
    rc = elector__etcd_run_until(el->etcd, campaign_over, el, timeout_ms);
    if (!rc) rc = el->life.closed ? ELECTOR_ECLOSED : el->outcome == 1 ? 0 : el->outcome;
    elector__el_unhold(el);
    return rc;
}

elector_election *elector__election_new(elector_session *s, const char *name,
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
    if (!elector__name_add(el)) {
        elector__prefix_free(&el->prefix);
        free(el->name);
        free(el);
        return NULL;
    }
    elector__session_listen(s, &el->listener);
    return el;
}

static void detach(elector_election *el)
{
    if (!el->s) return;
    elector__session_unlisten(el->s, &el->listener);
    el->s = NULL;
}

void elector__election_free(elector_election *el)
{
    if (!el || el->life.closed) return;
    /* Best effort, one attempt: delete our key if we may hold one (by its
     * revision, or by name and lease when a lost answer left that unknown), or
     * if a resign still owes the delete. A campaign Txn in flight is handled
     * by campaign_done. Once the session is over the key goes with the lease. */
    if (!elector__el_live(el)) el->keep_key = true;
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
    elector__pace_forget(el);
    /* With Txns on our key still out, the name stays busy (names.c) until
     * they are answered; the handle leaves the names when its memory goes. */
    if (!el->deletes) elector__name_remove(el);
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
    elector__el_close(el);
}
