/* SPDX-License-Identifier: MIT */
/* What a leader does (proclaim, guarded Txn) and how a campaign ends by the
 * owner's hand (resign). Uses the handle (election.c) and the delete of our
 * key (pacer.c); nothing below calls back in here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "election_private.h"

bool elector__is_leader(const elector_election *el)
{
    return el && !el->life.closed && el->state == E_LEADER && el->s &&
           elector__session_alive(el->s);
}

/* ---------------------------------------------------------------- proclaim */

static void proclaim_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct op *o = ud;
    uint8_t *v = o->value;
    size_t vlen = o->vlen;
    o->value = NULL;
    o->el->proclaiming = false;
    elector_election *el = elector__op_end(o);
    if (!el) {
        free(v);
        return;
    }
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    if (!err && !r->succeeded) {
        free(v);
        elector__lose(el, ELECTOR_ENOTLEADER,
                      "proclaim refused: our key is no longer ours", 0);
        return;
    }
    if (!err) {
        free(el->value);
        el->value = v;
        el->vlen = vlen;
    } else {
        free(v);
    }
    elector__emit(el, ELECTOR_EV_PROCLAIMED, err, err ? elector__etcd_errstr(e) : NULL,
                  0);
}

int elector__proclaim(elector_election *el, const void *value, size_t len)
{
    if (!elector__is_leader(el)) return ELECTOR_ENOTLEADER;
    if (el->proclaiming) return ELECTOR_EBUSY;
    struct op *o = elector__op_new(el);
    if (!o || elector__memdup(&o->value, &o->vlen, value, len)) {
        if (o) elector__op_end(o);
        return ELECTOR_ENOMEM;
    }
    /* If CreateRevision(key) == rev: Put(key, value, lease). */
    elector__txn t;
    elector__cmp_create(&t.cmp, el->key, el->klen, el->rev);
    elector__op_put(&t.op[0], &t.put, el->key, el->klen, o->value, o->vlen,
                    elector__session_lease(el->s));
    elector__txn_init(&t, 1);
    int rc = elector__send_txn(el, &t.txn, o, proclaim_done);
    if (!rc) el->proclaiming = true;
    return rc;
}

/* ---------------------------------------------------------------- resign */

static void resign_send(elector_election *el);
static void resign_settle(elector_election *el, int err, const char *detail);

static void resign_retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_election *el = ud;
    if (el->resign_tries >= RESIGN_TRIES || !el->s ||
        elector__session_phase(el->s) != ELECTOR__S_ALIVE || el->keep_key)
        resign_settle(el, ELECTOR_EUNAVAILABLE, "our key could not be deleted");
    else
        resign_send(el);
}

/* The resign's delete was answered (or could not be sent): retry a transient
 * failure while the session lives, else report the end of the campaign. */
static void resign_settle(elector_election *el, int err, const char *detail)
{
    if (elector__transient(err) && el->s &&
        elector__session_phase(el->s) == ELECTOR__S_ALIVE && !el->keep_key &&
        el->resign_tries < RESIGN_TRIES) {
        int64_t d = elector__retry_ms(el->resign_tries++);
        elector__timer_arm(el->etcd, &el->resign_timer, elector__now_ms() + d,
                           resign_retry_fired, el);
        return;
    }
    int64_t t = el->resign_ns;
    el->resign_pending = false;
    if (el->resign_was_leader)
        elector__emit(el, ELECTOR_EV_RESIGNED, err, err ? detail : NULL, t);
    else
        elector__emit(el, ELECTOR_EV_FAILED, ELECTOR_ECANCELED,
                      "campaign canceled by resign", t);
}

static void resign_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m;
    struct op *o = ud;
    elector__delete_over(o->el);
    elector_election *el = elector__op_end(o);
    if (!el || !el->resign_pending) return; /* freed, or a new campaign took over */
    resign_settle(el, err, elector__etcd_errstr(e));
}

static void resign_send(elector_election *el)
{
    struct op *o = elector__op_new(el);
    int rc = o ? elector__delete_key(el, el->resign_rev, o, resign_done) : ELECTOR_ENOMEM;
    if (rc) {
        /* Not sent: try again from the loop (never report from inside the
         * caller's elector__resign()). */
        if (el->resign_tries < RESIGN_TRIES) el->resign_tries++;
        elector__timer_arm(el->etcd, &el->resign_timer, elector__now_ms() + 50,
                           resign_retry_fired, el);
    }
}

static void notify_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_election *el = ud;
    elector__emit(el, ELECTOR_EV_FAILED, ELECTOR_ECANCELED, "campaign canceled by resign",
                  el->notify_ns);
}

