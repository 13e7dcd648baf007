/* SPDX-License-Identifier: MIT */
/* fault-candidate: one candidate of the fault-injection suite, as its own process.
 *
 * It campaigns for an election on the library and writes every change of its
 * belief, one line each, to its own log file (CLOCK_MONOTONIC nanoseconds first):
 *
 *   T start PID ID                    process started
 *   T elected TOKEN KEY               ELECTED (T = the event's mono_ns)
 *   T lost TOKEN KEY REASON           LOST (T = when the belief ended; the library
 *                                     caps it at the validity deadline)
 *   T resigned TOKEN KEY              RESIGNED (T = when resign was called)
 *   T notleader TOKEN KEY LAST_TRUE   sampling: elector_is_leader() turned false
 *                                     (T = first false sample, LAST_TRUE = the
 *                                     last sample that said true)
 *   T deadline TOKEN DEADLINE         while leading: the session's validity
 *                                     deadline moved (a renewal)
 *   T waiting PRED_KEY | T failed REASON | T session_lost REASON
 *   T restart                         new session + campaign after a loss/failure
 *   T endpoint EP                     connected endpoint changed ("-": none)
 *   T rw TOKEN SEQ ok|rej MAX|err     fenced-resource write; T = when
 *                                     elector_is_leader() was checked before it
 *   T txn TOKEN SEQ RESULT T_DONE     guarded Txn Put of the resource key;
 *                                     T = when it was sent; RESULT ok, cmpfail,
 *                                     an error name, or refused:ERR (not sent)
 *   T rss KB | T exit STATUS
 *   T stats txn N watch N keepalive N connects N   requests sent (every 10 s, exit)
 *   T stall TOKEN MS | T stall_end TOKEN   (--stall-after N --stall-ms MS: once
 *                                     per process, at the N-th write of a term,
 *                                     the whole process pauses after checking
 *                                     leadership and queueing the Txn, before
 *                                     the resource write: a GC pause at the
 *                                     worst moment)
 *
 * While it believes it leads it writes every --write-ms: (a) "W TOKEN SEQ ID" to
 * the fenced resource (fault-resource, a unix SEQPACKET socket), synchronously,
 * and (b) elector_guarded_txn Put KEY="TOKEN SEQ" (one in flight at a time).
 * After any loss or failed campaign it closes the session and campaigns again
 * on a new one. SIGTERM/SIGINT: resign, revoke, exit 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "elector/election.h"
#include "futil.h"

static struct {
    const char *endpoints, *election, *log_path, *resource, *txn_key;
    int id;
    int ttl_s;
    int write_ms;
    int dial_ms, request_ms;
    int64_t auto_sync_ms; /* --auto-sync-ms: the client's auto_sync_interval_ms */
    const char *cacert, *cert, *key; /* TLS files (a TLS run: cert-rotate) */
    int stall_after, stall_ms;       /* fault injection: one stall per process */
    bool release_on_exit;            /* the session's release helper (kill-release) */
} opt = {.ttl_s = 2, .write_ms = 20, .dial_ms = 1000, .request_ms = 1000};

static volatile sig_atomic_t g_term;
static int g_log = -1;

static struct {
    elector_etcd *etcd;
    elector_session *s;
    elector_election *el;
    char value[64];
    bool need_restart;
    int64_t restart_at;
    int restarts_in_row;
    bool terminating, resign_done;
    /* belief sampling */
    bool was_leader;
    int64_t last_true_ns, logged_deadline;
    int64_t token;
    char key[256];
    /* writes */
    uint64_t seq;
    int64_t next_write;
    bool txn_busy, stalled;
    int writes_in_term;
    int64_t txn_sent, txn_token;
    uint64_t txn_seq;
    int res_fd;
    int64_t res_retry_at;
    char endpoint[160];
    int64_t next_rss;
} C = {.res_fd = -1};

static void on_signal(int sig)
{
    (void)sig;
    g_term = 1;
}

