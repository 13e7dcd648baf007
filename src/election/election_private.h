/* SPDX-License-Identifier: MIT */
/* Shared by the files of the election layer (src/election/) only.
 *
 *   session.c    leases kept alive, the validity deadline, listeners
 *   campaign.c   the campaign and the handle's lifecycle (top of the campaign)
 *   wait.c       check and watch the predecessor, lead
 *   pacer.c      operations in flight, the pacer, deleting our key
 *   election.c   the handle: holds, events, the endings (failed, lost)
 *   names.c      the client's elections by name
 *   leader.c     what a leader does and how a campaign ends: proclaim,
 *                guarded Txn, resign, deleting our key
 *   observe.c    leader query and observe
 *   release.c    the release helper of a session (release_on_exit) */
#ifndef ELECTOR_ELECTION_PRIVATE_H
#define ELECTOR_ELECTION_PRIVATE_H

#include <stddef.h>
#include "etcd_internal.h"
#include "election_internal.h"
#include "elector/election.h"

/* ---- the release helper (release.c) ----
 * A process that revokes the session's lease once its owner is gone. */
typedef struct elector__release {
    int pid;   /* > 0: running; 0: none; < 0: why it could not start */
    int sock;  /* our end of its socket, -1 when none */
    int owner; /* getpid() when it was started: a forked child leaves it alone */
    int64_t lease, ttl_s;
    uint64_t gen; /* elector__settings_gen() of the orders it has */
    uint8_t *out; /* orders not all sent yet (the socket was full) */
    size_t out_len, out_off;
} elector__release;

/* Empties r (sock -1, nothing to send); once before the first start. */
void elector__release_init(elector__release *r);
/* Spawns the helper for lease (ttl seconds) on etcd's settings; r->pid tells
 * how it went. adopted: the lease came from elsewhere (lease_id): no helper,
 * ELECTOR_EINVAL and a notice. */
void elector__release_start(elector__release *r, elector_etcd *etcd, int64_t lease,
                            int64_t ttl_s, bool adopted);
/* Sends the helper new orders when the client's endpoints or password changed
 * since the last (never waits: a full socket is tried again next time). */
void elector__release_refresh(elector__release *r, elector_etcd *etcd);
/* Tells the helper to exit without revoking and hands it to the client's
 * reaper (a timer: reaped when it exits, SIGKILLed after 2 s); never waits. In
 * a forked child of the owner it only closes the child's copy of the socket. */
void elector__release_stop(elector__release *r, elector_etcd *etcd);
/* Whether the client's reaper still waits for helper pid (close_sync does). */
bool elector__release_reaping(elector_etcd *etcd, int pid);

/* The helper's orders (release.c encodes them, release_helper.c decodes):
 * "ELR2", the body's length (4 bytes), the ints, then each string as a 4-byte
 * length (UINT32_MAX: none) and its bytes. */
#define ELECTOR__ORDERS_MAGIC "ELR2"
#define ELECTOR__ORDERS_MAX (64 * 1024) /* a few hundred bytes in practice */
/* endpoints (in use), cacert, cert, key, user, password, password file */
#define ELECTOR__ORDERS_NSTR 7
/* lease, ttl, dial, request, keepalive time, idle and timeout, backoff min and
 * max, max recv, max decode, insecure_skip_verify, require_tls */
#define ELECTOR__ORDERS_NINT 13
typedef struct elector__orders {
    int64_t v[ELECTOR__ORDERS_NINT];
    const char *s[ELECTOR__ORDERS_NSTR];
    uint32_t slen[ELECTOR__ORDERS_NSTR];
} elector__orders;
/* release_find.c: the helper's path into out: $ELECTOR_RELEASE_HELPER, else
 * beside the loaded library (LIBDIR/elector/, ../lib/elector/,
 * ../../lib/elector/), else the configured LIBDIR/elector/. 0, or
 * ELECTOR_EINVAL after a notice on etcd that names every place tried. */
int elector__release_find(elector_etcd *etcd, char *out, size_t cap);

