/* SPDX-License-Identifier: MIT */
/* Restores from a snapshot (issue 20): the cluster's revision goes back to
 * the snapshot's, so fencing tokens (create revisions) handed out since can be
 * handed out again. The client keeps the highest revision it saw; a reply
 * below it (or from another cluster ID) is ERESTORED and a leader steps down.
 * Restored with etcdutl's --bump-revision and --mark-compacted (3.5), the
 * revisions keep increasing: the leader stays, and later tokens are larger
 * than every one handed out before. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elect_util.h"
#include "elector/etcd.h"
#include "etcd_harness.h"
#include "testlib.h"
#include "transport_internal.h"

/* Puts through the candidate's own client, so that it sees the revisions. */
static int64_t put(elector_etcd *e, const char *k)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = (ProtobufCBinaryData){strlen(k), (uint8_t *)k};
    p.value = (ProtobufCBinaryData){1, (uint8_t *)"v"};
    ProtobufCMessage *m = NULL;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &p.base, NULL, &m));
    int64_t rev = ((Etcdserverpb__PutResponse *)m)->header->revision;
    protobuf_c_message_free_unpacked(m, NULL);
    return rev;
}

/* A leader, a snapshot, then 10 more revisions; returns the last revision. */
static int64_t leader_then_snapshot(eh_cluster *c, eu_cand *a, char *snap, size_t cap)
{
    ASSERT_OK(elector_campaign_sync(a->el, "A", 1, 5000));
    ASSERT(elector_is_leader(a->el));
    snprintf(snap, cap, "%s/snap.db", eh_dir(c));
    ASSERT_OK(eh_etcdctl(c, NULL, "snapshot", "save", snap, NULL));
    int64_t rev = 0;
    for (int i = 0; i < 10; i++) {
        char k[16];
        snprintf(k, sizeof(k), "after/%d", i);
        rev = put(a->etcd, k);
    }
    tl_log("leader's token %lld; snapshot taken; revision %lld before the restore",
           (long long)elector_election_token(a->el), (long long)rev);
    return rev;
}

/* Stops the member while the candidates' clients are pumped (etcd 3.5 waits
 * for its clients to leave before it exits), then restores it. */
static void restore(eh_cluster *c, const char *snap, const char *args)
{
    ASSERT_OK(kill(eh_pid(c, 0), SIGTERM));
    double t0 = tl_now();
    while (eh_member_running(c, 0)) {
        ASSERT_LT(tl_now() - t0, 15.0);
        eu_pump(20);
    }
    ASSERT_OK(eh_member_restore(c, 0, snap, args));
}

static bool have_etcdutl(void)
{
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : ""), *save = NULL;
    bool found = false;
    for (char *d = strtok_r(copy, ":", &save); d && !found;
         d = strtok_r(NULL, ":", &save)) {
        char p[600];
        snprintf(p, sizeof(p), "%s/etcdutl", d);
        found = access(p, X_OK) == 0;
    }
    free(copy);
    return found;
}

static void count_put(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    int *n = ud;
    if (!err)
        n[0]++;
    else
        n[1]++;
}

/* Replies to calls in flight together come in any order: one with a lower
 * revision than a reply already seen is not a restore (each call is held only
 * to what was seen before it was made). Hundreds of puts at once on 3 members. */
TEST_WITH_TIMEOUT(concurrent_writes_answered_out_of_order_are_not_a_restore, 90)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 3});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    int done[2] = {0, 0}, total = 0;
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 100; i++, total++) {
            char k[32];
            snprintf(k, sizeof(k), "conc/%d", i % 7);
            Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
            p.key = (ProtobufCBinaryData){strlen(k), (uint8_t *)k};
            p.value = (ProtobufCBinaryData){1, (uint8_t *)"v"};
            ASSERT_OK(
                elector_etcd_call(e, ELECTOR_RPC_PUT, &p.base, NULL, count_put, done));
        }
        double t0 = tl_now();
        while (done[0] + done[1] < total) {
            ASSERT_LT(tl_now() - t0, 30.0);
            ASSERT_OK(elector_etcd_run_once(e, 100));
        }
    }
    tl_log("%d puts in rounds of 100 in flight: %d ok, %d failed, restores counted %llu",
           total, done[0], done[1], (unsigned long long)elector__restores(e, NULL));
    ASSERT_EQ(total, done[0]);
    ASSERT_EQ(0, (long long)elector__restores(e, NULL));
    elector_etcd_free(e);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(restore_to_an_older_revision_makes_the_leader_step_down, 90)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    eu_cand *a = eu_cand_new(eh_endpoints(c), "rs", 10);
    char snap[600];
    leader_then_snapshot(c, a, snap, sizeof(snap));
    double t0 = tl_now();
    restore(c, snap, NULL);
    int i = eu_wait_event(a, 0, ELECTOR_EV_LOST, 15000);
    ASSERT_GE(i, 0);
    tl_log("leader lost %.0f ms after the restore began: %s", (tl_now() - t0) * 1e3,
           elector_err_name(a->reasons[i]));
    ASSERT_EQ(ELECTOR_ERESTORED, a->reasons[i]);
    ASSERT(!elector_is_leader(a->el));
    ASSERT_CONTAINS(elector_strerror(ELECTOR_ERESTORED), "restored from a snapshot?");
    eu_cand_free(a);
    eh_stop(c);
}

