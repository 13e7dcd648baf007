/* SPDX-License-Identifier: MIT */
/* herd — the thundering-herd benchmark: N candidates of one election hosted in
 * one process, each with its own session (lease), spread over a few shared
 * elector_etcd clients (connections). It counts what one leadership change costs
 * etcd, and how long it takes, for two designs:
 *
 *   --mode elector  libelector's election: each candidate watches only its
 *                   predecessor (the key just ahead of it in create order).
 *   --mode naive    the naive design from the seeds: everyone watches the one
 *                   leader key and, when it is deleted, races to create it with a
 *                   put-if-absent Txn (CreateRevision(K) == 0 ? Put(K, lease)).
 *
 * One leadership change: the leader resigns (elector_resign; naive: it cancels
 * its watch and deletes the key with a guarded Txn) and a successor wins. For each
 * change the program scrapes etcd's /metrics on every member before the resign and
 * again once everything is quiet, and counts grpc_server_msg_received_total summed
 * over members and methods, LeaseKeepAlive excluded (its traffic depends on time,
 * not on changes). Failover time: from the resign call to the successor's win, on
 * CLOCK_MONOTONIC in this process (elector: the ELECTED event's mono_ns; naive: the
 * winning Txn's reply). Watch events per change: etcd_debugging_mvcc_events_total
 * (events etcd sent to watchers) summed over members, over the same window: 1-2 when
 * only the successor wakes (the leader's delete reaches the successor's watch on its
 * predecessor, and the old leader's watch on its own key if not canceled first),
 * N - 1 or more when a change wakes every waiter. Then the old leader joins again at the
 * back of the queue (outside the counted window; the cost of a join is reported
 * separately), so N stays constant.
 *
 *   herd --endpoints E --metrics M1,M2,M3 --mode elector|naive --n N
 *        [--changes C] [--clients K] [--ttl S] [--out DIR] [--probe 1]
 *
 * --probe 1 (elector mode) splits each failover with timestamps taken in this
 * process: the resign call (t0), the DELETE event on a watch of the election's
 * prefix held by an extra client (when etcd's watch delivered the delete), the
 * candidates' second Txn after t0 (the successor's check; the first is the
 * delete; taken from the clients' request counters, which count a request when
 * its HTTP/2 stream is submitted, so to the resolution of one loop pass), and the
 * successor's ELECTED.
 * After each change (outside the counted window) it times, on the extra idle
 * client, the successor's check as the library sends it (Range of the prefix,
 * max_create_revision, sorted by create revision, limit 1) and a plain Range of
 * one key, and counts keepalives the candidates sent during the failover. The
 * probe watch adds one watch event per change to etcd's count.
 *
 * Prints one "herd mode=... n=..." line; writes the failover samples to
 * DIR/herd_<mode>_<n>.txt (ms, one per line).
 */
#include <poll.h>
#include <signal.h>
#include <time.h>
#include "bench_util.h"
#include "elector/election.h"

enum { C_OUT, C_WAITING, C_LEADER };

typedef struct cand {
    int idx;
    elector_etcd *etcd;
    elector_session *s;
    int state;
    /* elector */
    elector_election *el;
    /* naive */
    elector_watch *w;
    bool watch_created;
    bool racing;
    int64_t rev; /* create revision of the leader key we made */
} cand;

static bool g_naive;
static int g_n, g_k;
static elector_etcd **g_clients;
static cand *g_c;
static char g_name[128]; /* election name (elector) */
static char g_key[160];  /* the one leader key (naive) */
static cand *g_leader;   /* current leader */
static int64_t g_t_elected;
static int g_waiting;      /* candidates currently waiting */
static int g_resigned;     /* RESIGNED events / naive deletes answered */
static int g_races;        /* naive Txns in flight */
static int g_watches_live; /* naive: watches confirmed by etcd and not canceled */
/* --probe: timestamps of one failover (CLOCK_MONOTONIC ns, 0 = not seen yet) */
static elector_etcd *g_probe;
static int64_t g_t_resigned, g_t_deleted, g_t_check;
static uint64_t g_txn_base; /* candidate clients' Txn count before the resign */
static bool g_probe_closing;

