/* SPDX-License-Identifier: MIT */
/**
 * @file
 * elector — leader election on etcd v3: sessions, campaign, proclaim, resign,
 * leader, observe, fencing.
 *
 * Protocol (the one of etcd's Go client and `etcdctl elect`, so both can share an
 * election): for election NAME every candidate owns the key `NAME/<lease-id-hex>`,
 * attached to its session's lease. The candidate with the lowest create revision
 * leads; each other candidate watches only the key just ahead of it.
 *
 * Safety: etcd alone decides when a lease expires. A session tracks the latest
 * moment at which it can prove its lease is still alive: for each keepalive sent
 * at t_send that etcd answers with ttl, the lease lives at least until
 * t_send + ttl. The session's validity deadline is that instant minus a margin.
 * elector_is_leader() compares the deadline clock (CLOCK_BOOTTIME, see
 * elector_now_ns(): it keeps counting while the host is suspended, as etcd's
 * clock does) with this deadline on every call,
 * so a process resumed after SIGSTOP sees at once that its leadership is gone.
 * ELECTOR_EV_LOST is due 1 ms before the deadline; a process that is not scheduled
 * then gets it late, but elector_is_leader() says false from the deadline on,
 * whether or not the event has been delivered. Once the deadline has
 * passed the session is over, even if a renewal's answer is processed later
 * (a process stopped past its deadline): belief never returns without a new
 * session and a new ELECTOR_EV_ELECTED.
 *
 * All objects live on one elector_etcd client and its event loop (see etcd.h):
 * callbacks run inside elector_etcd_process(), or with own_thread on the
 * client's callback thread, any function being callable from any thread (see
 * etcd.h). Free order: elections, then sessions, then the client.
 */
#ifndef ELECTOR_ELECTION_H
#define ELECTOR_ELECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "elector/etcd.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct elector_session elector_session;   /**< a lease kept alive */
typedef struct elector_election elector_election; /**< a candidate in one election */
typedef struct elector_observer elector_observer; /**< follows an election's leader */

/* ---- events --------------------------------------------------------------------- */

/** What an event says (elector_event.type). */
typedef enum elector_event_type {
    ELECTOR_EV_WAITING = 1, /**< campaigning, behind `key` (the predecessor); reason
                               ELECTOR_EBLOCKED when that key has no lease (it
                               never goes by itself: detail says to delete it) */
    ELECTOR_EV_ELECTED,     /**< we lead; token = our key's create revision */
    ELECTOR_EV_PROCLAIMED,  /**< our new value is stored */
    ELECTOR_EV_LOST,        /**< we led and no longer do; reason says why */
    ELECTOR_EV_RESIGNED,    /**< we led and resigned */
    ELECTOR_EV_FAILED,      /**< a campaign that never led ended; reason says why */
    ELECTOR_EV_LEADER,      /**< observe/leader: the current leader (key, value, token);
                               reason ELECTOR_EBLOCKED for a key without a lease:
                               nobody leads, and nobody can until it is deleted */
    ELECTOR_EV_NO_LEADER,   /**< observe: nobody leads */
    ELECTOR_EV_SESSION_LOST /**< session: the lease is gone or unprovable */
} elector_event_type;

/** @return "waiting", "elected", "proclaimed", "lost", "resigned", "failed",
 * "leader", "no_leader", "session_lost". */
const char *elector_event_name(elector_event_type type);

/** Everything an event carries. Pointers are valid during the callback only. */
typedef struct elector_event {
    elector_event_type type; /**< what happened */
    int reason;              /**< LOST/FAILED/SESSION_LOST: an ELECTOR_E* code; else 0 */
    const char *detail;      /**< human text for reason, "" otherwise */
    const char *name;        /**< election name */
    const uint8_t *key;   /**< our key; the predecessor for WAITING; the leader's key */
    size_t key_len;       /**< length of key */
    const uint8_t *value; /**< the value proclaimed or observed */
    size_t value_len;     /**< length of value */
    int64_t token;        /**< fencing token: the leader key's create revision */
    int64_t lease;        /**< lease ID of that key */
    int64_t mono_ns;      /**< CLOCK_MONOTONIC when the belief changed (comparable
                             across processes; not the deadline clock) */
} elector_event;

