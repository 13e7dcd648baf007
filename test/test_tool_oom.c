/* SPDX-License-Identifier: MIT */
/* Allocation-failure injection for the elector tool (issue 23): the commands
 * run as `elector_oom` (the tool's objects linked with test/tool_oom_wrap.c's
 * allocation wrappers) against a real etcd, once without a failure to count
 * the allocations each makes (the baseline), then once for each N with the
 * Nth allocation of the elector process failing (ELECTOR_TOOL_OOM_N).
 *
 * Each run must:
 *   - not die of a signal (a crash, an ASan/UBSan abort) nor print a
 *     sanitizer report (LeakSanitizer at exit included);
 *   - end within its bound (else it is SIGKILLed by pid: a hang);
 *   - exit 0 with the output the scenario expects, or non-zero with an error
 *     on stderr ("out of memory", or the tool's usual ERROR line) and no
 *     output that says something false (`leader` must not say "no leader",
 *     exit 4, while one leads);
 *   - campaign and run: leave no key under the election's prefix once it has
 *     exited (checked for 3 s, well within the TTL of 10 s, so a key left
 *     to expire is seen), and while it says it is elected its key is the only
 *     one there.
 *
 * Scenarios: leader (simple and -w json), observe (sees a change of value),
 * campaign (-w json, --proclaim-stdin, --http with /metrics and /leader read,
 * $NOTIFY_SOCKET, debug log; stopped with SIGTERM), run (a command and a
 * health check, JSON log lines; ends by itself), switchover (the target
 * already leads), lock -n 2 with a command (a semaphore), leader on a cluster
 * with authentication (--user, --password-file), campaign waiting behind a
 * leader until --timeout, a switchover that hands over between two real
 * electors, and one that hands over to elector_oom.
 *
 * Which N: the baseline records each allocation's call site; the ctest sample
 * fails the first allocation of each call site in tool/ (addr2line maps the
 * sites), plus a few of the library's, within a budget of runs per scenario.
 * Environment:
 *   ELECTOR_TOOL_OOM_FULL=1   every N of every scenario (minutes: see
 *                             docs/COVERAGE.md)
 *   ELECTOR_TOOL_OOM_SCEN=s   only scenario s (leader, leader_json, observe,
 *                             campaign, run, switchover, lock_n, leader_auth,
 *                             campaign_wait, handover, handover_target)
 *   ELECTOR_TOOL_OOM_ONLY=n   only that N (with _SCEN)
 *   ELECTOR_TOOL_OOM_VERBOSE=1  a line per run
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tool_util.h"

#ifndef ELECTOR_OOM_BIN
#error "ELECTOR_OOM_BIN must name the built elector_oom binary"
#endif

static eh_cluster *cl, *cl_auth; /* cl_auth: with authentication */
static eh_cluster *target;       /* the cluster a run talks to */
static char *dir;
static bool verbose;
static int notify_fd = -1;
static char notify_path[256];

/* ---- one run of elector_oom --------------------------------------------- */

typedef struct run {
    long n; /* the allocation that fails (0: none) */
    pid_t pid;
    int in_fd; /* its stdin's write end (-1: /dev/null) */
    char out[300], err[300], report[300], sites[300];
    long allocs, failed; /* from the injector's report */
    int status;          /* exit status; 128+sig if killed; -1 hang */
    bool hung;
    char why[512]; /* the first thing wrong */
} run;

static char *read_all(const char *p)
{
    FILE *f = fopen(p, "r");
    if (!f) return strdup("");
    char *buf = NULL;
    size_t len = 0, cap = 0, k;
    char tmp[4096];
    while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        if (len + k + 1 > cap) {
            cap = (len + k + 1) * 2;
            buf = realloc(buf, cap);
        }
        memcpy(buf + len, tmp, k);
        len += k;
    }
    fclose(f);
    if (!buf) return strdup("");
    buf[len] = 0;
    return buf;
}

static bool file_has(const char *p, const char *needle)
{
    char *s = read_all(p);
    bool yes = strstr(s, needle) != NULL;
    free(s);
    return yes;
}

static void fail_run(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_run(run *r, const char *fmt, ...)
{
    if (r->why[0]) return; /* the first reason stands */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof(r->why), fmt, ap);
    va_end(ap);
}

/* An error line of the tool's with a message (text or JSON log format). */
static bool has_error_line(const char *e)
{
    for (const char *l = e; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *t = strstr(l, " error elector: ");
        const char *nl = strchr(l, '\n');
        if (t && (!nl || t < nl)) {
            t += strlen(" error elector: ");
            if (*t && *t != '\n') return true;
        }
        if (strncmp(l, "{\"time\"", 7) == 0 && strstr(l, "\"level\":\"error\""))
            return true;
        if (strncmp(l, "elector: (out of memory)", 24) == 0) return true;
    }
    return false;
}

