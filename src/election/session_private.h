/* SPDX-License-Identifier: MIT */
/* A session's insides, shared by session.c (the lease, its keepalives and
 * deadline), session_view.c (its listeners, and what others read of it) and
 * session_notify.c (its events told to the listeners). */
#ifndef ELECTOR_SESSION_PRIVATE_H
#define ELECTOR_SESSION_PRIVATE_H

#include "election_private.h"

/* An event under way over the listeners: the next one to call. Listeners that
 * leave the list meanwhile move the cursor on; walks nest (a listener may close
 * the session, which walks again), so the cursors form a stack. */
struct walk {
    elector__session_listener *next;
    struct walk *outer;
};

struct elector_session {
    elector_etcd *etcd;
    void *owner; /* elector__session_owner() */
    elector_session_config cfg;
    enum elector__session_phase state;
    int64_t lease, ttl_s;
    int64_t deadline_ns; /* proven lease expiry minus the margin */
    int64_t ka_sent_ns;  /* when the keepalive in flight (or the grant) was sent */
    bool ka_in_flight;
    bool revoke_owed; /* we hold a lease that nobody revoked and etcd did not drop */
    int last_err, grant_err;
    int64_t created_ms; /* deadline clock: grants are retried for GRANT_RETRY_MS */
    uint64_t restores;  /* elector__restores() when the lease was granted */
    elector_session_stats stats;
    /* Holds: the grant in flight, events under way; closed: by the owner. */
    elector__life life;
    elector__timer renew_timer, deadline_timer;
    elector__session_listener *listeners;
    struct walk *walks;
    elector_session_cb cb;
    void *ud;
    elector__release rel; /* release_on_exit: the helper */
};

/* session_view.c */
void elector__session_unhold(elector_session *s);

/* session_notify.c */
enum session_what { SW_READY, SW_ENDED };
/* Tells every listener, holding the session: a listener may close it. */
void elector__session_notify(elector_session *s, enum session_what what, int reason,
                             const char *detail, int64_t end_ns);
/* The session died or was closed: LOST or FAILED for each listener. */
void elector__session_notify_ended(elector_session *s, int reason, const char *detail,
                                   int64_t end_ns);
/* The session is closing: every listener forgets it and leaves the list. */
void elector__session_detach_all(elector_session *s);

/* session_close.c: a LeaseRevoke of lease that nobody waits for (sent if it
 * can be). */
void elector__session_revoke(elector_etcd *e, int64_t lease);

#endif