/* ---- sessions ------------------------------------------------------------------- */

/** Session settings: elector_session_config_init() fills the defaults. */
typedef struct elector_session_config {
    int64_t ttl_s; /**< requested TTL in seconds; default 10. etcd may grant more. */
    int64_t
        margin_ms; /**< safety margin before the proven expiry; 0 = max(ttl/10, 200ms) */
    int64_t
        lease_id; /**< keep alive an existing lease instead of granting one; 0 = new */
    /** false (default): a session that ends on its own (ELECTOR_ESESSION) revokes
     * its lease at once, so its keys stop blocking other candidates.
     * true: it does not; LOST and SESSION_LOST come as usual, renewals stop, and
     * the lease (with our keys) stays in etcd until elector_session_close() or
     * elector_session_close_sync() revokes it, or its TTL runs out. For owners
     * that must stop what acted on the leadership (reap a supervised command)
     * before a successor may be elected. */
    bool manual_release;
    /** true: once the lease is granted, start a release helper (a small process,
     * elector-release) that revokes the lease as soon as this process is gone
     * (killed, crashed, _exit()), so the next candidate leads in milliseconds
     * instead of after the TTL. It learns the lease and how to reach etcd
     * (endpoints, TLS files, user and password) over a socket, never in argv or
     * its environment; it watches this process with a pidfd, so a forked child
     * that lives on does not keep it waiting. A normal close (or the session's
     * own end, unless manual_release) makes it exit quietly; the close waits for
     * it (a few ms) and reaps it. Spawned with posix_spawn(), so safe in
     * threaded programs; it is this process's child. It costs nothing unless
     * asked for. The helper is found at $ELECTOR_RELEASE_HELPER (and only
     * there, when set), else beside the library or the program
     * (DIR/elector/, DIR/../lib/elector/, DIR/../../lib/elector/ of the
     * object the library was loaded from and of the running program: an
     * install into any prefix, and the build tree's build/lib/elector/; only
     * a helper and directory that belong to root or this user and that no
     * one else may write), else at the path compiled in (the configured
     * libdir/elector/elector-release). None found: a notice on the client
     * names every place tried.
     * Right only if the work done as leader dies with this process: work in
     * child processes belongs under `elector run`; daemonize (fork, parent
     * exits) before the session starts, not after; a stopped process still
     * holds the lease until the TTL; the fencing token covers the rest
     * (README, "From C"; docs/DESIGN.md, "The release helper").
     * The helper follows the client: when auto-sync changes the endpoints or
     * the password file is read again, it is sent the new settings at the
     * next renewal, and it reads the password file itself before it
     * authenticates. Not with lease_id: an adopted lease may be another live
     * process's, so no helper is started (ELECTOR_EINVAL and a notice).
     * Closing stops the helper without waiting in the loop; the loop reaps
     * it (a stopped one is killed after 2 s); elector_session_close_sync()
     * returns once it is reaped.
     * See elector_session_helper(). Default false, as in C++
     * (session_options) and Python (session(), lock(), the tooz URL): the
     * library starts no process unless asked. The tool asks (campaign, run). */
    bool release_on_exit;
} elector_session_config;

/** Fills defaults. */
void elector_session_config_init(elector_session_config *cfg);

/** Called once with ELECTOR_EV_SESSION_LOST when the session ends on its own: etcd
 * says the lease is gone (ELECTOR_ELEASE), no renewal succeeded before the
 * deadline (ELECTOR_ESESSION), or the server broke the protocol on the keepalive
 * stream (ELECTOR_EPROTO). Elections on it have been told first. The lease has
 * been revoked then, unless the config asked for manual_release. */
typedef void (*elector_session_cb)(elector_session *s, const elector_event *ev, void *ud);

/** Grants (or adopts) the lease asynchronously and keeps it alive every TTL/3 on the
 * client's shared LeaseKeepAlive streams (one up to 256 renewals in flight). @return NULL
 * only when out of memory or when etcd is a handle in error (see elector_etcd_err()). cb
 * may be NULL. */
