/* SPDX-License-Identifier: MIT */
/* Stress of the free paths (issue 27): thousands of elections on one session
 * are created, campaign, resign and are freed while their requests and watches
 * are in flight and the connection breaks (a proxy cuts it) and the member
 * restarts (every watch breaks, cancel replies and delete replies arrive after
 * the elections that asked for them are gone). Run under ASan in the test
 * command, this is where a use-after-free on a free path shows. The keys must
 * all be gone at the end, deleted by the frees and resigns while the session
 * still lives.
 *
 * STRESS_N overrides the number of elections (default 40000: about 12 s under
 * ASan on an idle machine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elect_util.h"
#include "elector/etcd_rpc.h"
#include "testlib.h"
#include "tproxy.h"

struct cand {
    elector_election *el;
    int elected, lost, failed, resigned;
    bool free_in_cb; /* frees itself from its next ending event */
    bool resigning;
};

static int g_n;
static struct cand *g_c;
static int g_freed_in_cb;

static void on_event(elector_election *el, const elector_event *ev, void *ud)
{
    struct cand *c = ud;
    switch (ev->type) {
    case ELECTOR_EV_ELECTED:
        c->elected++;
        break;
    case ELECTOR_EV_LOST:
        c->lost++;
        break;
    case ELECTOR_EV_FAILED:
        c->failed++;
        break;
    case ELECTOR_EV_RESIGNED:
        c->resigned++;
        break;
    default:
        return;
    }
    if (ev->type != ELECTOR_EV_ELECTED && c->free_in_cb) {
        elector_election_free(el);
        c->el = NULL;
        g_freed_in_cb++;
    }
}

static void pump(elector_etcd *e, int ms)
{
    double end = tl_now() + ms / 1e3;
    while (tl_now() < end)
        elector_etcd_run_once(e, 20);
}

/* Every election still held that campaigns (not resigning) leads. */
static bool all_lead(void)
{
    for (int i = 0; i < g_n; i++) {
        struct cand *c = &g_c[i];
        if (c->el && !c->resigning && !elector_is_leader(c->el)) return false;
    }
    return true;
}

static bool pump_until(elector_etcd *e, int ms, bool (*pred)(void))
{
    double end = tl_now() + ms / 1e3;
    while (!pred()) {
        if (tl_now() > end) return false;
        elector_etcd_run_once(e, 20);
    }
    return true;
}

/* Keys under "stress/", read by a separate client. */
static long long keys_left(elector_etcd *checker)
{
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key.data = (uint8_t *)"stress/";
    rr.key.len = 7;
    rr.range_end.data = (uint8_t *)"stress0";
    rr.range_end.len = 7;
    rr.count_only = true;
    ProtobufCMessage *m = NULL;
    elector_call_opts o = {.timeout_ms = 5000};
    if (elector_etcd_call_sync(checker, ELECTOR_RPC_RANGE, &rr.base, &o, &m)) return -1;
    long long n = ((Etcdserverpb__RangeResponse *)m)->count;
    protobuf_c_message_free_unpacked(m, NULL);
    return n;
}

static void free_cand(struct cand *c)
{
    elector_election_free(c->el);
    c->el = NULL;
}

