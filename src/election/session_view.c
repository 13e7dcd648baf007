/* SPDX-License-Identifier: MIT */
/* What others see of a session: its list of listeners (elections), and the
 * values read through functions. session.c keeps the lease; session_notify.c
 * tells the listeners of its events. */
#include <stdlib.h>
#include <string.h>
#include "session_private.h"

enum elector__session_phase elector__session_phase(const elector_session *s)
{
    return s->state;
}

elector_etcd *elector__session_etcd(const elector_session *s)
{
    return s->etcd;
}

bool elector__session_manual_release(const elector_session *s)
{
    return s->cfg.manual_release;
}

int64_t elector__session_deadline_raw_ns(const elector_session *s)
{
    return s->deadline_ns;
}

bool elector__session_restored(const elector_session *s, const char **msg)
{
    if (s->state == ELECTOR__S_GRANTING) return false;
    return elector__restores(s->etcd, msg) != s->restores;
}

/* ---------------------------------------------------------------- listeners */

void elector__session_listen(elector_session *s, elector__session_listener *l)
{
    l->prev = NULL;
    l->next = s->listeners;
    if (l->next) l->next->prev = l;
    s->listeners = l;
}

void elector__session_unlisten(elector_session *s, elector__session_listener *l)
{
    for (struct walk *w = s->walks; w; w = w->outer)
        if (w->next == l) w->next = l->next;
    if (l->prev)
        l->prev->next = l->next;
    else
        s->listeners = l->next;
    if (l->next) l->next->prev = l->prev;
    l->next = l->prev = NULL;
}

void elector__session_unhold(elector_session *s)
{
    if (elector__unhold(&s->life)) free(s);
}

void elector_session_config_init(elector_session_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->ttl_s = 10;
}

int elector__session_helper(const elector_session *s)
{
    return s->rel.pid;
}

int64_t elector__session_lease(const elector_session *s)
{
    return s->lease;
}

int64_t elector__session_ttl(const elector_session *s)
{
    return s->ttl_s;
}

int64_t elector__session_deadline_ns(const elector_session *s)
{
    return s->state == ELECTOR__S_ALIVE ? s->deadline_ns : 0;
}

bool elector__session_alive(const elector_session *s)
{
    return s->state == ELECTOR__S_ALIVE && elector_now_ns() < s->deadline_ns;
}

const int64_t elector_rtt_bounds_us[ELECTOR_RTT_BUCKETS - 1] = {
    500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000};

void elector__session_get_stats(const elector_session *s, elector_session_stats *out)
{
    *out = s->stats;
}

/* The owner slot (election_internal.h): the driver's record of the session,
 * never read here. */
void *elector__session_owner(const elector_session *s)
{
    return s->owner;
}

void elector__session_set_owner(elector_session *s, void *owner)
{
    s->owner = owner;
}
