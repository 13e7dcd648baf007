/* elector — the command-line tool. It uses only the library's public API.
 *
 *   elector campaign NAME [VALUE]     campaign, hold leadership until SIGINT/SIGTERM
 *   elector observe NAME              print every leader change
 *   elector leader NAME               print the current leader once
 *   elector run NAME -- CMD [ARGS]    run CMD only while leader
 *
 * One event loop (poll) serves etcd, signals (signalfd), the optional HTTP
 * endpoint, stdin (--proclaim-stdin) and the supervised command. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "elector/election.h"
#include "escape.h"
#include "http.h"
#include "opts.h"
#include "secret.h"
#include "supervise.h"

#ifndef ELECTOR_VERSION
#define ELECTOR_VERSION "0.0.0"
#endif

static const char USAGE[] =
    "Usage: elector [OPTIONS] COMMAND NAME [ARGS]\n"
    "\n"
    "Leader election on etcd v3, compatible with `etcdctl elect`.\n"
    "\n"
    "Commands:\n"
    "  campaign NAME [VALUE]   Campaign for leadership of NAME and hold it until SIGINT or\n"
    "                          SIGTERM (then resign, exit 0). Prints the key and the value\n"
    "                          once elected, as `etcdctl elect` does.\n"
    "  observe NAME            Print every leader change of NAME until interrupted.\n"
    "  leader NAME             Print the current leader of NAME once.\n"
    "  run NAME [--value V] [--grace D] [--restart] -- CMD [ARGS...]\n"
    "                          Campaign; while leader, run CMD with ELECTOR_NAME, ELECTOR_KEY,\n"
    "                          ELECTOR_TOKEN (fencing token) and ELECTOR_LEASE in its\n"
    "                          environment. A guard process owns CMD and every descendant:\n"
    "                          SIGTERM to CMD's group, then the whole tree killed, in time to\n"
    "                          be gone when leadership can no longer be proven, also if\n"
    "                          elector is stopped (^Z) or killed; the lease is released only\n"
    "                          after the tree is gone. stdout is CMD's; elector writes to\n"
    "                          stderr.\n"
    "\n"
    "Options (before or after the command):\n"
    "  --endpoints LIST        etcd endpoints, comma separated: host:port, http://host:port,\n"
    "                          https://host:port (default: $ELECTOR_ENDPOINTS, else\n"
    "                          $ETCDCTL_ENDPOINTS, else 127.0.0.1:2379)\n"
    "  --ttl DURATION          session lease TTL, whole seconds (default 10s)\n"
    "  --dial-timeout DURATION connect timeout per endpoint (default 5s)\n"
    "  --cacert FILE           CA bundle to verify etcd's certificate\n"
    "  --cert FILE, --key FILE client certificate and key\n"
    "  --user NAME             etcd user; the password comes from $ELECTOR_PASSWORD or\n"
    "                          --password-file FILE (never from the command line)\n"
    "  -w, --write-out FORMAT  simple (default) or json: one JSON object per line with\n"
    "                          event, name, key, value, token, lease, mono_ns [, reason]\n"
    "  --http ADDR             serve GET /leader, /healthz[?leader=1], /metrics on ADDR\n"
    "                          (PORT, :PORT or HOST:PORT; host defaults to 127.0.0.1)\n"
    "  --proclaim-stdin        campaign: proclaim each line read from stdin as the new value\n"
    "  --value V               run: the value to campaign with (default: host name)\n"
    "  --grace DURATION        run: SIGTERM this long before the deadline (default\n"
    "                          min(2s, TTL/4))\n"
    "  --restart               run: when CMD exits, resign and campaign again (backoff\n"
    "                          from 200ms to 30s while CMD keeps failing quickly)\n"
    "  --events-fd N           run -w json: events to fd N instead of stderr\n"
    "  --log-level LEVEL       error, warn, info (default), debug; messages go to stderr\n"
    "  -h, --help              this help;  --version  print the version\n"
    "\n"
    "Durations: 500ms, 10s, 1.5s, 2m; a bare number is seconds.\n"
    "Exit status: 0 success, 1 error (etcd unreachable, TLS, auth, ...), 2 bad usage,\n"
    "3 leadership lost, 4 no leader (leader command); run: CMD's status when it ended\n"
    "on its own (128+N if killed by signal N, 126 not executable, 127 not found), 3\n"
    "when it was stopped because leadership ended.\n"
    "\n"
    "Examples:\n"
    "  elector campaign my-service node-1\n"
    "  elector --endpoints 10.0.0.1:2379,10.0.0.2:2379 -w json observe my-service\n"
    "  elector leader my-service || echo \"nobody leads\"\n"
    "  elector run my-service --ttl 5s --http :9090 -- ./scheduler --config s.yaml\n";

/* ---------------------------------------------------------------- state */

struct line {
    struct line *next;
    size_t len;
    char data[];
};

