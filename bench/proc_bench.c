/* SPDX-License-Identifier: MIT */
/* proc_bench — process-level comparisons of `elector` with etcdctl on a running
 * etcd cluster (driven by scripts/bench.sh, which starts the cluster):
 *
 *   proc_bench graceful  --endpoints E --rounds R --out DIR
 *       Graceful failover. Per tool a queue of three candidates for one election:
 *       `elector -w json campaign` and `etcdctl elect`. Each round signals the
 *       leader (elector: SIGTERM, etcdctl: SIGINT; both resign on it) and times
 *       until the next candidate reports that it leads:
 *         ext   signal sent -> the successor's "elected" line read by this harness
 *               (etcdctl: its first output line, the key), both tools alike;
 *         mono  elector only: signal sent -> the successor's own mono_ns of the
 *               change (CLOCK_MONOTONIC is one clock for all processes);
 *         hand  elector only: the old leader's "resigned" mono_ns -> the
 *               successor's "elected" mono_ns (what `scripts/demo.sh` prints).
 *       With --etcd3 SCRIPT (bench/node/etcd3_elect.js), a third queue: the
 *       Election of the `etcd3` Node client (npm), signalled with SIGINT (it
 *       resigns by revoking its lease), timed on its "elected" line like
 *       etcdctl's first line.
 *       The tools take turns round by round on the same cluster (the order
 *       rotates each round); a new third candidate joins after each round, so
 *       the successor has always been waiting for at least one full round.
 *       Between rounds, in the same idle gaps: one Put, and the protocol floor
 *       (see chain) once with each check, the order alternating.
 *
 *   proc_bench crash --endpoints E --rounds R --ttl 2 --out DIR
 *       Crash failover: the leader is SIGKILLed; `elector --ttl 2s -w json
 *       campaign` vs `etcdctl lock --ttl 2` (prints the key once it holds the
 *       lock). Same clocks as above (no "hand": nobody resigns).
 *
 *   proc_bench runcrash --endpoints E --rounds R --ttl 5 --out DIR
 *       `elector run` leader SIGKILLed, the host alive: `elector --ttl 5s run
 *       NAME -- sh -c 'echo started; exec sleep 3600'` vs `etcdctl lock --ttl 5
 *       NAME sh -c '...'`, same queue scheme. Time: SIGKILL sent to the leader
 *       (elector / etcdctl alone, not its group) -> the successor's command's
 *       first line ("started") read by this harness. elector's guard stops the
 *       dead leader's command (sleep exits on SIGTERM) and revokes the lease;
 *       etcdctl leaves its command running (killed with its process group after
 *       the round) and the successor waits for the lease to expire.
 *
 *   proc_bench embedcrash --endpoints E --rounds R --ttl 10 --release-helper PATH
 *           --out DIR
 *       A leader that embeds libelector SIGKILLed: `elector --ttl 10s -w json
 *       campaign` with the release helper (release_on_exit, its default; the
 *       helper at PATH) vs the same without it (`--release-on-exit=false`: the
 *       successor waits for the TTL). Same clocks as crash. The other benches'
 *       elector candidates run with --release-on-exit=false (their figures stay
 *       those of the library without a helper).
 *
 *   proc_bench releasecrash --endpoints E --rounds R --ttl 10 --release-helper PATH
 *           --out DIR
 *       embedcrash's release_on_exit queue alone (no queue waiting for the TTL,
 *       so a round takes milliseconds, not the TTL): SIGKILL of the leader ->
 *       the successor's "elected". scripts/bench-gate.sh gates it.
 *
 *   proc_bench footprint --endpoints E --idle-s S --out DIR
 *       RSS (VmRSS, VmHWM, Pss, RssAnon, RssFile), threads and idle CPU of a
 *       waiting candidate: `elector campaign` and `etcdctl elect`, each behind a
 *       leader of its own kind.
 *
 *   proc_bench chain --endpoints E --n N [--gap-ms G] --out DIR
 *       The protocol floor of a watch-based handover without election logic:
 *       Delete on one connection -> watch event on another -> read-only Txn sent
 *       from the event's callback, each round after G ms (default 150) idle.
 *       Two checks, alternating round by round:
 *         chain      the Txn's Range is linearizable (a ReadIndex through the
 *                    Raft leader: what etcd's Go client and elector do today);
 *         chain_ser  the Range is serializable, sent on the watch's connection,
 *                    and its answer is taken only if the reply's header names
 *                    the member (and cluster) that delivered the event and its
 *                    revision is >= R, the DELETE event's revision; otherwise
 *                    the linearizable Txn is sent and the round's time includes
 *                    it (docs/DESIGN.md, "Graceful handover: the serializable
 *                    check"). The fallbacks are counted by reason.
 *       Each round times Delete sent -> event (measure=event) and Delete sent ->
 *       the accepted Txn reply (measure=floor).
 *
 *   proc_bench put --endpoints E --n N --warmup W [--gap-ms G] --out DIR
 *       The floor: latency of one etcd Put through libelector, back to back
 *       ("busy"), or each after G ms of idleness ("idle"), as the first request of
 *       a failover is: an idle cluster and client answer the first request of a
 *       burst more slowly than the hundredth.
 *
 * Options: --elector PATH (default elector), --etcdctl PATH (default etcdctl),
 * --node PATH (default node), --etcd3 SCRIPT (graceful: the etcd3 queue),
 * --log FILE (children's stderr, default /dev/null), --helper 1 (graceful: the
 * elector candidates keep the release helper, the tool's default; without it
 * they run with --release-on-exit=false).
 * Output: "key=value" summary lines on stdout, samples (ms, one per line) in DIR.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include "bench_util.h"
#include "elector/etcd.h"

static const char *g_endpoints = "127.0.0.1:2379";
static const char *g_elector = "elector";
static const char *g_etcdctl = "etcdctl";
static const char *g_node = "node";
static const char *g_etcd3 = NULL; /* bench/node/etcd3_elect.js: the etcd3 queue */
static const char *g_log = "/dev/null";
static const char *g_out = ".";
static int g_ttl = 2;
static elector_etcd *g_etcd;   /* the harness's own client: counts keys */
static bool g_graceful_helper; /* graceful: elector candidates with the helper */

