/* SPDX-License-Identifier: MIT */
/* A session's events told to its elections, the listeners on its list
 * (session_view.c keeps the list): session.c reports the lease ready or ended,
 * session_close.c the session closing; each election hears it from campaign.c,
 * called by name. Above campaign.c, below session.c and session_close.c. */
#include "session_private.h"

/* Tells every listener, holding the session: a listener may close it. */
void elector__session_notify(elector_session *s, enum session_what what, int reason,
                             const char *detail, int64_t end_ns)
{
    struct walk w = {s->listeners, s->walks};
    s->walks = &w;
    elector__hold(&s->life);
    while (w.next) {
        elector__session_listener *l = w.next;
        w.next = l->next;
        if (what == SW_READY)
            elector__campaign_session_ready(l);
        else
            elector__campaign_session_ended(l, reason, detail, end_ns);
    }
    s->walks = w.outer;
    elector__session_unhold(s);
}

/* The session died or was closed: LOST or FAILED for each listener. The belief
 * ended at the validity deadline, or now if that is sooner. */
void elector__session_notify_ended(elector_session *s, int reason, const char *detail,
                                   int64_t end_ns)
{
    int64_t now = elector_now_ns();
    elector__session_notify(s, SW_ENDED, reason, detail,
                            end_ns && end_ns < now ? end_ns : now);
}

/* The session is closing: every listener forgets it and leaves the list. */
void elector__session_detach_all(elector_session *s)
{
    elector__hold(&s->life);
    while (s->listeners) {
        elector__session_listener *l = s->listeners;
        elector__session_unlisten(s, l);
        elector__campaign_session_detached(l);
    }
    elector__session_unhold(s);
}
