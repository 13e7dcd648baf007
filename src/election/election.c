/* SPDX-License-Identifier: MIT */
/* An election's handle and what every step of it uses: holds and the release
 * of its memory, events, and the two endings of a campaign (failed, lost). The
 * operations in flight and the pacer that spaces the bulk requests are in
 * pacer.c, with the deletes of our key; the steps themselves are above:
 * wait.c (check and watch the predecessor), campaign.c (campaign and the
 * handle's lifecycle), leader.c (proclaim, resign, guarded Txns). Nothing here
 * calls up.
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
    if (el->named) elector__name_remove(el);
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

void elector__stop_watch(elector_election *el)
{
    if (el->watch) elector_watch_cancel(el->watch);
    el->watch = NULL;
    el->watch_ok = false;
    if (el->own_watch) elector_watch_cancel(el->own_watch);
    el->own_watch = NULL;
    el->own_ok = false;
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

elector_etcd *elector__election_etcd(const elector_election *el)
{
    return el->etcd;
}

/* The owner slot (election_internal.h): the driver's record of the election,
 * never read here. */
void *elector__election_owner(const elector_election *el)
{
    return el->owner;
}

void elector__election_set_owner(elector_election *el, void *owner)
{
    el->owner = owner;
}