elector_session *elector_session_new(elector_etcd *etcd,
                                     const elector_session_config *cfg,
                                     elector_session_cb cb, void *ud);

/** Blocks (running the loop) until the lease is granted. @return 0, ELECTOR_ETIMEDOUT,
 * or the grant's error (ECONNECT, ETLS, EAUTH, ENOLEADER, ...). A grant refused
 * as ELECTOR_EUNAVAILABLE (etcd's "too many requests", the leader changing, the
 * connection lost under the request) or ELECTOR_ETIMEDOUT (etcd's "request
 * timed out", no answer in time) is sent again after a jittered pause for up to
 * 30 s after elector_session_new(); only then does it end the session. */
int elector_session_wait(elector_session *s, int64_t timeout_ms);

/** Revokes the lease (so our keys vanish at once) and frees the session. A session
 * that ended on its own is revoked too if its lease was not (manual_release),
 * unless etcd said it is gone (ELECTOR_ELEASE). Elections
 * still on it report LOST (ELECTOR_ECLOSED) if leading, FAILED if campaigning;
 * the session counts as closed during those callbacks (closing it again there
 * does nothing). The revoke is sent by the loop; use elector_session_close_sync()
 * to wait for it, or elector_session_close_async() to be told. Safe from a
 * callback. */
void elector_session_close(elector_session *s);

/** @{ */
/** Same, and cb(rc, ud) runs once from the loop when the revoke is answered: rc
 * 0 (revoked, or etcd no longer knew the lease) or the revoke's error
 * (ELECTOR_ETIMEDOUT after timeout_ms > 0, EUNAVAILABLE, ...; ELECTOR_ECANCELED
 * when the client is freed first). @return 1 when the revoke was sent (cb will
 * run), 0 when there was nothing to revoke (or cb is NULL: as
 * elector_session_close()), or an error code, and then cb does not run:
 * ELECTOR_ENOMEM (the revoke is still sent if it can be), or the send's error
 * (the lease expires after its TTL). The session is freed in every case. For an
 * event loop that must not block (the asyncio binding); safe from a callback.
 * own_thread: cb on the callback thread; from the session's own callback the
 * close is made once it has returned (0: cb does not run). */
typedef void (*elector_session_closed_cb)(int rc, void *ud);
int elector_session_close_async(elector_session *s, int64_t timeout_ms,
                                elector_session_closed_cb cb, void *ud);
/** @} */

/** Same, but runs the loop until the revoke is answered or timeout_ms passes.
 * @return 0 (also when there was nothing to revoke, or etcd no longer knew the
 * lease) or the revoke's error (ETIMEDOUT, EUNAVAILABLE, ...); ELECTOR_ECLOSED
 * when a callback run meanwhile frees the client (whether the revoke reached
 * etcd is then unknown). A revoke that could not be queued (out of memory) or
 * failed on the way (EUNAVAILABLE, ...) is made again with
 * elector_etcd_lease_revoke_sync() until timeout_ms: on return the revoke was
 * answered or has failed, never left queued, so the client may be freed next.
 * Not from a callback. own_thread: the same from any thread (the revoke made
 * again from the calling thread); from the session's own callback, not at all
 * (0: the close is made once that callback has returned). */
int elector_session_close_sync(elector_session *s, int64_t timeout_ms);

/** The release helper of a session with release_on_exit. @return its process ID while
 * it runs; 0 when none was asked for, before the lease is granted and after it
 * was stopped (close, or the session's own end); or a negative ELECTOR_E* code
 * when it could not be started (ELECTOR_EINVAL: no helper binary at the path,
 * it could not be spawned, or the kernel has no pidfds; ELECTOR_ENOMEM: no
 * memory, descriptors or processes left). The session works without it: the
 * lease then ends by its TTL when this process dies. */
int elector_session_helper(const elector_session *s);

