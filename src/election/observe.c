/* SPDX-License-Identifier: MIT */
/* Leader query and observe.
 *
 * Observe reads the leader (the lowest create revision under NAME/) and watches
 * the whole prefix from the next revision. A PUT on the leader's key is a new
 * proclaimed value and is reported from the event itself. Anything else that may
 * change who leads (the leader's key deleted, a key appearing while nobody leads)
 * triggers a fresh read, rather than guessing from a batch of events: the first
 * event of a batch is not necessarily the new leader (etcd issue 18163). A
 * compacted or broken watch also leads to a fresh read and a new watch, so the
 * observer never ends silently (etcd issue 7815).
 *
 * Reads and the watch are two views that do not move together: a watch that
 * runs behind delivers events the last read already showed (a replay in
 * several responses, or a busy server), and a read may be answered at a
 * revision older than events already delivered. So the observer remembers the
 * revision its reported state stands for (`rev`): events at or below it are
 * old news and ignored; a read older than it is not reported; and a read that
 * comes back older than events seen while it was in flight is read again.
 *
 * A restore of etcd from a snapshot (ERESTORED, noticed by the transport) takes
 * the revisions back: everything the observer remembers by revision is of the
 * old history. It forgets it, drops the watch (which would start from a
 * revision the new history reaches only later) and reads again; the next
 * report carries reason ELECTOR_ERESTORED and the restore's message, even when
 * the same key leads. */
#include <stdlib.h>
#include <string.h>
#include "election_private.h"

struct elector_observer {
    elector_etcd *etcd;
    void *owner; /* elector__observer_owner() */
    char *name;
    elector__prefix prefix;
    elector_watch *watch;
    bool reading, reread;
    bool failed;      /* ended by a protocol error: no more reads */
    int64_t rev;      /* the reported state is that of this revision (or later) */
    int64_t seen_rev; /* newest event seen while the read in flight was out */
    int retries;
    uint64_t restores; /* elector__restores() the remembered state belongs to */
    bool restored;     /* the next report says why (ERESTORED) */
    elector__timer retry;
    /* Holds: the read in flight, callbacks running; closed: the owner let go. */
    elector__life life;
    /* What was last reported: nothing yet (known = false), nobody, or a leader. */
    bool known, has_leader;
    uint8_t *key, *value;
    size_t klen, vlen;
    int64_t token, lease;
    char blocked[ELECTOR__BLOCKED_DETAIL]; /* the detail of a LEADER event for a
                                              key without a lease */
    elector_observe_cb cb;
    void *ud;
};

static void start_read(elector_observer *o);
static void stop_watch(elector_observer *o);
static void schedule_retry(elector_observer *o);

static void obs_release(elector_observer *o)
{
    elector__timer_disarm(o->etcd, &o->retry);
    free(o->name);
    elector__prefix_free(&o->prefix);
    free(o->key);
    free(o->value);
    free(o);
}

static void obs_unhold(elector_observer *o)
{
    if (elector__unhold(&o->life)) obs_release(o);
}

/* Calls back, holding the observer: the callback may free it. */
static void deliver(elector_observer *o, const elector_event *ev)
{
    elector__hold(&o->life);
    if (!o->life.closed) o->cb(o, ev, o->ud);
    obs_unhold(o);
}

/* True (and the state forgotten) when etcd was restored since it was read. */
static bool restored(elector_observer *o)
{
    uint64_t n = elector__restores(o->etcd, NULL);
    if (n == o->restores) return false;
    o->restores = n;
    o->restored = true;
    o->known = false;
    o->rev = 0;
    o->seen_rev = 0;
    stop_watch(o);
    return true;
}