/* Starts elector_oom with args; stdin a pipe (stdin_pipe) or /dev/null. */
static void start(run *r, long n, const char *tag, const char *const args[],
                  bool stdin_pipe, bool want_sites)
{
    memset(r, 0, sizeof(*r));
    r->n = n;
    r->in_fd = -1;
    snprintf(r->out, sizeof(r->out), "%s/%s.out", dir, tag);
    snprintf(r->err, sizeof(r->err), "%s/%s.err", dir, tag);
    snprintf(r->report, sizeof(r->report), "%s/%s.report", dir, tag);
    snprintf(r->sites, sizeof(r->sites), "%s/%s.sites", dir, tag);
    /* Removed here, not only truncated by the child: what the last run wrote
     * must not be read as this one's. */
    unlink(r->out);
    unlink(r->err);
    unlink(r->report);
    unlink(r->sites);
    const char *argv[48] = {ELECTOR_OOM_BIN, "--endpoints",
                            eh_endpoints(target ? target : cl)};
    int k = 3;
    for (int i = 0; args[i] && k < 46; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    int p[2] = {-1, -1};
    if (stdin_pipe) ASSERT_OK(pipe2(p, O_CLOEXEC));
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int in = stdin_pipe ? p[0] : open("/dev/null", O_RDONLY);
        int o = open(r->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(r->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || o < 0 || e < 0) _exit(120);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        char nb[32];
        snprintf(nb, sizeof(nb), "%ld", n);
        setenv("ELECTOR_TOOL_OOM_N", nb, 1);
        setenv("ELECTOR_TOOL_OOM_REPORT", r->report, 1);
        if (want_sites) setenv("ELECTOR_TOOL_OOM_SITES", r->sites, 1);
        setenv("ELECTOR_RELEASE_HELPER", RELEASE_HELPER_BIN, 1);
        if (*notify_path) setenv("NOTIFY_SOCKET", notify_path, 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (stdin_pipe) {
        close(p[0]);
        r->in_fd = p[1];
    }
    r->pid = pid;
}

static bool exited(run *r)
{
    if (!r->pid) return true;
    int st;
    pid_t w = waitpid(r->pid, &st, WNOHANG);
    if (w == 0) return false;
    r->pid = 0;
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (WIFSIGNALED(st)) fail_run(r, "killed by signal %d", WTERMSIG(st));
    return true;
}

/* Waits for the process to exit (at most timeout_s; then SIGKILL: a hang). */
static void finish(run *r, double timeout_s)
{
    double end = tl_now() + timeout_s;
    while (!exited(r)) {
        if (tl_now() > end) {
            kill(r->pid, SIGKILL);
            int st;
            while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR) {
            }
            r->pid = 0;
            r->hung = true;
            r->status = -1;
            fail_run(r, "hangs: killed after %.0f s", timeout_s);
            break;
        }
        tl_msleep(5);
    }
    if (r->in_fd >= 0) close(r->in_fd);
    r->in_fd = -1;
    FILE *f = fopen(r->report, "r");
    r->allocs = r->failed = -1;
    if (f) {
        if (fscanf(f, "allocations %ld failed %ld", &r->allocs, &r->failed) != 2)
            r->allocs = r->failed = -1;
        fclose(f);
    }
    char *e = read_all(r->err);
    if (strstr(e, "Sanitizer") || strstr(e, "runtime error:"))
        fail_run(r, "a sanitizer report");
    free(e);
    if (!r->hung && r->status != 0 && r->status < 128) {
        /* An error: said on stderr as the tool says errors. */
        e = read_all(r->err);
        if (!has_error_line(e))
            fail_run(r, "exit %d without an error message", r->status);
        free(e);
    }
}

/* Waits until path contains needle or the process exits (false then). */
static bool wait_for(run *r, const char *path, const char *needle, double timeout_s)
{
    double end = tl_now() + timeout_s;
    for (;;) {
        if (file_has(path, needle)) return true;
        if (exited(r) || tl_now() > end) return file_has(path, needle);
        tl_msleep(5);
    }
}

/* Keys under prefix/ (etcdctl), -1 on an etcdctl error. */
static int keys_under(const char *name, char *first, size_t cap)
{
    char prefix[128], *out = NULL;
    snprintf(prefix, sizeof(prefix), "%s/", name);
    if (eh_etcdctl(cl, &out, "get", "--prefix", "--keys-only", prefix, NULL)) {
        free(out);
        return -1;
    }
    int n = 0;
    if (first) *first = 0;
    for (char *s = strtok(out, "\n"); s; s = strtok(NULL, "\n")) {
        if (!*s) continue;
        if (!n && first) snprintf(first, cap, "%s", s);
        n++;
    }
    free(out);
    return n;
}

/* After a candidate exited: nothing of it stays under its prefix. */
static void check_gone(run *r, const char *name)
{
    double end = tl_now() + 3;
    int n;
    while ((n = keys_under(name, NULL, 0)) != 0 && tl_now() < end)
        tl_msleep(50);
    if (n) fail_run(r, "%d key(s) left under %s/ 3 s after exit %d", n, name, r->status);
}

/* GET path on 127.0.0.1:port; the status code, or -1. */
static int http_get(int port, const char *path)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int code = -1;
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0) {
        char req[128], buf[8192];
        int l = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
        if (write(s, req, (size_t)l) == l) {
            size_t got = 0;
            struct pollfd p = {.fd = s, .events = POLLIN};
            while (got < sizeof(buf) - 1 && poll(&p, 1, 3000) == 1) {
                ssize_t k = read(s, buf + got, sizeof(buf) - 1 - got);
                if (k <= 0) break;
                got += (size_t)k;
            }
            buf[got] = 0;
            if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1) code = -1;
        }
    }
    close(s);
    return code;
}