static void key_str(char *dst, size_t cap, const uint8_t *k, size_t n)
{
    if (n >= cap) n = cap - 1;
    for (size_t i = 0; i < n; i++)
        dst[i] = (k[i] > ' ' && k[i] < 127) ? (char)k[i] : '?';
    dst[n] = '\0';
    if (n == 0 && cap > 1) {
        dst[0] = '-';
        dst[1] = '\0';
    }
}

/* ---- the belief log (elector_election_set_log) ---------------------------------- */

static void log_hook(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el, (void)ud;
    char key[256];
    key_str(key, sizeof key, ev->key, ev->key_len);
    switch (ev->type) {
    case ELECTOR_EV_ELECTED:
        fu_line(g_log, "%" PRId64 " elected %" PRId64 " %s", ev->mono_ns, ev->token, key);
        break;
    case ELECTOR_EV_LOST:
        fu_line(g_log, "%" PRId64 " lost %" PRId64 " %s %s", ev->mono_ns, ev->token, key,
                elector_err_name(ev->reason));
        break;
    case ELECTOR_EV_RESIGNED:
        fu_line(g_log, "%" PRId64 " resigned %" PRId64 " %s", ev->mono_ns, ev->token,
                key);
        break;
    default:
        break;
    }
}

static void schedule_restart(void)
{
    if (C.need_restart) return;
    C.need_restart = true;
    /* Back off a little when campaigns keep failing (etcd unreachable). */
    int64_t d = 50LL << (C.restarts_in_row < 4 ? C.restarts_in_row : 4);
    C.restart_at = fu_now_ns() + d * 1000000;
}

static void el_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el, (void)ud;
    char key[256];
    switch (ev->type) {
    case ELECTOR_EV_WAITING:
        key_str(key, sizeof key, ev->key, ev->key_len);
        fu_line(g_log, "%" PRId64 " waiting %s", ev->mono_ns, key);
        C.restarts_in_row = 0;
        break;
    case ELECTOR_EV_ELECTED:
        C.restarts_in_row = 0;
        break;
    case ELECTOR_EV_FAILED:
        fu_line(g_log, "%" PRId64 " failed %s", ev->mono_ns,
                elector_err_name(ev->reason));
        if (C.terminating)
            C.resign_done = true;
        else
            schedule_restart();
        break;
    case ELECTOR_EV_LOST:
        if (C.terminating)
            C.resign_done = true;
        else
            schedule_restart();
        break;
    case ELECTOR_EV_RESIGNED:
        C.resign_done = true;
        break;
    default:
        break;
    }
}

static void session_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s, (void)ud;
    fu_line(g_log, "%" PRId64 " session_lost %s", ev->mono_ns,
            elector_err_name(ev->reason));
    if (!C.terminating) schedule_restart();
}

/* ---- session + campaign ----------------------------------------------------------- */

static void drop_session(void)
{
    if (C.el) elector_election_free(C.el);
    C.el = NULL;
    if (C.s) elector_session_close(C.s); /* revoke, best effort, sent by the loop */
    C.s = NULL;
    C.txn_busy = false; /* a freed election never calls back */
}

static void start_session(void)
{
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = opt.ttl_s;
    sc.release_on_exit = opt.release_on_exit;
    C.need_restart = false;
    C.s = elector_session_new(C.etcd, &sc, session_cb, NULL);
    if (C.s) C.el = elector_election_new(C.s, opt.election, el_cb, NULL);
    if (C.el) elector_election_set_log(C.el, log_hook, NULL);
    int rc = C.el ? elector_campaign(C.el, C.value, strlen(C.value)) : ELECTOR_ENOMEM;
    if (rc) {
        fu_line(g_log, "%" PRId64 " failed %s", fu_now_ns(), elector_err_name(rc));
        drop_session();
        C.restarts_in_row++;
        schedule_restart();
    }
}

/* ---- the fenced resource ----------------------------------------------------------- */

static int resource_connect(void)
{
    if (C.res_fd >= 0) return 0;
    if (!opt.resource || fu_now_ns() < C.res_retry_at) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", opt.resource);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        C.res_retry_at = fu_now_ns() + 200000000;
        return -1;
    }
    C.res_fd = fd;
    return 0;
}