/** The lease ID: 0 until granted; still set after the session ended. */
int64_t elector_session_lease(const elector_session *s);
int64_t elector_session_ttl(const elector_session *s); /**< granted TTL, seconds */
/** The validity deadline, on elector_now_ns()'s clock (CLOCK_BOOTTIME); 0 unless
 * the session is alive. */
int64_t elector_session_deadline_ns(const elector_session *s);
bool elector_session_alive(const elector_session *s); /**< now < deadline */

/** @{ */
/** Keepalive statistics of a session. rtt_buckets[i] counts round trips of at
 * most elector_rtt_bounds_us[i] microseconds (and more than the bound before);
 * the last bucket counts the rest. */
#define ELECTOR_RTT_BUCKETS 12
extern const int64_t elector_rtt_bounds_us[ELECTOR_RTT_BUCKETS - 1];
/** @} */
/** Keepalive statistics of a session (see ELECTOR_RTT_BUCKETS). */
typedef struct elector_session_stats {
    uint64_t renewals;                         /**< keepalives answered with ttl > 0 */
    uint64_t failures;                         /**< keepalives that failed or timed out */
    int64_t last_rtt_ns;                       /**< the last round trip, ns */
    uint64_t rtt_buckets[ELECTOR_RTT_BUCKETS]; /**< round trips by duration */
    uint64_t rtt_count;                        /**< round trips measured */
    int64_t rtt_sum_ns;                        /**< their total duration, ns */
    /** LeaseGrant requests sent again after ELECTOR_EUNAVAILABLE ("too many
     * requests", the connection lost under it) or ELECTOR_ETIMEDOUT, for up to
     * 30 s. */
    uint64_t grant_retries;
} elector_session_stats;

/** Fills out with the session's keepalive statistics. */
void elector_session_get_stats(const elector_session *s, elector_session_stats *out);

/* ---- elections ------------------------------------------------------------------ */

/** An election's events (WAITING, ELECTED, PROCLAIMED, LOST, RESIGNED, FAILED).
 * ev's pointers live during the call. */
typedef void (*elector_election_cb)(elector_election *el, const elector_event *ev,
                                    void *ud);

/** An election handle for `name` on a session. name is copied; it must be
 * non-empty. Many elections may share one session. @return NULL when out of
 * memory or name is empty. */
elector_election *elector_election_new(elector_session *s, const char *name,
                                       elector_election_cb cb, void *ud);

/** Resigns if leading or campaigning (best effort: the delete of our key is sent
 * by the loop, and sent again after a transient failure, up to 12 times; it is
 * also sent, once, when a lost answer left our key's revision unknown, guarded
 * then by our lease), frees. Until that delete, or a campaign Txn still out,
 * is answered, a new election object with this name on the session gets
 * ELECTOR_EBUSY from elector_campaign (the key would be the same one).
 * Safe from any callback, also one delivered to another election (say, the
 * LOST of the first election of a dying session frees them all). */
void elector_election_free(elector_election *el);

/** Adds an observer of beliefs (ELECTED, LOST, RESIGNED, PROCLAIMED) beside the
 * main callback, for audit logs and the fault suite's history checker. */
void elector_election_set_log(elector_election *el, elector_election_cb log, void *ud);