/* ---------------------------------------------------------------- loop */

static uint64_t txn_count(void)
{
    uint64_t s = 0;
    for (int i = 0; i < g_k; i++) {
        elector_etcd_stats st;
        elector_etcd_get_stats(g_clients[i], &st);
        s += st.requests[ELECTOR_RPC_TXN];
    }
    return s;
}

static void loop_once(int max_ms)
{
    struct pollfd pfd[64];
    int64_t tmo = max_ms;
    for (int i = 0; i < g_k; i++) {
        pfd[i].fd = elector_etcd_fd(g_clients[i]);
        pfd[i].events = POLLIN;
        int64_t t = elector_etcd_timeout(g_clients[i]);
        if (t >= 0 && t < tmo) tmo = t;
    }
    int np = g_k;
    if (g_probe) {
        pfd[np].fd = elector_etcd_fd(g_probe);
        pfd[np].events = POLLIN;
        int64_t t = elector_etcd_timeout(g_probe);
        if (t >= 0 && t < tmo) tmo = t;
        np++;
    }
    poll(pfd, (nfds_t)np, (int)tmo);
    /* the probe first: its DELETE timestamp is not delayed by the candidates' work */
    if (g_probe) elector_etcd_process(g_probe);
    for (int i = 0; i < g_k; i++) {
        elector_etcd_process(g_clients[i]);
        if (g_probe && g_t_resigned && !g_t_check) {
            if (txn_count() > g_txn_base + 1) g_t_check = bu_mono_ns();
        }
    }
}

/* Runs the loop until done() holds and no client has sent a request (keepalives
 * aside) for quiet_ms. Dies after timeout_ms. */
static void settle(bool (*done)(void), int quiet_ms, int timeout_ms, const char *what)
{
    int64_t start = bu_mono_ns(), last_change = start;
    uint64_t last = bu_client_reqs(g_clients, g_k, false);
    for (;;) {
        loop_once(5);
        int64_t now = bu_mono_ns();
        uint64_t r = bu_client_reqs(g_clients, g_k, false);
        if (r != last) {
            last = r;
            last_change = now;
        }
        if ((!done || done()) && now - last_change >= (int64_t)quiet_ms * 1000000) return;
        if (now - start > (int64_t)timeout_ms * 1000000) {
            int leased = 0, alive = 0;
            for (int i = 0; i < g_n; i++) {
                leased += elector_session_lease(g_c[i].s) != 0;
                alive += elector_session_alive(g_c[i].s);
            }
            fprintf(
                stderr,
                "herd: %d of %d sessions have a lease, %d alive; waiting %d, races %d\n",
                leased, g_n, alive, g_waiting, g_races);
            for (int i = 0; i < g_k; i++)
                fprintf(stderr, "herd: client %d: %s\n", i,
                        elector_etcd_errstr(g_clients[i]));
            bu_die("%s: timeout (%d ms) waiting for %s", g_naive ? "naive" : "elector",
                   timeout_ms, what);
        }
    }
}

/* ---------------------------------------------------------------- elector mode */

static void on_event(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    cand *c = ud;
    switch (ev->type) {
    case ELECTOR_EV_WAITING:
        if (c->state != C_WAITING) g_waiting++;
        c->state = C_WAITING;
        break;
    case ELECTOR_EV_ELECTED:
        if (c->state == C_WAITING) g_waiting--;
        c->state = C_LEADER;
        g_leader = c;
        g_t_elected = ev->mono_ns;
        break;
    case ELECTOR_EV_RESIGNED:
        g_resigned++;
        g_t_resigned = ev->mono_ns;
        break;
    default:
        bu_die("candidate %d: unexpected event %s: %s", c->idx,
               elector_event_name(ev->type), ev->detail ? ev->detail : "");
    }
}