/* One synchronous write; t0 is when elector_is_leader() said true just before. */
static void resource_write(int64_t t0, int64_t token, uint64_t seq)
{
    if (resource_connect() != 0) {
        fu_line(g_log, "%" PRId64 " rw %" PRId64 " %" PRIu64 " err noconn", t0, token,
                seq);
        return;
    }
    char msg[96], rep[64];
    int n = snprintf(msg, sizeof msg, "W %" PRId64 " %" PRIu64 " %d", token, seq, opt.id);
    ssize_t got = -1;
    if (send(C.res_fd, msg, (size_t)n, MSG_NOSIGNAL) == n) {
        struct pollfd p = {.fd = C.res_fd, .events = POLLIN};
        if (poll(&p, 1, 1000) == 1) got = recv(C.res_fd, rep, sizeof rep - 1, 0);
    }
    if (got <= 0) {
        fu_line(g_log, "%" PRId64 " rw %" PRId64 " %" PRIu64 " err io", t0, token, seq);
        close(C.res_fd);
        C.res_fd = -1;
        return;
    }
    rep[got] = '\0';
    if (rep[0] == 'A')
        fu_line(g_log, "%" PRId64 " rw %" PRId64 " %" PRIu64 " ok", t0, token, seq);
    else
        fu_line(g_log, "%" PRId64 " rw %" PRId64 " %" PRIu64 " rej %s", t0, token, seq,
                rep[0] == 'R' && rep[1] == ' ' ? rep + 2 : "?");
}

/* ---- guarded Txn ---------------------------------------------------------------- */

static void txn_done(elector_election *el, int err, const Etcdserverpb__TxnResponse *resp,
                     void *ud)
{
    (void)el, (void)ud;
    const char *res =
        err == 0 ? (resp && resp->succeeded ? "ok" : "cmpfail") : elector_err_name(err);
    fu_line(g_log, "%" PRId64 " txn %" PRId64 " %" PRIu64 " %s %" PRId64, C.txn_sent,
            C.txn_token, C.txn_seq, res, fu_now_ns());
    C.txn_busy = false;
}

static void guarded_put(int64_t token, uint64_t seq)
{
    if (C.txn_busy || !opt.txn_key) return;
    char val[64];
    int n = snprintf(val, sizeof val, "%" PRId64 " %" PRIu64, token, seq);
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key.data = (uint8_t *)opt.txn_key;
    put.key.len = strlen(opt.txn_key);
    put.value.data = (uint8_t *)val;
    put.value.len = (size_t)n;
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = {&op};
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op.request_put = &put;
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_success = 1;
    txn.success = ops;
    C.txn_sent = fu_now_ns();
    C.txn_token = token;
    C.txn_seq = seq;
    int rc = elector_guarded_txn(C.el, &txn, txn_done, NULL);
    if (rc == 0)
        C.txn_busy = true;
    else
        fu_line(g_log, "%" PRId64 " txn %" PRId64 " %" PRIu64 " refused:%s %" PRId64,
                C.txn_sent, token, seq, elector_err_name(rc), fu_now_ns());
}

static void leader_writes(void)
{
    int64_t t0 = fu_now_ns();
    if (!C.el || !elector_is_leader(C.el)) return;
    int64_t token = elector_election_token(C.el);
    uint64_t seq = ++C.seq;
    guarded_put(token, seq); /* checks elector_is_leader() again itself; queued */
    if (opt.stall_ms > 0 && !C.stalled && ++C.writes_in_term >= opt.stall_after) {
        /* A pause at the worst moment: leadership checked, Txn queued, the
         * resource write not yet sent. Nothing runs meanwhile, not even renewals. */
        C.stalled = true;
        fu_line(g_log, "%" PRId64 " stall %" PRId64 " %d", fu_now_ns(), token,
                opt.stall_ms);
        fu_msleep(opt.stall_ms);
        fu_line(g_log, "%" PRId64 " stall_end %" PRId64, fu_now_ns(), token);
    }
    resource_write(t0, token, seq);
    C.next_write = t0 + (int64_t)opt.write_ms * 1000000;
}

