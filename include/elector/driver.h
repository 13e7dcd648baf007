/* SPDX-License-Identifier: MIT */
/**
 * @file
 * elector — the driver: the library's loop on a thread of its own, for programs
 * that have no event loop to hand elector_etcd_fd() to (most threaded C, C++ and
 * Python servers). An optional layer above elections (src/driver/); the core
 * (etcd.h, election.h) stays thread-free and keeps its fd API.
 *
 * Threads. elector_driver_new() starts two threads:
 *   - the loop thread owns the client: it alone calls into the core, runs the
 *     keepalives, the deadlines and the requests. It never runs user code (except
 *     the on_stall hook, see below) and never waits for a user thread, so a
 *     callback that blocks or a user thread that holds its own mutex for minutes
 *     cannot make the lease expire.
 *   - the callback thread ("the driver's callback thread") runs every callback
 *     of this API, one at a time, in the order the events happened.
 * Every function below may be called from any thread, callbacks included. A
 * call is marshalled to the loop thread (a queued job and
 * elector_etcd_wakeup()) and either waits there for its answer (the _sync forms,
 * with a timeout) or returns at once and completes through a callback. A call
 * from a callback may block (a _sync form): the loop thread keeps running, only
 * later callbacks wait. A callback that runs longer than stall_ms is reported
 * (on_stall, or a line on stderr) and counted: it delays the callbacks behind
 * it, never a keepalive.
 *
 * Handles. A driver owns its sessions, elections and observers: each *_free /
 * *_close may be called from any thread, and once it returns no callback of
 * that handle runs any more (from a callback of that very handle, the current
 * callback is the last). elector_driver_free() frees what is left (elections
 * resign, sessions revoke their lease, waiting up to 1 s each) and joins both
 * threads; the handles it freed must not be used or freed afterwards. From a
 * callback it stops the driver and the callback thread exits once that
 * callback has returned. Not from on_stall, nor from elector_driver_exec()'s
 * fn.
 *
 * fork(). The driver's threads do not exist in a child. Every call in a child
 * of the process that created the driver returns ELECTOR_EFORKED (false, 0 for
 * the queries) and sends nothing: the child never renews, writes with or
 * revokes the parent's lease. elector_driver_free() in the child only forgets
 * the handle (no memory is released, nothing is sent); the parent's driver goes
 * on untouched.
 */
#ifndef ELECTOR_DRIVER_H
#define ELECTOR_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "elector/election.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct elector_driver elector_driver; /**< a client run by two threads */
typedef struct elector_driver_session elector_driver_session;   /**< a session on it */
typedef struct elector_driver_election elector_driver_election; /**< an election */
typedef struct elector_driver_observer elector_driver_observer; /**< an observer */

/** Driver settings: elector_driver_config_init() fills the defaults. */
typedef struct elector_driver_config {
    int64_t stall_ms; /**< a callback running longer is reported; default 1000 */
    /** Called on the loop thread once per callback that runs longer than
     * stall_ms, with how long it has run so far. It must not block nor call
     * this API. NULL: a line on stderr. */
    void (*on_stall)(elector_driver *d, int64_t running_ms, void *ud);
    void *ud; /**< passed to on_stall */
} elector_driver_config;

/** Fills defaults. */
void elector_driver_config_init(elector_driver_config *cfg);

/** Creates the client (etcd_cfg as for elector_etcd_new(); NULL: defaults) and
 * starts the two threads. @return 0 and *out, or ELECTOR_EINVAL/ETLS (the
 * client's configuration error; elector_etcd_errstr's text on stderr is not
 * printed: it is lost with the client), ELECTOR_ENOMEM, ELECTOR_EUNAVAILABLE
 * (no thread could be started). cfg may be NULL. */
int elector_driver_new(const elector_etcd_config *etcd_cfg,
                       const elector_driver_config *cfg, elector_driver **out);

/** Stops the driver and frees it with every handle left on it. From any
 * thread; see above. NULL is a no-op. */
