/* Shared between session.c, election.c and observe.c. */
#ifndef ELECTOR_ELECTION_PRIVATE_H
#define ELECTOR_ELECTION_PRIVATE_H

#include "etcd_internal.h"
#include "elector/election.h"

enum session_state { S_GRANTING, S_ALIVE, S_DEAD, S_CLOSED };

struct elector_session {
    elector_etcd *etcd;
    elector_session_config cfg;
    enum session_state state;
    int64_t lease, ttl_s;
    int64_t deadline_ns; /* proven lease expiry minus the margin */
    int64_t ka_sent_ns;  /* when the keepalive in flight (or the grant) was sent */
    bool ka_in_flight;
    bool revoke_owed; /* we hold a lease that nobody revoked and etcd did not drop */
    int last_err, grant_err;
    elector_session_stats stats;
    int refs; /* owner + in-flight calls; freed at 0 once closed */
    elector__timer renew_timer, deadline_timer;
    struct elector_election *elections;
    unsigned walks; /* stamp of the latest walk over `elections` */
    elector_session_cb cb;
    void *ud;
};

/* Called by sessions: the lease is ready / the session ended (LOST or FAILED
 * for each election; end_ns caps the LOST time at the validity deadline). */
void elector__elections_session_ready(elector_session *s);
void elector__elections_session_ended(elector_session *s, int reason, const char *detail,
                                      int64_t end_ns);

/* The session is being freed: elections forget it (they report ESESSION). */
void elector__elections_detach_all(elector_session *s);

/* Builds "name/" into a malloc'd buffer. */
uint8_t *elector__name_prefix(const char *name, size_t *len);

/* Range request for the lowest-create-revision key under prefix (the leader). */
void elector__leader_range(Etcdserverpb__RangeRequest *r, const uint8_t *prefix, size_t plen,
                           uint8_t *end_buf);

#endif