/* What an observer reported, in order. */
typedef struct {
    int n, restored;
    int64_t want; /* obs_has: the last report is this leader */
    elector_event_type types[32];
    int64_t tokens[32];
} obs_log;

static void obs_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    obs_log *l = ud;
    if (ev->reason == ELECTOR_ERESTORED) {
        l->restored++;
        tl_log("observer: %s (%s)",
               ev->type == ELECTOR_EV_LEADER ? "leader" : "no leader", ev->detail);
    }
    if (l->n < 31) {
        l->types[l->n] = ev->type;
        l->tokens[l->n++] = ev->token;
    }
}

static bool obs_has(void *p)
{
    obs_log *l = p;
    return l->n > 0 && l->types[l->n - 1] == ELECTOR_EV_LEADER &&
           l->tokens[l->n - 1] == l->want;
}

/* An observer sees the revisions go back: it forgets what it knew (by
 * revision), reads the leader again and goes on reporting changes of the
 * new history (whose tokens are lower than those it saw before). */
TEST_WITH_TIMEOUT(observer_reads_again_after_a_restore_and_goes_on, 90)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd *oe = eu_client(eh_endpoints(c));
    ASSERT_NOT_NULL(oe);
    eu_register_client(oe);
    obs_log l = {0};
    elector_observer *o = elector_observe(oe, "ro", obs_cb, &l);
    ASSERT_NOT_NULL(o);
    eu_pump(500);
    ASSERT_EQ(1, l.n);
    ASSERT_EQ(ELECTOR_EV_NO_LEADER, l.types[0]);
    /* Nobody leads in the snapshot; then A leads at a higher revision. */
    char snap[600];
    snprintf(snap, sizeof(snap), "%s/snap.db", eh_dir(c));
    ASSERT_OK(eh_etcdctl(c, NULL, "snapshot", "save", snap, NULL));
    eu_cand *a = eu_cand_new(eh_endpoints(c), "ro", 10);
    for (int i = 0; i < 20; i++) {
        char k[16];
        snprintf(k, sizeof(k), "after/%d", i);
        put(a->etcd, k);
    }
    ASSERT_OK(elector_campaign_sync(a->el, "A", 1, 5000));
    int64_t ta = elector_election_token(a->el);
    l.want = ta;
    ASSERT(eu_pump_until(5000, obs_has, &l));
    tl_log("observer saw A, token %lld", (long long)ta);
    restore(c, snap, NULL);
    /* The restored member has no leader for ro: reported again, as a restore. */
    double t0 = tl_now();
    while (!(l.restored && l.types[l.n - 1] == ELECTOR_EV_NO_LEADER)) {
        ASSERT_LT(tl_now() - t0, 15.0);
        eu_pump(50);
    }
    tl_log("observer re-read %.0f ms after the restore", (tl_now() - t0) * 1e3);
    /* A new leader with a token below A's (the history went back) is seen. */
    eu_cand *b = eu_cand_new(eh_endpoints(c), "ro", 10);
    ASSERT_OK(elector_campaign_sync(b->el, "B", 1, 5000));
    int64_t tb = elector_election_token(b->el);
    tl_log("B leads with token %lld (A had %lld)", (long long)tb, (long long)ta);
    ASSERT_LT(tb, ta);
    l.want = tb;
    ASSERT(eu_pump_until(5000, obs_has, &l));
    elector_observer_free(o);
    eu_cand_free(b);
    eu_cand_free(a);
    eu_unregister_client(oe);
    elector_etcd_free(oe);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(tokens_keep_increasing_across_a_restore_with_bump_revision, 90)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    /* etcd 3.4 has no --bump-revision (its step-down is the test above). The
     * check comes after eh_start: it puts ELECTOR_ETCD_DIR first in PATH. */
    if (!have_etcdutl()) {
        eh_stop(c);
        tl_skip("no etcdutl, so no --bump-revision (etcd 3.4)");
    }
    eu_cand *a = eu_cand_new(eh_endpoints(c), "rs", 10);
    char snap[600];
    int64_t last = leader_then_snapshot(c, a, snap, sizeof(snap));
    restore(c, snap, "--bump-revision=1000 --mark-compacted");
    /* Revisions went up, not back: the leader stays, a TTL and more. */
    eu_pump(12000);
    for (int i = 0; i < a->n; i++)
        ASSERT(a->types[i] != ELECTOR_EV_LOST);
    ASSERT(elector_is_leader(a->el));
    eu_cand *b = eu_cand_new(eh_endpoints(c), "rs", 10);
    ASSERT_OK(elector_campaign(b->el, "B", 1));
    ASSERT_GE(eu_wait_event(b, 0, ELECTOR_EV_WAITING, 5000), 0);
    ASSERT_OK(elector_resign(a->el));
    int i = eu_wait_event(b, 0, ELECTOR_EV_ELECTED, 10000);
    ASSERT_GE(i, 0);
    tl_log("next leader's token %lld; highest revision before the restore %lld",
           (long long)b->tokens[i], (long long)last);
    ASSERT_GT(b->tokens[i], last);
    eu_cand_free(b);
    eu_cand_free(a);
    eh_stop(c);
}