/* ---- what the layer sees of a session (session.c) ----
 * Elections read their session only through these functions, and hear of it
 * through a listener. */
enum elector__session_phase {
    ELECTOR__S_GRANTING, /* the lease is being granted (or adopted) */
    ELECTOR__S_ALIVE,    /* granted, kept alive (the deadline may still pass) */
    ELECTOR__S_DEAD,     /* lease gone or unprovable */
    ELECTOR__S_CLOSED    /* closed by its owner */
};
enum elector__session_phase elector__session_phase(const elector_session *s);
elector_etcd *elector__session_etcd(const elector_session *s);
bool elector__session_manual_release(const elector_session *s);
/* The validity deadline as last proven (also once the session is over; 0
 * before the grant), on the deadline clock. */
int64_t elector__session_deadline_raw_ns(const elector_session *s);
/* True (and the restore's message in *msg) when etcd was restored from a
 * snapshot since the session's lease was granted. */
bool elector__session_restored(const elector_session *s, const char **msg);

/* The elections of a session are its listeners. They hear of its lease, from
 * session_notify.c calling campaign.c by name: ready (granted), ended (LOST or
 * FAILED for what depends on it; end_ns: when the belief ended, never later
 * than the validity deadline) and detached (the session is closing: forget
 * it). A listener may unlisten itself or others, or close the session, from
 * any of these; listeners added meanwhile do not hear the event under way. */
typedef struct elector__session_listener elector__session_listener;
struct elector__session_listener {
    elector__session_listener *next, *prev;
};
void elector__session_listen(elector_session *s, elector__session_listener *l);
void elector__session_unlisten(elector_session *s, elector__session_listener *l);

/* ---- an election (election.c, pacer.c, wait.c, campaign.c, leader.c) ---- */

enum el_state { E_IDLE, E_CAMPAIGN, E_WAIT, E_LEADER };

/* Test knobs of the serializable check: each can only make the client see
 * less (a later R, another connection, an error), never make a reply count
 * that would not. Zero (the default): no effect. Not for production use. */
typedef struct elector__check_knobs {
    bool off;          /* no serializable check: every check is linearizable */
    bool no_own_watch; /* a waiting candidate does not watch its own key */
    int64_t rev_shift; /* added to R, the DELETE event's revision */
    /* Called just before / after the serializable Txn is handed to the client. */
    void (*before_send)(elector_etcd *etcd, void *ud);
    void (*after_send)(elector_etcd *etcd, void *ud);
    void *ud;
} elector__check_knobs;
extern elector__check_knobs elector__check_test;

struct op;
/* What an election sends when its turn comes: a slot of the pacer is free
 * for it, or the last delete of our key that a new campaign waits for was
 * answered (pacer.c calls it). campaign.c's (the campaign Txn) or wait.c's
 * (the check), set by the one that waits: elector__pace_wait(), and
 * elector__campaign() for the wait on the deletes. */
typedef void (*elector__turn_fn)(elector_election *el);