/** Starts campaigning with value (copied; may be binary). Events: WAITING (each
 * time the predecessor changes), then ELECTED, or FAILED with a reason:
 * ESESSION/ELEASE (the session died while waiting: we never claim leadership on
 * a lease we cannot prove alive), ECANCELED (resigned while waiting), or an
 * error etcd gives that retrying cannot cure (ETOOLARGE, EPERM, EAUTH, ...),
 * ELECTOR_EPROTO among them: the server sent what etcd never sends (a malformed
 * or oversized reply, a result of the wrong kind). A leader loses with it too.
 * Transient errors (etcd's "too many requests", no leader, a timeout, the
 * connection lost) are never a reason: the campaign and check Txns and the
 * watch are sent again inside the library, after a jittered pause (50 ms
 * doubling to 1.6 s), for as long as the session lives; the session's deadline
 * bounds them. They are counted in elector_election_get_stats() (retries).
 * Campaign and check Txns, and the deletes of resign and free, are paced: at
 * most 256 in flight per client (fewer while etcd answers them slowly), the
 * others wait their turn, so that the lease's keepalive is never stuck behind
 * them (docs/DESIGN.md, "Many elections on one client").
 * A campaign or check that fails for good (EPERM, EAUTH, ...) deletes the key it
 * made, so it does not make later candidates wait for our session.
 * Our key is `NAME/<lease>`: one per name and session. Another election object
 * with the same name on the same session cannot campaign while this one
 * campaigns, leads, still deletes that key or still has the Txn of a resigned
 * campaign out, freed or not (ELECTOR_EBUSY).
 * @return 0, ELECTOR_EBUSY (already campaigning or leading, or another election
 * with this name on this session is), ELECTOR_ESESSION (session dead),
 * ELECTOR_ETOOLARGE, ELECTOR_ENOMEM; on error no event follows. */
int elector_campaign(elector_election *el, const void *value, size_t len);

/** Blocking: campaigns and runs the loop until elected, failed, or timeout_ms
 * passes; timeout_ms < 0 waits without limit. Not from a callback. @return 0
 * (elected), the failure's reason, or ELECTOR_ETIMEDOUT (the campaign goes on). */
int elector_campaign_sync(elector_election *el, const void *value, size_t len,
                          int64_t timeout_ms);

/** Stores a new value under our key without a new election. Event PROCLAIMED
 * (reason 0: stored; reason < 0: not stored, e.g. ETIMEDOUT, still leading), or
 * LOST (ELECTOR_ENOTLEADER) if the key is no longer ours. @return 0, or
 * ELECTOR_ENOTLEADER at once if we do not lead now, ELECTOR_EBUSY while another
 * proclaim is in flight. */
int elector_proclaim(elector_election *el, const void *value, size_t len);

/** Gives up leadership, or stops a campaign: our belief ends at once, then our key
 * is deleted, guarded by its create revision, or by our lease if a campaign Txn
 * was applied but its answer lost (the revision is then unknown); transient
 * failures are retried while the session lives. Event RESIGNED if we led, FAILED
 * (ELECTOR_ECANCELED) if we were waiting, once the delete is answered. A new
 * campaign started before that waits for the delete's answer, so that the delete
 * cannot remove the new key; one started while the resigned campaign's Txn is
 * still out waits for that Txn's answer (the key it made is then the new
 * campaign's). @return 0 or ELECTOR_EINVAL (idle). */
int elector_resign(elector_election *el);

/** Resigns and waits until RESIGNED or FAILED came (our key is deleted), running
 * the loop (not from a callback) or, with own_thread, on a condition variable.
 * @return 0, ELECTOR_EINVAL (idle), ELECTOR_ETIMEDOUT after timeout_ms (< 0:
 * no limit; the delete goes on), ELECTOR_ECLOSED (freed meanwhile). */
int elector_resign_sync(elector_election *el, int64_t timeout_ms);

/** True only while we lead and the session's validity deadline has not passed:
 * evaluated against the deadline clock (elector_now_ns()) at each call. */
bool elector_is_leader(const elector_election *el);

/** @{ */
/** Our key, token (create revision; 0 if none), election name and session.
 * key_len may be NULL. */
const uint8_t *elector_election_key(const elector_election *el, size_t *key_len);
int64_t elector_election_token(const elector_election *el);
const char *elector_election_name(const elector_election *el);
elector_session *elector_election_session(const elector_election *el);
/** @} */

/** How this election's checks were made (docs/DESIGN.md, "Graceful handover:
 * the serializable check"). A check asks "is our key still ours, and who was
 * created just before it?". After the DELETE event of our predecessor it is a
 * serializable read, answered by the member from its own state; that answer
 * counts only if it comes from the member that sent the event, over the same
 * connection, at a revision at or after the delete. Otherwise a linearizable
 * check decides (a fallback, counted by reason). Every other check is
 * linearizable. */