/* ---------------------------------------------------------------- children */

#define MAX_CHILDREN 64
typedef struct child {
    pid_t pid;
    int fd; /* its stdout */
    char buf[16384];
    size_t len;
    int64_t buf_t; /* when the bytes now in buf arrived (time of the last read) */
    bool eof;
    int lines; /* lines returned so far */
} child;

static child *g_children[MAX_CHILDREN];

static void reap_strays(bool kill_them);

static void kill_all_children(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] && g_children[i]->pid > 0) {
            kill(-g_children[i]->pid, SIGKILL); /* its group: an orphaned command too */
            kill(g_children[i]->pid, SIGKILL);
        }
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] && g_children[i]->pid > 0) waitpid(g_children[i]->pid, NULL, 0);
    reap_strays(true);
}

static void on_fatal_signal(int sig)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] && g_children[i]->pid > 0) kill(g_children[i]->pid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static child *spawn(char *const argv[])
{
    int p[2];
    if (pipe(p)) bu_die("pipe: %s", strerror(errno));
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) bu_die("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Gone with the harness, whatever kills it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        setpgid(0, 0); /* a ^C on the terminal reaches the harness only */
        dup2(p[1], 1);
        int lf = open(g_log, O_WRONLY | O_APPEND | O_CREAT, 0644);
        if (lf >= 0) dup2(lf, 2);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(p[1]);
    child *c = bu_xcalloc(1, sizeof(*c));
    c->pid = pid;
    c->fd = p[0];
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (!g_children[i]) {
            g_children[i] = c;
            return c;
        }
    bu_die("too many children");
    return NULL;
}

/* Next complete line of the child's stdout, waiting until deadline_ns.
 * *t_read: CLOCK_MONOTONIC right after the read() that completed the line.
 * Returns 1 (line), 0 (timeout), -1 (EOF). */
static int next_line(child *c, int64_t deadline_ns, char *out, size_t outsz,
                     int64_t *t_read)
{
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            size_t k = n < outsz - 1 ? n : outsz - 1;
            memcpy(out, c->buf, k);
            out[k] = 0;
            memmove(c->buf, nl + 1, c->len - n - 1);
            c->len -= n + 1;
            if (t_read) *t_read = c->buf_t;
            c->lines++;
            return 1;
        }
        if (c->eof) return -1;
        int64_t now = bu_mono_ns();
        if (now >= deadline_ns) return 0;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int ms = (int)((deadline_ns - now + 999999) / 1000000);
        int pr = poll(&pfd, 1, ms);
        if (pr < 0 && errno != EINTR) bu_die("poll: %s", strerror(errno));
        if (pr <= 0) continue;
        if (c->len == sizeof(c->buf)) c->len = 0; /* absurdly long line: drop */
        ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
        c->buf_t = bu_mono_ns();
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            c->eof = true;
            continue;
        }
        c->len += (size_t)r;
    }
}

/* Reaps the child (after it was signalled), waiting up to timeout_ms, then
 * SIGKILL. Returns the wait status. */
static int reap(child *c, int64_t timeout_ms)
{
    int st = 0;
    int64_t end = bu_mono_ns() + timeout_ms * 1000000;
    for (;;) {
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid) break;
        if (bu_mono_ns() > end) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    c->pid = -1;
    return st;
}

/* runcrash: this harness is a child subreaper (a SIGKILLed elector's guard, the
 * command etcdctl leaves behind come to it); reap what is not one of ours. */
static bool g_subreaper;

static bool tracked(pid_t p)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] && g_children[i]->pid == p) return true;
    return false;
}

static void reap_strays(bool kill_them)
{
    if (!g_subreaper) return;
    char path[64], buf[8192];
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    for (char *p = buf, *end; *p; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p) break;
        if (pid <= 0 || tracked((pid_t)pid)) continue;
        if (kill_them) kill((pid_t)pid, SIGKILL);
        waitpid((pid_t)pid, NULL, kill_them ? 0 : WNOHANG);
    }
}

static void child_free(child *c)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == c) g_children[i] = NULL;
    close(c->fd);
    free(c);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/* ---------------------------------------------------------------- etcd helpers */

static int64_t count_prefix(const char *prefix)
{
    size_t n = strlen(prefix);
    uint8_t end[256];
    size_t el = elector_prefix_end((const uint8_t *)prefix, n, end);
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key.data = (uint8_t *)prefix;
    r.key.len = n;
    r.range_end.data = end;
    r.range_end.len = el;
    r.count_only = 1;
    ProtobufCMessage *m;
    int rc = elector_etcd_call_sync(g_etcd, ELECTOR_RPC_RANGE, &r.base, NULL, &m);
    if (rc)
        bu_die("Range %s: %s (%s)", prefix, elector_strerror(rc),
               elector_etcd_errstr(g_etcd));
    int64_t c = ((Etcdserverpb__RangeResponse *)m)->count;
    protobuf_c_message_free_unpacked(m, NULL);
    return c;
}

