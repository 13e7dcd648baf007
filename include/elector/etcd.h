/* SPDX-License-Identifier: MIT */
/**
 * @file
 * elector — a lean etcd v3 client: gRPC over HTTP/2 (nghttp2), protobuf-c, OpenSSL.
 *
 * One client, two ways to drive it, chosen when it is made:
 *
 * - By the caller's loop (the default). The client creates no threads. An
 *   application embeds it in its own loop with three calls:
 *
 *       int fd = elector_etcd_fd(etcd);          // poll it for POLLIN; never changes
 *       int64_t ms = elector_etcd_timeout(etcd); // at the latest, call process then
 *       elector_etcd_process(etcd);              // do all I/O and timers that are due
 *
 *   or lets elector_etcd_run_once() do the waiting. Blocking helpers such as
 *   elector_session_wait() and elector_campaign_sync() are short loops over the
 *   same engine. Every call is made from the thread that drives the loop.
 *
 * - By its own thread (elector_etcd_config.own_thread). elector_etcd_new()
 *   starts a loop thread, which alone runs the client (keepalives, deadlines,
 *   requests) and never runs user code, and a callback thread, which runs
 *   every callback of the client, one at a time, in the order the events
 *   happened. Every function of etcd.h and election.h may then be called from
 *   any thread, callbacks included: the call is handed to the loop thread and
 *   either waits there for its answer or returns at once and completes through
 *   a callback; the blocking forms (_sync, _wait) wait on a condition
 *   variable, also from a callback (only later callbacks wait). A handle's
 *   free or close, from any thread, returns once no callback of that handle
 *   runs any more, and none runs later (from a callback of that very handle,
 *   the current one is the last). elector_etcd_fd(), _timeout(), _process()
 *   and _run_once() are refused (-1, ELECTOR_EINVAL): the loop is the
 *   client's own. A callback that runs longer than stall_ms is reported
 *   (on_stall, or a line on stderr) and counted (elector_etcd_stalls()): it
 *   delays the callbacks behind it, never a keepalive. In a child of fork(),
 *   whose threads are gone, every call returns ELECTOR_EFORKED (false, 0, NULL
 *   for the queries) and sends nothing; elector_etcd_free() there only forgets
 *   the client.
 *
 * The raw RPC API (elector_etcd_call() and streams, watches, keepalives with
 * etcd's own protobuf messages) is declared in elector/etcd_rpc.h, which is not
 * installed: it needs the protobuf-c types generated in the build tree, which are
 * not part of the library's ABI (docs/DESIGN.md, "Public API and ABI"). The
 * library's own programs (tool, tests, benchmarks) see it through ELECTOR_RPC_API.
 *
 * Rule taken from libuv: when a function that takes a callback returns an error,
 * that callback is never called.
 *
 * Driven by the caller's loop, all callbacks run inside elector_etcd_process()
 * (or a blocking helper), never from another thread; with own_thread, on the
 * client's callback thread. Calling elector_etcd_free() (and, in-tree,
 * elector_stream_close() or elector_watch_cancel()) from inside a callback is
 * allowed; the memory is released once the callback has returned.
 *
 * Signals: the library never raises SIGPIPE, whatever the peer does. Plain
 * connections send with MSG_NOSIGNAL, and TLS goes through a socket BIO that
 * does the same (OpenSSL's own writes with write()). The application need not
 * ignore SIGPIPE for the library's sake.
 *
 * A broken or hostile server: what it sends is bounded (max_recv_msg_bytes per
 * message, checked as the bytes arrive; max_decode_bytes per decode; messages at
 * most 32 deep) and checked (a Txn result of the kind each operation asked for).
 * A violation resets the stream; the call or stream ends with ELECTOR_EPROTO and
 * a detail text naming the RPC and the endpoint. See docs/BAD_INPUT.md.
 */
#ifndef ELECTOR_ETCD_H
#define ELECTOR_ETCD_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "elector/error.h"
#include "elector/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct elector_etcd elector_etcd; /**< an etcd client and its event loop */

/** Connection settings. Initialize with elector_etcd_config_init(), then set fields.
 * Strings are copied by elector_etcd_new(). Times are in milliseconds. */