struct app {
    tool_opts *o;
    elector_etcd *etcd;
    elector_session *s;
    elector_election *el;
    elector_observer *obs;
    tool_http *http;
    tool_child *child;
    int sfd;
    char *value;
    size_t vlen;
    bool done, stopping, restart_pending, session_dead;
    bool joined;         /* the first campaign reached etcd (WAITING or ELECTED) */
    int exit_code, child_status;
    int64_t child_deadline;
    int64_t child_lease;    /* the lease the guard releases if elector dies */
    int64_t child_start_ms; /* when the command started (restart backoff) */
    int restarts;           /* quick restarts in a row */
    char *pw;               /* run: kept for the guard's release connection */
    FILE *events;           /* where -w json events go (run: stderr or --events-fd) */
    int64_t retry_at_ms; /* campaign again on a new session after this */
    /* The leader as last known, for --http. */
    bool has_leader;
    char *lkey, *lval;
    size_t lklen, lvlen;
    int64_t ltoken, llease, lsince_ms;
    uint64_t changes;
    elector_session_stats view_ka; /* what fill_view's view points to */
    elector_etcd_stats view_st;
    char endpoint[256];
    struct line *queue, *queue_tail; /* lines waiting for the proclaim in flight */
    char *stdin_buf; /* grows up to STDIN_MAX for one line */
    size_t stdin_len, stdin_cap;
    bool stdin_eof, stdin_skip;
};

static enum tool_log g_log = LOG_INFO;
static bool g_stdout_tty; /* keys and values on a terminal are escaped */

/* One line on stderr. Keys, values and texts from the server end up in these
 * lines, so control characters are escaped (tool/escape.c): no terminal escape
 * sequences, no forged second line. */
static void logmsg(enum tool_log lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logmsg(enum tool_log lvl, const char *fmt, ...)
{
    if (lvl > g_log) return;
    char buf[2048], *msg = buf;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof(buf) && (msg = malloc((size_t)n + 1))) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (!msg) msg = buf; /* out of memory: the truncated line */
    char *esc = tool_escape_dup(msg, strlen(msg));
    fprintf(stderr, "elector: %s\n", esc ? esc : "(out of memory)");
    free(esc);
    if (msg != buf) free(msg);
}

static int64_t now_ms(void)
{
    return elector_now_ns() / 1000000;
}

/* CLOCK_MONOTONIC, the clock of the events' mono_ns (elector_now_ns() is the
 * deadline clock, CLOCK_BOOTTIME). */
static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What to do about an error, by its kind. */
static const char *hint(int err)
{
    switch (err) {
    case ELECTOR_ECONNECT:
    case ELECTOR_EUNAVAILABLE:
    case ELECTOR_ETIMEDOUT:
        return "check --endpoints (or ELECTOR_ENDPOINTS) and that etcd is running";
    case ELECTOR_ETLS: return "check --cacert, --cert and --key, and the endpoint's host name";
    case ELECTOR_EAUTH:
    case ELECTOR_ETOKEN:
        return "check --user and the password (ELECTOR_PASSWORD or --password-file)";
    case ELECTOR_EPERM: return "the etcd user needs read/write permission on the NAME/ prefix";
    case ELECTOR_ETOOLARGE:
        return "the value is larger than etcd accepts (--max-request-bytes, 1.5 MiB by default)";
    case ELECTOR_ENOLEADER: return "the etcd cluster has lost its quorum";
    case ELECTOR_EPROTO: return "the endpoint does not answer as etcd does; check --endpoints";
    default: return NULL;
    }
}

static void fatal_etcd(struct app *a, int err, const char *what)
{
    const char *h = hint(err);
    logmsg(LOG_ERROR, "%s: %s%s%s", what, *elector_etcd_errstr(a->etcd) ? elector_etcd_errstr(a->etcd)
                                                                         : elector_strerror(err),
           h ? "; " : "", h ? h : "");
    a->exit_code = EXIT_ERROR;
    a->done = true;
}

/* ---------------------------------------------------------------- output */

struct jbuf {
    char *p;
    size_t len, cap;
};

static void jraw(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jraw(struct jbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) return;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, tmp, (size_t)n);
    b->len += (size_t)n;
}

static void jstr(struct jbuf *b, const char *field, const void *s, size_t n)
{
    jraw(b, ",\"%s\":", field);
    tool_json_str(&b->p, &b->len, &b->cap, s, n);
}

