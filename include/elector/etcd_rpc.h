/* SPDX-License-Identifier: MIT */
/* elector — the raw etcd RPC API: unary calls, bidirectional streams, watches and
 * lease keepalives with etcd's own protobuf messages (protobuf-c types from
 * <etcdserverpb/rpc.pb-c.h>, generated in the build tree from proto/).
 *
 * NOT INSTALLED. This header is for the library itself and the programs of this
 * project (tool, tests, benchmarks, fault and fuzz programs), which build with
 * ELECTOR_RPC_API defined and the generated headers on their include path. The
 * generated types are not part of libelector's public API or ABI, and the shared
 * library does not export these functions (docs/DESIGN.md, "Public API and ABI").
 *
 * Requests are serialized when they are submitted, so the caller may free a request
 * right after the call returns. A response passed to a callback is valid only
 * during that callback.
 */
#ifndef ELECTOR_ETCD_RPC_H
#define ELECTOR_ETCD_RPC_H

#include <protobuf-c/protobuf-c.h>
#include <etcdserverpb/rpc.pb-c.h>
#include "elector/etcd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Completion of a unary call: err is 0 and resp the decoded response (of the type
 * that belongs to the rpc), or err < 0 and resp NULL; elector_etcd_errstr() holds
 * the detail during the callback. ELECTOR_EPROTO: the server's reply broke the
 * protocol (too large, undecodable, nested too deep, a second message, a Txn
 * result of the wrong kind). */
typedef void (*elector_etcd_cb)(elector_etcd *etcd, int err, const ProtobufCMessage *resp,
                                void *ud);

/* Starts a unary call. req must be of the rpc's request type. The call is queued
 * until a connection is ready and fails with its deadline, or earlier with the
 * connection error once every endpoint has been tried and refused. A call that was
 * sent and whose connection then broke fails with ELECTOR_EUNAVAILABLE; it is never
 * retried silently (the server may have executed it).
 * Returns 0, ELECTOR_EINVAL (rpc is a stream, or bad arguments), ELECTOR_ENOMEM,
 * ELECTOR_ECLOSED (client being freed). */
int elector_etcd_call(elector_etcd *etcd, elector_rpc rpc, const ProtobufCMessage *req,
                      const elector_call_opts *opts, elector_etcd_cb cb, void *ud);

/* Blocking form: runs the client's loop until the call completes. On success
 * *resp receives the response, to be freed with protobuf_c_message_free_unpacked(
 * *resp, NULL). Returns 0 or the call's error (see elector_etcd_call and the
 * grpc status mapping: ENOLEADER, ECOMPACTED, ELEASE, EAUTH, EPERM, ETOOLARGE,
 * ETIMEDOUT, EUNAVAILABLE, ECONNECT, ETLS, EGRPC, ...). */
int elector_etcd_call_sync(elector_etcd *etcd, elector_rpc rpc,
                           const ProtobufCMessage *req, const elector_call_opts *opts,
                           ProtobufCMessage **resp);

/* ---- bidirectional streams ------------------------------------------------------ */

typedef struct elector_stream elector_stream;

/* A received message (err 0, msg set), or the end of the stream (err < 0, msg NULL:
 * the connection broke, etcd returned a status, or the stream was reset; by us
 * with ELECTOR_EPROTO when the server broke the protocol). After an end the
 * stream sends and receives nothing more; close it to free it. */
typedef void (*elector_stream_cb)(elector_stream *s, int err, const ProtobufCMessage *msg,
                                  void *ud);

/* Opens a stream for ELECTOR_RPC_WATCH or ELECTOR_RPC_LEASE_KEEPALIVE. Returns NULL
 * with elector_etcd_err() set on failure (EINVAL, ENOMEM, ECLOSED). */
elector_stream *elector_etcd_stream_open(elector_etcd *etcd, elector_rpc rpc,
                                         const elector_call_opts *opts,
                                         elector_stream_cb cb, void *ud);

/* Queues one message. Returns 0, ELECTOR_EINVAL (wrong type), ELECTOR_ENOMEM,
 * ELECTOR_ECLOSED (the stream has ended). */
