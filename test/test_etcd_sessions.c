/* SPDX-License-Identifier: MIT */
/* The other axis of scale (issue 27): many sessions on one client, and many
 * candidates of one election.
 *
 * - Thousands of sessions (leases) on one client share its few LeaseKeepAlive
 *   streams (a new one only when 256 renewals wait on each, at most 16): all
 *   are granted, every one is renewed round after round at a short TTL without
 *   a failure or a loss, etcd sees at most 16 keepalive streams opened (not one
 *   per lease), and closing them revokes every lease.
 * - Hundreds of candidates queued on one election: a change (the leader
 *   resigns) wakes only the successor. etcd counts the watch events it sends
 *   (etcd_debugging_mvcc_events_total): a change that woke every waiter would
 *   send one per waiter.
 *
 * SESSIONS_N / HERD_N override the counts (defaults 2000 / 300). Timing is not
 * asserted: only that nothing is lost, failed or woken needlessly. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "elect_util.h"
#include "testlib.h"

/* ---------------------------------------------------------------- metrics */

/* etcd serves /metrics on its client URL: GET it over plain HTTP/1.0. Returns a
 * malloc'd body, NULL on failure. */
static char *fetch_metrics(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return NULL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        close(fd);
        return NULL;
    }
    static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (len + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0) break;
        len += (size_t)n;
    }
    close(fd);
    if (buf) buf[len] = 0;
    return buf;
}