static void wait_count(const char *prefix, int64_t want, int64_t timeout_ms)
{
    int64_t end = bu_mono_ns() + timeout_ms * 1000000;
    while (count_prefix(prefix) != want) {
        if (bu_mono_ns() > end)
            bu_die("timeout: %s has %lld keys, want %lld", prefix,
                   (long long)count_prefix(prefix), (long long)want);
        sleep_ms(5);
    }
}

/* ---------------------------------------------------------------- candidates */

enum tool {
    T_ELECTOR,
    T_ETCDCTL_ELECT,
    T_ETCDCTL_LOCK,
    T_ELECTOR_RUN,
    T_ETCDCTL_LOCK_CMD,
    T_ETCD3,
    T_ELECTOR_RELEASE, /* campaign with the release helper */
    T_NONE             /* no second queue (releasecrash) */
};

/* elector campaign, speaking -w json */
static bool json_tool(enum tool t)
{
    return t == T_ELECTOR || t == T_ELECTOR_RELEASE;
}

/* The command of runcrash: one line once it runs, then idle; SIGTERM ends it. */
static char g_cmd_sh[] = "sh", g_cmd_c[] = "-c",
            g_cmd[] = "echo started; exec sleep 3600";

typedef struct queue {
    enum tool tool;
    const char *label;
    char name[128];   /* election / lock name */
    char prefix[160]; /* name + "/" (etcd3: "election/" + name + "/") */
    child *c[8];
    int n;
    int seq;
} queue;

static child *start_candidate(queue *q)
{
    char value[64];
    snprintf(value, sizeof(value), "cand-%d", q->seq++);
    char ttl[32], ep[1024];
    snprintf(ep, sizeof(ep), "--endpoints=%s", g_endpoints);
    child *c;
    if (json_tool(q->tool)) {
        snprintf(ttl, sizeof(ttl), "%ds", g_ttl);
        /* debug: the log (--log FILE) says which check elected each one */
        char release[] = "--release-on-exit=false";
        char *argv[] = {
            (char *)g_elector, ep,         "--ttl", ttl,   "-w", "json", "--log-level",
            "debug",           "campaign", q->name, value, NULL, NULL};
        if (q->tool == T_ELECTOR && !g_graceful_helper) argv[11] = release;
        c = spawn(argv);
    } else if (q->tool == T_ETCDCTL_ELECT) {
        char *argv[] = {(char *)g_etcdctl, ep, "elect", q->name, value, NULL};
        c = spawn(argv);
    } else if (q->tool == T_ELECTOR_RUN) {
        snprintf(ttl, sizeof(ttl), "%ds", g_ttl);
        char *argv[] = {(char *)g_elector, ep,        "--ttl", ttl,  "run",
                        q->name,           "--value", value,   "--", g_cmd_sh,
                        g_cmd_c,           g_cmd,     NULL};
        c = spawn(argv);
    } else if (q->tool == T_ETCD3) {
        char *argv[] = {(char *)g_node, (char *)g_etcd3, (char *)g_endpoints,
                        q->name,        value,           NULL};
        c = spawn(argv);
    } else if (q->tool == T_ETCDCTL_LOCK_CMD) {
        snprintf(ttl, sizeof(ttl), "%d", g_ttl);
        char *argv[] = {(char *)g_etcdctl, ep,      "lock", "--ttl", ttl, q->name, "--",
                        g_cmd_sh,          g_cmd_c, g_cmd,  NULL};
        c = spawn(argv);
    } else {
        snprintf(ttl, sizeof(ttl), "%d", g_ttl);
        char *argv[] = {(char *)g_etcdctl, ep, "lock", "--ttl", ttl, q->name, NULL};
        c = spawn(argv);
    }
    q->c[q->n++] = c;
    return c;
}

