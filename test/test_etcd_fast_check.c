/* SPDX-License-Identifier: MIT */
/* The serializable check after a predecessor's DELETE event (docs/DESIGN.md,
 * "Graceful handover: the serializable check"), on a real 3-member cluster:
 * its answer is taken when it comes from the member that delivered the event,
 * on the same connection, at a revision >= R; each other case falls back to
 * the linearizable check, which then decides. The library's counters say
 * which path a check took; the test knobs (election_private.h) can only make
 * the client see less (a later R, a reconnect, an error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elect_util.h"
#include "election_private.h"
#include "testlib.h"
#include "tproxy.h"
#include "transport_private.h" /* elector__conn_fail: a reconnect on purpose */

static eh_cluster *start3(void)
{
    eh_opts o = {.members = 3};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

/* Endpoints with member `first` in front, so the client connects to it. */
static const char *endpoints_first(eh_cluster *c, int first, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int k = 0; k < eh_members(c); k++) {
        int i = (first + k) % eh_members(c);
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? "," : "", eh_endpoint(c, i));
    }
    return buf;
}

static elector_election_stats stats(const eu_cand *c)
{
    elector_election_stats s;
    elector_election_get_stats(c->el, &s);
    fprintf(stderr,
            "checks: linearizable %d fast %d used %d; fallbacks: error %d conn %d "
            "member %d stale %d reply %d\n",
            (int)s.checks_linearizable, (int)s.checks_serializable,
            (int)s.serializable_taken, (int)s.fallback_error, (int)s.fallback_conn,
            (int)s.fallback_member, (int)s.fallback_stale, (int)s.fallback_reply);
    return s;
}

/* a leads, b waits behind it (b's first check, linearizable, is done). */
static void lead_and_wait(eu_cand *a, eu_cand *b)
{
    ASSERT_OK(elector_campaign_sync(a->el, "a", 1, 5000));
    ASSERT_OK(elector_campaign(b->el, "b", 1));
    ASSERT(eu_wait_event(b, 0, ELECTOR_EV_WAITING, 5000) >= 0);
    ASSERT_EQ(1, (int)stats(b).checks_linearizable);
    ASSERT_EQ(0, (int)stats(b).checks_serializable);
}

/* a resigns; b must be elected. */
static void hand_over(eu_cand *a, eu_cand *b)
{
    int from = b->n;
    ASSERT_OK(elector_resign(a->el));
    ASSERT(eu_wait_event(b, from, ELECTOR_EV_ELECTED, 5000) >= 0);
    ASSERT(elector_is_leader(b->el));
    ASSERT(!elector_is_leader(a->el));
}

/* Checks that every fast check was either taken or refused as below R (the
 * real race of docs/DESIGN.md, fact 6: the member sends the event before R is
 * visible to its reads), and that each refusal cost one linearizable check. */
static void only_taken_or_stale(const elector_election_stats *s, int first_checks)
{
    ASSERT_EQ((int)s->checks_serializable,
              (int)(s->serializable_taken + s->fallback_stale));
    ASSERT_EQ(0, (int)(s->fallback_error + s->fallback_conn + s->fallback_member +
                       s->fallback_reply));
    ASSERT_EQ(first_checks + (int)s->fallback_stale, (int)s->checks_linearizable);
}

/* Handovers back and forth until one was decided by the serializable check
 * alone (most are; a round refused as below R is legitimate, see above). */
TEST_WITH_TIMEOUT(fast_check_elects_the_successor_without_a_linearizable_read, 120)
{
    eh_cluster *c = start3();
    char eps[512];
    eu_cand *a = eu_cand_new(endpoints_first(c, 1, eps, sizeof(eps)), "fc", 5);
    eu_cand *b = eu_cand_new(endpoints_first(c, 0, eps, sizeof(eps)), "fc", 5);
    lead_and_wait(a, b);
    eu_cand *lead = a, *next = b;
    int used = 0;
    for (int round = 1; round <= 10 && !used; round++) {
        if (round > 1) {
            ASSERT_OK(elector_campaign(next->el, "n", 1));
            ASSERT(eu_wait_event(next, next->n - 1, ELECTOR_EV_WAITING, 5000) >= 0);
        }
        elector_election_stats before = stats(next);
        hand_over(lead, next);
        elector_election_stats s = stats(next);
        ASSERT_EQ(1, (int)(s.checks_serializable - before.checks_serializable));
        only_taken_or_stale(&s, (int)(s.checks_linearizable - s.fallback_stale));
        ASSERT_EQ(before.checks_linearizable + (s.fallback_stale - before.fallback_stale),
                  s.checks_linearizable);
        used = (int)(s.serializable_taken - before.serializable_taken);
        ASSERT_EQ(used ? 2 : 1, s.last_decided_by);
        if (!used) {
            eu_cand *t = lead;
            lead = next;
            next = t;
        }
    }
    ASSERT_EQ(1, used);
    /* The successor's own-key watch starts after the check: a delete of its key
     * now is seen (docs: the watch must start at h + 1 <= the delete). */
    size_t klen;
    const uint8_t *k = elector_election_key(next->el, &klen);
    char key[256];
    snprintf(key, sizeof(key), "%.*s", (int)klen, (const char *)k);
    int from = next->n;
    ASSERT_OK(eh_etcdctl(c, NULL, "del", key, NULL));
    ASSERT(eu_wait_event(next, from, ELECTOR_EV_LOST, 5000) >= 0);
    eu_cand_free(a);
    eu_cand_free(b);
    eh_stop(c);
}

