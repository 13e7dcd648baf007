/* SPDX-License-Identifier: MIT */
/* What the transport layer (src/transport/) offers the layers above it, beside
 * the public API of <elector/etcd.h>: timers on the client's loop, per-client
 * state of the layers above, the rule of callbacks and freeing, and small shared
 * helpers. The transport knows nothing of leases, watches or elections: they
 * register here, and it calls back only through what they registered.
 *
 * Cross-file helpers use the elector__ prefix; nothing here is public API. */
#ifndef ELECTOR_TRANSPORT_INTERNAL_H
#define ELECTOR_TRANSPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "elector/etcd.h"

/* The largest gRPC message the client sends or accepts at all (the configured
 * max_recv_msg_bytes is at most this). */
#define ELECTOR__GRPC_MAX_MSG (64u * 1024u * 1024u)

/* ---- the client's calls, whichever drives it ----
 * The public functions of <elector/etcd.h> whose behaviour depends on how the
 * client is driven (the caller's loop, or its own thread: own_thread) are
 * defined by the top layer (src/driver/), which calls these on the loop
 * thread. The core calls these, never the public names. */
elector_etcd *elector__etcd_new(const elector_etcd_config *cfg);
void elector__etcd_free(elector_etcd *etcd);
int elector__etcd_err(const elector_etcd *etcd);
const char *elector__etcd_errstr(const elector_etcd *etcd);
int elector__etcd_fd(const elector_etcd *etcd);
int64_t elector__etcd_timeout(elector_etcd *etcd);
int elector__etcd_process(elector_etcd *etcd);
int elector__etcd_run_once(elector_etcd *etcd, int64_t max_ms);
/* The blocking wait of every _sync call (sync.c): runs the loop until
 * done(arg) is true (0), timeout_ms passed (ELECTOR_ETIMEDOUT; negative: no
 * limit) or a pass failed (its error). done is asked before each pass: a
 * condition already true returns at once, even with timeout_ms 0. */
int elector__etcd_run_until(elector_etcd *etcd, bool (*done)(const void *arg),
                            const void *arg, int64_t timeout_ms);
void elector__etcd_set_notice(elector_etcd *etcd, elector_etcd_notice_cb cb, void *ud);
const char *elector__etcd_current_endpoint(const elector_etcd *etcd);
int elector__etcd_endpoint_info(const elector_etcd *etcd, int i,
                                elector_endpoint_info *out);
void elector__etcd_get_stats(const elector_etcd *etcd, elector_etcd_stats *out);

/* The state of the layer that drives the client from a thread of its own
 * (own_thread), NULL for a client driven by the caller's loop. A slot of data
 * the top layer sets once, before any other thread knows the client. */
void *elector__etcd_owner(const elector_etcd *etcd);
void elector__etcd_set_owner(elector_etcd *etcd, void *owner);
/* Makes a new client unusable, as a bad configuration does (calls and sessions
 * are refused, elector__etcd_err() says why); returns err. */
int elector__etcd_unusable(elector_etcd *etcd, int err, const char *why);

/* ---- the rule of callbacks and freeing (docs/DESIGN.md) ----
 *
 * Whatever a callback may end is ended in two steps: closing marks it (no
 * callback reaches it from then on), and its memory goes when the last hold on it
 * is dropped. Code that runs a callback and touches an object afterwards holds
 * the object across the callback and checks the mark after it. */
typedef struct elector__life {
    int holds;
    bool closed;
} elector__life;

static inline void elector__hold(elector__life *l)
{
    l->holds++;
}

/* Drops a hold. True when it was the last one of a closed object: free it now. */
static inline bool elector__unhold(elector__life *l)
{
    return --l->holds == 0 && l->closed;
}

/* Marks closed. True when nothing holds it: free it now. */
static inline bool elector__close(elector__life *l)
{
    l->closed = true;
    return l->holds == 0;
}

static inline bool elector__held(const elector__life *l)
{
    return l->holds > 0;
}

/* The client itself follows the rule: a layer above that runs user callbacks
 * holds it with elector__etcd_enter(); elector__etcd_leave() says whether the
 * client was freed meanwhile (then it must not be used any more; the memory goes
 * when the engine's own hold ends). */
void elector__etcd_enter(elector_etcd *etcd);
bool elector__etcd_leave(elector_etcd *etcd);

/* ---- clocks ----
 * elector_now_ns() (public) is the deadline clock, CLOCK_BOOTTIME; every
 * deadline and timer of the library is on it (in ms: elector__now_ms()).
 * Events carry CLOCK_MONOTONIC instead (other processes compare them):
 * elector__mono_ns() now, elector__mono_of() for an instant of the deadline
 * clock (the two differ by the time the host spent suspended). */
int64_t elector__now_ms(void);
int64_t elector__mono_ns(void);
int64_t elector__mono_of(int64_t boot_ns);

/* ---- timers ----
 * Every deadline of the library is one of these, in one heap per client; the
 * engine's timeout (elector__etcd_timeout()) is the earliest of them. A timer is
 * owned by its embedder and zero-initialized before first use; disarm it before
 * freeing it. Timers due at the same time fire in the order they were armed. */