int elector__resign(elector_election *el)
{
    if (!el || el->life.closed || el->state == E_IDLE) return ELECTOR_EINVAL;
    bool was_leader = el->state == E_LEADER;
    int64_t rev = el->rev;
    int64_t now = elector__mono_ns();
    /* Our belief ends now, before anything is sent. */
    elector__stop_watch(el);
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

/* A resign's wait: the election had an ending since (the resign's own event),
 * or was freed. */
struct resign_wait {
    const elector_election *el;
    uint64_t endings;
};

static bool resign_over(const void *arg)
{
    const struct resign_wait *w = arg;
    return w->el->endings != w->endings || w->el->life.closed;
}

int elector__resign_sync(elector_election *el, int64_t timeout_ms)
{
    struct resign_wait w = {el, el ? el->endings : 0};
    int rc = elector__resign(el);
    if (rc) return rc;
    elector__el_hold(el);
    rc = elector__etcd_run_until(el->etcd, resign_over, &w, timeout_ms);
    if (!rc && el->endings == w.endings) rc = ELECTOR_ECLOSED;
    elector__el_unhold(el);
    return rc;
}

/* ---------------------------------------------------------------- fencing */

static void guarded_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct op *o = ud;
    elector_txn_cb ucb = o->ucb;
    void *uud = o->uud;
    o->gen = o->el->gen; /* the caller waits for this reply whatever happened since */
    elector_election *el = elector__op_end(o);
    if (!el) return;
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    if (!err && !r->succeeded) {
        /* Our Range of our key is the last failure op. */
        const Etcdserverpb__RangeResponse *rr =
            elector__txn_range(e, r, r->n_responses ? r->n_responses - 1 : 0);
        if (!rr)
            err = ELECTOR_EPROTO;
        else if (rr->n_kvs == 0 || rr->kvs[0]->create_revision != el->rev)
            err = ELECTOR_ENOTLEADER;
    }
    elector__el_hold(el);
    ucb(el, err, err && err != ELECTOR_ENOTLEADER ? NULL : r, uud);
    elector__el_unhold(el);
}

int elector__guarded_txn(elector_election *el, const Etcdserverpb__TxnRequest *in,
                         elector_txn_cb cb, void *ud)
{
    if (!elector__is_leader(el)) return ELECTOR_ENOTLEADER;
    if (!in || !cb) return ELECTOR_EINVAL;
    size_t nc = in->n_compare + 1, nf = in->n_failure + 1;
    Etcdserverpb__Compare **cmps = calloc(nc, sizeof(*cmps));
    Etcdserverpb__RequestOp **fops = calloc(nf, sizeof(*fops));
    struct op *o = cmps && fops ? elector__op_new(el) : NULL;
    int rc = ELECTOR_ENOMEM;
    if (o) {
        Etcdserverpb__Compare mine;
        elector__cmp_create(&mine, el->key, el->klen, el->rev);
        cmps[0] = &mine;
        if (in->n_compare) memcpy(cmps + 1, in->compare, in->n_compare * sizeof(*cmps));
        Etcdserverpb__RangeRequest rr;
        Etcdserverpb__RequestOp rop;
        elector__op_range_key(&rop, &rr, el->key, el->klen);
        if (in->n_failure) memcpy(fops, in->failure, in->n_failure * sizeof(*fops));
        fops[nf - 1] = &rop;
        Etcdserverpb__TxnRequest txn = *in;
        txn.n_compare = nc;
        txn.compare = cmps;
        txn.n_failure = nf;
        txn.failure = fops;
        o->ucb = cb;
        o->uud = ud;
        rc = elector__send_txn(el, &txn, o, guarded_done);
    }
    free(cmps);
    free(fops);
    return rc;
}

/* ---------------------------------------------------------------- guarded put/delete */

/* The public guarded writes: one Txn, If CreateRevision(our key) == token, Then
 * the Put or the Delete; no failure ops. Unlike elector_guarded_txn, the
 * callback runs exactly once, also after elector_election_free (so that a
 * caller that waits for it, or owns memory for it, always hears). */
struct gwrite {
    elector_guarded_cb cb;
    void *ud;
};

static void gwrite_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    struct op *o = ud;
    struct gwrite *g = (void *)o->uud;
    elector_election *el = o->el;
    /* Keep the memory of el for the callback, current or not. */
    elector__el_hold(el);
    elector__op_end(o);
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    if (!err && !r->succeeded) err = ELECTOR_ENOTLEADER;
    g->cb(el, err, g->ud);
    free(g);
    elector__el_unhold(el);
}

/* A key under the election's own prefix (NAME/) would be taken for a
 * candidate's: there, a key without a lease comes first for good and nobody
 * leads after it (the README's examples once wrote NAME/state). */