static void drain_notify(void)
{
    char b[512];
    while (notify_fd >= 0 && recv(notify_fd, b, sizeof(b), MSG_DONTWAIT) > 0) {
    }
}

/* ---- the scenarios -------------------------------------------------------- */

/* A key with a lease of 10 minutes, put by etcdctl: a candidate's, for
 * `leader` (one without a lease blocks the election: ELECTOR_EBLOCKED). */
static void put_leased(eh_cluster *c, const char *key, const char *value)
{
    char *out = NULL, id[32];
    ASSERT_EQ(0, eh_etcdctl(c, &out, "lease", "grant", "600", NULL));
    ASSERT_EQ(1, sscanf(out, "lease %31s granted", id));
    free(out);
    char lease[48];
    snprintf(lease, sizeof(lease), "--lease=%s", id);
    ASSERT_EQ(0, eh_etcdctl(c, NULL, "put", lease, key, value, NULL));
}

/* leader: a key put by etcdctl (with a lease) leads "toom-held". */
static void sc_leader_common(run *r, long n, bool json)
{
    const char *args[] = {"-w", "json", "leader", "toom-held", NULL};
    const char *simple[] = {"leader", "toom-held", NULL};
    start(r, n, "leader", json ? args : simple, false, n == 0);
    finish(r, 10);
    char *out = read_all(r->out);
    if (r->status == 0) {
        if (json ? !strstr(out, "\"event\":\"leader\"") || !strstr(out, "v-held")
                 : strcmp(out, "toom-held/k1\nv-held\n") != 0)
            fail_run(r, "exit 0 with the wrong output: \"%.200s\"", out);
    } else if (r->status == 4) {
        fail_run(r, "exit 4 (no leader) while toom-held/k1 leads");
    } else if (*out && !r->why[0]) {
        fail_run(r, "exit %d with output \"%.200s\"", r->status, out);
    }
    free(out);
}

static void sc_leader(run *r, long n)
{
    sc_leader_common(r, n, false);
}

static void sc_leader_json(run *r, long n)
{
    sc_leader_common(r, n, true);
}

/* observe: the leader of "toom-obs", then a new value put while it watches. */
static void sc_observe(run *r, long n)
{
    char v0[32], v1[32];
    snprintf(v0, sizeof(v0), "o%ld-a", n);
    snprintf(v1, sizeof(v1), "o%ld-b", n);
    put_leased(cl, "toom-obs/k1", v0); /* a candidate's key: it has a lease */
    const char *args[] = {"observe", "toom-obs", NULL};
    start(r, n, "observe", args, false, n == 0);
    bool first = wait_for(r, r->out, v0, 5);
    bool second = false;
    if (first) {
        put_leased(cl, "toom-obs/k1", v1);
        second = wait_for(r, r->out, v1, 5);
    }
    if (!exited(r)) kill(r->pid, SIGTERM);
    finish(r, 10);
    if (r->status == 0 && (!first || !second)) {
        char *out = read_all(r->out);
        fail_run(r, "exit 0 but the %s value was not printed (\"%.200s\")",
                 first ? "new" : "first", out);
        free(out);
    }
}