static int64_t json_int(const char *line, const char *field)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", field);
    const char *p = strstr(line, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* Waits until c reports that it leads. Returns the read time; *mono gets the
 * elector event's mono_ns (-1 for etcdctl). */
static int64_t wait_elected(queue *q, child *c, int64_t timeout_ms, int64_t *mono)
{
    int64_t end = bu_mono_ns() + timeout_ms * 1000000, t = 0;
    char line[4096];
    for (;;) {
        int r = next_line(c, end, line, sizeof(line), &t);
        if (r == 0)
            bu_die("%s: no successor elected within %lld ms", q->label,
                   (long long)timeout_ms);
        if (r < 0) bu_die("%s: candidate exited before being elected", q->label);
        if (!json_tool(q->tool)) { /* the first line: the key, or the command's */
            if (c->lines == 1) {
                if (mono) *mono = -1;
                return t;
            }
            continue;
        }
        if (strstr(line, "\"event\":\"elected\"")) {
            if (mono) *mono = json_int(line, "mono_ns");
            return t;
        }
        if (strstr(line, "\"event\":\"failed\"") || strstr(line, "\"event\":\"lost\""))
            bu_die("%s: candidate reported: %s", q->label, line);
    }
}

/* Leader plus `depth - 1` waiting candidates, all registered in etcd. */
static void queue_fill(queue *q, int depth)
{
    while (q->n < depth) {
        child *c = start_candidate(q);
        wait_count(q->prefix, q->n, 20000);
        if (q->n == 1) wait_elected(q, c, 20000, NULL);
    }
}

static void queue_stop(queue *q, int sig)
{
    for (int i = 0; i < q->n; i++)
        kill(q->c[i]->pid, sig);
    if (q->tool ==
        T_ETCDCTL_LOCK_CMD) /* its command, in its group, ignores SIGINT's fate */
        for (int i = 0; i < q->n; i++)
            kill(-q->c[i]->pid, SIGTERM);
    for (int i = 0; i < q->n; i++) {
        reap(q->c[i], 5000);
        child_free(q->c[i]);
    }
    q->n = 0;
}

static void queue_init(queue *q, enum tool t, const char *label, const char *kind)
{
    memset(q, 0, sizeof(*q));
    q->tool = t;
    q->label = label;
    snprintf(q->name, sizeof(q->name), "bench-%s-%s-%d-%lld", kind, label, (int)getpid(),
             (long long)(bu_mono_ns() / 1000000 % 100000));
    if (t == T_ETCD3)
        snprintf(q->prefix, sizeof(q->prefix), "election/%s/", q->name);
    else
        snprintf(q->prefix, sizeof(q->prefix), "%s/", q->name);
}

typedef struct samples {
    int64_t *v;
    size_t n, cap;
} samples;

static void push(samples *s, int64_t x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
        if (!s->v) bu_die("out of memory");
    }
    s->v[s->n++] = x;
}

static void emit(const char *bench, const char *tool, const char *measure, samples *s)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s_%s_%s.txt", g_out, bench, tool, measure);
    bu_write_samples(path, s->v, s->n); /* in round order */
    char prefix[256];
    snprintf(prefix, sizeof(prefix), "%s tool=%s measure=%s ", bench, tool, measure);
    bu_summary_ms(stdout, prefix, "", s->v, s->n);
    printf("\n");
    fflush(stdout);
}

/* The protocol floor of any watch-based handover, without election logic: a
 * Delete sent on one connection, the watch event it causes on a second
 * connection, and a read-only Txn sent on that second connection from the
 * event's callback; each round after G ms of idleness. Measures send -> the
 * Txn's (accepted) reply.
 *
 * CHAIN_LIN: the Txn's Range is linearizable (the member asks the Raft leader
 * for a ReadIndex and waits until it has applied it: etcd 3.4
 * etcdserver/v3_server.go, Txn -> linearizableReadNotify).
 * CHAIN_SER: the Range is serializable, so the whole read-only Txn is served
 * from the member's own state without Raft (v3_server.go isTxnSerializable).
 * The answer is accepted only under the conditions of docs/DESIGN.md ("Graceful
 * handover: the serializable check"): the reply's header names the member and
 * cluster whose watch delivered the DELETE, and its revision is >= R, the
 * DELETE's revision (the event's kv.mod_revision). Otherwise the linearizable
 * Txn follows, and the round's time includes it. */
enum chain_mode { CHAIN_LIN, CHAIN_SER };
static elector_etcd *g_chain_b;
static int64_t g_chain_ev, g_chain_done, g_chain_del;
static Etcdserverpb__TxnRequest *g_chain_txn, *g_chain_txn_ser;
static bool g_chain_closing;
static enum chain_mode g_chain_mode;
static int64_t g_chain_R;                        /* the DELETE event's revision */
static uint64_t g_chain_member, g_chain_cluster; /* who delivered it */
/* serializable rounds: accepted, and the fallbacks by reason */
static struct {
    int fast, error, no_header, other_member, stale;
    int64_t ahead; /* sum of (reply revision - R) over accepted answers */
} g_ser;

static void chain_txn_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m, (void)ud;
    if (err) bu_die("chain Txn: %s (%s)", elector_strerror(err), elector_etcd_errstr(e));
    g_chain_done = bu_mono_ns();
}

static void chain_ser_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)ud;
    const Etcdserverpb__TxnResponse *r = (const void *)m;
    const Etcdserverpb__ResponseHeader *h = !err && r ? r->header : NULL;
    if (err)
        g_ser.error++;
    else if (!h)
        g_ser.no_header++;
    else if (h->member_id != g_chain_member || h->cluster_id != g_chain_cluster)
        g_ser.other_member++;
    else if (h->revision < g_chain_R)
        g_ser.stale++;
    else {
        g_ser.fast++;
        g_ser.ahead += h->revision - g_chain_R;
        g_chain_done = bu_mono_ns();
        return;
    }
    /* the fallback: today's linearizable read */
    if (elector_etcd_call(e, ELECTOR_RPC_TXN, &g_chain_txn->base, NULL, chain_txn_cb,
                          NULL))
        bu_die("chain Txn (fallback)");
}

static void chain_del_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m, (void)ud;
    if (err)
        bu_die("chain Delete: %s (%s)", elector_strerror(err), elector_etcd_errstr(e));
    g_chain_del = bu_mono_ns();
}