/* ---- sampling the belief ---------------------------------------------------------- */

static void sample(void)
{
    int64_t t0 = fu_now_ns();
    bool lead = C.el && elector_is_leader(C.el);
    int64_t t1 = fu_now_ns();
    if (lead) {
        if (!C.was_leader) {
            size_t kl = 0;
            const uint8_t *k = elector_election_key(C.el, &kl);
            key_str(C.key, sizeof C.key, k, kl);
            C.token = elector_election_token(C.el);
            C.next_write = 0; /* the first fenced write goes out at once */
            C.writes_in_term = 0;
        }
        C.last_true_ns = t0;
        int64_t d = elector_session_deadline_ns(C.s);
        if (d != C.logged_deadline) {
            fu_line(g_log, "%" PRId64 " deadline %" PRId64 " %" PRId64, t0, C.token, d);
            C.logged_deadline = d;
        }
    } else if (C.was_leader) {
        fu_line(g_log, "%" PRId64 " notleader %" PRId64 " %s %" PRId64, t1, C.token,
                C.key, C.last_true_ns);
        C.logged_deadline = 0;
    }
    C.was_leader = lead;
}

static void note_endpoint(void)
{
    const char *ep = elector_etcd_current_endpoint(C.etcd);
    if (!ep || !*ep) ep = "-";
    if (strcmp(ep, C.endpoint) != 0) {
        snprintf(C.endpoint, sizeof C.endpoint, "%s", ep);
        fu_line(g_log, "%" PRId64 " endpoint %s", fu_now_ns(), C.endpoint);
    }
}

/* Requests sent so far: watch creates/cancels count how often waiters re-watched
 * (a compacted watch start makes them read and watch again). */
static void log_stats(void)
{
    elector_etcd_stats st;
    elector_etcd_get_stats(C.etcd, &st);
    fu_line(g_log,
            "%" PRId64 " stats txn %" PRIu64 " watch %" PRIu64 " keepalive %" PRIu64
            " connects %" PRIu64,
            fu_now_ns(), st.requests[ELECTOR_RPC_TXN], st.requests[ELECTOR_RPC_WATCH],
            st.requests[ELECTOR_RPC_LEASE_KEEPALIVE], st.connects);
}

/* ---- main ------------------------------------------------------------------------- */

static _Noreturn void usage(const char *argv0, int status)
{
    fprintf(
        status ? stderr : stdout,
        "usage: %s --id N --endpoints LIST --election NAME --log FILE\n"
        "          [--resource SOCKET] [--txn-key KEY] [--ttl S] [--write-ms MS]\n"
        "          [--release-on-exit] [--auto-sync-ms MS]\n"
        "          [--cacert FILE --cert FILE --key FILE]\n"
        "          [--dial-ms MS] [--request-ms MS] [--stall-after N --stall-ms MS]\n",
        argv0);
    exit(status);
}