/* campaign: elected, a value proclaimed from stdin, /metrics and /leader read,
 * stopped by SIGTERM: exit 0, nothing left under the prefix. */
static void sc_campaign(run *r, long n)
{
    char name[64];
    snprintf(name, sizeof(name), "toom-c%ld", n);
    const char *args[] = {
        "-w", "json",    "--log-level",      "debug",  "--ttl",       "10", "campaign",
        name, "val-one", "--proclaim-stdin", "--http", "127.0.0.1:0", NULL};
    start(r, n, "campaign", args, true, n == 0);
    bool elected = wait_for(r, r->out, "\"event\":\"elected\"", 8);
    if (elected && !exited(r)) {
        char first[256];
        int k = keys_under(name, first, sizeof(first));
        char *out = read_all(r->out);
        if (k != 1 || !strstr(out, first)) {
            char *raw = NULL;
            eh_etcdctl(cl, &raw, "get", "--prefix", name, NULL);
            fail_run(r, "elected, but %d key(s) under %s/ (first %s; get --prefix: %s)",
                     k, name, first, raw ? raw : "?");
            free(raw);
        }
        free(out);
        static const char line[] = "val-two\n";
        if (r->in_fd >= 0 && write(r->in_fd, line, sizeof(line) - 1) < 0) {
        }
        /* Proclaimed, or said not to be (the line could not be kept). */
        bool proclaimed = false, refused = false;
        for (double end = tl_now() + 5; !exited(r) && tl_now() < end; tl_msleep(5)) {
            if ((proclaimed = file_has(r->out, "\"event\":\"proclaimed\""))) break;
            if ((refused = file_has(r->err, "not proclaimed") ||
                           file_has(r->err, "proclaim failed")))
                break;
        }
        if (!exited(r) && !proclaimed && !refused)
            fail_run(r, "the line on stdin was neither proclaimed nor refused in 5 s");
        if (n == 0 && !proclaimed) fail_run(r, "baseline: not proclaimed");
        char *e = read_all(r->err);
        char *h = strstr(e, "on http://127.0.0.1:");
        int port = h ? atoi(h + strlen("on http://127.0.0.1:")) : 0;
        free(e);
        if (port > 0) {
            int m = http_get(port, "/metrics"), l = http_get(port, "/leader");
            if (n == 0 && (m != 200 || l != 200))
                fail_run(r, "baseline: /metrics %d, /leader %d", m, l);
        } else if (n == 0) {
            fail_run(r, "baseline: no HTTP port said");
        }
    } else if (n == 0) {
        fail_run(r, "baseline: not elected");
    }
    if (!exited(r)) kill(r->pid, SIGTERM);
    finish(r, 10);
    drain_notify();
    if (!r->hung) check_gone(r, name);
    if (r->status == 0 && !elected) fail_run(r, "exit 0, never elected");
}

/* run: a command that says it ran, and a health check; it ends by itself. */
static void sc_run(run *r, long n)
{
    char name[64];
    snprintf(name, sizeof(name), "toom-r%ld", n);
    const char *args[] = {"--ttl",
                          "10",
                          "--log-format",
                          "json",
                          "run",
                          name,
                          "--health-cmd",
                          "true",
                          "--health-interval",
                          "50ms",
                          "--",
                          "/bin/sh",
                          "-c",
                          "echo cmd-ran; sleep 0.1",
                          NULL};
    start(r, n, "run", args, false, n == 0);
    finish(r, 15);
    if (!r->hung) check_gone(r, name);
    if (r->status == 0 && !file_has(r->out, "cmd-ran"))
        fail_run(r, "exit 0, but the command did not run");
}

/* switchover to the candidate that already leads: exit 0, its key and value. */
static eu_child sw_cand;
static void sc_switchover(run *r, long n)
{
    const char *args[] = {"switchover", "toom-sw", "--to", "sw-target",
                          "--timeout",  "5s",      NULL};
    start(r, n, "switchover", args, false, n == 0);
    finish(r, 15);
    if (r->status == 0 && !file_has(r->out, "sw-target"))
        fail_run(r, "exit 0 without the leader's value");
    /* The request is withdrawn in every outcome. */
    double end = tl_now() + 3;
    char *out = NULL;
    bool left = true;
    while (left) {
        free(out);
        out = NULL;
        eh_etcdctl(cl, &out, "get", "--keys-only", "__elector/switchover/toom-sw", NULL);
        left = out && strstr(out, "switchover");
        if (!left || tl_now() > end) break;
        tl_msleep(50);
    }
    free(out);
    if (left) fail_run(r, "the switchover request was left in etcd");
    if (!pid_alive(sw_cand.pid)) fail_run(r, "the switchover's target is gone");
}