typedef struct elector_etcd_config {
    /** Comma-separated endpoints: "host:port", "http://host:port",
     * "https://host:port". An endpoint without scheme uses TLS when a CA or client
     * certificate is configured. Default "127.0.0.1:2379". */
    const char *endpoints;
    const char *cacert;   /**< PEM CA bundle to verify the server; NULL: system store */
    const char *cert;     /**< PEM client certificate (optional) */
    const char *key;      /**< PEM client key (optional, with cert) */
    const char *user;     /**< etcd user for Auth.Authenticate (optional) */
    const char *password; /**< its password */
    int64_t dial_timeout_ms;    /**< connect + TLS + first SETTINGS; default 5000 */
    int64_t request_timeout_ms; /**< default deadline of unary calls; default 5000 */
    int64_t keepalive_time_ms;  /**< silence before a PING while awaiting a reply; 1000 */
    int64_t keepalive_idle_ms; /**< silence before a PING with only idle streams; 10000 */
    int64_t
        keepalive_timeout_ms; /**< PING ack deadline, then the connection is dead; 2000 */
    int64_t backoff_min_ms;   /**< first reconnect delay after a failed round; 50 */
    int64_t backoff_max_ms;   /**< reconnect delay cap; 2000 */
    /** Bounds on what a server may send (a broken or hostile peer gets
     * ELECTOR_EPROTO, never unbounded memory). */
    size_t max_recv_msg_bytes; /**< largest gRPC message accepted, checked on its 5-byte
                                  prefix as DATA arrives; 0: 4 MiB (gRPC's own
                                  default), at most 64 MiB. A larger message resets
                                  its stream: a unary call fails, a stream ends. */
    size_t max_decode_bytes;   /**< heap that decoding one message may take (protobuf-c
                                  allocations); 0: 8 x max_recv_msg_bytes. etcd's
                                  replies take 1-5 times their size. */
    /** true: accept any server certificate, for any name (etcdctl's
     * --insecure-skip-tls-verify). The connection is encrypted but anyone in the
     * path can pose as etcd and read the password. For tests only. */
    bool insecure_skip_verify;
    /** Every this many ms, the endpoint list is replaced by the client URLs of the
     * cluster's members (Cluster.MemberList; learners left out), like the Go
     * client's AutoSyncInterval. 0 (the default): off, the list stays as given.
     * Off by default because the list given may be a load balancer or a DNS
     * name that must stay in use; see docs/DESIGN.md, "Membership". */
    int64_t auto_sync_interval_ms;
    /** A file that holds the password (its first line), read again before an
     * Auth.Authenticate whenever it changed (inode, size or mtime): a rotated
     * password is used without a restart. A file that cannot be read or is
     * empty is a notice, and the previous password stays in use. password, if
     * also set, is the one to start with. NULL: the password field only. */
    const char *password_file;
    /** true: TLS only (etcdctl's --insecure-transport=false). Endpoints without a
     * scheme use TLS, an http:// endpoint is refused (elector_etcd_new() fails
     * with ELECTOR_EINVAL), and auto-sync takes only https:// client URLs.
     * Without it, a client whose endpoints use TLS (https://, or no scheme with
     * TLS files set) still never moves to cleartext: auto-sync skips the http://
     * URLs of the member list (a notice names them), so a password or token is
     * never sent unencrypted to a member the user did not name. Default false. */
    bool require_tls;
    /** true: the client runs its own loop on a thread of its own and takes
     * calls from any thread (see the top of this file). Default false: the
     * caller's loop drives it, and the library starts no thread. */
    bool own_thread;
    /** own_thread: a callback that runs longer than this is reported once;
     * default 1000. */
    int64_t stall_ms;
    /** own_thread: called on the loop thread once per callback that runs
     * longer than stall_ms, with how long it has run so far. It must not
     * block nor call into the client. NULL: a line on stderr. */
    void (*on_stall)(elector_etcd *etcd, int64_t running_ms, void *ud);
    void *stall_ud; /**< passed to on_stall */
} elector_etcd_config;

/** Fills defaults. */
void elector_etcd_config_init(elector_etcd_config *cfg);

/** Creates a client. No connection is made until the first call or stream.
 * @return NULL only when memory is exhausted; otherwise check elector_etcd_err():
 * ELECTOR_EINVAL for a malformed endpoint list (or an http:// endpoint with
 * require_tls) or unreadable TLS files (the text names the culprit; a
 * malformed or refused list leaves no endpoints, so
 * elector_etcd_endpoint_info(etcd, 0, ...) fails then, and only then),
 * ELECTOR_ETLS for an unusable TLS setup, ELECTOR_ENOMEM when memory ran out
 * part way (never a client that silently lacks a configured feature, such as
 * auto-sync or the TLS files' reload). A client in error must still be freed
 * with elector_etcd_free(). */
