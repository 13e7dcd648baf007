/* SPDX-License-Identifier: MIT */
/* The PING policy: a dead peer must be noticed in seconds, but etcd's gRPC
 * server answers pings closer than its keepalive-min-time (5 s) with GOAWAY after
 * a few strikes unless it sent data in between. So a PING goes out only after a
 * stretch of silence: keepalive_time_ms while a reply is awaited (a unary call, or
 * a stream whose owner awaits one), keepalive_idle_ms with only idle streams,
 * never closer than 5 s to the last one unless data arrived since. An
 * unanswered PING ends the connection after keepalive_timeout_ms (this file
 * sets e->ping_dead; engine.c ends it). */
#include "transport_private.h"

#define PING_MIN_SPACING_MS 5000

/* When the next PING goes out, or (one in flight) when it counts as
 * unanswered; INT64_MAX: no PING is wanted. */
static int64_t ping_next(const elector_etcd *e)
{
    if (e->cstate != C_READY) return INT64_MAX;
    if (e->ping_out) return e->last_ping_ms + e->cfg.keepalive_timeout_ms;
    bool fast = e->n_active_unary > 0 || e->n_awaiting > 0;
    if (!fast && e->n_active_streams == 0) return INT64_MAX;
    int64_t due =
        e->last_recv_ms + (fast ? e->cfg.keepalive_time_ms : e->cfg.keepalive_idle_ms);
    if (!e->data_since_ping && due < e->last_ping_ms + PING_MIN_SPACING_MS)
        due = e->last_ping_ms + PING_MIN_SPACING_MS;
    return due;
}

static void ping_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_etcd *e = ud;
    if (e->cstate != C_READY) return;
    if (e->ping_out && e->now_ms >= e->last_ping_ms + e->cfg.keepalive_timeout_ms) {
        e->ping_dead = true; /* engine.c ends the connection after the timers */
        return;
    }
    if (!e->ping_out && e->now_ms >= ping_next(e)) {
        elector__h2_ping(e);
        e->ping_out = true;
        e->last_ping_ms = e->now_ms;
        e->data_since_ping = false;
    }
    elector__ping_rearm(e);
}

/* The time of the next PING moves with every frame received and every call
 * that starts or ends. It is checked after each pass of the loop (and when the
 * connection is up, a blocking call was sent, or a stream's owner starts or
 * stops awaiting a reply), and the timer armed again only when it must fire
 * sooner: a timer that fires early finds the PING not yet due and re-arms
 * itself, which is cheaper than moving it in the heap at every frame. */
void elector__ping_rearm(elector_etcd *e)
{
    int64_t due = ping_next(e);
    if (due == INT64_MAX)
        elector__timer_disarm(e, &e->ping_timer);
    else if (!e->ping_timer.armed || due < e->ping_timer.due_ms)
        elector__timer_set(e, &e->ping_timer, due, ping_fired, e);
}