/* One JSON object per line: what the fault suite and the benchmarks read. */
static int out_json(struct app *a, const elector_event *ev, const char *event)
{
    struct jbuf b = {0};
    jraw(&b, "{\"event\":\"%s\"", event);
    jstr(&b, "name", a->o->name, strlen(a->o->name));
    if (ev->key) jstr(&b, "key", ev->key, ev->key_len);
    if (ev->value) jstr(&b, "value", ev->value, ev->value_len);
    jraw(&b, ",\"token\":%lld,\"lease\":\"%llx\",\"mono_ns\":%lld,\"unix_ms\":%lld",
         (long long)ev->token, (unsigned long long)ev->lease, (long long)ev->mono_ns,
         (long long)(wall_ms() - (mono_ns() - ev->mono_ns) / 1000000));
    if (ev->reason) {
        jraw(&b, ",\"error\":\"%s\"", elector_err_name(ev->reason));
        jstr(&b, "reason", ev->detail, strlen(ev->detail));
    }
    jraw(&b, "}\n");
    FILE *f = a->events ? a->events : stdout;
    if (b.p) fwrite(b.p, 1, b.len, f);
    free(b.p);
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

/* Keys and values are data: written as they are (as etcdctl does) for scripts,
 * escaped only when stdout is a terminal. Returns 0 or -1 (errno) when stdout
 * cannot be written. */
static int out_bytes(const uint8_t *p, size_t n)
{
    char *esc = g_stdout_tty ? tool_escape_dup(p, n) : NULL;
    if (esc) fputs(esc, stdout);
    else fwrite(p, 1, n, stdout);
    free(esc);
    return fputc('\n', stdout) == EOF ? -1 : 0;
}

static int out_simple_kv(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
    out_bytes(k, kl);
    out_bytes(v, vl);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -1;
}

static void remember_leader(struct app *a, const elector_event *ev)
{
    free(a->lkey);
    free(a->lval);
    a->lkey = a->lval = NULL;
    a->has_leader = ev && ev->key;
    if (!a->has_leader) return;
    a->lkey = malloc(ev->key_len + 1);
    a->lval = malloc(ev->value_len + 1);
    if (!a->lkey || !a->lval) {
        a->has_leader = false;
        return;
    }
    memcpy(a->lkey, ev->key, ev->key_len);
    memcpy(a->lval, ev->value, ev->value_len);
    a->lklen = ev->key_len;
    a->lvlen = ev->value_len;
    a->ltoken = ev->token;
    a->llease = ev->lease;
    a->lsince_ms = wall_ms();
}

/* ---------------------------------------------------------------- run: the command */

static elector_etcd *make_client(const tool_opts *o, const char *pw);

/* Runs in the guard, once the command's tree is gone, when elector died or the
 * deadline passed: revoke the lease on a connection of the guard's own so the
 * next candidate leads at once instead of after the TTL. If etcd cannot be
 * reached, the TTL ends the lease. */
static void release_lease(void *ud)
{
    struct app *a = ud;
    logmsg(LOG_INFO, "guard: %s and its descendants are gone; revoking lease %llx",
           a->o->argv[0], (unsigned long long)a->child_lease);
    elector_etcd *e = make_client(a->o, a->pw);
    int rc = !e ? ELECTOR_ENOMEM : elector_etcd_err(e);
    if (!rc) {
        Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
        req.id = a->child_lease;
        elector_call_opts co = {.timeout_ms = a->o->dial_timeout_ms ? a->o->dial_timeout_ms : 5000};
        ProtobufCMessage *resp = NULL;
        rc = elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_REVOKE, &req.base, &co, &resp);
        if (resp) protobuf_c_message_free_unpacked(resp, NULL);
    }
    if (rc && rc != ELECTOR_ELEASE)
        logmsg(LOG_WARN, "guard: lease %llx could not be revoked (%s); it ends by its TTL",
               (unsigned long long)a->child_lease, elector_strerror(rc));
    elector_etcd_free(e);
}

static void start_child(struct app *a, const elector_event *ev)
{
    char *env[5];
    char token[64], lease[64];
    snprintf(token, sizeof(token), "%lld", (long long)ev->token);
    snprintf(lease, sizeof(lease), "%llx", (unsigned long long)ev->lease);
    if (asprintf(&env[0], "ELECTOR_NAME=%s", a->o->name) < 0 ||
        asprintf(&env[1], "ELECTOR_KEY=%.*s", (int)ev->key_len, (const char *)ev->key) < 0 ||
        asprintf(&env[2], "ELECTOR_TOKEN=%s", token) < 0 ||
        asprintf(&env[3], "ELECTOR_LEASE=%s", lease) < 0) {
        logmsg(LOG_ERROR, "out of memory");
        exit(EXIT_ERROR);
    }
    env[4] = NULL;
    char err[256];
    a->child_deadline = elector_session_deadline_ns(a->s);
    a->child_lease = ev->lease;
    tool_child_spec sp = {.argv = a->o->argv, .env_add = env, .deadline_ns = a->child_deadline,
                          .grace_ns = a->o->grace_ms * 1000000, .release = release_lease,
                          .ud = a};
    a->child = tool_child_start(&sp, err, sizeof(err));
    for (int i = 0; i < 4; i++) free(env[i]);
    if (!a->child) {
        logmsg(LOG_ERROR, "cannot start %s: %s", a->o->argv[0], err);
        a->exit_code = EXIT_ERROR;
        elector_resign(a->el);
        a->stopping = true;
        return;
    }
    a->child_start_ms = now_ms();
    logmsg(LOG_INFO, "started %s (token %lld)", a->o->argv[0], (long long)ev->token);
}