TEST_WITH_TIMEOUT(stress_create_break_restart_free, 400)
{
    const char *env = getenv("STRESS_N");
    g_n = env && atoi(env) > 0 ? atoi(env) : 40000;
    eh_opts eo = {.members = 1};
    eh_cluster *cl = eh_start(&eo);
    ASSERT_NOT_NULL(cl);
    tp_proxy *px = tp_start(eh_endpoint(cl, 0));
    ASSERT_NOT_NULL(px);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = tp_endpoint(px);
    cfg.request_timeout_ms = 5000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_etcd *checker = eu_client(eh_endpoints(cl));
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 60; /* survives the restart and the test's slowest phases */
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 10000));

    g_c = calloc((size_t)g_n, sizeof(*g_c));
    ASSERT_NOT_NULL(g_c);
    for (int i = 0; i < g_n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "stress/e%d", i);
        g_c[i].el = elector_election_new(s, name, on_event, &g_c[i]);
        ASSERT_NOT_NULL(g_c[i].el);
        ASSERT_OK(elector_campaign(g_c[i].el, "v", 1));
    }
    double t0 = tl_now();

    /* 1. The connection breaks twice while the campaigns are in flight. */
    pump(e, 150);
    ASSERT_OK(tp_reset(px));
    pump(e, 150);
    ASSERT_OK(tp_reset(px));
    /* 2. Some are freed, some resign, some will free themselves on their
     * ending event, with their requests in flight. */
    for (int i = 0; i < g_n; i++) {
        struct cand *c = &g_c[i];
        if (i % 7 == 0)
            free_cand(c);
        else if (i % 5 == 0) {
            c->resigning = true;
            c->free_in_cb = i % 2 == 0;
            ASSERT_OK(elector_resign(c->el));
        }
    }
    ASSERT(pump_until(e, 180000, all_lead));
    tl_log("%d elections: all led after %.1f s", g_n, tl_now() - t0);
    for (int i = 0; i < g_n; i++)
        if (g_c[i].el && g_c[i].resigning && !g_c[i].free_in_cb) free_cand(&g_c[i]);

    /* 3. The member restarts: every watch breaks. Frees, resigns and new
     * campaigns go on while the client reconnects. */
    ASSERT_OK(eh_member_kill(cl, 0));
    pump(e, 100);
    ASSERT_OK(eh_member_restart(cl, 0));
    ASSERT_OK(eh_wait_healthy(cl, 0, 20));
    for (int i = 0; i < g_n; i++) {
        struct cand *c = &g_c[i];
        if (!c->el || c->resigning) continue;
        if (i % 3 == 0)
            free_cand(c);
        else if (i % 4 == 0) {
            c->resigning = true;
            c->free_in_cb = true;
            ASSERT_OK(elector_resign(c->el));
        }
    }
    pump(e, 200);
    ASSERT_OK(tp_reset(px));
    ASSERT(pump_until(e, 180000, all_lead));
    tl_log("after the restart: all led again at %.1f s", tl_now() - t0);

    /* 4. The rest go, leaders with their watches, in two orders. (A free's
     * delete is one attempt: the connection must hold now for the keys to go.) */
    for (int i = g_n - 1; i >= 0; i -= 2)
        if (g_c[i].el) free_cand(&g_c[i]);
    pump(e, 30);
    for (int i = 0; i < g_n; i++)
        if (g_c[i].el) free_cand(&g_c[i]);
    /* Cancel and delete replies arrive now, for elections already gone. */
    double end = tl_now() + 60;
    long long left = -1;
    while (tl_now() < end) {
        pump(e, 300);
        elector_etcd_run_once(checker, 0);
        left = keys_left(checker);
        if (left == 0) break;
    }
    tl_log("keys left after the frees: %lld (%d freed from a callback)", left,
           g_freed_in_cb);
    ASSERT_EQ(0, left);
    ASSERT(elector_session_alive(s));
    int lost = 0;
    for (int i = 0; i < g_n; i++)
        lost += g_c[i].lost;
    ASSERT_EQ(0, lost);
    ASSERT_OK(elector_session_close_sync(s, 10000));
    elector_etcd_free(e);
    elector_etcd_free(checker);
    free(g_c);
    tp_stop(px);
    eh_stop(cl);
}

/* The client is freed right after thousands of elections were: their deletes
 * still wait in the pacer (only a few hundred go at once). They are dropped
 * with the client; under ASan its leak check says whether everything went. */
TEST_WITH_TIMEOUT(stress_free_client_with_deletes_waiting, 120)
{
    const int n = 3000;
    eh_opts eo = {.members = 1};
    eh_cluster *cl = eh_start(&eo);
    ASSERT_NOT_NULL(cl);
    elector_etcd *e = eu_client(eh_endpoints(cl));
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 10000));
    g_n = n;
    g_c = calloc((size_t)n, sizeof(*g_c));
    ASSERT_NOT_NULL(g_c);
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "stress/f%d", i);
        g_c[i].el = elector_election_new(s, name, on_event, &g_c[i]);
        ASSERT_NOT_NULL(g_c[i].el);
        ASSERT_OK(elector_campaign(g_c[i].el, "v", 1));
    }
    ASSERT(pump_until(e, 60000, all_lead));
    /* Half resign (their RESIGNED never comes: the client goes first), half
     * are freed; then the session and the client, without running the loop. */
    for (int i = 0; i < n; i++) {
        if (i % 2)
            ASSERT_OK(elector_resign(g_c[i].el));
        else
            free_cand(&g_c[i]);
    }
    elector_session_close(s);
    for (int i = 0; i < n; i++)
        if (g_c[i].el) free_cand(&g_c[i]);
    elector_etcd_free(e);
    free(g_c);
    eh_stop(cl);
}