/* The reply is below R (here R is shifted up by a knob; for real it is the
 * window in which the member has sent the event but not yet made R visible
 * to reads): fallback, and the linearizable check elects. */
TEST_WITH_TIMEOUT(fast_check_below_R_falls_back, 90)
{
    eh_cluster *c = start3();
    char eps[512];
    eu_cand *a = eu_cand_new(endpoints_first(c, 1, eps, sizeof(eps)), "fs", 5);
    eu_cand *b = eu_cand_new(endpoints_first(c, 0, eps, sizeof(eps)), "fs", 5);
    lead_and_wait(a, b);
    elector__check_test.rev_shift = 1000;
    hand_over(a, b);
    elector_election_stats s = stats(b);
    ASSERT_EQ(1, (int)s.checks_serializable);
    ASSERT_EQ(0, (int)s.serializable_taken);
    ASSERT_EQ(1, (int)s.fallback_stale);
    ASSERT_EQ(2, (int)s.checks_linearizable);
    ASSERT_EQ(1, s.last_decided_by);
    eu_cand_free(a);
    eu_cand_free(b);
    eh_stop(c);
}

/* Drops the client's connection where the hook runs: the check goes out on a
 * new connection, to the next endpoint of the list. */
static void reconnect(elector_etcd *e, void *ud)
{
    int *n = ud;
    ++*n;
    elector__conn_fail(e, ELECTOR_EUNAVAILABLE, "test: reconnect before the check");
}

/* The client reconnects to another member between the event and the check. */
TEST_WITH_TIMEOUT(fast_check_on_another_member_falls_back, 90)
{
    eh_cluster *c = start3();
    char eps[512];
    eu_cand *a = eu_cand_new(endpoints_first(c, 1, eps, sizeof(eps)), "fm", 5);
    eu_cand *b = eu_cand_new(endpoints_first(c, 0, eps, sizeof(eps)), "fm", 5);
    lead_and_wait(a, b);
    ASSERT_STREQ(eh_endpoint(c, 0), elector_etcd_current_endpoint(b->etcd));
    int hooked = 0;
    elector__check_test.before_send = reconnect;
    elector__check_test.ud = &hooked;
    hand_over(a, b);
    ASSERT_EQ(1, hooked);
    ASSERT_STREQ(eh_endpoint(c, 1), elector_etcd_current_endpoint(b->etcd));
    elector_election_stats s = stats(b);
    ASSERT_EQ(1, (int)s.checks_serializable);
    ASSERT_EQ(0, (int)s.serializable_taken);
    ASSERT_EQ(1, (int)s.fallback_member);
    ASSERT_EQ(2, (int)s.checks_linearizable);
    eu_cand_free(a);
    eu_cand_free(b);
    eh_stop(c);
}

/* The client reconnects to the same member (one endpoint): same member ID,
 * another connection (as after a restart of that member): fallback. */
TEST_WITH_TIMEOUT(fast_check_on_a_new_connection_to_the_same_member_falls_back, 90)
{
    eh_cluster *c = start3();
    char eps[512];
    eu_cand *a = eu_cand_new(endpoints_first(c, 1, eps, sizeof(eps)), "fn", 5);
    eu_cand *b = eu_cand_new(eh_endpoint(c, 0), "fn", 5);
    lead_and_wait(a, b);
    int hooked = 0;
    elector__check_test.before_send = reconnect;
    elector__check_test.ud = &hooked;
    hand_over(a, b);
    ASSERT_EQ(1, hooked);
    elector_election_stats s = stats(b);
    ASSERT_EQ(1, (int)s.checks_serializable);
    ASSERT_EQ(0, (int)s.serializable_taken);
    ASSERT_EQ(1, (int)s.fallback_conn);
    ASSERT_EQ(2, (int)s.checks_linearizable);
    eu_cand_free(a);
    eu_cand_free(b);
    eh_stop(c);
}

static void cut(elector_etcd *e, void *ud)
{
    (void)e;
    ASSERT_OK(tp_reset(ud));
}

/* The check is sent and its connection breaks (a forwarder in front of the
 * member closes it): the call fails, the linearizable check goes to the next
 * member and elects. */