static void stop_child(struct app *a)
{
    if (!a->child) return;
    int64_t soon = elector_now_ns() + a->o->grace_ms * 1000000;
    int64_t kill_at = a->child_deadline < soon ? a->child_deadline : soon;
    tool_child_stop(a->child, kill_at);
}

/* ---------------------------------------------------------------- campaign */

/* Failures that may heal by themselves: campaign again, on a new session. */
static bool transient(int err)
{
    return err == ELECTOR_ESESSION || err == ELECTOR_ELEASE || err == ELECTOR_ECLOSED ||
           err == ELECTOR_ENOLEADER || err == ELECTOR_ETIMEDOUT || err == ELECTOR_EUNAVAILABLE ||
           err == ELECTOR_ECONNECT;
}


static void start_campaign(struct app *a);
static void schedule_restart(struct app *a);

static void proclaim_next(struct app *a);

static void on_event(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct app *a = ud;
    const char *name = elector_event_name(ev->type);
    if (a->o->fmt == FMT_JSON) out_json(a, ev, name);
    switch (ev->type) {
    case ELECTOR_EV_WAITING:
        a->joined = true;
        logmsg(LOG_INFO, "waiting behind %.*s", (int)ev->key_len, (const char *)ev->key);
        break;
    case ELECTOR_EV_ELECTED:
        a->joined = true;
        a->changes++;
        remember_leader(a, ev);
        logmsg(LOG_INFO, "elected: %.*s (token %lld)", (int)ev->key_len, (const char *)ev->key,
               (long long)ev->token);
        /* run: stdout belongs to the command; the line above says it on stderr. */
        if (a->o->fmt == FMT_SIMPLE && a->o->cmd != CMD_RUN)
            out_simple_kv(ev->key, ev->key_len, ev->value, ev->value_len);
        if (a->o->cmd == CMD_RUN) start_child(a, ev);
        break;
    case ELECTOR_EV_PROCLAIMED:
        if (ev->reason) {
            const char *h = hint(ev->reason);
            logmsg(LOG_ERROR, "proclaim failed: %s%s%s", ev->detail, h ? "; " : "", h ? h : "");
        } else {
            remember_leader(a, ev);
        }
        proclaim_next(a);
        break;
    case ELECTOR_EV_LOST:
        a->changes++;
        remember_leader(a, NULL);
        logmsg(LOG_ERROR, "leadership lost: %s", ev->detail);
        a->session_dead = transient(ev->reason) && ev->reason != ELECTOR_ENOLEADER;
        if (a->child) {
            stop_child(a);
            a->exit_code = EXIT_LOST;
            a->restart_pending = a->o->restart;
        } else if (a->o->cmd == CMD_RUN && a->o->restart) {
            a->retry_at_ms = now_ms() + 1000;
        } else {
            a->exit_code = EXIT_LOST;
            a->done = true;
        }
        break;
    case ELECTOR_EV_RESIGNED:
        a->changes++;
        remember_leader(a, NULL);
        if (a->restart_pending && !a->stopping) {
            a->restart_pending = false;
            schedule_restart(a);
        } else if (a->stopping && !a->child) {
            a->done = true;
        }
        break;
    case ELECTOR_EV_FAILED:
        if (a->stopping) {
            a->done = true;
        } else if (!a->joined && !(a->s && elector_session_lease(a->s))) {
            /* Never reached etcd: say so at once (within the dial timeout), as
             * `leader` does, instead of retrying in silence. */
            const char *h = hint(ev->reason);
            logmsg(LOG_ERROR, "cannot start a session: %s%s%s", ev->detail, h ? "; " : "",
                   h ? h : "");
            a->exit_code = EXIT_ERROR;
            a->done = true;
        } else if (transient(ev->reason)) {
            logmsg(LOG_WARN, "campaign interrupted (%s); campaigning again on a new session",
                   ev->detail);
            a->session_dead = true;
            a->retry_at_ms = now_ms() + 1000;
        } else {
            const char *h = hint(ev->reason);
            logmsg(LOG_ERROR, "campaign failed: %s%s%s", ev->detail, h ? "; " : "", h ? h : "");
            a->exit_code = EXIT_ERROR;
            a->done = true;
        }
        break;
    default:
        break;
    }
}

/* Campaigns on the current session, or on a new one if it died. The new session
 * is granted asynchronously (the campaign waits for it), so the loop keeps
 * serving signals and HTTP; a failed grant comes back as a FAILED event. */
static void start_campaign(struct app *a)
{
    if (a->session_dead) {
        if (a->el) elector_election_free(a->el);
        a->el = NULL;
        if (a->s) elector_session_close(a->s);
        elector_session_config sc;
        elector_session_config_init(&sc);
        if (a->o->ttl_s) sc.ttl_s = a->o->ttl_s;
        /* run: a session that dies must keep its lease until the command's tree
         * is reaped; closing it (start_campaign, cleanup) revokes it then. */
        sc.manual_release = a->o->cmd == CMD_RUN;
        a->s = elector_session_new(a->etcd, &sc, NULL, NULL);
        if (!a->s) {
            logmsg(LOG_ERROR, "out of memory");
            a->exit_code = EXIT_ERROR;
            a->done = true;
            return;
        }
        a->session_dead = false;
    }
    if (!a->el) a->el = elector_election_new(a->s, a->o->name, on_event, a);
    int rc = a->el ? elector_campaign(a->el, a->value, a->vlen) : ELECTOR_ENOMEM;
    if (rc) fatal_etcd(a, rc, "cannot campaign");
}