elector_etcd *elector_etcd_new(const elector_etcd_config *cfg);

/** Fails every pending call with ELECTOR_ECANCELED, closes the connection, frees.
 * Safe from inside a callback (deferred until it returns). NULL is a no-op.
 * With own_thread, from any thread: new calls are refused (ELECTOR_ECLOSED),
 * what is left is freed on the loop thread (elections resign, sessions revoke
 * their lease, waiting up to 1 s each), and both threads are joined; a handle
 * of the client must not be used once the free has begun. From a callback,
 * the handles live until that callback returns (the calls it makes are
 * refused), then the client goes. Not from on_stall, nor from
 * elector_etcd_exec()'s fn. */
void elector_etcd_free(elector_etcd *etcd);

/** @{ */
/** The last error code of the handle and its detail text ("" when none). With
 * own_thread: on the callback thread, in the callback of a call that failed,
 * the text of that failure ("" in other callbacks); on other threads what the
 * loop thread last published. */
int elector_etcd_err(const elector_etcd *etcd);
const char *elector_etcd_errstr(const elector_etcd *etcd);
/** @} */

/** The one file descriptor to poll for POLLIN (an epoll set behind it: the
 * connection, the wakeup eventfd, and a timerfd on CLOCK_BOOTTIME armed at the
 * next due time, so the fd also becomes readable when something is due, even
 * across a suspend of the host, which poll() timeouts do not count). */
int elector_etcd_fd(const elector_etcd *etcd);

/** Milliseconds until elector_etcd_process() must run at the latest; -1 = no timer.
 * Call it before each wait: it also arms the fd's wake-up for that moment. */
int64_t elector_etcd_timeout(elector_etcd *etcd);

/** Performs every due read, write and timer and runs the callbacks that result.
 * @return 0, or ELECTOR_ECLOSED if the handle was freed from a callback. */
int elector_etcd_process(elector_etcd *etcd);

/** Waits up to max_ms (or the next timer, if sooner; -1 = no cap) for activity,
 * then processes it. @return what elector_etcd_process() returns. */
int elector_etcd_run_once(elector_etcd *etcd, int64_t max_ms);

/** Wakes a run_once()/poll() that waits on elector_etcd_fd(). Driven by the
 * caller's loop, the only function of the client (etcd.h, election.h) that may
 * be called from another thread. */
void elector_etcd_wakeup(elector_etcd *etcd);

/** Runs fn(etcd, arg) on the thread that drives the client and returns once it
 * has returned: at once when called there (the caller's loop, or own_thread's
 * loop thread), else handed to the loop thread between two of its rounds. fn
 * may call any function of the client that does not block. For what the API
 * lacks (the in-tree RPC API of etcd_rpc.h, with own_thread).
 * @return 0, ELECTOR_EINVAL (fn NULL), ELECTOR_ECLOSED (the client is being
 * freed), ELECTOR_EFORKED. */
int elector_etcd_exec(elector_etcd *etcd, void (*fn)(elector_etcd *etcd, void *arg),
                      void *arg);

/** own_thread: the callbacks that ran longer than stall_ms so far (0 without). */
uint64_t elector_etcd_stalls(const elector_etcd *etcd);

/** own_thread: true on the client's callback thread (false without). */
bool elector_etcd_in_callback(const elector_etcd *etcd);

/** @{ */
/** Notices: what the client did on its own that an operator wants in a log.
 * err 0: informative (the TLS files changed and were loaded again, the
 * endpoint list was synced from the cluster); else an error code and what went
 * wrong (new TLS files that do not load: the previous ones stay in use). The
 * callback runs from the loop (with own_thread, on the callback thread); it
 * must not call into the client (log, return).
 * NULL cb: no notices (the default). */
typedef void (*elector_etcd_notice_cb)(elector_etcd *etcd, int err, const char *msg,
                                       void *ud);
void elector_etcd_set_notice(elector_etcd *etcd, elector_etcd_notice_cb cb, void *ud);
/** @} */

/** Endpoint currently connected ("" if none). Valid until the next call into the
 * client (auto-sync may replace the list). */
const char *elector_etcd_current_endpoint(const elector_etcd *etcd);

/** What endpoint i (0-based) of the configured list is, for callers that want to
 * check where credentials go. The strings live as long as the client, or, with
 * auto_sync_interval_ms set, until the list is synced (the next process call at
 * the earliest): copy them to keep them. */