TEST_WITH_TIMEOUT(fast_check_error_falls_back, 90)
{
    eh_cluster *c = start3();
    tp_proxy *p = tp_start(eh_endpoint(c, 0));
    ASSERT_NOT_NULL(p);
    char eps[512];
    snprintf(eps, sizeof(eps), "%s,%s,%s", tp_endpoint(p), eh_endpoint(c, 1),
             eh_endpoint(c, 2));
    char eps_a[512];
    eu_cand *a = eu_cand_new(endpoints_first(c, 1, eps_a, sizeof(eps_a)), "fe", 5);
    eu_cand *b = eu_cand_new(eps, "fe", 5);
    lead_and_wait(a, b);
    ASSERT_STREQ(tp_endpoint(p), elector_etcd_current_endpoint(b->etcd));
    elector__check_test.after_send = cut;
    elector__check_test.ud = p;
    hand_over(a, b);
    elector_election_stats s = stats(b);
    ASSERT_EQ(1, (int)s.checks_serializable);
    ASSERT_EQ(0, (int)s.serializable_taken);
    ASSERT_EQ(1, (int)s.fallback_error);
    ASSERT_EQ(2, (int)s.checks_linearizable);
    eu_cand_free(a);
    eu_cand_free(b);
    tp_stop(p);
    eh_stop(c);
}

/* Our key was deleted while we waited: at h >= R the compare fails, and that
 * answer is conclusive (FAILED ESESSION, no fallback, never ELECTED). */
TEST_WITH_TIMEOUT(fast_check_compare_failed_is_conclusive, 90)
{
    eh_cluster *c = start3();
    char eps[512];
    eu_cand *a = eu_cand_new(endpoints_first(c, 1, eps, sizeof(eps)), "fk", 5);
    eu_cand *b = eu_cand_new(endpoints_first(c, 0, eps, sizeof(eps)), "fk", 5);
    /* b's own-key watch would end its wait at the delete itself
     * (test_etcd_election waiting_candidate_whose_key_is_deleted_aborts): off,
     * as when that watch broke, the fast check is what finds the key gone. */
    elector__check_test.no_own_watch = true;
    lead_and_wait(a, b);
    size_t klen;
    const uint8_t *k = elector_election_key(b->el, &klen);
    char key[256];
    snprintf(key, sizeof(key), "%.*s", (int)klen, (const char *)k);
    ASSERT_OK(eh_etcdctl(c, NULL, "del", key, NULL));
    int from = b->n;
    ASSERT_OK(elector_resign(a->el));
    int i = eu_wait_event(b, from, ELECTOR_EV_FAILED, 5000);
    ASSERT(i >= 0);
    ASSERT_EQ(ELECTOR_ESESSION, b->reasons[i]);
    eu_pump(300);
    for (int j = from; j < b->n; j++)
        ASSERT(b->types[j] != ELECTOR_EV_ELECTED);
    elector_election_stats s = stats(b);
    ASSERT_EQ(1, (int)s.checks_serializable);
    only_taken_or_stale(&s, 1);
    eu_cand_free(a);
    eu_cand_free(b);
    eh_stop(c);
}

/* a leads, b waits on a, d waits on b; b resigns: d's fast check finds a and
 * waits on it (taken, no fallback); a resigns: d is elected by a fast check. */
TEST_WITH_TIMEOUT(fast_check_finds_the_next_predecessor, 90)
{
    eh_cluster *c = start3();
    char eps[512];
    eu_cand *a = eu_cand_new(endpoints_first(c, 1, eps, sizeof(eps)), "fp", 5);
    eu_cand *b = eu_cand_new(endpoints_first(c, 2, eps, sizeof(eps)), "fp", 5);
    eu_cand *d = eu_cand_new(endpoints_first(c, 0, eps, sizeof(eps)), "fp", 5);
    lead_and_wait(a, b);
    ASSERT_OK(elector_campaign(d->el, "d", 1));
    ASSERT(eu_wait_event(d, 0, ELECTOR_EV_WAITING, 5000) >= 0);
    int from = d->n;
    ASSERT_OK(elector_resign(b->el));
    /* d now waits on a: a second "waiting" event names a's key */
    int i = eu_wait_event(d, from, ELECTOR_EV_WAITING, 5000);
    ASSERT(i >= 0);
    size_t alen;
    const uint8_t *ak = elector_election_key(a->el, &alen);
    char akey[256];
    snprintf(akey, sizeof(akey), "%.*s", (int)alen, (const char *)ak);
    ASSERT_STREQ(akey, d->last_key);
    ASSERT(!elector_is_leader(d->el));
    elector_election_stats s = stats(d);
    ASSERT_EQ(1, (int)s.checks_serializable);
    only_taken_or_stale(&s, 1);
    hand_over(a, d);
    s = stats(d);
    ASSERT_EQ(2, (int)s.checks_serializable);
    only_taken_or_stale(&s, 1);
    eu_cand_free(a);
    eu_cand_free(b);
    eu_cand_free(d);
    eh_stop(c);
}