static void chain_watch_cb(elector_watch *w, int err,
                           const Etcdserverpb__WatchResponse *r, void *ud)
{
    (void)w, (void)ud;
    if (err) {
        if (g_chain_closing) return;
        bu_die("chain watch: %s", elector_strerror(err));
    }
    for (size_t i = 0; i < r->n_events; i++)
        if (r->events[i]->type == MVCCPB__EVENT__EVENT_TYPE__DELETE) {
            g_chain_ev = bu_mono_ns();
            const Mvccpb__KeyValue *kv = r->events[i]->kv;
            g_chain_R = kv ? kv->mod_revision : INT64_MAX; /* no kv: never "fresh" */
            g_chain_member = r->header ? r->header->member_id : 0;
            g_chain_cluster = r->header ? r->header->cluster_id : 0;
            int rc =
                g_chain_mode == CHAIN_SER
                    ? elector_etcd_call(g_chain_b, ELECTOR_RPC_TXN,
                                        &g_chain_txn_ser->base, NULL, chain_ser_cb, NULL)
                    : elector_etcd_call(g_chain_b, ELECTOR_RPC_TXN, &g_chain_txn->base,
                                        NULL, chain_txn_cb, NULL);
            if (rc) bu_die("chain Txn");
        }
}

static void chain_loop(int max_ms)
{
    elector_etcd *c[2] = {g_etcd, g_chain_b};
    struct pollfd p[2];
    int64_t t = max_ms;
    for (int i = 0; i < 2; i++) {
        p[i].fd = elector_etcd_fd(c[i]);
        p[i].events = POLLIN;
        int64_t x = elector_etcd_timeout(c[i]);
        if (x >= 0 && x < t) t = x;
    }
    poll(p, 2, (int)t);
    for (int i = 0; i < 2; i++)
        elector_etcd_process(c[i]);
}

static Etcdserverpb__TxnRequest g_ctxn = ETCDSERVERPB__TXN_REQUEST__INIT;
static Etcdserverpb__RequestOp g_cop = ETCDSERVERPB__REQUEST_OP__INIT,
                               *g_cops[1] = {&g_cop};
static Etcdserverpb__RangeRequest g_crr = ETCDSERVERPB__RANGE_REQUEST__INIT;
static Etcdserverpb__TxnRequest g_ctxn_ser = ETCDSERVERPB__TXN_REQUEST__INIT;
static Etcdserverpb__RequestOp g_cop_ser = ETCDSERVERPB__REQUEST_OP__INIT,
                               *g_cops_ser[1] = {&g_cop_ser};
static Etcdserverpb__RangeRequest g_crr_ser = ETCDSERVERPB__RANGE_REQUEST__INIT;
static Etcdserverpb__PutRequest g_cput = ETCDSERVERPB__PUT_REQUEST__INIT;
static Etcdserverpb__DeleteRangeRequest g_cdel = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
static const char g_ckey[] = "bench-chain-floor";

static void chain_setup(void)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = g_endpoints;
    g_chain_b = elector_etcd_new(&cfg);
    if (!g_chain_b || elector_etcd_err(g_chain_b)) bu_die("elector_etcd_new");
    Etcdserverpb__WatchCreateRequest wc = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    wc.key.data = (uint8_t *)g_ckey;
    wc.key.len = sizeof(g_ckey) - 1;
    if (!elector_etcd_watch(g_chain_b, &wc, chain_watch_cb, NULL)) bu_die("chain watch");
    g_cput.key = wc.key;
    g_cput.value.data = (uint8_t *)"v";
    g_cput.value.len = 1;
    g_cdel.key = wc.key;
    g_crr.key = wc.key;
    g_cop.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    g_cop.request_range = &g_crr;
    g_ctxn.n_success = 1;
    g_ctxn.success = g_cops;
    g_chain_txn = &g_ctxn;
    /* the same Txn, its Range serializable */
    g_crr_ser = g_crr;
    g_crr_ser.serializable = 1;
    g_cop_ser.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    g_cop_ser.request_range = &g_crr_ser;
    g_ctxn_ser.n_success = 1;
    g_ctxn_ser.success = g_cops_ser;
    g_chain_txn_ser = &g_ctxn_ser;
}

/* One chain measurement after gap_ms idle; pushes event and total times. */
static void chain_once(int gap_ms, enum chain_mode mode, samples *ev, samples *total)
{
    ProtobufCMessage *m;
    int rc = elector_etcd_call_sync(g_etcd, ELECTOR_RPC_PUT, &g_cput.base, NULL, &m);
    if (rc) bu_die("Put: %s", elector_strerror(rc));
    protobuf_c_message_free_unpacked(m, NULL);
    int64_t end = bu_mono_ns() + (int64_t)gap_ms * 1000000;
    while (bu_mono_ns() < end)
        chain_loop(5);
    g_chain_ev = g_chain_done = g_chain_del = 0;
    g_chain_mode = mode;
    int64_t t0 = bu_mono_ns();
    if (elector_etcd_call(g_etcd, ELECTOR_RPC_DELETE_RANGE, &g_cdel.base, NULL,
                          chain_del_cb, NULL))
        bu_die("chain Delete");
    while (!g_chain_done || !g_chain_del)
        chain_loop(5);
    push(total, g_chain_done - t0);
    push(ev, g_chain_ev - t0);
}

static void chain_ser_summary(const char *bench)
{
    int fb = g_ser.error + g_ser.no_header + g_ser.other_member + g_ser.stale;
    printf("%s tool=chain_ser measure=fallbacks n=%d accepted=%d fallbacks=%d error=%d "
           "no_header=%d other_member=%d stale=%d mean_rev_ahead=%.3f\n",
           bench, g_ser.fast + fb, g_ser.fast, fb, g_ser.error, g_ser.no_header,
           g_ser.other_member, g_ser.stale,
           g_ser.fast ? (double)g_ser.ahead / g_ser.fast : 0.0);
    fflush(stdout);
}

