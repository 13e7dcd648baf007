/* "Never two acting leaders" (issue 9), library side, against a real etcd:
 * a session that dies on its own can keep its lease until its owner releases it;
 * any election may be freed from any callback; a campaign key never outlives
 * its campaign; the deadline clock is CLOCK_BOOTTIME; an observer never reports
 * an older value after a newer one; a belief that ended never comes back.
 *
 * Several tests make a session die by its validity deadline while etcd keeps
 * the lease: a margin larger than two thirds of the TTL puts the deadline
 * before the first renewal (TTL 30 s, margin 26 s: the session dies 4 s after
 * its grant, the lease lives on in etcd for 26 s more). That is the same code
 * path as a renewal that does not come back in time, without depending on how
 * fast a stalled member or process is noticed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elect_util.h"
#include "testlib.h"

static eh_cluster *start1(void)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

struct sess_log {
    int lost;   /* SESSION_LOST events */
    int reason; /* of the last one */
};

static void sess_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s;
    struct sess_log *l = ud;
    if (ev->type == ELECTOR_EV_SESSION_LOST) {
        l->lost++;
        l->reason = ev->reason;
    }
}

static bool sess_lost(void *p)
{
    return ((struct sess_log *)p)->lost > 0;
}

/* A session whose validity deadline passes `dies_after_s` seconds after its
 * grant, before any renewal, while etcd keeps its lease for ttl_s. */
static elector_session *doomed_session(elector_etcd *e, int ttl_s, int dies_after_s,
                                       bool manual_release, struct sess_log *log)
{
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = ttl_s;
    sc.margin_ms = (ttl_s - dies_after_s) * 1000LL;
    (void)manual_release;
    elector_session *s = elector_session_new(e, &sc, sess_cb, log);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    return s;
}

/* ---------------------------------------------------------------- item 4 */

struct two {
    elector_election *el[2];
    int events[2];
    int lost;
};

static void free_both_cb(elector_election *el, const elector_event *ev, void *ud)
{
    struct two *t = ud;
    int i = el == t->el[0] ? 0 : 1;
    t->events[i]++;
    if (ev->type != ELECTOR_EV_LOST && ev->type != ELECTOR_EV_FAILED) return;
    t->lost++;
    /* election.h allows freeing any election from a callback. */
    for (int k = 0; k < 2; k++) {
        elector_election_free(t->el[k]);
        t->el[k] = NULL;
    }
}

TEST_WITH_TIMEOUT(lost_callback_may_free_every_election_of_the_session, 60)
{
    eh_cluster *c = start1();
    elector_etcd *e = eu_client(eh_endpoints(c));
    eu_register_client(e);
    struct sess_log sl = {0};
    elector_session *s = doomed_session(e, 30, 4, false, &sl);
    struct two t = {0};
    t.el[0] = elector_election_new(s, "first", free_both_cb, &t);
    t.el[1] = elector_election_new(s, "second", free_both_cb, &t);
    ASSERT_NOT_NULL(t.el[0]);
    ASSERT_NOT_NULL(t.el[1]);
    ASSERT_OK(elector_campaign_sync(t.el[0], "1", 1, 3000));
    ASSERT_OK(elector_campaign_sync(t.el[1], "2", 1, 3000));
    ASSERT(elector_is_leader(t.el[0]) && elector_is_leader(t.el[1]));
    /* The session dies by its deadline; the first LOST frees both elections,
     * the one being notified and the one the walk would visit next. */
    ASSERT(eu_pump_until(10000, sess_lost, &sl));
    ASSERT_EQ(ELECTOR_ESESSION, sl.reason);
    ASSERT_EQ(1, t.lost);
    ASSERT_NULL(t.el[0]);
    eu_pump(100);
    ASSERT_EQ(1, sl.lost);
    elector_session_close_sync(s, 2000);
    eu_unregister_client(e);
    elector_etcd_free(e);
    eh_stop(c);
}

struct closer {
    elector_session *s;
    int lost;
};

static void close_on_lost_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct closer *k = ud;
    if (ev->type != ELECTOR_EV_LOST) return;
    k->lost++;
    elector_session_close(k->s); /* the session being closed: a no-op */
}

TEST(closing_the_session_again_from_the_lost_its_close_caused_is_safe)
{
    eh_cluster *c = start1();
    elector_etcd *e = eu_client(eh_endpoints(c));
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct closer k = {.s = s};
    elector_election *el[2];
    el[0] = elector_election_new(s, "c1", close_on_lost_cb, &k);
    el[1] = elector_election_new(s, "c2", close_on_lost_cb, &k);
    ASSERT_OK(elector_campaign_sync(el[0], "1", 1, 3000));
    ASSERT_OK(elector_campaign_sync(el[1], "2", 1, 3000));
    ASSERT_OK(elector_session_close_sync(s, 3000));
    ASSERT_EQ(2, k.lost);
    elector_leader_info li;
    ASSERT_EQ(1, elector_leader_sync(e, "c1", 3000, &li));
    ASSERT_EQ(1, elector_leader_sync(e, "c2", 3000, &li));
    elector_election_free(el[0]);
    elector_election_free(el[1]);
    elector_etcd_free(e);
    eh_stop(c);
}
