/* SPDX-License-Identifier: MIT */
/* many — many elections on one session in one process: what holding them costs.
 *
 * One client, one session (lease, TTL 10 s by default), COUNT elections with
 * distinct names; this process is the only candidate of each, so all lead (each
 * leader watches its own key). Once all are elected and the process has been
 * quiet for a second, it measures over an idle window of S seconds:
 *   RSS (VmRSS, and the baseline before the first election), threads,
 *   CPU per second (getrusage), requests per second sent by the client
 *   (elector_etcd_get_stats, keepalives separately) and messages per second
 *   received by etcd (grpc_server_msg_received_total over all members).
 * Setup ends when every election is elected (setup_ms) and etcd has confirmed
 * every leader's watch on its own key (watched_ms); the quiet second and the
 * idle window start only after both. watch_wait_max_ms: the longest any watch
 * took to be confirmed after it was asked for (ELECTED comes before it).
 * Then it waits until etcd has no "slow" (unsynced) watchers left: a watch
 * created at a past revision is caught up by etcd in batches
 * (slow_watchers_at_watched, synced_ms).
 * lib_retries: requests the library sent again after transient errors. A
 * session lost at any point ends the run with an error.
 *
 *   many --endpoints E --metrics M1,M2,M3 --count N [--idle-s S] [--ttl T]
 *        [--sessions K]
 *
 * --sessions K: K sessions (leases) on the one client instead of one; election i
 * campaigns on session i % K. --count 0 holds sessions only. Setup then starts
 * with the K grants (sessions_ms: all granted); the idle window shows their
 * keepalives (K / (TTL/3) per second expected, on the client's one shared
 * LeaseKeepAlive stream). A session lost at any time ends the run.
 *
 * The library retries transient errors itself (etcd's "too many requests"
 * among them); a campaign that still comes back FAILED with
 * ELECTOR_EUNAVAILABLE is started again after 200 ms and counted
 * (campaign_retries: 0 expected).
 *
 * Prints one "many count=..." line.
 */
#include <signal.h>
#include "bench_util.h"
#include "elector/election.h"

static int g_elected, g_resigned, g_retries;
static elector_election **g_retry; /* campaigns to start again (etcd pushed back) */
static int g_nretry;
static char g_first_failure[256];

static void on_session(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s;
    if (ev->type == ELECTOR_EV_SESSION_LOST)
        bu_die("session %d lost: %s", (int)(intptr_t)ud, ev->detail);
}

static void on_event(elector_election *el, const elector_event *ev, void *ud)
{
    (void)ud;
    if (ev->type == ELECTOR_EV_ELECTED)
        g_elected++;
    else if (ev->type == ELECTOR_EV_RESIGNED)
        g_resigned++;
    else if (ev->type == ELECTOR_EV_FAILED && ev->reason == ELECTOR_EUNAVAILABLE) {
        /* e.g. "etcdserver: too many requests" when 10000 campaigns arrive at
         * once: what an application does, campaign again a little later */
        if (!g_first_failure[0])
            snprintf(g_first_failure, sizeof(g_first_failure), "%s", ev->detail);
        g_retries++;
        g_retry[g_nretry++] = el;
    } else if (ev->type != ELECTOR_EV_WAITING)
        bu_die("unexpected event %s (%s): %s", elector_event_name(ev->type),
               elector_err_name(ev->reason), ev->detail);
}

static void usage(void)
{
    fprintf(stderr, "usage: many --endpoints E --metrics M1,M2,.. --count N [--idle-s S] "
                    "[--ttl T] [--sessions K]\n");
    exit(2);
}

static uint64_t reqs(elector_etcd *e, int rpc)
{
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    if (rpc >= 0) return st.requests[rpc];
    uint64_t s = 0;
    for (int r = 0; r < ELECTOR_RPC_COUNT_; r++)
        s += st.requests[r];
    return s;
}