static void chain_close(void)
{
    g_chain_closing = true;
    elector_etcd_free(g_chain_b);
    g_chain_b = NULL;
}

/* One Put after gap_ms idle. */
static void put_once(int gap_ms, samples *s)
{
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key.data = (uint8_t *)"bench-put-floor";
    put.key.len = strlen("bench-put-floor");
    put.value.data = (uint8_t *)"cand-0";
    put.value.len = 6;
    int64_t end = bu_mono_ns() + (int64_t)gap_ms * 1000000;
    while (bu_mono_ns() < end)
        elector_etcd_run_once(g_etcd, gap_ms);
    int64_t t0 = bu_mono_ns();
    ProtobufCMessage *m;
    int rc = elector_etcd_call_sync(g_etcd, ELECTOR_RPC_PUT, &put.base, NULL, &m);
    int64_t t1 = bu_mono_ns();
    if (rc) bu_die("Put: %s (%s)", elector_strerror(rc), elector_etcd_errstr(g_etcd));
    protobuf_c_message_free_unpacked(m, NULL);
    push(s, t1 - t0);
}

/* The anchors of graceful rounds, in the gaps between them: one Put, then the
 * protocol floor with each check (the order of the two alternating). */
typedef struct anchors {
    samples put, ev, floor, ser_ev, ser_floor;
} anchors;

static void anchors_round(anchors *a, int r, unsigned *seed)
{
    put_once(100 + rand_r(seed) % 100, &a->put);
    for (int k = 0; k < 2; k++) {
        enum chain_mode m = ((r + k) % 2) ? CHAIN_SER : CHAIN_LIN;
        if (m == CHAIN_LIN)
            chain_once(100 + rand_r(seed) % 100, m, &a->ev, &a->floor);
        else
            chain_once(100 + rand_r(seed) % 100, m, &a->ser_ev, &a->ser_floor);
    }
}

static void anchors_emit(const char *bench, anchors *a)
{
    if (a->put.n) emit(bench, "put", "idle", &a->put);
    emit(bench, "chain", "event", &a->ev);
    emit(bench, "chain", "floor", &a->floor);
    emit(bench, "chain_ser", "event", &a->ser_ev);
    emit(bench, "chain_ser", "floor", &a->ser_floor);
    chain_ser_summary(bench);
    free(a->put.v), free(a->ev.v), free(a->floor.v), free(a->ser_ev.v),
        free(a->ser_floor.v);
}

static void chain_floor(int n, int gap_ms)
{
    chain_setup();
    anchors a = {0};
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            enum chain_mode m = ((i + k) % 2) ? CHAIN_SER : CHAIN_LIN;
            if (m == CHAIN_LIN)
                chain_once(gap_ms, m, &a.ev, &a.floor);
            else
                chain_once(gap_ms, m, &a.ser_ev, &a.ser_floor);
        }
    }
    anchors_emit("chain", &a);
    chain_close();
}

/* One failover round on q: signal the leader, time the successor. */
static void round_once(queue *q, int sig, int64_t timeout_ms, samples *ext, samples *mono,
                       samples *hand)
{
    child *L = q->c[0], *S = q->c[1];
    int64_t t0 = bu_mono_ns();
    if (kill(L->pid, sig)) bu_die("kill: %s", strerror(errno));
    int64_t m = -1;
    int64_t t1 = wait_elected(q, S, timeout_ms, &m);
    push(ext, t1 - t0);
    if (json_tool(q->tool) && m > 0) push(mono, m - t0);
    /* The old leader's "resigned" line (graceful elector only), then its exit. */
    if (hand && q->tool == T_ELECTOR && sig != SIGKILL) {
        char line[4096];
        int64_t end = bu_mono_ns() + 5000 * 1000000LL;
        while (next_line(L, end, line, sizeof(line), NULL) == 1)
            if (strstr(line, "\"event\":\"resigned\"")) {
                int64_t r = json_int(line, "mono_ns");
                if (r > 0 && m > 0) push(hand, m - r);
                break;
            }
    }
    pid_t lpid = L->pid;
    int st = reap(L, 5000);
    if (q->tool == T_ETCDCTL_LOCK_CMD || q->tool == T_ELECTOR_RUN ||
        q->tool == T_ELECTOR_RELEASE) {
        /* etcdctl's command outlives it in its group; elector's guard (own
         * session) finishes and comes to us as an orphan */
        kill(-lpid, SIGKILL);
        reap_strays(false);
    }
    if (sig != SIGKILL && !(WIFEXITED(st) && WEXITSTATUS(st) == 0) &&
        !(WIFSIGNALED(st) && WTERMSIG(st) == sig))
        fprintf(stderr, "bench: %s: leader ended with status 0x%x\n", q->label, st);
    child_free(L);
    memmove(q->c, q->c + 1, sizeof(q->c[0]) * (size_t)(q->n - 1));
    q->n--;
}

/* One contender of a failover benchmark: a queue of candidates of one tool. */
typedef struct contender {
    queue q;
    int sig;
    const char *label;
    samples ext, mono, hand;
} contender;