void elector_driver_free(elector_driver *d);

/** Runs fn(etcd, arg) on the loop thread (between two rounds of the loop: fn may
 * call any core function that is not blocking) and waits until it returned.
 * For what this API lacks. @return 0, ELECTOR_ECLOSED (driver stopping),
 * ELECTOR_EFORKED. */
int elector_driver_exec(elector_driver *d, void (*fn)(elector_etcd *etcd, void *arg),
                        void *arg);

/** Callbacks that ran longer than stall_ms so far. */
uint64_t elector_driver_stalls(const elector_driver *d);

/** True on the driver's callback thread. */
bool elector_driver_in_callback(const elector_driver *d);

/** In the callback of elector_driver_leader() or of an asynchronous guarded
 * write that reports a failure of the call to etcd: the client's detail text of
 * that failure, as elector_etcd_errstr() had it on the loop thread when the
 * call failed ("endpoint 127.0.0.1:2379: connect: Connection refused"). ""
 * otherwise (no failure, ELECTOR_ENOTLEADER, another callback, another
 * thread). Valid until the callback returns. */
const char *elector_driver_cb_detail(const elector_driver *d);

/* ---- sessions ------------------------------------------------------------------ */

/** SESSION_LOST, as elector_session_cb. ev's pointers live during the call. */
typedef void (*elector_driver_session_cb)(elector_driver_session *s,
                                          const elector_event *ev, void *ud);

/** A session (lease kept alive by the loop thread); the grant is asynchronous.
 * cfg may be NULL (defaults). @return NULL when out of memory, the driver is
 * stopping, or in a forked child. */
elector_driver_session *elector_driver_session_new(elector_driver *d,
                                                   const elector_session_config *cfg,
                                                   elector_driver_session_cb cb,
                                                   void *ud);

/** Waits until the lease is granted. @return 0, ELECTOR_ETIMEDOUT, or the grant's error
 * (ECONNECT when etcd is down, ...: the session is over then; make a new one). */
int elector_driver_session_wait(elector_driver_session *s, int64_t timeout_ms);

/** Revokes the lease (sent by the loop thread) and frees the session.
 * Elections still on it report LOST or FAILED (ECLOSED); free them first.
 * elector_driver_free() right after waits (up to 1 s) for the revoke's answer. */
void elector_driver_session_close(elector_driver_session *s);

/** @{ */
/** Revokes lease (a closed session's: elector_driver_session_lease() read before
 * the close) with a LeaseRevoke of its own, for a caller that must know the
 * lease is gone: cb(d, rc, ud) runs once, on the callback thread, with 0 (etcd
 * revoked it, or no longer knew it: revoked or expired) or the call's error
 * (ELECTOR_ETIMEDOUT after timeout_ms; <= 0: the request timeout;
 * ELECTOR_ECANCELED when the driver stops first). @return 0 (cb will run) or
 * the error (cb never runs). */
typedef void (*elector_driver_revoke_cb)(elector_driver *d, int rc, void *ud);
int elector_driver_revoke(elector_driver *d, int64_t lease, int64_t timeout_ms,
                          elector_driver_revoke_cb cb, void *ud);
/** @} */

int64_t
elector_driver_session_lease(const elector_driver_session *s); /**< 0 until granted */
/** now < deadline, as elector_session_alive() */
bool elector_driver_session_alive(const elector_driver_session *s);
/** As elector_session_helper(). @return the release helper's pid while it runs, 0 when
 * none was asked for (or not yet, or no longer), or why it could not start
 * (a negative ELECTOR_E* code; the client's notice names the paths tried). */
int elector_driver_session_helper(const elector_driver_session *s);

/* ---- elections ----------------------------------------------------------------- */

/** An election's events, as elector_election_cb, on the callback thread. */
typedef void (*elector_driver_election_cb)(elector_driver_election *el,
                                           const elector_event *ev, void *ud);