/* The value of the first line starting with `series` and a space; -1 if none. */
static double metric(int port, const char *series)
{
    char *body = fetch_metrics(port);
    if (!body) return -1;
    double v = -1;
    size_t sl = strlen(series);
    for (char *line = body; line && *line;) {
        char *nl = strchr(line, '\n');
        if (!strncmp(line, series, sl) && line[sl] == ' ') {
            v = strtod(line + sl + 1, NULL);
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(body);
    return v;
}

static void pump(elector_etcd *e, int ms)
{
    double end = tl_now() + ms / 1e3;
    while (tl_now() < end)
        elector_etcd_run_once(e, 20);
}

/* ---------------------------------------------------------------- sessions */

static int g_lost;

static void on_session(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s, (void)ud;
    if (ev->type == ELECTOR_EV_SESSION_LOST) {
        if (!g_lost++) tl_log("first session lost: %s", ev->detail);
    }
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : dflt;
}

TEST_WITH_TIMEOUT(thousands_of_sessions_share_a_few_keepalive_streams, 120)
{
    int n = env_int("SESSIONS_N", 2000);
    eh_opts eo = {.members = 1};
    eh_cluster *cl = eh_start(&eo);
    ASSERT_NOT_NULL(cl);
    int port = eh_client_port(cl, 0);
    static const char streams[] =
        "grpc_server_started_total{grpc_method=\"LeaseKeepAlive\",grpc_service="
        "\"etcdserverpb.Lease\",grpc_type=\"bidi_stream\"}";
    double streams0 = metric(port, streams);
    if (streams0 < 0) streams0 = 0; /* no series before the first stream */

    elector_etcd *e = eu_client(eh_endpoints(cl));
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 5; /* a renewal every ~1.7 s: several rounds within the test */
    elector_session **ss = calloc((size_t)n, sizeof(*ss));
    ASSERT_NOT_NULL(ss);
    double t0 = tl_now();
    for (int i = 0; i < n; i++) {
        ss[i] = elector_session_new(e, &sc, on_session, NULL);
        ASSERT_NOT_NULL(ss[i]);
    }
    for (int i = 0; i < n; i++)
        ASSERT_OK(elector_session_wait(ss[i], 30000));
    tl_log("%d sessions granted after %.2f s", n, tl_now() - t0);

    /* Three rounds of renewals at least (10 s at TTL 5 s: every ~1.7 s). */
    pump(e, 10000);
    ASSERT_EQ(g_lost, 0);
    uint64_t min_renewals = UINT64_MAX, failures = 0;
    for (int i = 0; i < n; i++) {
        elector_session_stats st;
        elector_session_get_stats(ss[i], &st);
        if (st.renewals < min_renewals) min_renewals = st.renewals;
        failures += st.failures;
        ASSERT(elector_session_alive(ss[i]));
    }
    tl_log("fewest renewals of a session: %llu; failures: %llu",
           (unsigned long long)min_renewals, (unsigned long long)failures);
    ASSERT(min_renewals >= 3);
    ASSERT_EQ(failures, 0);
    /* A few shared streams, not one per lease. */
    double streams1 = metric(port, streams);
    tl_log("LeaseKeepAlive streams started: %.0f", streams1 - streams0);
    ASSERT(streams1 - streams0 >= 1 && streams1 - streams0 <= 16);

    /* Closing revokes every lease. */
    for (int i = 0; i < n; i++)
        elector_session_close(ss[i]);
    double end = tl_now() + 60;
    long left = -1;
    while (tl_now() < end) {
        pump(e, 500);
        char *out = NULL;
        if (eh_etcdctl(cl, &out, "lease", "list", NULL) == 0 && out) {
            left = 0;
            for (char *p = strstr(out, "id: "); p; p = strstr(p + 1, "id: "))
                left++;
        }
        free(out);
        if (left == 0) break;
    }
    tl_log("leases left after close: %ld", left);
    ASSERT_EQ(left, 0);
    ASSERT_EQ(g_lost, 0);
    elector_etcd_free(e);
    free(ss);
    eh_stop(cl);
}

/* ---------------------------------------------------------------- herd */

struct cand {
    elector_session *s;
    elector_election *el;
    int elected, waiting;
};

static void on_cand(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct cand *c = ud;
    if (ev->type == ELECTOR_EV_ELECTED) c->elected++;
    if (ev->type == ELECTOR_EV_WAITING) c->waiting++;
}

static int g_hn;
static struct cand *g_hc;

static int leaders(void)
{
    int l = 0;
    for (int i = 0; i < g_hn; i++)
        l += g_hc[i].el && elector_is_leader(g_hc[i].el);
    return l;
}

TEST_WITH_TIMEOUT(a_change_in_a_large_herd_wakes_only_the_successor, 120)
{
    int n = env_int("HERD_N", 300);
    eh_opts eo = {.members = 1};
    eh_cluster *cl = eh_start(&eo);
    ASSERT_NOT_NULL(cl);
    int port = eh_client_port(cl, 0);
    elector_etcd *e = eu_client(eh_endpoints(cl));
    g_hn = n;
    g_hc = calloc((size_t)n, sizeof(*g_hc));
    ASSERT_NOT_NULL(g_hc);
    for (int i = 0; i < n; i++) {
        g_hc[i].s = elector_session_new(e, NULL, NULL, NULL);
        ASSERT_NOT_NULL(g_hc[i].s);
        g_hc[i].el = elector_election_new(g_hc[i].s, "herd", on_cand, &g_hc[i]);
        ASSERT_NOT_NULL(g_hc[i].el);
    }
    for (int i = 0; i < n; i++)
        ASSERT_OK(elector_session_wait(g_hc[i].s, 30000));
    /* In order: candidate 0 leads, the others queue behind it. */
    ASSERT_OK(elector_campaign(g_hc[0].el, "v", 1));
    double end = tl_now() + 30;
    while (!g_hc[0].elected && tl_now() < end)
        elector_etcd_run_once(e, 20);
    ASSERT_EQ(g_hc[0].elected, 1);
    for (int i = 1; i < n; i++)
        ASSERT_OK(elector_campaign(g_hc[i].el, "v", 1));
    int waiting;
    end = tl_now() + 60;
    do {
        elector_etcd_run_once(e, 20);
        waiting = 0;
        for (int i = 1; i < n; i++)
            waiting += g_hc[i].waiting > 0;
    } while (waiting < n - 1 && tl_now() < end);
    ASSERT_EQ(waiting, n - 1);
    pump(e, 500); /* every waiter's watch created and synced */
    /* The leader watches its own key; each waiter its predecessor's and its
     * own (whose deletion ends the wait at once): 2n - 1 watchers, none on a
     * range. A change still wakes only the successor (below). */
    double watchers = metric(port, "etcd_debugging_mvcc_watcher_total");
    tl_log("watchers with %d candidates queued: %.0f", n, watchers);
    ASSERT(watchers == 2 * n - 1);

    /* Three changes, each counted alone. */
    for (int ch = 0; ch < 3; ch++) {
        int leader = -1, elected0 = 0;
        for (int i = 0; i < n; i++) {
            if (elector_is_leader(g_hc[i].el)) leader = i;
            elected0 += g_hc[i].elected;
        }
        ASSERT(leader >= 0);
        double ev0 = metric(port, "etcd_debugging_mvcc_events_total");
        ASSERT(ev0 >= 0);
        ASSERT_OK(elector_resign(g_hc[leader].el));
        end = tl_now() + 30;
        while (leaders() == 0 && tl_now() < end)
            elector_etcd_run_once(e, 20);
        ASSERT_EQ(leaders(), 1);
        pump(e, 300);
        double ev = metric(port, "etcd_debugging_mvcc_events_total") - ev0;
        tl_log("change %d: %.0f watch events sent by etcd", ch + 1, ev);
        ASSERT(ev >= 1 && ev <= 2);
        /* One ELECTED in all: the successor's; nobody else woke to win. */
        int elected1 = 0;
        for (int i = 0; i < n; i++)
            elected1 += g_hc[i].elected;
        ASSERT_EQ(elected1, elected0 + 1);
        ASSERT_EQ(leaders(), 1);
    }
    for (int i = 0; i < n; i++) {
        elector_election_free(g_hc[i].el);
        elector_session_close(g_hc[i].s);
    }
    pump(e, 500);
    elector_etcd_free(e);
    free(g_hc);
    eh_stop(cl);
}

/* A session's keepalive round trips are counted, each in the bucket of its
 * length (elector_session_get_stats: the buckets add up to the count, the
 * last round trip is in the bucket its length belongs to, the sum is at least
 * the last). */
TEST_WITH_TIMEOUT(keepalive_round_trips_are_counted_in_their_buckets, 60)
{
    eh_cluster *cl = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(cl);
    elector_etcd *e = eu_client(eh_endpoints(cl));
    ASSERT_NOT_NULL(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 2; /* a keepalive every 2/3 s */
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    elector_session_stats st;
    double t0 = tl_now(), end = t0 + 10;
    do {
        elector_etcd_run_once(e, 50);
        elector_session_get_stats(s, &st);
    } while (st.renewals < 3 && tl_now() < end);
    ASSERT_GE(st.renewals, 3);
    /* Paced at TTL/3 from the grant (3 renewals: about 2 s), not sooner (a
     * busy machine only makes them later). */
    ASSERT_GT(tl_now() - t0, 1.2);
    uint64_t sum = 0;
    for (int i = 0; i < ELECTOR_RTT_BUCKETS; i++)
        sum += st.rtt_buckets[i];
    tl_log("%llu round trips, last %.3f ms, mean %.3f ms",
           (unsigned long long)st.rtt_count, st.last_rtt_ns / 1e6,
           st.rtt_count ? st.rtt_sum_ns / 1e6 / (double)st.rtt_count : 0.0);
    ASSERT_GE(st.rtt_count, 3);
    ASSERT_EQ(st.rtt_count, sum);
    ASSERT_GT(st.last_rtt_ns, 0);
    ASSERT_GE(st.rtt_sum_ns, st.last_rtt_ns);
    int b = 0;
    while (b < ELECTOR_RTT_BUCKETS - 1 &&
           st.last_rtt_ns > elector_rtt_bounds_us[b] * 1000)
        b++;
    ASSERT_GE(st.rtt_buckets[b], 1);
    ASSERT_OK(elector_session_close_sync(s, 5000));
    elector_etcd_free(e);
    eh_stop(cl);
}