static void report(elector_observer *o, const Mvccpb__KeyValue *kv)
{
    bool same =
        o->known && (kv ? o->has_leader && o->token == kv->create_revision &&
                              o->vlen == kv->value.len &&
                              (!o->vlen || !memcmp(o->value, kv->value.data, o->vlen))
                        : !o->has_leader);
    if (same) return;
    o->known = true;
    o->has_leader = kv != NULL;
    elector_event ev = {.type = kv ? ELECTOR_EV_LEADER : ELECTOR_EV_NO_LEADER,
                        .detail = "",
                        .name = o->name,
                        .mono_ns = elector__mono_ns()};
    if (o->restored) {
        o->restored = false;
        ev.reason = ELECTOR_ERESTORED;
        elector__restores(o->etcd, &ev.detail);
    }
    if (kv) {
        if (elector__memdup(&o->key, &o->klen, kv->key.data, kv->key.len) ||
            elector__memdup(&o->value, &o->vlen, kv->value.data, kv->value.len)) {
            /* Out of memory: report at the next read, which is scheduled
             * here (else a leader that does not change again is never
             * reported: the watch sees nothing more to read for). */
            o->known = false;
            schedule_retry(o);
            return;
        }
        o->token = kv->create_revision;
        o->lease = kv->lease;
        if (!o->lease && !ev.reason) { /* nobody leads: a key without a lease blocks */
            elector__blocked_detail(o->blocked, sizeof(o->blocked), o->name, o->key,
                                    o->klen);
            ev.reason = ELECTOR_EBLOCKED;
            ev.detail = o->blocked;
        }
        ev.key = o->key;
        ev.key_len = o->klen;
        ev.value = o->value;
        ev.value_len = o->vlen;
        ev.token = o->token;
        ev.lease = o->lease;
    }
    deliver(o, &ev);
}

static void retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    start_read(ud);
}

/* The server broke the protocol (ELECTOR_EPROTO): retrying against it cannot
 * help, and retrying forever would hide it. One FAILED event ends the observer. */
static void fail_observer(elector_observer *o, int err)
{
    stop_watch(o);
    elector__timer_disarm(o->etcd, &o->retry);
    o->failed = true;
    elector_event ev = {.type = ELECTOR_EV_FAILED,
                        .reason = err,
                        .detail = elector__etcd_errstr(o->etcd),
                        .name = o->name,
                        .mono_ns = elector_now_ns()};
    deliver(o, &ev);
}

static void schedule_retry(elector_observer *o)
{
    int64_t d = elector__retry_ms(o->retries++);
    elector__timer_arm(o->etcd, &o->retry, elector__now_ms() + d, retry_fired, o);
}

static void stop_watch(elector_observer *o)
{
    if (o->watch) elector_watch_cancel(o->watch);
    o->watch = NULL;
}

static bool is_leader_key(const elector_observer *o, const Mvccpb__KeyValue *kv)
{
    return o->has_leader && kv->key.len == o->klen &&
           (!o->klen || !memcmp(kv->key.data, o->key, o->klen));
}

static void watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                     void *ud)
{
    (void)w;
    elector_observer *o = ud;
    if (restored(o)) {
        /* Events (or an end) of a watch from the old history. */
        start_read(o);
        return;
    }
    if (err) {
        stop_watch(o);
        enum elector__watch_next next = elector__watch_next(err);
        if (next == ELECTOR__WATCH_RETRY)
            schedule_retry(o);
        else if (next == ELECTOR__WATCH_REREAD)
            start_read(o);
        else
            fail_observer(o, err);
        return;
    }
    bool need_read = false;
    elector__hold(&o->life);
    for (size_t i = 0; i < r->n_events && !o->life.closed; i++) {
        const Mvccpb__Event *ev = r->events[i];
        if (!ev->kv) continue;
        int64_t mod = ev->kv->mod_revision;
        if (mod <= o->rev) continue; /* the state we reported includes it */
        if (o->reading && mod > o->seen_rev) o->seen_rev = mod;
        bool put = ev->type == MVCCPB__EVENT__EVENT_TYPE__PUT;
        if (put && is_leader_key(o, ev->kv)) {
            o->rev = mod;
            report(o, ev->kv); /* a proclaim */
        } else if (!put && is_leader_key(o, ev->kv)) {
            need_read = true;
        } else if (put && !o->has_leader) {
            need_read = true;
        }
    }
    if (need_read && !o->life.closed) start_read(o);
    obs_unhold(o);
}

static void read_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    elector_observer *o = ud;
    o->reading = false;
    if (o->life.closed) {
        obs_unhold(o);
        return;
    }
    if (err) {
        if (err == ELECTOR_EPROTO)
            fail_observer(o, err);
        else
            schedule_retry(o);
        obs_unhold(o);
        return;
    }
    const Etcdserverpb__RangeResponse *r = (const void *)m;
    int64_t rrev = r->header ? r->header->revision : 0;
    o->retries = 0;
    restored(o); /* then this read is the first of the new history */
    if (rrev && rrev < o->rev) {
        /* Older than what we reported already (from the watch): read again. */
        o->reread = true;
    } else {
        if (rrev) o->rev = rrev;
        report(o, r->n_kvs ? r->kvs[0] : NULL);
        /* Events newer than this read arrived while it was out: one of them
         * may have changed who leads without our noticing then. */
        if (o->seen_rev > rrev) o->reread = true;
    }
    if (!o->life.closed && o->reread) {
        o->reread = false;
        start_read(o);
    } else if (!o->life.closed && !o->watch) {
        Etcdserverpb__WatchCreateRequest wc = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        wc.key.data = o->prefix.key;
        wc.key.len = o->prefix.len;
        wc.range_end.data = o->prefix.end;
        wc.range_end.len = o->prefix.end_len;
        wc.start_revision = r->header ? r->header->revision + 1 : 0;
        o->watch = elector_etcd_watch(o->etcd, &wc, watch_cb, o);
        if (!o->watch) schedule_retry(o);
    }
    obs_unhold(o);
}