/** As elector_election_new(); events come on the callback thread. */
elector_driver_election *elector_driver_election_new(elector_driver_session *s,
                                                     const char *name,
                                                     elector_driver_election_cb cb,
                                                     void *ud);
/** Resigns if leading or campaigning and frees. */
void elector_driver_election_free(elector_driver_election *el);

/** @{ */
/** As elector_campaign(), elector_proclaim(), elector_resign(): the return value
 * is the core's; the events follow on the callback thread. */
int elector_driver_campaign(elector_driver_election *el, const void *value, size_t len);
int elector_driver_proclaim(elector_driver_election *el, const void *value, size_t len);
int elector_driver_resign(elector_driver_election *el);
/** @} */

/** Campaigns and waits. @return 0 (elected), the campaign's failure, or ETIMEDOUT (the
 * campaign goes on; its events still come). timeout_ms < 0: no limit. */
int elector_driver_campaign_sync(elector_driver_election *el, const void *value,
                                 size_t len, int64_t timeout_ms);
/** Resigns and waits until our key is deleted (RESIGNED or FAILED came). @return 0,
 * ELECTOR_EINVAL (idle), ELECTOR_ETIMEDOUT. */
int elector_driver_resign_sync(elector_driver_election *el, int64_t timeout_ms);

/** As elector_is_leader(): our belief, bounded by the session's validity
 * deadline on the deadline clock at each call. Lock-free of the loop: the
 * loop thread publishes the state after each round; a stale copy can only
 * carry an older (earlier) deadline. */
bool elector_driver_is_leader(const elector_driver_election *el);
int64_t elector_driver_token(const elector_driver_election *el); /**< 0: none */

/** @{ */
/** Guarded writes (see elector_guarded_put()). cb runs exactly once on the
 * callback thread, also when the election was freed meanwhile (el must not be
 * used then). */
typedef void (*elector_driver_guarded_cb)(elector_driver_election *el, int err, void *ud);
int elector_driver_guarded_put(elector_driver_election *el, const void *key,
                               size_t key_len, const void *value, size_t value_len,
                               elector_driver_guarded_cb cb, void *ud);
int elector_driver_guarded_delete(elector_driver_election *el, const void *key,
                                  size_t key_len, elector_driver_guarded_cb cb, void *ud);
int elector_driver_guarded_put_sync(elector_driver_election *el, const void *key,
                                    size_t key_len, const void *value, size_t value_len,
                                    int64_t timeout_ms);
int elector_driver_guarded_delete_sync(elector_driver_election *el, const void *key,
                                       size_t key_len, int64_t timeout_ms);
/** @} */

/* ---- leader query and observe -------------------------------------------------- */

/** As elector_leader_sync(). @return 0 (info filled; free with elector_leader_free()),
 * 1 (nobody leads), ELECTOR_EBLOCKED (info filled with the key without a lease
 * that blocks the election; free it too), or the read's error. */
int elector_driver_leader_sync(elector_driver *d, const char *name, int64_t timeout_ms,
                               elector_leader_info *info);

/** @{ */
/** The same read without waiting: cb(d, rc, info, ud) runs once, on the callback
 * thread, with rc as elector_driver_leader_sync() would return it (info is set
 * when rc is 0 or ELECTOR_EBLOCKED, valid during the callback only; ELECTOR_ECANCELED
 * when the driver stops first). For callers that wait on their own terms (a file
 * descriptor the callback wakes, say). @return 0 (cb will run) or the error
 * (cb never runs). */
typedef void (*elector_driver_leader_cb)(elector_driver *d, int rc,
                                         const elector_leader_info *info, void *ud);
int elector_driver_leader(elector_driver *d, const char *name, int64_t timeout_ms,
                          elector_driver_leader_cb cb, void *ud);
/** @} */

/** @{ */
/** As elector_observe(); events come on the callback thread. @return NULL when
 * out of memory or name is empty, the driver is stopping, or in a forked child. */