int main(int argc, char **argv)
{
    const char *endpoints = "127.0.0.1:2379", *metrics = NULL;
    int count = 1, idle_s = 10, ttl = 10, nsess = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *o = argv[i], *v = argv[++i];
        if (!strcmp(o, "--endpoints"))
            endpoints = v;
        else if (!strcmp(o, "--metrics"))
            metrics = v;
        else if (!strcmp(o, "--count"))
            count = atoi(v);
        else if (!strcmp(o, "--idle-s"))
            idle_s = atoi(v);
        else if (!strcmp(o, "--ttl"))
            ttl = atoi(v);
        else if (!strcmp(o, "--sessions"))
            nsess = atoi(v);
        else
            usage();
    }
    if (!metrics || count < 0 || (count < 1 && nsess < 2) || idle_s < 1 || nsess < 1)
        usage();
    signal(SIGPIPE, SIG_IGN);

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.request_timeout_ms = 60000;
    elector_etcd *e = elector_etcd_new(&cfg);
    if (!e || elector_etcd_err(e)) bu_die("elector_etcd_new");
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = ttl;
    long rss_none = bu_status_field(0, "VmRSS");
    int64_t ts0 = elector_now_ns();
    elector_session **ss = bu_xcalloc((size_t)nsess, sizeof(*ss));
    for (int i = 0; i < nsess; i++) {
        ss[i] = elector_session_new(e, &sc, on_session, (void *)(intptr_t)i);
        if (!ss[i]) bu_die("session_new");
    }
    int rc = 0;
    for (int i = 0; i < nsess; i++) {
        /* the grant is retried while etcd is busy; the others progress meanwhile */
        rc = elector_session_wait(ss[i], 60000);
        if (rc)
            bu_die("session %d: %s (%s)", i, elector_strerror(rc),
                   elector_etcd_errstr(e));
    }
    double sessions_ms = (double)(elector_now_ns() - ts0) / 1e6;
    long rss_base = bu_status_field(0, "VmRSS");

    int64_t t0 = elector_now_ns();
    elector_election **els = bu_xcalloc((size_t)count + 1, sizeof(*els));
    g_retry = bu_xcalloc((size_t)count + 1, sizeof(*g_retry));
    for (int i = 0; i < count; i++) {
        char name[96];
        snprintf(name, sizeof(name), "many-%d-%d/e%d", (int)getpid(), count, i);
        els[i] = elector_election_new(ss[i % nsess], name, on_event, NULL);
        if (!els[i]) bu_die("election_new");
        rc = elector_campaign(els[i], "v", 1);
        if (rc) bu_die("campaign: %s", elector_strerror(rc));
    }
    int64_t retry_at = 0;
    while (g_elected < count) {
        elector_etcd_run_once(e, 20);
        if (g_nretry && !retry_at) retry_at = elector_now_ns() + 200000000;
        if (g_nretry && elector_now_ns() >= retry_at) {
            for (int i = 0; i < g_nretry; i++)
                if ((rc = elector_campaign(g_retry[i], "v", 1)))
                    bu_die("campaign: %s", elector_strerror(rc));
            g_nretry = 0;
            retry_at = 0;
        }
        if (elector_now_ns() - t0 > 300 * 1000000000LL)
            bu_die("not all elected after 300 s");
    }
    double setup_ms = (double)(elector_now_ns() - t0) / 1e6;
    /* Every leader's watch on its own key confirmed by etcd. */
    int64_t watch_wait_max = 0;
    uint64_t retries = 0;
    for (int i = 0; i < count; i++) {
        elector_election_stats st;
        for (;;) {
            elector_election_get_stats(els[i], &st);
            if (st.watching) break;
            elector_etcd_run_once(e, 20);
            if (elector_now_ns() - t0 > 600 * 1000000000LL)
                bu_die("not all watches confirmed after 600 s");
        }
        if (st.watch_wait_ns > watch_wait_max) watch_wait_max = st.watch_wait_ns;
    }
    double watched_ms = (double)(elector_now_ns() - t0) / 1e6;
    /* etcd catches up watches created at a past revision in batches: until it
     * has (no "slow" watchers left), it is not idle. */
    double slow = bu_gauge(metrics, "etcd_debugging_mvcc_slow_watcher_total");
    double slow_at_watched = slow;
    while (slow > 0) {
        int64_t q0 = elector_now_ns() + 200000000LL;
        while (elector_now_ns() < q0)
            elector_etcd_run_once(e, 100);
        slow = bu_gauge(metrics, "etcd_debugging_mvcc_slow_watcher_total");
        if (elector_now_ns() - t0 > 600 * 1000000000LL)
            bu_die("etcd's watchers not synced after 600 s");
    }
    double synced_ms = (double)(elector_now_ns() - t0) / 1e6;
    for (int i = 0; i < count; i++) {
        elector_election_stats st;
        elector_election_get_stats(els[i], &st);
        retries += st.retries;
    }
    int64_t q = elector_now_ns() + 1000000000LL;
    while (elector_now_ns() < q)
        elector_etcd_run_once(e, 100);

    /* the idle window */
    bu_msgs m0, m1, d;
    bu_scrape(metrics, &m0);
    uint64_t r0 = reqs(e, -1), k0 = reqs(e, ELECTOR_RPC_LEASE_KEEPALIVE);
    int64_t c0 = bu_self_cpu_us(), w0 = elector_now_ns();
    int64_t end = w0 + (int64_t)idle_s * 1000000000LL;
    while (elector_now_ns() < end) {
        int64_t left = (end - elector_now_ns()) / 1000000;
        elector_etcd_run_once(e, left > 0 ? left : 1);
    }
    int64_t c1 = bu_self_cpu_us(), w1 = elector_now_ns();
    uint64_t r1 = reqs(e, -1), k1 = reqs(e, ELECTOR_RPC_LEASE_KEEPALIVE);
    bu_scrape(metrics, &m1);
    bu_msgs_diff(&m1, &m0, &d);
    double secs = (double)(w1 - w0) / 1e9;
    double srv_all = 0;
    for (int i = 0; i < d.n; i++)
        srv_all += d.count[i];
    int alive = 0;
    for (int i = 0; i < count; i++)
        alive += elector_is_leader(els[i]);
    uint64_t renewals = 0, ka_failures = 0, rtt_n = 0;
    int64_t rtt_sum = 0;
    int top = 0; /* the highest round-trip bucket any session saw */
    for (int i = 0; i < nsess; i++) {
        elector_session_stats st;
        elector_session_get_stats(ss[i], &st);
        renewals += st.renewals;
        ka_failures += st.failures;
        rtt_n += st.rtt_count;
        rtt_sum += st.rtt_sum_ns;
        for (int b = top + 1; b < ELECTOR_RTT_BUCKETS; b++)
            if (st.rtt_buckets[b]) top = b;
    }
    double ka_rtt_max_ms =
        top < ELECTOR_RTT_BUCKETS - 1 ? (double)elector_rtt_bounds_us[top] / 1000.0 : -1;
    if (nsess > 1)
        printf("many_sessions sessions=%d count=%d ttl_s=%d sessions_ms=%.1f "
               "rss_none_kb=%ld rss_sessions_kb=%ld per_session_kb=%.2f renewals=%llu "
               "ka_failures=%llu ka_rtt_mean_ms=%.2f ka_rtt_max_ms_le=%.1f\n",
               nsess, count, ttl, sessions_ms, rss_none, rss_base,
               (double)(rss_base - rss_none) / nsess, (unsigned long long)renewals,
               (unsigned long long)ka_failures,
               rtt_n ? (double)rtt_sum / (double)rtt_n / 1e6 : 0.0, ka_rtt_max_ms);
    printf("many count=%d ttl_s=%d setup_ms=%.1f watched_ms=%.1f watch_wait_max_ms=%.1f "
           "slow_watchers_at_watched=%.0f synced_ms=%.1f lib_retries=%llu "
           "campaign_retries=%d leaders=%d "
           "rss_base_kb=%ld rss_kb=%ld hwm_kb=%ld "
           "threads=%ld idle_s=%.1f cpu_ms_per_s=%.3f client_req_per_s=%.3f "
           "client_ka_per_s=%.3f "
           "server_msgs_per_s=%.3f server_ka_per_s=%.3f server_other_per_s=%.3f\n",
           count, ttl, setup_ms, watched_ms, (double)watch_wait_max / 1e6,
           slow_at_watched, synced_ms, (unsigned long long)retries, g_retries, alive,
           rss_base, bu_status_field(0, "VmRSS"), bu_status_field(0, "VmHWM"),
           bu_status_field(0, "Threads"), secs, (double)(c1 - c0) / 1000.0 / secs,
           (double)(r1 - r0) / secs, (double)(k1 - k0) / secs, srv_all / secs,
           bu_msgs_get(&d, "LeaseKeepAlive") / secs, bu_msgs_total_no_ka(&d) / secs);
    printf("many_methods count=%d server_msgs_per_s_by_method=", count);
    for (int i = 0, k = 0; i < d.n; i++)
        if (d.count[i] > 0)
            printf("%s%s:%.3f", k++ ? "," : "", d.method[i], d.count[i] / secs);
    printf("\n");
    if (g_first_failure[0])
        printf("many_note count=%d first_campaign_failure=\"%s\"\n", count,
               g_first_failure);
    fflush(stdout);

    /* clean up: resign everything, revoke the lease */
    for (int i = 0; i < count; i++)
        elector_election_free(els[i]);
    for (int i = 0; i < nsess; i++)
        elector_session_close(ss[i]);
    /* The revokes are sent from the loop: run it until every one has gone out
     * and been answered (no request in flight for a second), at most 120 s.
     * (Before, with one session, the client was freed at once and the revoke
     * never left: the run's keys and lease stayed on etcd for the TTL and the
     * lease expired, all its keys in one apply, during the next run.) */
    elector_etcd_stats st0;
    elector_etcd_get_stats(e, &st0);
    int64_t q2 = elector_now_ns() + 120000000000LL, quiet = elector_now_ns();
    uint64_t last = bu_client_reqs(&e, 1, false);
    while (elector_now_ns() < q2) {
        elector_etcd_run_once(e, 50);
        elector_etcd_stats st;
        elector_etcd_get_stats(e, &st);
        uint64_t r = bu_client_reqs(&e, 1, false);
        if (r != last) last = r, quiet = elector_now_ns();
        if (st.requests[ELECTOR_RPC_LEASE_REVOKE] -
                    st0.requests[ELECTOR_RPC_LEASE_REVOKE] >=
                (uint64_t)nsess &&
            elector_now_ns() - quiet > 1000000000LL)
            break;
    }
    elector_etcd_free(e);
    free(els);
    free(ss);
    return 0;
}