typedef struct elector_election_stats {
    uint64_t checks_linearizable; /**< linearizable check Txns sent */
    uint64_t checks_serializable; /**< serializable check Txns sent */
    uint64_t serializable_taken;  /**< ... whose answer decided */
    /** serializable checks followed by a linearizable one, by reason: */
    uint64_t fallback_error;  /**< the call failed (not with ELECTOR_EPROTO) */
    uint64_t fallback_member; /**< no header, another member or cluster */
    uint64_t fallback_conn;   /**< answered on another connection than the event */
    uint64_t fallback_stale;  /**< revision below the delete's (the member had sent
                                 the event before the delete was visible to reads) */
    uint64_t fallback_reply;  /**< malformed answer (ELECTOR_EPROTO: a result
                                 missing, extra or of the wrong kind, ...) */
    int last_decided_by;      /**< the last check whose answer was used: 0 none yet,
                                 1 linearizable, 2 serializable */
    /** Requests sent again after a transient error (etcd's "too many requests",
     * no leader, a timeout, the connection lost): campaign and check Txns, a
     * watch that broke or could not be created, a freed election's delete. */
    uint64_t retries;
    /** 1 while etcd has confirmed the watch this election relies on now (a
     * leader's on its own key, a waiting candidate's on its predecessor's).
     * ELECTED comes before that confirmation: in between, a delete of our key
     * by someone else is not noticed until it comes (docs/DESIGN.md). */
    int watching;
    int64_t watch_wait_ns; /**< how long etcd took to confirm the last watch */
} elector_election_stats;

/** Fills out with the election's statistics. */
void elector_election_get_stats(const elector_election *el, elector_election_stats *out);

/* Fencing for applications: elector_election_token() is the fencing token; pass it
 * to the resource you guard. */

/** @{ */
/** Guarded writes to etcd itself: a Put or a Delete of `key` (bytes, copied
 * before the call returns) made in one Txn with the compare
 * CreateRevision(our key) == token, so it is applied only while our key is
 * still the one we were elected with: nothing is written once etcd has dropped
 * our lease or our key, whatever this process believes.
 *
 * Asynchronous forms: cb runs exactly once, from the loop, with err 0 (written),
 * ELECTOR_ENOTLEADER (the compare failed: nothing written), or the call's error
 * (ETIMEDOUT, EUNAVAILABLE, EPERM, ...: the write may or may not have been
 * applied when the answer was lost). It runs also when the election was freed
 * meanwhile (el must not be used then), and with ELECTOR_ECANCELED when the
 * client is freed first. @return 0, ELECTOR_ENOTLEADER (we do not lead now:
 * nothing sent, no callback), ELECTOR_EINVAL (empty key, NULL cb, or a key
 * under the election's own prefix NAME/, where a key without a lease would
 * block the election for good: the client's error text says so), ELECTOR_ENOMEM. */
typedef void (*elector_guarded_cb)(elector_election *el, int err, void *ud);
int elector_guarded_put(elector_election *el, const void *key, size_t key_len,
                        const void *value, size_t value_len, elector_guarded_cb cb,
                        void *ud);
int elector_guarded_delete(elector_election *el, const void *key, size_t key_len,
                           elector_guarded_cb cb, void *ud);
/** @} */

/** The rule the guarded writes keep. @return 0 when `key` may be written for election
 * `name`, ELECTOR_EINVAL (why, if given, says so in full) when it is under the
 * election's own prefix NAME/. Pure; for bindings that want the text. */
int elector_guarded_key_check(const char *name, const void *key, size_t key_len,
                              char *why, size_t cap);

/** @{ */
/** Blocking forms (run the loop; not from a callback). @return 0, ELECTOR_ENOTLEADER
 * (nothing written), or the call's error; ELECTOR_ETIMEDOUT after timeout_ms
 * (< 0: no limit; the Txn may still be applied). */
int elector_guarded_put_sync(elector_election *el, const void *key, size_t key_len,
                             const void *value, size_t value_len, int64_t timeout_ms);
int elector_guarded_delete_sync(elector_election *el, const void *key, size_t key_len,
                                int64_t timeout_ms);
/** @} */