static void failover_ex(const char *bench, int rounds, int sig_elector, int sig_etcdctl,
                        enum tool mine, const char *mine_label, enum tool other,
                        const char *other_label, int64_t timeout_ms)
{
    bool graceful = sig_elector != SIGKILL;
    contender cs[3];
    int nc = 0;
    memset(cs, 0, sizeof(cs));
    queue_init(&cs[nc].q, mine, mine_label, bench);
    cs[nc].sig = sig_elector, cs[nc++].label = mine_label;
    if (other != T_NONE) {
        queue_init(&cs[nc].q, other, other_label, bench);
        cs[nc].sig = sig_etcdctl, cs[nc++].label = other_label;
    }
    if (graceful && g_etcd3) {
        queue_init(&cs[nc].q, T_ETCD3, "etcd3", bench);
        cs[nc].sig = SIGINT, cs[nc++].label = "etcd3";
    }
    for (int i = 0; i < nc; i++)
        queue_fill(&cs[i].q, 3);
    sleep_ms(500);
    anchors a = {0}; /* graceful only */
    if (graceful) chain_setup();
    unsigned seed = (unsigned)getpid();
    for (int r = 0; r < rounds; r++) {
        /* the tools take turns; who goes first rotates */
        for (int k = 0; k < nc; k++) {
            contender *c = &cs[(r + k) % nc];
            bool hand = c->q.tool == T_ELECTOR && graceful;
            round_once(&c->q, c->sig, timeout_ms, &c->ext, &c->mono,
                       hand ? &c->hand : NULL);
            queue_fill(&c->q, 3);
            /* let the newcomer settle; random gap against phase-locking with
             * keepalive timers */
            sleep_ms(100 + rand_r(&seed) % 100);
        }
        /* the anchors, measured in the same conditions, between rounds */
        if (graceful) anchors_round(&a, r, &seed);
        fprintf(stderr, "\r%s: round %d/%d", bench, r + 1, rounds);
    }
    fprintf(stderr, "\n");
    for (int i = 0; i < nc; i++) {
        enum tool t = cs[i].q.tool;
        queue_stop(&cs[i].q, json_tool(t) || t == T_ELECTOR_RUN ? SIGTERM : SIGINT);
    }
    reap_strays(true);
    for (int i = 0; i < nc; i++) {
        contender *c = &cs[i];
        emit(bench, c->label, "ext", &c->ext);
        if (c->mono.n) emit(bench, c->label, "mono", &c->mono);
        if (c->hand.n) emit(bench, "elector", "hand", &c->hand);
        free(c->ext.v), free(c->mono.v), free(c->hand.v);
    }
    if (graceful) {
        anchors_emit(bench, &a);
        chain_close();
    }
}

static void failover(const char *bench, int rounds, int sig_elector, int sig_etcdctl,
                     enum tool other, const char *other_label, int64_t timeout_ms)
{
    failover_ex(bench, rounds, sig_elector, sig_etcdctl, T_ELECTOR, "elector", other,
                other_label, timeout_ms);
}

/* ---------------------------------------------------------------- footprint */

static void footprint_one(const char *label, pid_t pid, int idle_s, int64_t cpu0)
{
    int64_t cpu1 = bu_proc_cpu_ns(pid);
    printf("footprint tool=%s pid=%d rss_kb=%ld hwm_kb=%ld pss_kb=%ld rss_anon_kb=%ld "
           "rss_file_kb=%ld threads=%ld idle_s=%d cpu_ms_per_s=%.4f\n",
           label, (int)pid, bu_status_field(pid, "VmRSS"), bu_status_field(pid, "VmHWM"),
           bu_pss_kb(pid), bu_status_field(pid, "RssAnon"),
           bu_status_field(pid, "RssFile"), bu_status_field(pid, "Threads"), idle_s,
           (double)(cpu1 - cpu0) / 1e6 / (double)idle_s);
    char maps[2048];
    bu_rss_by_mapping(pid, maps, sizeof(maps), 14);
    printf("footprint_maps tool=%s rss_kb_by_mapping=%s\n", label, maps);
}

static void footprint(int idle_s)
{
    queue qe, qo;
    queue_init(&qe, T_ELECTOR, "elector", "footprint");
    queue_init(&qo, T_ETCDCTL_ELECT, "etcdctl", "footprint");
    queue_fill(&qe, 2);
    queue_fill(&qo, 2);
    sleep_ms(3000); /* settled: connections up, first keepalives done */
    pid_t ew = qe.c[1]->pid, ow = qo.c[1]->pid, el = qe.c[0]->pid, ol = qo.c[0]->pid;
    int64_t c_ew = bu_proc_cpu_ns(ew), c_ow = bu_proc_cpu_ns(ow);
    int64_t c_el = bu_proc_cpu_ns(el), c_ol = bu_proc_cpu_ns(ol);
    sleep_ms((int64_t)idle_s * 1000);
    footprint_one("elector_waiting", ew, idle_s, c_ew);
    footprint_one("etcdctl_waiting", ow, idle_s, c_ow);
    footprint_one("elector_leader", el, idle_s, c_el);
    footprint_one("etcdctl_leader", ol, idle_s, c_ol);
    fflush(stdout);
    queue_stop(&qe, SIGTERM);
    queue_stop(&qo, SIGINT);
}

/* ---------------------------------------------------------------- put floor */