/* lock -n 2 with a command: a semaphore's slots (elector's own keys). */
static void sc_lock_n(run *r, long n)
{
    char name[64], prefix[96];
    snprintf(name, sizeof(name), "toom-l%ld", n);
    snprintf(prefix, sizeof(prefix), "__elector/semaphore/%s", name);
    const char *args[] = {"--ttl", "10", "-w",      "json", "lock",        name, "-n",
                          "2",     "--", "/bin/sh", "-c",   "echo locked", NULL};
    start(r, n, "lock", args, false, n == 0);
    finish(r, 15);
    if (!r->hung) check_gone(r, prefix);
    if (r->status == 0 && !file_has(r->out, "locked"))
        fail_run(r, "exit 0, but the command did not run");
}

/* leader on a cluster with authentication: --user, the password from a file. */
static char pw_file[300];
static void sc_leader_auth(run *r, long n)
{
    char user[64];
    snprintf(user, sizeof(user), "%s", EH_USER);
    char name[64];
    snprintf(name, sizeof(name), "%sheld", EH_USER_PREFIX);
    const char *args[] = {"--user", user, "--password-file", pw_file, "leader",
                          name,     NULL};
    target = cl_auth;
    start(r, n, "leader_auth", args, false, n == 0);
    target = NULL;
    finish(r, 15);
    char *out = read_all(r->out);
    char want[128];
    snprintf(want, sizeof(want), "%s/k1\nv-auth\n", name);
    if (r->status == 0 && strcmp(out, want) != 0)
        fail_run(r, "exit 0 with the wrong output: \"%.200s\"", out);
    else if (r->status == 4)
        fail_run(r, "exit 4 (no leader) while %s/k1 leads", name);
    free(out);
}

/* campaign behind the switchover's target with --timeout: waits (the waiting
 * event names the one ahead), gives up, exit 6; only the target's key stays.
 * The timeout leaves room to reach the waiting state on a busy machine (300 ms
 * did not once in 152 runs of the coverage build beside a CI run). */
static void sc_campaign_wait(run *r, long n)
{
    const char *args[] = {"-w",     "json",      "campaign", "toom-sw",
                          "behind", "--timeout", "1s",       NULL};
    start(r, n, "campaign_wait", args, false, n == 0);
    finish(r, 15);
    if (r->status == 0) fail_run(r, "exit 0: elected while sw-target leads?");
    if (r->status == 6 && !file_has(r->out, "\"event\":\"waiting\"") &&
        !file_has(r->err, "cannot write the waiting event"))
        fail_run(r, "exit 6 without the waiting event");
    if (n == 0 && r->status != 6) fail_run(r, "baseline: exit %d, not 6", r->status);
    double end = tl_now() + 3;
    int k;
    while ((k = keys_under("toom-sw", NULL, 0)) != 1 && tl_now() < end)
        tl_msleep(50);
    if (k != 1)
        fail_run(r, "%d keys under toom-sw/ after exit %d (1: the target's)", k,
                 r->status);
}

/* A real switchover: candidates A (leads) and B (waits) are real electors; the
 * request hands over to B. Exit 0: B leads; else an error, and the request is
 * withdrawn in every outcome. */
static void sc_handover(run *r, long n)
{
    char name[64], req[96];
    snprintf(name, sizeof(name), "toom-h%ld", n);
    snprintf(req, sizeof(req), "__elector/switchover/%s", name);
    eu_child ca, cb;
    const char *aa[] = {
        "--endpoints", eh_endpoints(cl), "--ttl", "10", "campaign", name, "h-a", NULL};
    const char *ab[] = {
        "--endpoints", eh_endpoints(cl), "--ttl", "10", "campaign", name, "h-b", NULL};
    tool_bg(&ca, aa);
    char line[256];
    ASSERT_EQ(0, eu_child_expect(&ca, name, line, sizeof(line), 10000));
    tool_bg(&cb, ab);
    for (double end = tl_now() + 10; keys_under(name, NULL, 0) < 2; tl_msleep(20))
        ASSERT(tl_now() < end);
    const char *args[] = {"switchover", name, "--to", "h-b", "--timeout", "5s", NULL};
    start(r, n, "handover", args, false, n == 0);
    finish(r, 15);
    if (r->status == 0) {
        char *out = NULL;
        const char *la[] = {"--endpoints", eh_endpoints(cl), "leader", name, NULL};
        int rc = tool(&out, NULL, la);
        if (rc != 0 || !out || !strstr(out, "\nh-b\n"))
            fail_run(r, "exit 0, but the leader is not h-b (leader: exit %d, %.100s)", rc,
                     out ? out : "");
        free(out);
    }
    if (n == 0 && r->status != 0) fail_run(r, "baseline: exit %d", r->status);
    double end = tl_now() + 3;
    bool left = true;
    while (left) {
        char *out = NULL;
        eh_etcdctl(cl, &out, "get", "--keys-only", req, NULL);
        left = out && strstr(out, "switchover");
        free(out);
        if (!left || tl_now() > end) break;
        tl_msleep(50);
    }
    if (left) fail_run(r, "the switchover request was left in etcd");
    tl_reap(ca.pid, SIGTERM, 10);
    tl_reap(cb.pid, SIGTERM, 10);
    close(ca.fd);
    close(cb.fd);
}