/* --restart: campaign again after a pause. Quick failures back off exponentially
 * (200 ms doubling up to 30 s, each drawn from [d/2, d] so that candidates
 * restarting together spread out); a command that ran 10 s or more resets it. */
static void schedule_restart(struct app *a)
{
    if (now_ms() - a->child_start_ms >= 10000) a->restarts = 0;
    int64_t d = 200LL << (a->restarts < 8 ? a->restarts : 8);
    if (d > 30000) d = 30000;
    a->restarts++;
    d = d / 2 + (int64_t)((uint64_t)random() % (uint64_t)(d / 2 + 1));
    logmsg(LOG_INFO, "campaigning again in %lld ms", (long long)d);
    a->retry_at_ms = now_ms() + d;
}

/* ---------------------------------------------------------------- observe */

static void on_observe(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    struct app *a = ud;
    if (a->o->fmt == FMT_JSON) out_json(a, ev, elector_event_name(ev->type));
    if (ev->type == ELECTOR_EV_LEADER) {
        if (a->o->fmt == FMT_SIMPLE) out_simple_kv(ev->key, ev->key_len, ev->value, ev->value_len);
        remember_leader(a, ev);
    } else if (ev->type == ELECTOR_EV_FAILED) {
        /* The observer ends only when etcd's answers make no sense (EPROTO). */
        const char *h = hint(ev->reason);
        logmsg(LOG_ERROR, "observe failed: %s%s%s", ev->detail, h ? "; " : "", h ? h : "");
        remember_leader(a, NULL);
        a->exit_code = EXIT_ERROR;
        a->done = true;
    } else {
        logmsg(LOG_INFO, "no leader");
        remember_leader(a, NULL);
    }
}

/* ---------------------------------------------------------------- http view */

static void fill_view(void *ud, tool_view *v)
{
    struct app *a = ud;
    elector_session_stats *ka = &a->view_ka;
    elector_etcd_stats *st = &a->view_st;
    memset(v, 0, sizeof(*v));
    elector_etcd_get_stats(a->etcd, st);
    v->etcd = st;
    v->name = a->o->name;
    v->is_leader = a->el && elector_is_leader(a->el);
    if (a->s) {
        elector_session_get_stats(a->s, ka);
        v->ka = ka;
        v->session_healthy = elector_session_alive(a->s);
        int64_t left = elector_session_deadline_ns(a->s) - elector_now_ns();
        v->lease_remaining_s = left > 0 ? left / 1e9 : 0;
    } else {
        v->session_healthy = a->obs && *elector_etcd_current_endpoint(a->etcd);
    }
    v->has_leader = a->has_leader;
    if (a->has_leader) {
        v->key = (const uint8_t *)a->lkey;
        v->key_len = a->lklen;
        v->value = (const uint8_t *)a->lval;
        v->value_len = a->lvlen;
        v->token = a->ltoken;
        v->lease = a->llease;
        v->since_unix_ms = a->lsince_ms;
    }
    v->leadership_changes = a->changes;
}

/* ---------------------------------------------------------------- loop */

static void on_signal(struct app *a, int sig)
{
    if (sig == SIGCHLD) return;
    if (sig == SIGHUP) sig = SIGTERM; /* terminal closed, ssh dropped: stop and resign */
    logmsg(LOG_INFO, "%s received", strsignal(sig));
    if (a->stopping && sig == SIGINT) {
        /* A second ^C: stop waiting for a graceful end. */
        if (a->child) tool_child_signal(a->child, SIGKILL);
        else a->done = true;
        return;
    }
    a->stopping = true;
    if (a->child) {
        tool_child_signal(a->child, sig);
        return;
    }
    if (a->el && elector_resign(a->el) == 0) return; /* done on RESIGNED/FAILED */
    a->done = true;
}

/* Far above etcd's default request limit (1.5 MiB), so etcd, not we, decides
 * what is too large; only a longer line is refused here. */
#define STDIN_MAX (8u << 20)

/* Sends the oldest queued line, if no proclaim is in flight. */
static void proclaim_next(struct app *a)
{
    while (a->queue) {
        struct line *l = a->queue;
        int rc = a->el && elector_is_leader(a->el) ? elector_proclaim(a->el, l->data, l->len)
                                                    : ELECTOR_ENOTLEADER;
        if (rc == ELECTOR_EBUSY) return; /* again on PROCLAIMED */
        a->queue = l->next;
        if (!a->queue) a->queue_tail = NULL;
        if (rc) logmsg(LOG_WARN, "line from stdin not proclaimed: %s", elector_strerror(rc));
        free(l);
        if (!rc) return;
    }
}