static void put_floor(int n, int warmup, int gap_ms)
{
    static const char key[] = "bench-put-floor";
    static const char val[] = "cand-0";
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key.data = (uint8_t *)key;
    put.key.len = sizeof(key) - 1;
    put.value.data = (uint8_t *)val;
    put.value.len = sizeof(val) - 1;
    samples s = {0};
    for (int i = 0; i < warmup + n; i++) {
        /* gap_ms > 0: the Put follows an idle pause, as a failover does */
        if (gap_ms > 0 && i >= warmup) {
            int64_t end = bu_mono_ns() + (int64_t)gap_ms * 1000000;
            while (bu_mono_ns() < end)
                elector_etcd_run_once(g_etcd, gap_ms);
        }
        int64_t t0 = bu_mono_ns();
        ProtobufCMessage *m;
        int rc = elector_etcd_call_sync(g_etcd, ELECTOR_RPC_PUT, &put.base, NULL, &m);
        int64_t t1 = bu_mono_ns();
        if (rc) bu_die("Put: %s (%s)", elector_strerror(rc), elector_etcd_errstr(g_etcd));
        protobuf_c_message_free_unpacked(m, NULL);
        if (i >= warmup) push(&s, t1 - t0);
    }
    emit("put", "libelector", gap_ms > 0 ? "idle" : "busy", &s);
    free(s.v);
}

/* ---------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr, "usage: proc_bench "
                    "graceful|crash|runcrash|embedcrash|releasecrash|footprint|put|chain "
                    "[--endpoints E] [--rounds R] "
                    "[--ttl S] [--idle-s S] [--n N] [--warmup W] [--gap-ms G] [--elector "
                    "PATH] [--etcdctl PATH] "
                    "[--node PATH] [--etcd3 SCRIPT] "
                    "[--release-helper PATH] [--helper 0|1] [--log FILE] [--out DIR]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2) usage();
    const char *cmd = argv[1];
    int rounds = 50, idle_s = 10, n = 1000, warmup = 100, gap_ms = 0;
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *o = argv[i], *v = argv[++i];
        if (!strcmp(o, "--endpoints"))
            g_endpoints = v;
        else if (!strcmp(o, "--rounds"))
            rounds = atoi(v);
        else if (!strcmp(o, "--ttl"))
            g_ttl = atoi(v);
        else if (!strcmp(o, "--idle-s"))
            idle_s = atoi(v);
        else if (!strcmp(o, "--n"))
            n = atoi(v);
        else if (!strcmp(o, "--warmup"))
            warmup = atoi(v);
        else if (!strcmp(o, "--gap-ms"))
            gap_ms = atoi(v);
        else if (!strcmp(o, "--elector"))
            g_elector = v;
        else if (!strcmp(o, "--etcdctl"))
            g_etcdctl = v;
        else if (!strcmp(o, "--node"))
            g_node = v;
        else if (!strcmp(o, "--etcd3"))
            g_etcd3 = v;
        else if (!strcmp(o, "--log"))
            g_log = v;
        else if (!strcmp(o, "--release-helper"))
            setenv("ELECTOR_RELEASE_HELPER", v, 1); /* the candidates inherit it */
        else if (!strcmp(o, "--helper"))
            g_graceful_helper = atoi(v) != 0;
        else if (!strcmp(o, "--out"))
            g_out = v;
        else
            usage();
    }
    signal(SIGINT, on_fatal_signal);
    signal(SIGTERM, on_fatal_signal);
    signal(SIGHUP, on_fatal_signal);
    signal(SIGPIPE, SIG_IGN);
    atexit(kill_all_children);

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = g_endpoints;
    g_etcd = elector_etcd_new(&cfg);
    if (!g_etcd || elector_etcd_err(g_etcd)) bu_die("elector_etcd_new failed");

    if (!strcmp(cmd, "graceful"))
        failover("graceful", rounds, SIGTERM, SIGINT, T_ETCDCTL_ELECT, "etcdctl", 10000);
    else if (!strcmp(cmd, "crash"))
        failover("crash", rounds, SIGKILL, SIGKILL, T_ETCDCTL_LOCK, "etcdctl_lock",
                 (int64_t)g_ttl * 1000 * 4 + 5000);
    else if (!strcmp(cmd, "runcrash")) {
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        g_subreaper = true;
        failover_ex("runcrash", rounds, SIGKILL, SIGKILL, T_ELECTOR_RUN, "elector_run",
                    T_ETCDCTL_LOCK_CMD, "etcdctl_lock_cmd",
                    (int64_t)g_ttl * 1000 * 4 + 5000);
    } else if (!strcmp(cmd, "embedcrash")) {
        prctl(PR_SET_CHILD_SUBREAPER, 1); /* the dead leaders' helpers come to us */
        g_subreaper = true;
        failover_ex("embedcrash", rounds, SIGKILL, SIGKILL, T_ELECTOR_RELEASE,
                    "elector_release", T_ELECTOR, "elector_ttl",
                    (int64_t)g_ttl * 1000 * 4 + 5000);
    } else if (!strcmp(cmd, "releasecrash")) {
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        g_subreaper = true;
        failover_ex("releasecrash", rounds, SIGKILL, SIGKILL, T_ELECTOR_RELEASE,
                    "elector_release", T_NONE, NULL, (int64_t)g_ttl * 1000 * 4 + 5000);
    } else if (!strcmp(cmd, "footprint"))
        footprint(idle_s);
    else if (!strcmp(cmd, "put"))
        put_floor(n, warmup, gap_ms);
    else if (!strcmp(cmd, "chain"))
        chain_floor(n, gap_ms > 0 ? gap_ms : 150);
    else
        usage();
    elector_etcd_free(g_etcd);
    return 0;
}