struct elector_election {
    elector__session_listener listener; /* in the session's list */
    elector__turn_fn turn;              /* see elector__turn_fn */
    elector_session *s;                 /* NULL once the session is closed */
    elector_etcd *etcd;
    void *owner;      /* elector__election_owner() */
    uint64_t endings; /* RESIGNED and FAILED events emitted (resign_sync) */
    char *name;
    elector__prefix prefix;
    uint8_t *key, *value, *pred;
    size_t klen, vlen, pred_len;
    int64_t key_lease; /* the lease named in `key` (and attached to it) */
    int64_t rev;
    /* A campaign Txn of this campaign was answered with a transient error: it may
     * have created our key, at a revision we do not know. */
    bool maybe_key;
    bool campaign_waits; /* campaigning, Txn not sent: no lease yet, or deletes */
    /* Txns on our key in flight: deletes (resign, cleanup) and campaign Txns.
     * A new campaign waits until none is left, and another election object
     * with our name on the session may not campaign (campaign.c name_busy):
     * an older campaign Txn still out may make our key, or overwrite its
     * value, and its answer deletes the key it made once that campaign was
     * resigned; a delete, guarded by a create revision, would remove the key
     * the new campaign found and leads with. */
    int deletes;
    /* The session is over (or was when the owner let go): our key goes with the
     * lease, when its owner releases it (manual_release), never by a delete. */
    bool keep_key;
    enum el_state state;
    /* Bumped by every state change: a reply to a request sent in an older
     * generation is stale, and ignored (op_end()). */
    unsigned gen;
    bool proclaiming;
    elector_election_stats checks; /* elector__election_get_stats() */
    elector_watch *watch;
    int64_t watch_from; /* the start revision of `watch` */
    elector__timer retry;
    elector__timer notify; /* delivers FAILED for a resign before our key existed */
    int64_t notify_ns;     /* CLOCK_MONOTONIC, as the event carries it */
    /* A resign whose delete failed for a transient reason is sent again: the key
     * must go, or the next candidate waits for our whole session. resign_rev is
     * the guard (0: our key's create revision is unknown; guard by our lease). */
    elector__timer resign_timer;
    int64_t resign_rev, resign_ns; /* resign_ns: CLOCK_MONOTONIC */
    bool resign_pending, resign_was_leader;
    int resign_tries;
    int retries;
    /* Waiting for a slot of the pacer (pacer.c): its next campaign or check
     * Txn goes when fewer than ELECTOR__PACE_MAX are in flight on the client. */
    elector_election *pace_next, *pace_prev;
    /* In the client's table of elections by name (names.c). */
    elector_election *name_next;
    uint32_t name_hash;
    bool named;
    bool pace_queued;
    int pace_what;     /* PACE_CAMPAIGN or PACE_CHECK */
    unsigned pace_gen; /* the generation that asked */
    /* The watch (on our key as leader, on our predecessor's while waiting) is
     * confirmed by etcd; watch_asked_ns: when it was asked for (deadline clock). */
    bool watch_ok;
    int64_t watch_asked_ns;
    /* While waiting, a second watch on our own key: its deletion (etcdctl del,
     * a revoke) ends the wait at once, not when the predecessor goes. Once we
     * lead it becomes `watch` (no new watch asked for). */
    elector_watch *own_watch;
    int64_t own_from;
    bool own_ok;
    int64_t own_asked_ns;
    /* Holds: in-flight operations and callbacks running; closed: the owner let
     * go (elector_election_free), memory stays until the last hold goes. */
    elector__life life;
    int outcome; /* for campaign_sync: 1 elected, < 0 failed */
    elector_election_cb cb, log;
    void *ud, *log_ud;
};

/* An operation in flight holds its election; its reply is current only if the
 * election is not closed and still in the generation that sent it. */
struct op {
    elector_election *el;
    unsigned gen;
    elector_txn_cb ucb; /* guarded_txn only */
    void *uud;
    bool paced;           /* holds slots of the pacer */
    int weight;           /* ... this many (a check over a large election: more) */
    int64_t sent_ms;      /* ... since then (deadline clock) */
    int64_t del_rev;      /* a delete of our key: its guard (elector__delete_key) */
    elector_etcd_cb done; /* ... its callback */
    struct op *qnext;     /* ... waiting for a slot of the pacer */
    int tries;            /* ... sent again this many times */
    uint8_t *value;
    size_t vlen;
    /* A serializable check: what the DELETE event of our predecessor that it
     * follows came with (its revision R, the member that sent it, and the
     * connection it came on). */
    bool fast;
    int64_t ev_rev;
    uint64_t ev_member, ev_cluster, ev_conn;
};

/* The detail text for ELECTOR_EBLOCKED: a key without a lease under the
 * prefix of election `name` (written by hand, or by a program that took the
 * prefix for its own), which no candidate can ever follow. */
#define ELECTOR__BLOCKED_DETAIL 600
void elector__blocked_detail(char *buf, size_t cap, const char *name, const uint8_t *key,
                             size_t klen);

/* election.c: the handle, its events, the endings */
void elector__el_hold(elector_election *el);
void elector__el_unhold(elector_election *el);
/* The owner let go: the memory goes with the last hold. */
void elector__el_close(elector_election *el);
/* The session's lease (0 without a session); whether the session is alive and
 * its lease granted (requests that need it may go). */