#ifdef ELECTOR_RPC_API
/* In-tree only (it takes etcd's protobuf messages, see elector/etcd_rpc.h). */
/** Fencing: runs `txn` only if we still lead. Our compare
 * CreateRevision(our key) == token is added in front of the caller's compares,
 * and a Range of our key is appended to the failure ops (the last response op).
 * cb gets 0 and the response (resp->succeeded tells the caller's compares), or
 * ELECTOR_ENOTLEADER when our key is no longer ours (then resp is set too), or
 * another error. @return 0, ELECTOR_ENOTLEADER (not leading now: nothing sent),
 * ELECTOR_ENOMEM. */
typedef void (*elector_txn_cb)(elector_election *el, int err,
                               const Etcdserverpb__TxnResponse *resp, void *ud);
int elector_guarded_txn(elector_election *el, const Etcdserverpb__TxnRequest *txn,
                        elector_txn_cb cb, void *ud);
#endif

/* ---- leader query and observe ---------------------------------------------------- */

/** A leader as read from etcd; owned by the caller, freed with elector_leader_free. */
typedef struct elector_leader_info {
    uint8_t *key;     /**< the leader's key */
    size_t key_len;   /**< its length */
    uint8_t *value;   /**< the value it proclaimed */
    size_t value_len; /**< its length */
    int64_t token;    /**< create revision */
    int64_t lease;    /**< the key's lease */
    int64_t revision; /**< store revision of the read */
} elector_leader_info;

/** Reads the current leader of `name` without campaigning (Range of NAME/ sorted by
 * create revision, limit 1). @return 0 with info filled, 1 when nobody leads (info
 * zeroed), ELECTOR_EBLOCKED when the first key is one without a lease (not a
 * candidate's: written by hand or by a program under NAME/; nobody can lead
 * until it is deleted): info is filled with that key, to be freed as well, and
 * the handle's error text names it; or the read's error (EUNAVAILABLE,
 * ETIMEDOUT, EPERM, ...). Blocking; not from a callback. */
int elector_leader_sync(elector_etcd *etcd, const char *name, int64_t timeout_ms,
                        elector_leader_info *info);
/** Frees what info holds (info itself is the caller's) and zeroes it. */
void elector_leader_free(elector_leader_info *info);

/** @{ */
/** The same read without waiting: cb runs once (from the loop, or the callback
 * thread) with rc as elector_leader_sync() returns it and info (rc 0 or
 * ELECTOR_EBLOCKED; valid during cb), or ELECTOR_ECANCELED (the client freed
 * first). @return 0 (cb will run) or the error (cb never runs). */
typedef void (*elector_leader_cb)(elector_etcd *etcd, int rc,
                                  const elector_leader_info *info, void *ud);
int elector_leader(elector_etcd *etcd, const char *name, int64_t timeout_ms,
                   elector_leader_cb cb, void *ud);
/** @} */

/** @{ */
/** Follows the leader of `name`: LEADER (with every new value proclaimed) and
 * NO_LEADER events, in order, without duplicates, never an older state after a
 * newer one (events at or below the revision already reported are ignored).
 * Survives compaction, broken watches and reconnects by re-reading the current
 * state. Errors are retried and give no events, except ELECTOR_EPROTO (the server
 * broke the protocol, which a retry cannot cure): then one ELECTOR_EV_FAILED event
 * (reason, detail) ends the observer; free it. After a restore of etcd from a
 * snapshot (its revision went back: ELECTOR_ERESTORED) the observer forgets the
 * old history, reads again and reports the current state even if unchanged,
 * that once with reason ELECTOR_ERESTORED and detail saying why; it goes on.
 * @return NULL when out of memory or name is empty. */
typedef void (*elector_observe_cb)(elector_observer *o, const elector_event *ev,
                                   void *ud);
elector_observer *elector_observe(elector_etcd *etcd, const char *name,
                                  elector_observe_cb cb, void *ud);
/** @} */
/** Stops following and frees the observer. */
void elector_observer_free(elector_observer *o);

#ifdef __cplusplus
}
#endif
#endif