/* ---------------------------------------------------------------- naive mode */

static void race_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    cand *c = ud;
    g_races--;
    c->racing = false;
    if (err) bu_die("naive Txn: %s (%s)", elector_strerror(err), elector_etcd_errstr(e));
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    if (r->succeeded) {
        if (c->state == C_WAITING) g_waiting--;
        c->state = C_LEADER;
        c->rev = r->header ? r->header->revision : 0;
        g_leader = c;
        g_t_elected = bu_mono_ns();
    } else if (c->state != C_WAITING) {
        c->state = C_WAITING;
        g_waiting++;
    }
}

/* Txn(CreateRevision(K) == 0 ? Put(K, value, our lease)) */
static void race(cand *c)
{
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT, *cmps[1] = {&cmp};
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.key.data = (uint8_t *)g_key;
    cmp.key.len = strlen(g_key);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.create_revision = 0;
    char val[32];
    int vl = snprintf(val, sizeof(val), "cand-%d", c->idx);
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key = cmp.key;
    put.value.data = (uint8_t *)val;
    put.value.len = (size_t)vl;
    put.lease = elector_session_lease(c->s);
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = {&op};
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op.request_put = &put;
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_compare = 1;
    txn.compare = cmps;
    txn.n_success = 1;
    txn.success = ops;
    c->racing = true;
    g_races++;
    int rc = elector_etcd_call(c->etcd, ELECTOR_RPC_TXN, &txn.base, NULL, race_done, c);
    if (rc) bu_die("naive Txn: %s", elector_strerror(rc));
}

static void naive_watch_cb(elector_watch *w, int err,
                           const Etcdserverpb__WatchResponse *r, void *ud)
{
    (void)w;
    cand *c = ud;
    if (err) bu_die("naive watch %d: %s", c->idx, elector_strerror(err));
    if (r->created && !c->watch_created) {
        c->watch_created = true;
        g_watches_live++;
    }
    for (size_t i = 0; i < r->n_events; i++)
        if (r->events[i]->type == MVCCPB__EVENT__EVENT_TYPE__DELETE &&
            c->state == C_WAITING && !c->racing)
            race(c);
}

static void naive_watch(cand *c)
{
    Etcdserverpb__WatchCreateRequest wc = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    wc.key.data = (uint8_t *)g_key;
    wc.key.len = strlen(g_key);
    c->watch_created = false;
    c->w = elector_etcd_watch(c->etcd, &wc, naive_watch_cb, c);
    if (!c->w) bu_die("naive watch: %s", elector_strerror(elector_etcd_err(c->etcd)));
}

static void naive_deleted(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m, (void)ud;
    if (err)
        bu_die("naive delete: %s (%s)", elector_strerror(err), elector_etcd_errstr(e));
    g_resigned++;
}

/* The leader leaves: cancel its watch, delete the key if it is still ours. */
static void naive_resign(cand *c)
{
    elector_watch_cancel(c->w);
    c->w = NULL;
    if (c->watch_created) g_watches_live--;
    c->watch_created = false;
    c->state = C_OUT;
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT, *cmps[1] = {&cmp};
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.key.data = (uint8_t *)g_key;
    cmp.key.len = strlen(g_key);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.create_revision = c->rev;
    Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    del.key = cmp.key;
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = {&op};
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    op.request_delete_range = &del;
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_compare = 1;
    txn.compare = cmps;
    txn.n_success = 1;
    txn.success = ops;
    int rc =
        elector_etcd_call(c->etcd, ELECTOR_RPC_TXN, &txn.base, NULL, naive_deleted, c);
    if (rc) bu_die("naive delete: %s", elector_strerror(rc));
}

/* ---------------------------------------------------------------- probe */