int64_t elector__el_lease(const elector_election *el);
bool elector__el_live(const elector_election *el);
/* Delivers an event to the log hook and the callback; mono_ns: CLOCK_MONOTONIC,
 * 0 = now. Returns false if the election was freed meanwhile (the caller must
 * stop touching it). */
bool elector__emit(elector_election *el, elector_event_type type, int reason,
                   const char *detail, int64_t mono_ns);
/* Our campaign is over without leadership (FAILED). */
void elector__fail(elector_election *el, int reason, const char *detail);
void elector__lose(elector_election *el, int reason, const char *detail, int64_t at_ns);
void elector__stop_watch(elector_election *el);

/* pacer.c: the operations in flight, the pacer */
struct op *elector__op_new(elector_election *el);
elector_election *elector__op_end(struct op *o); /* the election if current, or NULL */
int elector__send_txn(elector_election *el, Etcdserverpb__TxnRequest *txn, struct op *o,
                      elector_etcd_cb done);
/* The pacer. pace_wait: true when el must wait for a slot (it is queued, and
 * `turn` runs once a slot is free); false when it may send now.
 * pace_take: o holds `weight` slots until elector__op_end(); pace_take_check:
 * as many as a check needs (returned). pace_note_keys: the key count a
 * linearizable check saw, which weighs the next checks. pace_forget: el leaves
 * the queue for good. pace_delete: true when o must wait (it is queued, and
 * sent from the pacer once a slot is free); else o takes a slot and the caller
 * sends it (elector__send_delete). */
enum { PACE_CAMPAIGN = 1, PACE_CHECK };
bool elector__pace_wait(elector_election *el, elector__turn_fn turn);
void elector__pace_take(struct op *o, int weight);
int elector__pace_take_check(struct op *o);
void elector__pace_note_keys(elector_etcd *e, int64_t keys);
void elector__pace_forget(elector_election *el);
bool elector__pace_delete(struct op *o);
/* Sends o's delete (o->del_rev, o->done) now; the send error, o untouched. */
int elector__send_delete(struct op *o);

/* wait.c: check and watch the predecessor, lead */
void elector__send_check(elector_election *el);
/* A read or watch failed for a reason that may heal: check again after a
 * short, growing, jittered pause (retry_delay: that pause, counted as a
 * retry; campaign.c's campaign Txn waits it too). */
void elector__schedule_retry(elector_election *el);
int64_t elector__retry_delay(elector_election *el);

/* pacer.c: deleting our key */
/* Deletes our key, guarded by rev (0: by our lease); o is released on error.
 * The delete is paced: without a free slot it waits in the pacer, and goes
 * from the loop (done is called then, with the send error if it fails). */
int elector__delete_key(elector_election *el, int64_t rev, struct op *o,
                        elector_etcd_cb done);
/* A delete of our key was answered (the campaign that waits for it goes: el->turn). */
void elector__delete_over(elector_election *el);
/* The answer to a delete of our key that nobody waits for. */
void elector__stray_deleted(elector_etcd *e, int err, const ProtobufCMessage *m,
                            void *ud);
/* Resign's delete, and a freed election's, is sent again after a transient
 * failure this many times. */
#define RESIGN_TRIES 12

/* names.c: the client's elections by name. Adds el (false: out of memory). */
bool elector__name_add(elector_election *el);
void elector__name_remove(elector_election *el);
/* Another election object with el's name campaigns, leads or deletes our key
 * (lease: our session's) on this session; or was freed while Txns on that key
 * were still out. */
bool elector__name_busy(const elector_election *el, int64_t lease);

/* campaign.c */
void elector__send_campaign(elector_election *el);
/* The session's news for one of its elections (session_notify.c). */
void elector__campaign_session_ready(elector__session_listener *l);
void elector__campaign_session_ended(elector__session_listener *l, int reason,
                                     const char *detail, int64_t end_ns);
void elector__campaign_session_detached(elector__session_listener *l);

#endif