static void parse(int argc, char **argv)
{
    static const struct option lo[] = {{"id", required_argument, 0, 'i'},
                                       {"endpoints", required_argument, 0, 'e'},
                                       {"election", required_argument, 0, 'n'},
                                       {"log", required_argument, 0, 'l'},
                                       {"resource", required_argument, 0, 'r'},
                                       {"txn-key", required_argument, 0, 'k'},
                                       {"ttl", required_argument, 0, 't'},
                                       {"write-ms", required_argument, 0, 'w'},
                                       {"dial-ms", required_argument, 0, 'd'},
                                       {"request-ms", required_argument, 0, 'q'},
                                       {"stall-after", required_argument, 0, 'A'},
                                       {"stall-ms", required_argument, 0, 'M'},
                                       {"release-on-exit", no_argument, 0, 'R'},
                                       {"auto-sync-ms", required_argument, 0, 'S'},
                                       {"cacert", required_argument, 0, 'C'},
                                       {"cert", required_argument, 0, 'E'},
                                       {"key", required_argument, 0, 'K'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'i':
            opt.id = atoi(optarg);
            break;
        case 'e':
            opt.endpoints = optarg;
            break;
        case 'n':
            opt.election = optarg;
            break;
        case 'l':
            opt.log_path = optarg;
            break;
        case 'r':
            opt.resource = optarg;
            break;
        case 'k':
            opt.txn_key = optarg;
            break;
        case 't':
            opt.ttl_s = atoi(optarg);
            break;
        case 'w':
            opt.write_ms = atoi(optarg);
            break;
        case 'd':
            opt.dial_ms = atoi(optarg);
            break;
        case 'q':
            opt.request_ms = atoi(optarg);
            break;
        case 'A':
            opt.stall_after = atoi(optarg);
            break;
        case 'M':
            opt.stall_ms = atoi(optarg);
            break;
        case 'C':
            opt.cacert = optarg;
            break;
        case 'E':
            opt.cert = optarg;
            break;
        case 'K':
            opt.key = optarg;
            break;
        case 'S':
            opt.auto_sync_ms = atoll(optarg);
            break;
        case 'R':
            opt.release_on_exit = true;
            break;
        case 'h':
            usage(argv[0], 0);
        default:
            usage(argv[0], 2);
        }
    }
    if (!opt.endpoints || !opt.election || !opt.log_path || opt.ttl_s <= 0 ||
        opt.write_ms <= 0 || optind != argc)
        usage(argv[0], 2);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    g_log = fu_open_log(opt.log_path);
    if (g_log < 0) {
        perror(opt.log_path);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fu_line(g_log, "%" PRId64 " start %d %d", fu_now_ns(), (int)getpid(), opt.id);
    snprintf(C.value, sizeof C.value, "cand-%d", opt.id);

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = opt.endpoints;
    cfg.dial_timeout_ms = opt.dial_ms;
    cfg.request_timeout_ms = opt.request_ms;
    cfg.auto_sync_interval_ms = opt.auto_sync_ms;
    cfg.cacert = opt.cacert;
    cfg.cert = opt.cert;
    cfg.key = opt.key;
    C.etcd = elector_etcd_new(&cfg);
    if (!C.etcd || elector_etcd_err(C.etcd)) {
        fu_line(g_log, "%" PRId64 " exit 1 %s", fu_now_ns(),
                C.etcd ? elector_etcd_errstr(C.etcd) : "out of memory");
        return 1;
    }
    start_session();
    C.next_rss = fu_now_ns() + 1000000000LL; /* first RSS once the client has run */
    int64_t term_deadline = 0;
    for (;;) {
        int64_t now = fu_now_ns();
        int64_t wait = 5;
        if (C.was_leader && C.next_write > now && (C.next_write - now) / 1000000 < wait)
            wait = (C.next_write - now) / 1000000;
        elector_etcd_run_once(C.etcd, wait);
        sample();
        note_endpoint();
        now = fu_now_ns();
        if (g_term && !C.terminating) {
            C.terminating = true;
            term_deadline = now + 3000000000LL;
            if (!C.el || elector_resign(C.el) != 0) C.resign_done = true;
            sample();
        }
        if (C.terminating) {
            if (C.resign_done || now >= term_deadline) break;
            continue;
        }
        if (C.need_restart && now >= C.restart_at) {
            fu_line(g_log, "%" PRId64 " restart", now);
            C.restarts_in_row++;
            drop_session();
            start_session();
            sample();
        }
        if (C.was_leader && now >= C.next_write) leader_writes();
        if (now >= C.next_rss) {
            fu_line(g_log, "%" PRId64 " rss %ld", now, fu_rss_kb());
            log_stats();
            C.next_rss = now + 10000000000LL;
        }
    }
    if (C.el) elector_election_free(C.el);
    if (C.s) elector_session_close_sync(C.s, 1000);
    log_stats();
    elector_etcd_free(C.etcd);
    if (C.res_fd >= 0) close(C.res_fd);
    fu_line(g_log, "%" PRId64 " rss %ld", fu_now_ns(), fu_rss_kb());
    fu_line(g_log, "%" PRId64 " exit 0", fu_now_ns());
    return 0;
}