typedef void (*elector_driver_observe_cb)(elector_driver_observer *o,
                                          const elector_event *ev, void *ud);
elector_driver_observer *elector_driver_observe(elector_driver *d, const char *name,
                                                elector_driver_observe_cb cb, void *ud);
/** @} */
/** Stops following and frees the observer. */
void elector_driver_observer_free(elector_driver_observer *o);

/* ---- keys -------------------------------------------------------------------- */

/* Plain key operations for what elections do not cover (tooz's groups, say):
 * blocking, from any thread but the callback thread; each waits for its own
 * call, which ends by timeout_ms (<= 0: the client's request timeout).
 * Keys and values are bytes; a key must not be empty. */

/** A key as read from etcd; the array and its bytes are owned by the caller,
 * freed with elector_driver_kvs_free(). */
typedef struct elector_driver_kv {
    uint8_t *key;            /**< the key's bytes */
    size_t key_len;          /**< their length */
    uint8_t *value;          /**< the value's bytes */
    size_t value_len;        /**< their length */
    int64_t create_revision; /**< revision of the key's creation */
    int64_t mod_revision;    /**< revision of its last change */
    int64_t lease;           /**< 0: none */
} elector_driver_kv;

/** Only when the key does not exist (a transaction on its create revision). */
#define ELECTOR_DRIVER_PUT_IF_ABSENT 1u

/** Puts key = value, bound to lease when not 0 (a session's:
 * elector_driver_session_lease(); the key goes with the lease). @return 0
 * (written), 1 (ELECTOR_DRIVER_PUT_IF_ABSENT and the key exists: nothing
 * written), or the call's error (ELECTOR_ELEASE: the lease is gone). */
int elector_driver_put_sync(elector_driver *d, const void *key, size_t key_len,
                            const void *value, size_t value_len, int64_t lease,
                            unsigned flags, int64_t timeout_ms);

/** The key (prefix false) or every key that starts with it (prefix true), in key
 * order. @return 0 and *kvs, *n (NULL, 0 when none), or the call's error. */
int elector_driver_get_sync(elector_driver *d, const void *key, size_t key_len,
                            bool prefix, int64_t timeout_ms, elector_driver_kv **kvs,
                            size_t *n);
/** Frees the n keys of kvs and the array (as elector_driver_get_sync() gave them). */
void elector_driver_kvs_free(elector_driver_kv *kvs, size_t n);

/** Deletes the key, or every key that starts with it; *deleted (may be NULL):
 * how many were. @return 0 or the call's error. */
int elector_driver_delete_sync(elector_driver *d, const void *key, size_t key_len,
                               bool prefix, int64_t timeout_ms, int64_t *deleted);

/** @{ */
/** The same three without the wait, for callers that wait on their own terms (a
 * file descriptor the callback wakes, say): cb(d, rc, kvs, n, deleted, ud) runs
 * once, on the callback thread, with rc as the _sync form would return it, and
 * for a get the keys (kvs, n: valid during the callback only), for a delete how
 * many were deleted; ELECTOR_ECANCELED when the driver stops first.
 * @return Each: 0 (cb will run) or the error (cb never runs). */
typedef void (*elector_driver_kv_cb)(elector_driver *d, int rc,
                                     const elector_driver_kv *kvs, size_t n,
                                     int64_t deleted, void *ud);
int elector_driver_put(elector_driver *d, const void *key, size_t key_len,
                       const void *value, size_t value_len, int64_t lease, unsigned flags,
                       int64_t timeout_ms, elector_driver_kv_cb cb, void *ud);
int elector_driver_get(elector_driver *d, const void *key, size_t key_len, bool prefix,
                       int64_t timeout_ms, elector_driver_kv_cb cb, void *ud);
int elector_driver_delete(elector_driver *d, const void *key, size_t key_len, bool prefix,
                          int64_t timeout_ms, elector_driver_kv_cb cb, void *ud);
/** @} */

#ifdef __cplusplus
}
#endif
#endif