static void probe_watch_cb(elector_watch *w, int err,
                           const Etcdserverpb__WatchResponse *r, void *ud)
{
    (void)w, (void)ud;
    if (err && g_probe_closing) return;
    if (err) bu_die("probe watch: %s", elector_strerror(err));
    for (size_t i = 0; i < r->n_events; i++)
        if (r->events[i]->type == MVCCPB__EVENT__EVENT_TYPE__DELETE && !g_t_deleted)
            g_t_deleted = bu_mono_ns();
}

static uint8_t g_pfx[200], g_pend[200];
static size_t g_pfx_len, g_pend_len;

/* Times one Txn on the idle probe client: with check = 1 the successor's check as
 * the library sends it, else a Range of one key. Returns ns; *count = keys seen. */
static int64_t probe_txn(bool check, int64_t max_create, int64_t *count)
{
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key.data = g_pfx;
    rr.key.len = g_pfx_len;
    if (check) {
        rr.range_end.data = g_pend;
        rr.range_end.len = g_pend_len;
        rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
        rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
        rr.max_create_revision = max_create;
        rr.limit = 1;
    }
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = {&op};
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    op.request_range = &rr;
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_success = 1;
    txn.success = ops;
    ProtobufCMessage *resp = NULL;
    int64_t t = bu_mono_ns();
    int rc = elector_etcd_call_sync(g_probe, ELECTOR_RPC_TXN, &txn.base, NULL, &resp);
    t = bu_mono_ns() - t;
    if (rc) bu_die("probe Txn: %s", elector_strerror(rc));
    const Etcdserverpb__TxnResponse *tr = (const void *)resp;
    *count = 0;
    if (tr->n_responses == 1 && tr->responses[0]->response_range)
        *count = tr->responses[0]->response_range->count;
    protobuf_c_message_free_unpacked(resp, NULL);
    return t;
}

/* ---------------------------------------------------------------- both */

static void join(cand *c)
{
    if (g_naive) {
        c->state = C_WAITING; /* joins waiting; counted as waiting once its Txn fails */
        g_waiting++;
        naive_watch(c);
        race(c);
    } else {
        c->state = C_OUT;
        int rc = elector_campaign(c->el, "v", 1);
        if (rc) bu_die("campaign: %s", elector_strerror(rc));
    }
}

static void resign(cand *c)
{
    if (g_naive) {
        naive_resign(c);
    } else {
        c->state = C_OUT;
        int rc = elector_resign(c->el);
        if (rc) bu_die("resign: %s", elector_strerror(rc));
    }
}

static int g_want_waiting;
static int g_want_resigned;
static bool have_leader(void)
{
    return g_leader != NULL;
}
static bool all_waiting(void)
{
    return g_waiting == g_want_waiting && g_races == 0 &&
           (!g_naive || g_watches_live == g_n);
}
static bool change_done(void)
{
    return g_leader != NULL && g_resigned == g_want_resigned && g_races == 0;
}
static bool sessions_ready(void)
{
    for (int i = 0; i < g_n; i++)
        if (!elector_session_lease(g_c[i].s)) return false;
    return true;
}

static void scrape_total(const char *metrics, bu_msgs *m)
{
    bu_scrape(metrics, m);
}

/* A session that ends on its own (its grant failed, or etcd dropped the lease)
 * spoils the measurement: say so. */