typedef struct elector__timer elector__timer;
typedef void (*elector__timer_fn)(elector__timer *t, void *ud);
struct elector__timer {
    elector__timer *left, *right, *parent; /* heap links */
    int64_t due_ms;
    uint64_t seq; /* arming order, for ties */
    elector__timer_fn fn;
    void *ud;
    bool armed;
};

/* (Re)arms t at due_ms (deadline clock); fn(t, ud) runs from the loop once due. */
void elector__timer_arm(elector_etcd *etcd, elector__timer *t, int64_t due_ms,
                        elector__timer_fn fn, void *ud);
void elector__timer_disarm(elector_etcd *etcd, elector__timer *t);

/* ---- the client's settings ----
 * The configuration the client runs with, defaults filled in, its strings the
 * client's own copies (valid as long as the client): for the release helper,
 * which reaches etcd the same way. */
void elector__etcd_settings(const elector_etcd *etcd, elector_etcd_config *out);
/* The endpoints in use now (auto-sync may have replaced the ones given), each
 * with its scheme: "https://a:2379,http://b:2379"; malloc'd, NULL when out of
 * memory. */
char *elector__endpoints_now(const elector_etcd *etcd);
/* Counts the changes of what the settings above say: the endpoint list synced,
 * the password file read again. The release helper's owner compares it with
 * what it last sent the helper. */
uint64_t elector__settings_gen(const elector_etcd *etcd);

/* ---- per-client state of the layers above ----
 * A layer above keeps its state for a client in a struct that starts with an
 * elector__ext, found again by its kind (the address of a static of that
 * layer). The client frees every ext it holds when it is freed. */
typedef struct elector__ext elector__ext;
struct elector__ext {
    elector__ext *next;
    const void *kind;
    void (*free)(elector__ext *x);
};

/* The ext of that kind, or NULL. */
elector__ext *elector__ext_find(elector_etcd *etcd, const void *kind);

/* The ext of that kind, created (calloc'd, `size` bytes, kind and free set) when
 * absent; NULL when out of memory. */
elector__ext *elector__ext_get(elector_etcd *etcd, const void *kind, size_t size,
                               void (*free_fn)(elector__ext *x));

/* ---- streams ----
 * A reply is awaited on stream s (a keepalive is in flight): the connection's
 * PING policy treats it like a unary call in flight. */
void elector__stream_set_awaiting(elector_stream *s, bool awaiting);

/* ---- the connection ----
 * The serial number of the connection now ready (1 for the first that reached
 * SETTINGS, 2 for the next, ...), 0 when none is ready. Two replies that carry
 * the same nonzero serial came over the same TCP connection, hence from the
 * same server process: nothing in between reconnected. */
uint64_t elector__conn_serial(const elector_etcd *etcd);

/* ---- errors ---- */

/* Sets the handle's error code and detail text; returns err. */
int elector__set_err(elector_etcd *etcd, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A notice for the application (elector__etcd_set_notice()); err 0: informative.
 * What the client did or could not do on its own that an operator should read:
 * files reloaded, the endpoint list synced, no release helper. */
void elector__notice(elector_etcd *e, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Maps grpc-status + decoded message to an elector error code (0 for status 0). */
int elector__grpc_error(int status, const char *message);

/* Errors after which the same request may simply be sent again: the connection,
 * the cluster's leader or the time ran out, not the request. */
bool elector__transient(int err);

/* Forgets the auth token, so the next request authenticates again (for streams
 * that etcd refuses because the token they were opened with expired). */
void elector__drop_token(elector_etcd *etcd);

/* ---- restores ----
 * Times a reply showed etcd's revision lower than one seen before (from a
 * reply that cannot be stale) or another cluster ID: the cluster was restored
 * from a snapshot, or the endpoints now name another cluster. msg (may be
 * NULL) gets the last such finding. */
uint64_t elector__restores(const elector_etcd *etcd, const char **msg);

/* ---- delays ---- */

/* Delay before attempt `failures` + 1 after that many failures in a row: 0 for
 * none, else min(max, min_ms * 2^(failures-1)) scaled by a jitter factor in
 * [0.5, 1.0] taken from rnd (0 .. 2^32-1; UINT32_MAX: no jitter). */
int64_t elector__backoff_ms(int failures, int64_t min_ms, int64_t max_ms, uint32_t rnd);

/* A pseudo-random number of the client, for jitter. */
uint32_t elector__next_rnd(elector_etcd *etcd);

/* The pause before retrying one's own request after `retries` failed ones:
 * 50 ms doubling up to 1.6 s, without jitter (no crowd of clients to spread). */
static inline int64_t elector__retry_ms(int retries)
{
    return elector__backoff_ms(retries + 1, 50, 1600, UINT32_MAX);
}

/* ---- memory ---- */

char *elector__strdup(const char *s);

/* Replaces *dst (freed) with a malloc'd copy of n bytes at p (p may be NULL when
 * n is 0, as protobuf-c gives an empty bytes field); *dlen = n. Returns 0 or
 * ELECTOR_ENOMEM (then *dst is unchanged). */
int elector__memdup(uint8_t **dst, size_t *dlen, const void *p, size_t n);

#endif