typedef struct elector_endpoint_info {
    const char *authority; /**< "host:port" as given */
    const char *host;      /**< without brackets */
    int tls;               /**< 1: TLS (https://, or no scheme with TLS files set) */
    int loopback;          /**< host is in 127.0.0.0/8, ::1 or "localhost": the
                              traffic does not leave this machine */
} elector_endpoint_info;

/** @return 0 and fills out, or ELECTOR_EINVAL when i is out of range (or the
 * endpoint list did not parse). */
int elector_etcd_endpoint_info(const elector_etcd *etcd, int i,
                               elector_endpoint_info *out);

/* ---- calls ---------------------------------------------------------------------- */

/** The etcd RPCs the client makes: the index of elector_etcd_stats' arrays. */
typedef enum elector_rpc {
    ELECTOR_RPC_RANGE,              /**< KV.Range */
    ELECTOR_RPC_PUT,                /**< KV.Put */
    ELECTOR_RPC_DELETE_RANGE,       /**< KV.DeleteRange */
    ELECTOR_RPC_TXN,                /**< KV.Txn */
    ELECTOR_RPC_COMPACT,            /**< KV.Compact */
    ELECTOR_RPC_LEASE_GRANT,        /**< Lease.LeaseGrant */
    ELECTOR_RPC_LEASE_REVOKE,       /**< Lease.LeaseRevoke */
    ELECTOR_RPC_LEASE_TIME_TO_LIVE, /**< Lease.LeaseTimeToLive */
    ELECTOR_RPC_LEASE_KEEPALIVE,    /**< Lease.LeaseKeepAlive, a stream */
    ELECTOR_RPC_WATCH,              /**< Watch.Watch, a stream */
    ELECTOR_RPC_AUTHENTICATE,       /**< Auth.Authenticate */
    ELECTOR_RPC_STATUS,             /**< Maintenance.Status */
    ELECTOR_RPC_MEMBER_LIST,        /**< Cluster.MemberList */
    ELECTOR_RPC_COUNT_              /**< how many there are */
} elector_rpc;

/** gRPC path of an rpc ("/etcdserverpb.KV/Range"), NULL if out of range. */
const char *elector_rpc_path(elector_rpc rpc);

/** Per-call options; a NULL pointer means all defaults. */
typedef struct elector_call_opts {
    int64_t timeout_ms; /**< 0: the client's request_timeout_ms; streams: none */
    int require_leader; /**< send "hasleader: true": fail instead of stalling
                           on a member that has lost its Raft leader */
} elector_call_opts;

/* ---- statistics ----------------------------------------------------------------- */

/** Counters since the client was created. requests: unary calls sent, and
 * messages sent on streams (each keepalive, each watch create/cancel). errors:
 * unary calls and streams that ended with an error. */
typedef struct elector_etcd_stats {
    uint64_t requests[ELECTOR_RPC_COUNT_]; /**< by rpc: sent */
    uint64_t errors[ELECTOR_RPC_COUNT_];   /**< by rpc: ended with an error */
    uint64_t connects;       /**< connections that reached HTTP/2 SETTINGS */
    uint64_t disconnects;    /**< established connections lost */
    uint64_t tls_reloads;    /**< TLS files loaded again after they changed */
    uint64_t endpoint_syncs; /**< endpoint lists taken from MemberList (auto-sync) */
} elector_etcd_stats;

/** Fills out with the client's counters. */
void elector_etcd_get_stats(const elector_etcd *etcd, elector_etcd_stats *out);

/** Short method name of an rpc ("Range", "LeaseKeepAlive"), NULL if out of range. */
const char *elector_rpc_name(elector_rpc rpc);

/* ---- keys ----------------------------------------------------------------------- */

/* Plain key operations for what elections do not cover (tooz's groups, say).
 * Keys and values are bytes; a key must not be empty. Each call ends by
 * timeout_ms (<= 0: the client's request timeout).
 *
 * The _sync forms wait for their answer: driven by the caller's loop they run
 * it (not from a callback); with own_thread they wait on a condition variable
 * (from any thread but the callback thread). The others return at once and
 * cb(etcd, rc, kvs, n, deleted, ud) runs once, from the loop or on the
 * callback thread, with rc as the _sync form would return it, and for a get
 * the keys (kvs, n: valid during the callback only), for a delete how many
 * were deleted; ELECTOR_ECANCELED when the client is freed first. Each
 * returns 0 (cb will run) or the error (cb never runs). */

/** A key as read from etcd; the array and its bytes are owned by the caller,
 * freed with elector_kvs_free(). */