/* The switchover's target is elector_oom: A (a real elector) leads, B
 * (elector_oom) waits, a real `elector switchover --to h-b` hands over; B is
 * then stopped. Nothing is left (keys, candidate keys, the request) once all
 * have exited; a switchover that says B leads means B said it was elected. */
static void sc_handover_target(run *r, long n)
{
    char name[64], req[96], cands[128];
    snprintf(name, sizeof(name), "toom-t%ld", n);
    snprintf(req, sizeof(req), "__elector/switchover/%s", name);
    snprintf(cands, sizeof(cands), "__elector/candidates/%s", name);
    eu_child ca;
    const char *aa[] = {
        "--endpoints", eh_endpoints(cl), "--ttl", "10", "campaign", name, "h-a", NULL};
    tool_bg(&ca, aa);
    char line[256];
    ASSERT_EQ(0, eu_child_expect(&ca, name, line, sizeof(line), 10000));
    const char *args[] = {"--ttl", "10", "campaign", name, "h-b", NULL};
    start(r, n, "target", args, false, n == 0);
    for (double end = tl_now() + 5; keys_under(name, NULL, 0) < 2 && !exited(r);
         tl_msleep(10))
        if (tl_now() > end) break;
    int sw = -2;
    if (!exited(r)) {
        const char *sa[] = {"--endpoints", eh_endpoints(cl), "switchover", name, "--to",
                            "h-b",         "--timeout",      "4s",         NULL};
        char *out = NULL, *err = NULL;
        sw = tool(&out, &err, sa);
        if (sw == 0 && !file_has(r->out, "h-b"))
            fail_run(r, "switchover exit 0, but h-b never said it was elected");
        if (n == 0 && sw != 0)
            fail_run(r, "baseline: switchover exit %d: %.300s", sw, err ? err : "");
        free(out);
        free(err);
    }
    if (!exited(r)) kill(r->pid, SIGTERM);
    finish(r, 10);
    tl_reap(ca.pid, SIGTERM, 10);
    close(ca.fd);
    if (r->hung) return;
    check_gone(r, name);
    check_gone(r, cands);
    double end = tl_now() + 3;
    bool left = true;
    while (left) {
        char *out = NULL;
        eh_etcdctl(cl, &out, "get", "--keys-only", req, NULL);
        left = out && strstr(out, "switchover");
        free(out);
        if (!left || tl_now() > end) break;
        tl_msleep(50);
    }
    if (left)
        fail_run(r, "the switchover request was left in etcd (switchover exit %d)", sw);
}

typedef struct scenario {
    const char *name;
    void (*fn)(run *, long);
    int budget; /* ctest sample: at most this many runs */
    int status; /* the baseline's exit status */
} scenario;

static const scenario scenarios[] = {
    {"leader", sc_leader, 16, 0},
    {"leader_json", sc_leader_json, 10, 0},
    {"observe", sc_observe, 12, 0},
    {"campaign", sc_campaign, 30, 0},
    {"run", sc_run, 12, 0},
    {"switchover", sc_switchover, 12, 0},
    {"lock_n", sc_lock_n, 16, 0},
    {"leader_auth", sc_leader_auth, 16, 0},
    {"campaign_wait", sc_campaign_wait, 8, 6},
    {"handover", sc_handover, 8, 0},
    {"handover_target", sc_handover_target, 4, 0},
};

/* ---- which N ---------------------------------------------------------------- */

/* From the baseline's sites file: the first N of each call site, those in tool/
 * first. Fills ns (sorted, distinct), returns how many. */