/* A read while the watch keeps running: events that arrive meanwhile either
 * are proclaims (reported directly) or ask for one more read (reread). */
static void start_read(elector_observer *o)
{
    if (o->failed) return;
    if (o->reading) {
        o->reread = true;
        return;
    }
    Etcdserverpb__RangeRequest rr;
    elector__leader_range(&rr, &o->prefix);
    if (elector_etcd_call(o->etcd, ELECTOR_RPC_RANGE, &rr.base, NULL, read_done, o)) {
        schedule_retry(o);
        return;
    }
    elector__hold(&o->life); /* until read_done */
    o->reading = true;
    o->seen_rev = 0;
}

elector_observer *elector__observe(elector_etcd *etcd, const char *name,
                                   elector_observe_cb cb, void *ud)
{
    if (!etcd || !name || !*name || !cb) return NULL;
    elector_observer *o = calloc(1, sizeof(*o));
    if (!o) return NULL;
    o->etcd = etcd;
    o->cb = cb;
    o->ud = ud;
    o->name = elector__strdup(name);
    o->restores = elector__restores(etcd, NULL);
    if (!o->name || elector__prefix_init(&o->prefix, name)) {
        obs_release(o);
        return NULL;
    }
    start_read(o);
    return o;
}

void elector__observer_free(elector_observer *o)
{
    if (!o || o->life.closed) return;
    stop_watch(o);
    elector__timer_disarm(o->etcd, &o->retry);
    if (elector__close(&o->life)) obs_release(o);
}

/* ---------------------------------------------------------------- leader query */

int elector__leader_sync(elector_etcd *etcd, const char *name, int64_t timeout_ms,
                         elector_leader_info *info)
{
    memset(info, 0, sizeof(*info));
    if (!name || !*name) return ELECTOR_EINVAL;
    elector__prefix prefix;
    if (elector__prefix_init(&prefix, name)) return ELECTOR_ENOMEM;
    Etcdserverpb__RangeRequest rr;
    elector__leader_range(&rr, &prefix);
    elector_call_opts opts = {.timeout_ms = timeout_ms};
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(etcd, ELECTOR_RPC_RANGE, &rr.base, &opts, &m);
    elector__prefix_free(&prefix);
    if (rc) return rc;
    const Etcdserverpb__RangeResponse *r = (const void *)m;
    info->revision = r->header ? r->header->revision : 0;
    if (r->n_kvs == 0) {
        protobuf_c_message_free_unpacked(m, NULL);
        return 1;
    }
    const Mvccpb__KeyValue *kv = r->kvs[0];
    if (elector__memdup(&info->key, &info->key_len, kv->key.data, kv->key.len) ||
        elector__memdup(&info->value, &info->value_len, kv->value.data, kv->value.len))
        rc = ELECTOR_ENOMEM;
    info->token = kv->create_revision;
    info->lease = kv->lease;
    protobuf_c_message_free_unpacked(m, NULL);
    if (rc) {
        elector_leader_free(info);
        return rc;
    }
    if (info->lease) return 0;
    char detail[ELECTOR__BLOCKED_DETAIL];
    elector__blocked_detail(detail, sizeof(detail), name, info->key, info->key_len);
    return elector__set_err(etcd, ELECTOR_EBLOCKED, "%s", detail);
}

void elector_leader_free(elector_leader_info *info)
{
    if (!info) return;
    free(info->key);
    free(info->value);
    memset(info, 0, sizeof(*info));
}

void *elector__observer_owner(const elector_observer *o)
{
    return o->owner;
}

void elector__observer_set_owner(elector_observer *o, void *owner)
{
    o->owner = owner;
}

elector_etcd *elector__observer_etcd(const elector_observer *o)
{
    return o->etcd;
}