int elector_stream_send(elector_stream *s, const ProtobufCMessage *msg);

/* Cancels the stream (RST_STREAM CANCEL) and frees it; no callback follows. */
void elector_stream_close(elector_stream *s);

elector_etcd *elector_stream_client(const elector_stream *s);

/* ---- watch: many watches multiplexed on one Watch stream ------------------------ */

typedef struct elector_watch elector_watch;

/* err 0: resp carries events (or is the creation/progress notice: resp->created).
 * ELECTOR_ECOMPACTED: the start revision was compacted; resp->compact_revision is
 * the oldest revision still available. Any other err < 0 (resp may be NULL): the
 * watch has ended (stream broken, canceled by etcd). After an error no more
 * callbacks come; cancel the watch to free it. */
typedef void (*elector_watch_cb)(elector_watch *w, int err,
                                 const Etcdserverpb__WatchResponse *resp, void *ud);

/* Creates a watch from req (key, range_end, start_revision, prev_kv, filters,
 * progress_notify; watch_id is assigned by the client). The shared stream requires
 * a leader, so a watch on a member cut off from its cluster ends instead of
 * stalling. Returns NULL with elector_etcd_err() set on failure. */
elector_watch *elector_etcd_watch(elector_etcd *etcd,
                                  const Etcdserverpb__WatchCreateRequest *req,
                                  elector_watch_cb cb, void *ud);

/* Cancels the watch and frees it; no callback follows. */
void elector_watch_cancel(elector_watch *w);

int64_t elector_watch_id(const elector_watch *w);

/* ---- lease keepalive: shared LeaseKeepAlive streams ------------------------------ */

/* ttl > 0: the lease was renewed for ttl seconds (counted by the server from
 * the moment it received the request). err ELECTOR_ELEASE: the lease is gone.
 * Other errors: the renewal is unknown (stream broken, deadline). */
typedef void (*elector_keepalive_cb)(elector_etcd *etcd, int err, int64_t lease_id,
                                     int64_t ttl, void *ud);

/* Sends one keepalive for lease_id and calls cb exactly once, at the latest after
 * timeout_ms (0: 5000 ms). All of a client's keepalives share its LeaseKeepAlive
 * streams: one, and another each time 256 renewals wait on every open one (etcd
 * serves a stream's renewals one at a time), at most 16. Returns 0, ELECTOR_EINVAL,
 * ELECTOR_ENOMEM, ELECTOR_ECLOSED; on error cb is not called. */
int elector_etcd_keepalive(elector_etcd *etcd, int64_t lease_id, int64_t timeout_ms,
                           elector_keepalive_cb cb, void *ud);

/* Forgets pending keepalives that carry this ud: their callbacks will not run.
 * For owners that go away while a renewal is in flight. */
void elector_etcd_keepalive_forget(elector_etcd *etcd, void *ud);

/* ---- lease release ---------------------------------------------------------------- */

/* Revokes lease_id, blocking (runs the client's loop; not from a callback).
 * Failures that may heal (no connection yet, no leader, a timeout, etcd busy)
 * are retried until until_ns (on elector_now_ns()'s clock): a caller passes the
 * moment the lease would have expired anyway. The first attempt is always made.
 * Returns 0 when etcd revoked the lease or no longer knows it (ELECTOR_ELEASE),
 * else the last error (EAUTH, EPERM, ETIMEDOUT, ECONNECT, ...). The revoke path
 * of `elector run`'s guard and of the release helper. */
int elector_etcd_lease_revoke_sync(elector_etcd *etcd, int64_t lease_id,
                                   int64_t until_ns);

/* The release helper's program (elector-release, see release_on_exit in
 * elector/election.h): reads its orders from the socket on fd 0, watches its
 * owner through the pidfd on fd 3, revokes the lease when the owner is gone.
 * Returns the exit status: 0 (closed normally, or revoked), 1 (the lease could
 * not be revoked: it ends by its TTL), 2 (not started by libelector, or bad
 * orders). */
int elector_release_helper_main(void);

#ifdef __cplusplus
}
#endif
#endif