static void proclaim_line(struct app *a, const char *data, size_t len)
{
    struct line *l = malloc(sizeof(*l) + len);
    if (!l) {
        logmsg(LOG_ERROR, "out of memory: line from stdin not proclaimed");
        return;
    }
    l->next = NULL;
    l->len = len;
    memcpy(l->data, data, len);
    if (a->queue_tail) a->queue_tail->next = l;
    else a->queue = l;
    a->queue_tail = l;
    proclaim_next(a);
}

static void read_stdin(struct app *a)
{
    if (a->stdin_cap - a->stdin_len < 65536 && a->stdin_cap < STDIN_MAX) {
        size_t cap = a->stdin_cap ? a->stdin_cap * 2 : 65536;
        char *p = realloc(a->stdin_buf, cap);
        if (p) {
            a->stdin_buf = p;
            a->stdin_cap = cap;
        }
    }
    ssize_t n = read(0, a->stdin_buf + a->stdin_len, a->stdin_cap - a->stdin_len);
    if (n <= 0) {
        a->stdin_eof = true;
        return;
    }
    a->stdin_len += (size_t)n;
    char *nl;
    while ((nl = memchr(a->stdin_buf, '\n', a->stdin_len))) {
        size_t len = (size_t)(nl - a->stdin_buf);
        if (a->stdin_skip) a->stdin_skip = false; /* the tail of an overlong line */
        else proclaim_line(a, a->stdin_buf, len);
        memmove(a->stdin_buf, nl + 1, a->stdin_len - len - 1);
        a->stdin_len -= len + 1;
    }
    if (a->stdin_len == a->stdin_cap && a->stdin_cap >= STDIN_MAX) {
        logmsg(LOG_ERROR, "a line on stdin is longer than %u MiB: not proclaimed", STDIN_MAX >> 20);
        a->stdin_len = 0;
        a->stdin_skip = true;
    }
}

/* Why the command ended, said once on stderr; the exit status follows from it. */
static void child_ended(struct app *a, int st, tool_child_cause why)
{
    const char *cmd = a->o->argv[0];
    if (why == TOOL_CHILD_DEADLINE) {
        if (a->exit_code != EXIT_LOST)
            logmsg(LOG_ERROR, "leadership lost: the validity deadline passed before a renewal "
                   "reached elector; %s was stopped (status %d)", cmd, st);
        a->exit_code = EXIT_LOST;
    } else if (why == TOOL_CHILD_GUARD_DIED) {
        logmsg(LOG_ERROR, "leadership given up: the guard process died (status %d); %s and "
               "its descendants were killed", st, cmd);
        a->exit_code = EXIT_LOST;
    } else {
        if (a->exit_code == EXIT_LOST)
            logmsg(LOG_INFO, "%s stopped (status %d)", cmd, st);
        else
            logmsg(LOG_INFO, "%s exited with status %d", cmd, st);
        if (a->exit_code != EXIT_LOST) a->exit_code = st;
    }
}

static void check_child(struct app *a)
{
    if (!a->child) return;
    int64_t d = a->s ? elector_session_deadline_ns(a->s) : 0;
    if (d > a->child_deadline && a->el && elector_is_leader(a->el)) {
        a->child_deadline = d;
        tool_child_deadline(a->child, d);
    }
    int st;
    tool_child_cause why;
    if (!tool_child_poll(a->child, &st, &why)) return;
    tool_child_free(a->child);
    a->child = NULL;
    a->child_status = st;
    child_ended(a, st, why);
    /* The whole tree is gone: only now may the lease (our key) be released. */
    if (a->o->restart && !a->stopping) {
        a->restart_pending = true;
        if (a->el && elector_resign(a->el) == 0) return; /* campaign again on RESIGNED */
        a->restart_pending = false;
        schedule_restart(a);
        a->exit_code = 0;
        return;
    }
    a->stopping = true;
    if (a->el && elector_resign(a->el) == 0) return;
    a->done = true;
}

static void note_connection(struct app *a)
{
    const char *ep = elector_etcd_current_endpoint(a->etcd);
    if (!strcmp(ep, a->endpoint)) return;
    if (*ep) logmsg(*a->endpoint ? LOG_INFO : LOG_DEBUG, "connected to %s", ep);
    else logmsg(LOG_WARN, "connection to %s lost; reconnecting", a->endpoint);
    snprintf(a->endpoint, sizeof(a->endpoint), "%s", ep);
}