static int sample(const char *sites, long total, int budget, long *ns, int cap)
{
    FILE *f = fopen(sites, "r");
    if (!f) return 0;
    enum { MAXS = 1024 };
    static unsigned long addr[MAXS];
    static long first[MAXS];
    int nsites = 0;
    long i;
    unsigned long a;
    while (fscanf(f, "%ld %lx", &i, &a) == 2 && i <= total) {
        int j = 0;
        while (j < nsites && addr[j] != a)
            j++;
        if (j == nsites && nsites < MAXS) {
            addr[nsites] = a;
            first[nsites++] = i;
        }
    }
    fclose(f);
    /* addr2line: which file each site is in (the address before the return). */
    const char **argv = calloc((size_t)nsites + 4, sizeof(*argv));
    char **bufs = calloc((size_t)nsites, sizeof(*bufs));
    argv[0] = "addr2line";
    argv[1] = "-e";
    argv[2] = ELECTOR_OOM_BIN;
    for (int j = 0; j < nsites; j++) {
        if (asprintf(&bufs[j], "%lx", addr[j] - 1) < 0) bufs[j] = NULL;
        argv[3 + j] = bufs[j];
    }
    char *out = NULL;
    tl_run_opts ro = {.quiet_stderr = 1, .timeout_s = 20};
    int rc = tl_run_ex(&out, argv, &ro);
    bool in_tool[MAXS] = {0};
    int ntool = 0;
    if (rc == 0 && out) {
        char *save = NULL;
        int j = 0;
        for (char *l = strtok_r(out, "\n", &save); l && j < nsites;
             l = strtok_r(NULL, "\n", &save), j++) {
            in_tool[j] = strstr(l, "/tool/") != NULL;
            ntool += in_tool[j];
        }
    }
    free(out);
    for (int j = 0; j < nsites; j++)
        free(bufs[j]);
    free(bufs);
    free(argv);
    int k = 0;
    /* The tool's sites, then every other site evenly, up to the budget. */
    for (int j = 0; j < nsites && k < budget && k < cap; j++)
        if (in_tool[j]) ns[k++] = first[j];
    int others = nsites - ntool, left = budget - k;
    for (int j = 0, seen = 0; j < nsites && k < budget && k < cap; j++) {
        if (in_tool[j]) continue;
        if (left > 0 && (long)seen++ * left % (others ? others : 1) < left)
            ns[k++] = first[j];
    }
    /* Sorted. */
    for (int x = 1; x < k; x++)
        for (int y = x; y > 0 && ns[y - 1] > ns[y]; y--) {
            long t = ns[y];
            ns[y] = ns[y - 1];
            ns[y - 1] = t;
        }
    tl_log("  %d call sites (%d in tool/); %d N sampled", nsites, ntool, k);
    return k;
}

#if defined(__SANITIZE_ADDRESS__)
#define TOOM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOOM_ASAN 1
#endif
#endif

#ifdef TOOM_ASAN
/* A leak of elector_oom's is seen: the wrapper leaks a block on request and
 * the program must then fail at exit (unless ASAN_OPTIONS turned leaks off). */
static void check_leak_detection(void)
{
    const char *ao = getenv("ASAN_OPTIONS");
    if (ao && strstr(ao, "detect_leaks=0")) {
        tl_log("ASAN_OPTIONS has detect_leaks=0: leaks go unseen");
        return;
    }
    const char *argv[] = {ELECTOR_OOM_BIN, "version", NULL};
    const char *envp[] = {"ELECTOR_TOOL_OOM_LEAK=1", "ELECTOR_TOOL_OOM_N=0", NULL};
    char *out = NULL, *err = NULL;
    tl_run_opts o = {.envp = envp, .err = &err, .timeout_s = 30};
    int rc = tl_run_ex(&out, argv, &o);
    ASSERT(rc != 0);
    ASSERT_CONTAINS(err, "LeakSanitizer");
    free(out);
    free(err);
}
#endif

static long env_long(const char *v, long dflt)
{
    const char *s = getenv(v);
    return s && *s ? strtol(s, NULL, 10) : dflt;
}

