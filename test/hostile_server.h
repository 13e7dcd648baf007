/* SPDX-License-Identifier: MIT */
/* A scripted, hostile etcd for tests: an HTTP/2 (h2c or TLS) gRPC server on
 * loopback, in a forked process of its own, that plays just enough of etcd for
 * elector to reach the point of an attack, then attacks.
 *
 * Without an attack (HS_NONE) it is a tiny etcd: leases are granted and kept
 * alive, a campaign Txn creates the key (revision 100), the check Txn finds no
 * predecessor, a Range finds a leader key "NAME/694d0001" = "v" when
 * opts.leader is set (else nothing), watches are created and then stay quiet,
 * Authenticate returns a token. Each attack replaces one of those answers.
 *
 * The server runs until hs_stop(); it serves any number of connections, one
 * after another or at once, and repeats its attack on each. It never uses more
 * than a few MB itself: endless replies are generated as they are sent. */
#ifndef ELECTOR_HOSTILE_SERVER_H
#define ELECTOR_HOSTILE_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum hs_attack {
    HS_NONE,
    /* Txn replies whose result kinds do not match the request. */
    HS_TXN_WRONG_KIND,   /* campaign Txn: failure branch, [Put, DeleteRange] (Range asked)
                          */
    HS_CHECK_WRONG_KIND, /* check Txn: success, [DeleteRange] (Range asked) */
    HS_CHECK_NO_RESULT,  /* check Txn: success, no results at all */
    HS_TXN_NESTED,       /* campaign Txn: result 1 is a Txn result nested 5,000 deep */
    HS_CAMPAIGN_BAD_REV, /* campaign Txn: "key exists" with create revision -1 */
    /* Unary replies without bound. */
    HS_RANGE_HUGE, /* Range: a prefix announcing 768 MiB, then those bytes, never ending
                    */
    HS_RANGE_ENDLESS, /* Range: 64 KiB messages one after another, 768 MiB, never ending
                       */
    HS_RANGE_EMPTY_KEYS, /* Range: one message of 8 MiB of empty keys ("12 00" ...) */
    HS_RANGE_EMPTY_KEYS_UNDER, /* the same just under the 4 MiB message limit */
    HS_RANGE_CANCEL,           /* Range: no answer; RST_STREAM(CANCEL) 0.4 s later, as
                                  etcd 3.5 does when the call's grpc-timeout runs out */
    /* Streams. */
    HS_WATCH_HUGE,     /* Watch: "created", then a prefix announcing 4 GiB, then bytes */
    HS_KEEPALIVE_HUGE, /* LeaseKeepAlive: a prefix announcing 4 GiB, then bytes */
    /* TLS. */
    HS_TLS_CLOSE,   /* close the connection right after the TLS handshake */
    HS_TLS_NO_ALPN, /* complete the handshake without agreeing to h2 */
    HS_TLS_CLOSE_AFTER_REPLY,
    /* Text. */
    HS_GRPC_MESSAGE_CONTROLS,
    /* Range: grpc-status 2 with escape sequences and a newline */ /* answer the first
                                                                      call, close the
                                                                      connection 0.3 s
                                                                      later */
    /* A graceful handover (HS_FAST_*, see hs_fast_attack()): every header carries
     * cluster HS_CLUSTER and member HS_MEMBER. The check finds a predecessor,
     * PREFIX "1" (create revision 50, below the campaign's 100); the watch on it
     * delivers, once per server, its DELETE at revision HS_R (header revision
     * HS_R). A linearizable check then still finds the predecessor (a lie that
     * makes a library which believes a forged serializable "you lead" emit
     * ELECTED); a serializable check (Range with serializable = true) is
     * answered "your key, no predecessor", truthfully or forged as named: */
    HS_FAST_CONTROL,       /* truthful: header {HS_CLUSTER, HS_MEMBER, HS_R} */
    HS_FAST_STALE,         /* header revision HS_R - 1 */
    HS_FAST_OTHER_MEMBER,  /* member_id HS_MEMBER + 1 */
    HS_FAST_OTHER_CLUSTER, /* cluster_id HS_CLUSTER + 1 */
    HS_FAST_NO_HEADER,     /* no header at all */
    HS_FAST_NO_RESULT,     /* succeeded, no results */
    HS_FAST_WRONG_KIND,    /* succeeded, a DeleteRange result */
    HS_FAST_EXTRA_RESULT,  /* succeeded, two (empty) Range results */
    HS_FAST_NEW_CONN,      /* truthful, but GOAWAY follows the event: the check
                              goes out on the next connection */
    HS_FAST_ERROR,         /* an error: grpc-status 3, "etcdserver: revision of
                              auth store is old" (ErrGRPCAuthOldRevision) */
    /* The event lies (the serializable answer is truthful): */
    HS_FAST_EVENT_HEADER_BELOW, /* header revision HS_R - 1 < mod_revision HS_R */
    HS_FAST_EVENT_OTHER_KEY,    /* the DELETE is of PREFIX "2", not the predecessor */
    HS_FAST_EVENT_OLD_REV,      /* mod_revision 60: before the watch's start */
    /* etcd overloaded: the first 2 LeaseGrants and the first 3 Txns are answered
     * "etcdserver: too many requests" (grpc-status 2), then all is well. */
    HS_BUSY,
    /* LeaseKeepAlive streams ended at their first request with grpc-status 3,
     * "etcdserver: invalid auth token" (what etcd 3.5 does to a stream opened
     * after the token expired), then RST_STREAM(NO_ERROR) as grpc-go does: */
    HS_KEEPALIVE_TOKEN_ONCE,   /* the server's first stream only; later ones answer */
    HS_KEEPALIVE_TOKEN,        /* every stream */
    HS_KEEPALIVE_TOKEN_NO_RST, /* every stream, the trailers without the RST_STREAM
                                  that grpc-go sends after them (RFC 9113 8.1: a
                                  server MAY send it; a proxy may not) */
    /* LeaseKeepAlive: the server's first renewal is answered TTL 0 ("lease not
     * found"), later ones normally. */
    HS_KEEPALIVE_GONE_ONCE,
    /* LeaseKeepAlive: every renewal is answered TTL 1 (not 10). */
    HS_KEEPALIVE_TTL1,
    /* Watch: each create is answered "created", then the stream ends with
     * grpc-status 14 "etcdserver: no leader" (what etcd does to a watch stream
     * opened with require-leader when its member loses the leader), */
    HS_WATCH_NO_LEADER,        /* then RST_STREAM(NO_ERROR), as grpc-go does */
    HS_WATCH_NO_LEADER_NO_RST, /* without the RST_STREAM (a proxy may not send it) */
    /* The first Txn that deletes a key is answered "etcdserver: too many
     * requests" (grpc-status 2: a transient refusal), later ones normally. */
    HS_DELETE_BUSY_ONCE,
    /* TLS: once the first call is answered, a TLS record that is not
     * (application data that fails to decrypt), written past OpenSSL onto the
     * socket, which stays open. */
    HS_TLS_GARBAGE_AFTER_REPLY,
    /* Unary replies that are not one whole message (Range): */
    HS_RANGE_NO_MESSAGE,     /* grpc-status 0 and no message at all */
    HS_RANGE_TRAILING_BYTES, /* the message, then 3 bytes of another prefix */
    HS_RANGE_COMPRESSED,     /* the message flagged compressed (never asked for) */
    HS_RANGE_UNDECODABLE,    /* a message whose bytes are not a RangeResponse */
    /* Watch: "created", then the stream ends with grpc-status 0 (trailers, then
     * RST_STREAM(NO_ERROR) as grpc-go sends). */
    HS_WATCH_END_OK,
    /* MemberList: a learner with a usable client URL (left out) and a member
     * whose one client URL is not a URL. (Without it MemberList is answered
     * with no members.) */
    HS_MEMBERS_UNUSABLE,
    /* h2c: once the first call is answered, a DATA frame on stream 0 (an
     * HTTP/2 connection error); the connection stays open. */
    HS_H2_BAD_FRAME_AFTER_REPLY,
    /* A compacted watch (etcd's answer to a watch whose start revision was
     * compacted: "created", then "canceled" with compact_revision). Once per
     * server, the first watch created gets it; later watches stay quiet. Until
     * then the check Txn finds a predecessor, PREFIX "1", and a Range finds no
     * leader; from then on the check finds none and a Range finds the leader key
     * "NAME/694d0001" = "v" (so a candidate or observer that looks again after
     * the compaction sees the change; one that does not stays where it was). */
    HS_WATCH_COMPACTED,
    /* The check Txn finds a predecessor, PREFIX "1"; the watch on it gets "created"
     * and then a message announcing 4 GiB (HS_WATCH_HUGE for a waiting candidate). */
    HS_PRED_WATCH_HUGE,
    /* A read older than the watch (a lagging member): the first Range finds the
     * leader "v" at revision 100; the first watch then delivers a PUT of that key
     * ("v2", revision 120) and its DELETE (121), then the DELETE again (122, in
     * a response of its own); the second Range answers the state of revision
     * 100 again ("v"); later Ranges find no leader at 125. */
    HS_OBSERVE_STALE_READ,
    /* Every watch create is answered first with a "created" for a watch ID
     * nobody asked for (the one asked + 1000), then as usual. */
    HS_WATCH_STRAY_CREATED,
    /* Every watch, once created, delivers a PUT of the key it watches (revision
     * 105), whatever its filters: a server that ignores NOPUT. */
    HS_WATCH_PUT_EVENT,
    /* etcd restored from a snapshot under a client: the first Range finds the
     * leader "v" at revision 100; later Ranges answer revision 50 (an older
     * history) with the leader "w". The second Range's answer is followed, on
     * the same connection, by a PUT of the leader key ("w", revision 51) on the
     * first watch created. */
    HS_RESTORED_WATCH,
    /* The first watch created is canceled by the server right after "created",
     * for no reason it gives (canceled, no compact_revision, no reason); later
     * watches stay quiet. */
    HS_WATCH_CANCELED_ONCE,
    /* LeaseGrant answered with its error field set ("lease store failed"), TTL as
     * asked. */
    HS_GRANT_ERROR,
    /* LeaseGrant answered TTL 0 (no lease), no error. */
    HS_GRANT_TTL0,
    /* The first four LeaseRevokes are refused (grpc-status 14) with etcd's
     * "request timed out", "no leader", "too many requests", "permission
     * denied"; later ones are answered. */
    HS_REVOKE_REFUSED,
    /* Range replies without a header (no revision). */
    HS_RANGE_NO_HEADER,
    /* As HS_RESTORED_WATCH, but the older history has the same leader: the same
     * key, create revision and value "v" (the watch's PUT too). */
    HS_RESTORED_SAME_LEADER,
    /* Handovers (as HS_FAST_*) whose DELETE event lies in what it lacks: */
    HS_FAST_EVENT_NO_HEADER, /* the event's response has no header */
    HS_FAST_EVENT_NO_MEMBER, /* its header names member 0 */
    HS_FAST_EVENT_NO_KV,     /* the event has no key-value */
    /* Every watch create is refused as etcd refuses one on a stream whose token
     * expired: created and canceled at once, watch ID -1, "invalid auth token". */
    HS_WATCH_TOKEN,
    /* The server's first LeaseKeepAlive stream is ended at its first request
     * with grpc-status 14, "etcdserver: leader changed" (then RST_STREAM, as
     * grpc-go does); later streams answer. */
    HS_KEEPALIVE_UNAVAILABLE_ONCE,
    /* Every watch create is answered "created" twice. */
    HS_WATCH_CREATED_TWICE,
    /* The check Txn is refused with grpc-status 16, "etcdserver: user name is
     * empty" (EAUTH); other Txns are answered. */
    HS_CHECK_EAUTH,
    /* Every watch, once created, delivers a DELETE event without a key-value
     * (revision 105). */
    HS_WATCH_EVENT_NO_KV,
    /* The server's first LeaseKeepAlive stream answers its first renewal, then
     * ends with grpc-status 3 "etcdserver: invalid auth token" (and
     * RST_STREAM) while nothing is pending on it; later streams answer. */
    HS_KEEPALIVE_TOKEN_AFTER_REPLY,
    /* As HS_KEEPALIVE_UNAVAILABLE_ONCE, with "etcdserver: request timed out". */
    HS_KEEPALIVE_TIMEDOUT_ONCE,
    /* Every renewal is answered TTL 10 for another lease ID (the one asked + 1). */
    HS_KEEPALIVE_OTHER_ID,
    /* 0.2 s after the first unary reply on a connection, the server resets it
     * (SO_LINGER 0, then close: a TCP RST, no TLS close_notify). */
    HS_RESET_AFTER_REPLY,
    /* Range: answered normally, but its trailers carry "grpc-statuz: 13" and
     * "grpc-messagf: decoy" (names one letter off) before "grpc-status: 0". */
    HS_RANGE_DECOY_TRAILERS,
    /* Watch: "created"; 0.3 s later a PUT of the watched key (revision 105) and
     * the trailers (grpc-status 0), in one go. */
    HS_WATCH_LATE_EVENT,
    /* MemberList (auto-sync): */
    HS_MEMBERS_SILENT,     /* never answered */
    HS_MEMBERS_MANY,       /* one member with 1,001 client URLs */
    HS_MEMBERS_REFUSED,    /* grpc-status 13 with an empty grpc-message */
    HS_MEMBERS_SCHEMELESS, /* one member, client URL "localhost:PORT" (this server) */
    /* Every Range refused with grpc-status 3 "etcdserver: invalid auth token". */
    HS_RANGE_TOKEN,
    /* h2c: once the first call is answered, a WINDOW_UPDATE on stream 0 that
     * takes the connection's send window past 2^31 - 1 (FLOW_CONTROL_ERROR). */
    HS_H2_WINDOW_OVERFLOW_AFTER_REPLY,
    /* HTTP/2 windows of 64 MiB (stream and connection); once the first call is
     * answered, the server reads nothing more (the connection stays open). */
    HS_STALL_AFTER_REPLY,
    /* Authenticate answered without a token / refused: */
    HS_AUTH_NO_TOKEN,
    HS_AUTH_DENIED,    /* grpc-status 7, "etcdserver: permission denied" */
    HS_AUTH_UNKNOWN,   /* grpc-status 2, "etcdserver: kaput" */
    HS_AUTH_NO_LEADER, /* grpc-status 14, "etcdserver: no leader" */
    HS_AUTH_SLOW,      /* answered 0.3 s late (etcd's bcrypt takes its time too) */
    HS_AUTH_TOKEN,     /* grpc-status 3, "etcdserver: invalid auth token" */
    /* Range: response headers carrying grpc-status 14 "etcdserver: leader
     * changed" (no END_STREAM), then RST_STREAM(REFUSED_STREAM). */
    HS_RANGE_STATUS_THEN_REFUSED,
    /* Range: RST_STREAM(REFUSED_STREAM) at once, every time (what a server at
     * its SETTINGS_MAX_CONCURRENT_STREAMS may do). */
    HS_RANGE_REFUSED,
    /* Put: answered as soon as its headers are in, before its message (trailers
     * only: grpc-status 3, "etcdserver: request is too large"), no reset. */
    HS_PUT_EARLY_REPLY,
    /* Campaign Txn answers without a usable revision: */
    HS_CAMPAIGN_NO_HEADER, /* "created" (succeeded), without a header */
    HS_CAMPAIGN_NO_KV,     /* "key exists" (failure branch), its Range finding no key */
    /* A proclaim (a Txn that puts the key its create-revision compare guards)
     * is refused: succeeded = false, as when the key is no longer ours. */
    HS_PROCLAIM_REFUSED,
    /* Every Txn that deletes a key, and the server's first campaign Txn, are
     * answered "etcdserver: too many requests" (grpc-status 2: transient). */
    HS_DELETES_BUSY,
    /* etcd 3.6's peer listener (its peer URL given as a client endpoint; see
     * docs/DESIGN.md, "etcd 3.6"): no HTTP/2 at all. Whatever the client
     * sends first (its HTTP/2 preface) is answered "HTTP/1.1 400 Bad Request"
     * with Connection: close, and the connection is closed (TLS: after the
     * handshake, which agrees to h2 in ALPN as etcd's does). */
    HS_PEER_URL_36,
} hs_attack;