static void loop(struct app *a)
{
    while (!a->done) {
        struct pollfd p[5];
        int n = 0;
        p[n++] = (struct pollfd){.fd = elector_etcd_fd(a->etcd), .events = POLLIN};
        p[n++] = (struct pollfd){.fd = a->sfd, .events = POLLIN};
        int http_i = -1, in_i = -1;
        if (a->http) {
            http_i = n;
            p[n++] = (struct pollfd){.fd = tool_http_fd(a->http), .events = POLLIN};
        }
        if (a->o->proclaim_stdin && !a->stdin_eof) {
            in_i = n;
            p[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
        }
        if (a->child) p[n++] = (struct pollfd){.fd = tool_child_fd(a->child), .events = POLLIN};
        int64_t t = elector_etcd_timeout(a->etcd);
        int64_t ht = a->http ? tool_http_timeout(a->http) : -1;
        if (ht >= 0 && (t < 0 || ht < t)) t = ht;
        if (a->retry_at_ms && (t < 0 || a->retry_at_ms - now_ms() < t))
            t = a->retry_at_ms > now_ms() ? a->retry_at_ms - now_ms() : 0;
        if (a->child && (t < 0 || t > 100)) t = 100; /* deadline pushes */
        poll(p, (nfds_t)n, t < 0 || t > 1000 ? 1000 : (int)t);
        if (p[1].revents) {
            struct signalfd_siginfo si;
            if (read(a->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) on_signal(a, (int)si.ssi_signo);
        }
        elector_etcd_process(a->etcd);
        note_connection(a);
        if (http_i >= 0) tool_http_process(a->http);
        if (in_i >= 0 && p[in_i].revents) read_stdin(a);
        check_child(a);
        if (a->retry_at_ms && now_ms() >= a->retry_at_ms && !a->stopping) {
            a->retry_at_ms = 0;
            start_campaign(a);
        }
    }
}

/* ---------------------------------------------------------------- setup */

static elector_etcd *make_client(const tool_opts *o, const char *pw)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    const char *eps = o->endpoints;
    if (!eps) eps = getenv("ELECTOR_ENDPOINTS");
    if (!eps) eps = getenv("ETCDCTL_ENDPOINTS");
    if (eps) cfg.endpoints = eps;
    cfg.cacert = o->cacert;
    cfg.cert = o->cert;
    cfg.key = o->key;
    cfg.user = o->user;
    cfg.password = pw;
    if (o->dial_timeout_ms) cfg.dial_timeout_ms = o->dial_timeout_ms;
    cfg.request_timeout_ms = cfg.dial_timeout_ms + 2000;
    return elector_etcd_new(&cfg);
}

static int setup_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

static int cmd_leader(struct app *a)
{
    elector_leader_info li;
    int64_t tmo = (a->o->dial_timeout_ms ? a->o->dial_timeout_ms : 5000) + 2000;
    int rc = elector_leader_sync(a->etcd, a->o->name, tmo, &li);
    if (rc < 0) {
        fatal_etcd(a, rc, "cannot read the leader");
        return EXIT_ERROR;
    }
    if (rc == 1) {
        if (a->o->fmt == FMT_JSON) {
            elector_event ev = {.type = ELECTOR_EV_NO_LEADER, .detail = "", .mono_ns = mono_ns()};
            out_json(a, &ev, "no_leader");
        }
        logmsg(LOG_INFO, "no leader for %s", a->o->name);
        return EXIT_NOLEADER;
    }
    elector_event ev = {.type = ELECTOR_EV_LEADER, .detail = "", .key = li.key,
                        .key_len = li.key_len, .value = li.value, .value_len = li.value_len,
                        .token = li.token, .lease = li.lease, .mono_ns = mono_ns()};
    int w = a->o->fmt == FMT_JSON ? out_json(a, &ev, "leader")
                                  : out_simple_kv(li.key, li.key_len, li.value, li.value_len);
    int werr = errno;
    elector_leader_free(&li);
    if (w) {
        logmsg(LOG_ERROR, "cannot write to stdout: %s", strerror(werr));
        return EXIT_ERROR;
    }
    return EXIT_OK;
}

static void default_value(struct app *a)
{
    const char *v = a->o->value;
    char host[256];
    if (!v) {
        if (gethostname(host, sizeof(host))) snprintf(host, sizeof(host), "elector");
        host[sizeof(host) - 1] = 0;
        v = host;
    }
    a->value = strdup(v);
    a->vlen = strlen(v);
}

static int run_command(struct app *a)
{
    if (a->o->cmd == CMD_LEADER) return cmd_leader(a);
    a->sfd = setup_signals();
    if (a->o->http) {
        char err[300];
        a->http = tool_http_start(a->o->http, fill_view, a, err, sizeof(err));
        if (!a->http) {
            logmsg(LOG_ERROR, "--http: %s", err);
            return EXIT_USAGE;
        }
    }
    if (a->o->cmd == CMD_OBSERVE) {
        a->obs = elector_observe(a->etcd, a->o->name, on_observe, a);
        if (!a->obs) return EXIT_ERROR;
    } else {
        default_value(a);
        if (a->o->cmd == CMD_RUN) tool_child_init();
        /* The session is granted while the loop runs, so signals are served while
         * connecting; a failure before etcd was reached ends it (FAILED). */
        a->session_dead = true;
        start_campaign(a);
    }
    loop(a);
    return a->exit_code;
}

static void cleanup(struct app *a)
{
    if (a->child) {
        stop_child(a);
        tool_child_free(a->child);
    }
    elector_observer_free(a->obs);
    if (a->el) {
        if (elector_is_leader(a->el)) elector_resign(a->el);
        elector_election_free(a->el);
    }
    if (a->s) elector_session_close_sync(a->s, 2000); /* revoke: nothing lingers */
    tool_http_stop(a->http);
    elector_etcd_free(a->etcd);
    free(a->value);
    free(a->stdin_buf);
    while (a->queue) {
        struct line *l = a->queue;
        a->queue = l->next;
        free(l);
    }
    free(a->lkey);
    free(a->lval);
    tool_secret_free(a->pw);
    if (a->events && a->events != stderr) fclose(a->events);
    if (a->sfd > 0) close(a->sfd);
}

int main(int argc, char **argv)
{
    /* A peer or a reader that went away is an error to report, not a reason to
     * die: SIGPIPE is ignored in every command (execve restores it for `run`'s
     * command, whose dispositions the supervisor resets anyway). */
    signal(SIGPIPE, SIG_IGN);
    g_stdout_tty = isatty(STDOUT_FILENO);
    tool_opts o;
    char err[300];
    if (tool_parse_args(argc, argv, &o, err, sizeof(err))) {
        logmsg(LOG_ERROR, "%s", err);
        return EXIT_USAGE;
    }
    if (o.help) {
        fputs(USAGE, stdout);
        return EXIT_OK;
    }
    if (o.version) {
        printf("elector %s\n", ELECTOR_VERSION);
        return EXIT_OK;
    }
    g_log = o.log;
    int64_t ttl_ms = (o.ttl_s ? o.ttl_s : 10) * 1000;
    if (o.cmd == CMD_RUN && o.grace_ms < 0) o.grace_ms = ttl_ms / 4 < 2000 ? ttl_ms / 4 : 2000;
    if (o.cmd == CMD_RUN && o.grace_ms * 2 >= ttl_ms)
        logmsg(LOG_WARN, "--grace %lldms is at least half the TTL: the command may be stopped "
               "while leadership is still fine", (long long)o.grace_ms);

    /* Secrets: no core dump or ptrace while the password (then the token) is held. */
    if (o.user || o.password_file || getenv("ELECTOR_PASSWORD")) tool_secret_protect();
    char warn[600];
    char *pw = tool_password_read(o.password_file, err, sizeof(err), warn, sizeof(warn));
    if (*warn) logmsg(LOG_WARN, "%s", warn);
    if (!pw && *err) {
        logmsg(LOG_ERROR, "%s", err);
        return EXIT_USAGE;
    }
    /* The command (and anything it starts) must not inherit the password. */
    unsetenv("ELECTOR_PASSWORD");
    if (o.user && !pw)
        logmsg(LOG_WARN, "--user given without a password (set ELECTOR_PASSWORD or --password-file)");
    if (tool_check_key_file(o.key, "--key", warn, sizeof(warn))) logmsg(LOG_WARN, "%s", warn);
    struct app a = {.o = &o, .sfd = -1};
    a.etcd = make_client(&o, pw);
    bool have_pw = pw != NULL;
    if (pw && o.cmd == CMD_RUN)
        a.pw = pw; /* the guard's release connection needs it; wiped at exit */
    else
        tool_secret_free(pw); /* the client has its own copy */
    if (a.etcd && o.cmd == CMD_RUN && o.fmt == FMT_JSON) {
        a.events = o.events_fd > 0 ? fdopen(o.events_fd, "w") : stderr;
        if (!a.events) {
            logmsg(LOG_ERROR, "--events-fd %d: %s", o.events_fd, strerror(errno));
            elector_etcd_free(a.etcd);
            tool_secret_free(a.pw);
            return EXIT_USAGE;
        }
    }
    srandom((unsigned)(elector_now_ns() ^ getpid()));
    if (!a.etcd) return EXIT_ERROR;
    if (o.user && have_pw && !elector_etcd_err(a.etcd) &&
        tool_check_cleartext(a.etcd, o.user, warn, sizeof(warn)))
        logmsg(LOG_WARN, "%s", warn);
    int e = elector_etcd_err(a.etcd);
    if (e) {
        bool usage = e == ELECTOR_EINVAL;
        const char *msg = elector_etcd_errstr(a.etcd);
        elector_endpoint_info ep0; /* none when the endpoint list is what failed */
        bool bad_eps = elector_etcd_endpoint_info(a.etcd, 0, &ep0) != 0;
        const char *h = !usage ? "" : bad_eps ? " (check --endpoints or ELECTOR_ENDPOINTS)"
                                              : " (check --cacert, --cert and --key)";
        logmsg(LOG_ERROR, "%s%s", msg, h);
        elector_etcd_free(a.etcd);
        return usage ? EXIT_USAGE : EXIT_ERROR;
    }
    int rc = run_command(&a);
    cleanup(&a);
    return rc;
}