typedef struct elector_kv {
    uint8_t *key;            /**< the key's bytes */
    size_t key_len;          /**< its length */
    uint8_t *value;          /**< the value's bytes */
    size_t value_len;        /**< its length */
    int64_t create_revision; /**< the revision that created the key */
    int64_t mod_revision;    /**< the revision of its last change */
    int64_t lease;           /**< its lease; 0: none */
} elector_kv;

/** Frees what elector_kv_get_sync() (or a get's copy) gave: n keys. */
void elector_kvs_free(elector_kv *kvs, size_t n);

/** Only when the key does not exist (a transaction on its create revision). */
#define ELECTOR_KV_PUT_IF_ABSENT 1u

/** Puts key = value, bound to lease when not 0 (a session's:
 * elector_session_lease(); the key goes with the lease).
 * @return 0 (written), 1 (ELECTOR_KV_PUT_IF_ABSENT and the key exists: nothing
 * written), or the call's error (ELECTOR_ELEASE: the lease is gone). */
int elector_kv_put_sync(elector_etcd *etcd, const void *key, size_t key_len,
                        const void *value, size_t value_len, int64_t lease,
                        unsigned flags, int64_t timeout_ms);

/** The key (prefix false) or every key that starts with it (prefix true), in key
 * order. @return 0 and *kvs, *n (NULL, 0 when none), or the call's error. */
int elector_kv_get_sync(elector_etcd *etcd, const void *key, size_t key_len, bool prefix,
                        int64_t timeout_ms, elector_kv **kvs, size_t *n);

/** Deletes the key, or every key that starts with it; *deleted (may be NULL):
 * how many were. @return 0 or the call's error. */
int elector_kv_delete_sync(elector_etcd *etcd, const void *key, size_t key_len,
                           bool prefix, int64_t timeout_ms, int64_t *deleted);

/** @{ */
/** The same three without the wait (see above): cb runs once. */
typedef void (*elector_kv_cb)(elector_etcd *etcd, int rc, const elector_kv *kvs, size_t n,
                              int64_t deleted, void *ud);
int elector_kv_put(elector_etcd *etcd, const void *key, size_t key_len, const void *value,
                   size_t value_len, int64_t lease, unsigned flags, int64_t timeout_ms,
                   elector_kv_cb cb, void *ud);
int elector_kv_get(elector_etcd *etcd, const void *key, size_t key_len, bool prefix,
                   int64_t timeout_ms, elector_kv_cb cb, void *ud);
int elector_kv_delete(elector_etcd *etcd, const void *key, size_t key_len, bool prefix,
                      int64_t timeout_ms, elector_kv_cb cb, void *ud);
/** @} */

/** @{ */
/** Revokes lease (a closed session's: elector_session_lease() read before the
 * close) with a LeaseRevoke of its own, for a caller that must know the lease
 * is gone: cb(etcd, rc, ud) runs once, from the loop or on the callback
 * thread, with 0 (etcd revoked it, or no longer knew it: revoked or expired)
 * or the call's error (ELECTOR_ETIMEDOUT after timeout_ms; <= 0: the request
 * timeout; ELECTOR_ECANCELED when the client is freed first). Returns 0 (cb
 * will run) or the error (cb never runs). */
typedef void (*elector_revoke_cb)(elector_etcd *etcd, int rc, void *ud);
int elector_lease_revoke(elector_etcd *etcd, int64_t lease, int64_t timeout_ms,
                         elector_revoke_cb cb, void *ud);
/** @} */

/* ---- helpers -------------------------------------------------------------------- */

/** The range_end that selects every key with the given prefix, into out (which
 * must hold max(len, 1) bytes). @return the length written; 1 with out[0] = 0 ("\0", all
 * keys) when no prefix end exists (all bytes 0xff). */
size_t elector_prefix_end(const uint8_t *prefix, size_t len, uint8_t *out);

/** CLOCK_BOOTTIME in nanoseconds: the clock of every deadline the library keeps or
 * reports (elector_session_deadline_ns(), timers, request deadlines). Like
 * CLOCK_MONOTONIC it ignores wall-clock steps; unlike it, it keeps counting
 * while the host is suspended, as etcd's clock does, so a lease that expired
 * during a suspend is seen as expired on resume. Events' mono_ns fields are
 * CLOCK_MONOTONIC instead (comparable across processes). */
int64_t elector_now_ns(void);

#ifdef __cplusplus
}
#endif

/* In-tree only: the build of this project defines ELECTOR_RPC_API. */
#ifdef ELECTOR_RPC_API
#include "elector/etcd_rpc.h"
#endif
#endif