int elector_guarded_key_check(const char *name, const void *key, size_t key_len,
                              char *why, size_t cap)
{
    size_t n = name ? strlen(name) : 0;
    const char *k = key;
    if (!key || key_len <= n || memcmp(k, name, n) || k[n] != '/') return 0;
    if (why && cap)
        snprintf(why, cap,
                 "guarded write to '%.*s': the key is under the election's own prefix "
                 "'%s/', where a key without a lease blocks the election for good; use "
                 "a key outside it, such as '%s-%.*s'",
                 (int)(key_len > 200 ? 200 : key_len), k, name, name,
                 (int)(key_len - n - 1 > 100 ? 100 : key_len - n - 1), k + n + 1);
    return ELECTOR_EINVAL;
}

static int under_own_prefix(elector_election *el, const void *key, size_t key_len)
{
    char why[600];
    if (!elector_guarded_key_check(el->name, key, key_len, why, sizeof(why))) return 0;
    return elector__set_err(el->etcd, ELECTOR_EINVAL, "%s", why);
}

/* Sends t, its success op t->op[0] filled by the caller, as the guarded
 * write: the op, if our key still has our create revision. */
static int gwrite_send(elector_election *el, const void *key, size_t key_len,
                       elector__txn *t, elector_guarded_cb cb, void *ud)
{
    if (!el || !cb) return ELECTOR_EINVAL;
    if (under_own_prefix(el, key, key_len)) return ELECTOR_EINVAL;
    if (!elector__is_leader(el)) return ELECTOR_ENOTLEADER;
    struct gwrite *g = malloc(sizeof(*g));
    struct op *o = g ? elector__op_new(el) : NULL;
    if (!o) {
        free(g);
        return ELECTOR_ENOMEM;
    }
    g->cb = cb;
    g->ud = ud;
    o->uud = g;
    elector__cmp_create(&t->cmp, el->key, el->klen, el->rev);
    elector__txn_init(t, 1);
    int rc = elector__send_txn(el, &t->txn, o, gwrite_done);
    if (rc) free(g);
    return rc;
}

int elector__guarded_put(elector_election *el, const void *key, size_t key_len,
                         const void *value, size_t value_len, elector_guarded_cb cb,
                         void *ud)
{
    if (!key || !key_len || (!value && value_len)) return ELECTOR_EINVAL;
    elector__txn t;
    elector__op_put(&t.op[0], &t.put, key, key_len, value, value_len, 0);
    return gwrite_send(el, key, key_len, &t, cb, ud);
}

int elector__guarded_delete(elector_election *el, const void *key, size_t key_len,
                            elector_guarded_cb cb, void *ud)
{
    if (!key || !key_len) return ELECTOR_EINVAL;
    elector__txn t;
    elector__op_delete(&t.op[0], &t.del, key, key_len);
    return gwrite_send(el, key, key_len, &t, cb, ud);
}

/* The blocking forms: the state lives on the heap, so that a call abandoned
 * at its timeout can still be answered; whoever comes last frees it. */
struct gsync {
    bool done, abandoned;
    int err;
};

static void gsync_cb(elector_election *el, int err, void *ud)
{
    (void)el;
    struct gsync *st = ud;
    if (st->abandoned) {
        free(st);
        return;
    }
    st->done = true;
    st->err = err;
}

static bool gsync_done(const void *arg)
{
    const struct gsync *st = arg;
    return st->done;
}

static int gsync_wait(elector_election *el, struct gsync *st, int rc, int64_t timeout_ms)
{
    if (rc) {
        free(st);
        return rc;
    }
    rc = elector__etcd_run_until(el->etcd, gsync_done, st, timeout_ms);
    if (st->done) {
        rc = st->err;
        free(st);
    } else {
        st->abandoned = true; /* the callback frees it */
    }
    return rc;
}

int elector__guarded_put_sync(elector_election *el, const void *key, size_t key_len,
                              const void *value, size_t value_len, int64_t timeout_ms)
{
    struct gsync *st = calloc(1, sizeof(*st));
    if (!st) return ELECTOR_ENOMEM;
    int rc = elector__guarded_put(el, key, key_len, value, value_len, gsync_cb, st);
    return gsync_wait(el, st, rc, timeout_ms);
}

int elector__guarded_delete_sync(elector_election *el, const void *key, size_t key_len,
                                 int64_t timeout_ms)
{
    struct gsync *st = calloc(1, sizeof(*st));
    if (!st) return ELECTOR_ENOMEM;
    int rc = elector__guarded_delete(el, key, key_len, gsync_cb, st);
    return gsync_wait(el, st, rc, timeout_ms);
}