static void on_session(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s;
    cand *c = ud;
    bu_die("candidate %d: session lost: %s (%s)", c->idx, elector_err_name(ev->reason),
           ev->detail);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: herd --endpoints E --metrics M1,M2,.. --mode elector|naive --n N "
            "[--changes C] [--clients K] [--ttl S] [--out DIR] [--probe 1]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *endpoints = "127.0.0.1:2379", *metrics = NULL, *mode = "elector",
               *out = NULL;
    int changes = 20, ttl = 10, probe = 0;
    g_n = 10;
    g_k = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *o = argv[i], *v = argv[++i];
        if (!strcmp(o, "--endpoints"))
            endpoints = v;
        else if (!strcmp(o, "--metrics"))
            metrics = v;
        else if (!strcmp(o, "--mode"))
            mode = v;
        else if (!strcmp(o, "--n"))
            g_n = atoi(v);
        else if (!strcmp(o, "--changes"))
            changes = atoi(v);
        else if (!strcmp(o, "--clients"))
            g_k = atoi(v);
        else if (!strcmp(o, "--ttl"))
            ttl = atoi(v);
        else if (!strcmp(o, "--out"))
            out = v;
        else if (!strcmp(o, "--probe"))
            probe = atoi(v);
        else
            usage();
    }
    if (!metrics || g_n < 2 || changes < 1) usage();
    g_naive = !strcmp(mode, "naive");
    if (!g_naive && strcmp(mode, "elector")) usage();
    if (g_k <= 0) g_k = g_n < 4 ? g_n : 4;
    if (g_k > 64) g_k = 64;
    signal(SIGPIPE, SIG_IGN);

    snprintf(g_name, sizeof(g_name), "herd-%s-%d-%d", mode, g_n, (int)getpid());
    snprintf(g_key, sizeof(g_key), "%s/leader", g_name);

    g_clients = bu_xcalloc((size_t)g_k, sizeof(*g_clients));
    for (int i = 0; i < g_k; i++) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = endpoints;
        cfg.request_timeout_ms = 30000;
        g_clients[i] = elector_etcd_new(&cfg);
        if (!g_clients[i] || elector_etcd_err(g_clients[i])) bu_die("elector_etcd_new");
    }

    if (probe && !g_naive) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = endpoints;
        cfg.request_timeout_ms = 30000;
        g_probe = elector_etcd_new(&cfg);
        if (!g_probe || elector_etcd_err(g_probe)) bu_die("elector_etcd_new (probe)");
        g_pfx_len = (size_t)snprintf((char *)g_pfx, sizeof(g_pfx), "%s/", g_name);
        g_pend_len = elector_prefix_end(g_pfx, g_pfx_len, g_pend);
        Etcdserverpb__WatchCreateRequest wc = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        wc.key.data = g_pfx;
        wc.key.len = g_pfx_len;
        wc.range_end.data = g_pend;
        wc.range_end.len = g_pend_len;
        if (!elector_etcd_watch(g_probe, &wc, probe_watch_cb, NULL))
            bu_die("probe watch: %s", elector_strerror(elector_etcd_err(g_probe)));
    }

    /* Sessions: one lease per candidate. */
    int64_t t_setup = bu_mono_ns();
    g_c = bu_xcalloc((size_t)g_n, sizeof(*g_c));
    for (int i = 0; i < g_n; i++) {
        cand *c = &g_c[i];
        c->idx = i;
        c->etcd = g_clients[i % g_k];
        elector_session_config sc;
        elector_session_config_init(&sc);
        sc.ttl_s = ttl;
        c->s = elector_session_new(c->etcd, &sc, on_session, c);
        if (!c->s) bu_die("session_new");
        if (!g_naive) {
            c->el = elector_election_new(c->s, g_name, on_event, c);
            if (!c->el) bu_die("election_new");
        }
    }
    settle(sessions_ready, 0, 20000, "leases");

    /* Candidate 0 leads first, then everybody else queues behind it. */
    if (g_naive) {
        naive_watch(&g_c[0]);
        g_c[0].state = C_WAITING;
        g_waiting++;
        race(&g_c[0]);
    } else {
        join(&g_c[0]);
    }
    settle(have_leader, 0, 30000, "the first leader");
    for (int i = 1; i < g_n; i++)
        join(&g_c[i]);
    g_want_waiting = g_n - 1;
    settle(all_waiting, 200, 600000, "all candidates waiting");
    double setup_s = (double)(bu_mono_ns() - t_setup) / 1e9;

    int64_t *fo = bu_xcalloc((size_t)changes, sizeof(int64_t));
    double *srv = bu_xcalloc((size_t)changes, sizeof(double));
    double *jn = bu_xcalloc((size_t)changes, sizeof(double));
    double ev_sum = 0, ev_max = 0; /* watch events etcd sent, per change */
    uint64_t cli_sum = 0;
    bu_msgs per_method = {0};
    /* --probe: per change, ns from t0 to the DELETE seen, the check sent, ELECTED;
     * the idle check and one-key Range times; keepalives sent in the window */
    int64_t *p_del = bu_xcalloc((size_t)changes, sizeof(int64_t));
    int64_t *p_chk = bu_xcalloc((size_t)changes, sizeof(int64_t));
    int64_t *p_d2c = bu_xcalloc((size_t)changes, sizeof(int64_t));
    int64_t *p_c2e = bu_xcalloc((size_t)changes, sizeof(int64_t));
    int64_t *p_idle = bu_xcalloc((size_t)changes, sizeof(int64_t));
    int64_t *p_one = bu_xcalloc((size_t)changes, sizeof(int64_t));
    int64_t *p_ka = bu_xcalloc((size_t)changes, sizeof(int64_t));
    int64_t p_keys = 0;
    for (int ch = 0; ch < changes; ch++) {
        bu_msgs m0, m1, d, j1, dj;
        uint64_t c0 = bu_client_reqs(g_clients, g_k, false);
        scrape_total(metrics, &m0);
        double ev0 = bu_gauge(metrics, "etcd_debugging_mvcc_events_total");
        cand *old = g_leader;
        g_leader = NULL;
        g_want_resigned = g_resigned + 1;
        uint64_t ka0 = bu_client_reqs(g_clients, g_k, true) - c0;
        g_t_resigned = g_t_deleted = g_t_check = 0;
        g_txn_base = txn_count();
        int64_t t0 = bu_mono_ns();
        resign(old);
        settle(change_done, 100, 60000, "the new leader");
        fo[ch] = g_t_elected - t0;
        if (g_probe) {
            p_del[ch] = g_t_deleted ? g_t_deleted - t0 : -1;
            p_chk[ch] = g_t_check ? g_t_check - t0 : -1;
            p_d2c[ch] = g_t_check && g_t_deleted ? g_t_check - g_t_deleted : -1;
            p_c2e[ch] = g_t_check ? g_t_elected - g_t_check : -1;
            p_ka[ch] = (int64_t)(bu_client_reqs(g_clients, g_k, true) -
                                 bu_client_reqs(g_clients, g_k, false) - ka0);
        }
        scrape_total(metrics, &m1);
        double ev = bu_gauge(metrics, "etcd_debugging_mvcc_events_total") - ev0;
        ev_sum += ev;
        if (ev > ev_max) ev_max = ev;
        cli_sum += bu_client_reqs(g_clients, g_k, false) - c0;
        bu_msgs_diff(&m1, &m0, &d);
        srv[ch] = bu_msgs_total_no_ka(&d);
        for (int i = 0; i < d.n; i++)
            if (strcmp(d.method[i], "LeaseKeepAlive") && d.count[i] > 0)
                bu_msgs_add(&per_method, d.method[i], d.count[i]);
        /* the old leader joins again, at the back */
        join(old);
        settle(all_waiting, 100, 60000, "the old leader to queue again");
        scrape_total(metrics, &j1);
        bu_msgs_diff(&j1, &m1, &dj);
        jn[ch] = bu_msgs_total_no_ka(&dj);
        if (g_probe) {
            /* the check the new leader made: keys created before it (none) */
            int64_t rev = elector_election_token(g_leader->el);
            p_idle[ch] = probe_txn(true, rev > 1 ? rev - 1 : 1, &p_keys);
            int64_t one;
            p_one[ch] = probe_txn(false, 0, &one);
            fprintf(stderr,
                    "herd probe change %d: failover %.2f ms: delete seen "
                    "%.2f, check sent %.2f (+%.2f after the delete), elected %.2f "
                    "(+%.2f after the check); keepalives in the window %lld; idle check "
                    "%.2f ms over %lld keys, one-key Range %.2f ms\n",
                    ch + 1, fo[ch] / 1e6, p_del[ch] / 1e6, p_chk[ch] / 1e6,
                    p_d2c[ch] / 1e6, fo[ch] / 1e6, p_c2e[ch] / 1e6, (long long)p_ka[ch],
                    p_idle[ch] / 1e6, (long long)p_keys, p_one[ch] / 1e6);
        }
        fprintf(stderr, "\rherd %s n=%d: change %d/%d", mode, g_n, ch + 1, changes);
    }
    fprintf(stderr, "\n");

    double smin = srv[0], smax = srv[0], ssum = 0, jsum = 0;
    for (int i = 0; i < changes; i++) {
        if (srv[i] < smin) smin = srv[i];
        if (srv[i] > smax) smax = srv[i];
        ssum += srv[i];
        jsum += jn[i];
    }
    char path[1024];
    if (out) {
        snprintf(path, sizeof(path), "%s/herd_%s_%d.txt", out, mode, g_n);
        bu_write_samples(path, fo, (size_t)changes);
    }
    printf("herd mode=%s n=%d changes=%d clients=%d ttl_s=%d setup_s=%.2f "
           "req_per_change_mean=%.2f "
           "req_per_change_min=%.0f req_per_change_max=%.0f client_req_per_change=%.2f "
           "req_per_join=%.2f events_per_change_mean=%.2f events_per_change_max=%.0f "
           "methods=",
           mode, g_n, changes, g_k, ttl, setup_s, ssum / changes, smin, smax,
           (double)cli_sum / changes, jsum / changes, ev_sum / changes, ev_max);
    for (int i = 0; i < per_method.n; i++)
        printf("%s%s:%.2f", i ? "," : "", per_method.method[i],
               per_method.count[i] / changes);
    bu_summary_ms(stdout, " ", "failover_", fo, (size_t)changes);
    if (g_probe) {
        printf(" probe_keys=%lld", (long long)p_keys);
        bu_summary_ms(stdout, " ", "delete_seen_", p_del, (size_t)changes);
        bu_summary_ms(stdout, " ", "delete_to_check_", p_d2c, (size_t)changes);
        bu_summary_ms(stdout, " ", "check_to_elected_", p_c2e, (size_t)changes);
        bu_summary_ms(stdout, " ", "idle_check_", p_idle, (size_t)changes);
        bu_summary_ms(stdout, " ", "one_key_range_", p_one, (size_t)changes);
        int64_t kmax = 0;
        for (int i = 0; i < changes; i++)
            if (p_ka[i] > kmax) kmax = p_ka[i];
        printf(" keepalives_in_failover_max=%lld", (long long)kmax);
    }
    printf("\n");
    fflush(stdout);

    /* Clean up: revoke every lease (the keys go with them). */
    for (int i = 0; i < g_n; i++) {
        if (g_c[i].el) elector_election_free(g_c[i].el);
        if (g_c[i].w) elector_watch_cancel(g_c[i].w);
    }
    for (int i = 0; i < g_n; i++)
        elector_session_close(g_c[i].s);
    settle(NULL, 300, 60000, "the leases to be revoked");
    for (int i = 0; i < g_k; i++)
        elector_etcd_free(g_clients[i]);
    g_probe_closing = true;
    if (g_probe) elector_etcd_free(g_probe); /* frees its watch */
    free(g_c), free(g_clients), free(fo), free(srv), free(jn);
    free(p_del), free(p_chk), free(p_d2c), free(p_c2e), free(p_idle);
    free(p_one), free(p_ka);
    return 0;
}