TEST_WITH_TIMEOUT(tool_oom, 7200)
{
    signal(SIGPIPE, SIG_IGN); /* a write to the stdin of an elector that ended */
#ifdef TOOM_ASAN
    check_leak_detection();
#endif
    cl = start1();
    dir = tl_tmpdir("toom");
    ASSERT_NOT_NULL(dir);
    verbose = env_long("ELECTOR_TOOL_OOM_VERBOSE", 0) != 0;
    bool full = env_long("ELECTOR_TOOL_OOM_FULL", 0) != 0;
    long only = env_long("ELECTOR_TOOL_OOM_ONLY", 0);
    const char *only_sc = getenv("ELECTOR_TOOL_OOM_SCEN");

    /* systemd's notify socket: the campaign's READY=1, STATUS= go here. */
    snprintf(notify_path, sizeof(notify_path), "%s/notify", dir);
    notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    ASSERT(strlen(notify_path) < sizeof(un.sun_path));
    memcpy(un.sun_path, notify_path, strlen(notify_path) + 1);
    ASSERT_OK(bind(notify_fd, (struct sockaddr *)&un, sizeof(un)));

    put_leased(cl, "toom-held/k1", "v-held");
    if (!only_sc || !*only_sc || strcmp(only_sc, "leader_auth") == 0) {
        cl_auth = eh_start(&(eh_opts){.members = 1, .auth = 1});
        ASSERT_NOT_NULL(cl_auth);
        char k[96];
        snprintf(k, sizeof(k), "%sheld/k1", EH_USER_PREFIX);
        put_leased(cl_auth, k, "v-auth");
        snprintf(pw_file, sizeof(pw_file), "%s/pw", dir);
        FILE *f = fopen(pw_file, "w");
        ASSERT_NOT_NULL(f);
        fprintf(f, "%s\n", EH_USER_PASSWORD);
        fclose(f);
        chmod(pw_file, 0600);
    }
    /* The switchover's target: a real elector leading toom-sw. */
    const char *sw_args[] = {"--endpoints", eh_endpoints(cl), "--ttl",     "30",
                             "campaign",    "toom-sw",        "sw-target", NULL};
    tool_bg(&sw_cand, sw_args);
    char line[256];
    ASSERT_EQ(0, eu_child_expect(&sw_cand, "toom-sw/", line, sizeof(line), 10000));

    int bad = 0, total_runs = 0;
    char bad_list[2048] = "";
    double t0 = tl_now();
    for (size_t s = 0; s < sizeof(scenarios) / sizeof(scenarios[0]); s++) {
        const scenario *sc = &scenarios[s];
        if (only_sc && *only_sc && strcmp(only_sc, sc->name) != 0) continue;
        run r = {0};
        double ts = tl_now();
        sc->fn(&r, 0);
        tl_log("%s: baseline %ld allocations, %.2f s%s%s", sc->name, r.allocs,
               tl_now() - ts, r.why[0] ? ": " : "", r.why);
        /* The baseline must pass: the checks work and the scenario ran. */
        ASSERT_STREQ("", r.why);
        ASSERT_EQ(sc->status, r.status);
        ASSERT_GT(r.allocs, 0);
        ASSERT_EQ(0, r.failed);
        long total = r.allocs;
        static long ns[65536];
        int count = 0;
        if (only) {
            ns[count++] = only;
        } else if (full) {
            for (long n = 1; n <= total && count < 65536; n++)
                ns[count++] = n;
        } else {
            count = sample(r.sites, total, sc->budget, ns, 65536);
        }
        int sbad = 0;
        for (int i = 0; i < count; i++) {
            double t1 = tl_now();
            sc->fn(&r, ns[i]);
            total_runs++;
            bool ok = !r.why[0];
            if (ok && r.failed != 1 && r.allocs >= 0 && r.allocs >= ns[i])
                ok = false, fail_run(&r, "the allocation did not fail");
            if (verbose || !ok)
                tl_log("%s N=%ld: %s: exit %d, %ld allocations, %.2f s%s%s", sc->name,
                       ns[i], ok ? "ok" : "FAILED", r.status, r.allocs, tl_now() - t1,
                       ok ? "" : ": ", r.why);
            if (!ok) {
                if (verbose || sbad < 3) {
                    char *e = read_all(r.err);
                    size_t l = strlen(e);
                    tl_log("  its stderr (last 1500 bytes): %s",
                           l > 1500 ? e + l - 1500 : e);
                    free(e);
                }
                sbad++;
                size_t l = strlen(bad_list);
                snprintf(bad_list + l, sizeof(bad_list) - l, " %s:%ld", sc->name, ns[i]);
            }
        }
        bad += sbad;
        tl_log("%s: %d runs, %d failed, %.1f s", sc->name, count, sbad, tl_now() - ts);
    }
    tl_log("%d runs in %.1f s; %d failed:%s", total_runs, tl_now() - t0, bad, bad_list);
    tl_reap(sw_cand.pid, SIGTERM, 10);
    close(notify_fd);
    eh_stop(cl_auth);
    eh_stop(cl);
    ASSERT_EQ(0, bad);
}