#define HS_CLUSTER 0x6c75737465720001ULL
#define HS_MEMBER 0x6d656d6265720001ULL
#define HS_R 110

static inline bool hs_fast_attack(hs_attack a)
{
    return (a >= HS_FAST_CONTROL && a <= HS_FAST_EVENT_OLD_REV) ||
           (a >= HS_FAST_EVENT_NO_HEADER && a <= HS_FAST_EVENT_NO_KV);
}

typedef struct hs_opts {
    hs_attack attack;
    bool leader;         /* Range finds a leader key */
    const char *value;   /* its value (default "v") */
    const char *bind_ip; /* default 127.0.0.1 */
    /* TLS: PEM files; NULL for h2c. */
    const char *cert, *key;
} hs_opts;

typedef struct hs_server {
    pid_t pid;
    int port;
    char endpoint[64]; /* "127.0.0.1:PORT" or "https://127.0.0.1:PORT" */
} hs_server;

/* Forks the server; 0 or -1 (with a message on stderr). The server works on its
 * own copy of *o and of what it points to (a copy of this process at fork()). */
int hs_start(hs_server *s, const hs_opts *o);

/* SIGKILLs and reaps it. */
void hs_stop(hs_server *s);

/* A TLS CA and a server certificate for 127.0.0.1/localhost made with the openssl
 * tool in dir: dir/ca.crt, dir/server.crt, dir/server.key. 0 or -1. */
int hs_make_certs(const char *dir);

#endif
