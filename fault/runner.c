/* SPDX-License-Identifier: MIT */
/* fault-runner: runs the fault-injection scenarios against a real 3-member etcd
 * cluster (test/etcd_harness.c), with candidates as separate processes
 * (fault-candidate, or for the run-* scenarios `elector run` processes whose
 * command is fault-job), a fenced resource (fault-resource), etcd's own history
 * recorded live (`etcdctl watch -w json`), and, for the netns scenarios, two
 * network namespaces of its own joined by a veth pair: the candidates' and the
 * forwarder's (fault-proxy listens there and forwards to the members, which
 * listen on the root namespace's 127.0.0.1). No address outside 127.0.0.0/8 and
 * ::1 may appear in the root namespace: checked after the setup, after each
 * scenario and at the end (a gain fails the run, status 3). After each scenario
 * it runs the checker (checker.c) on the scenario's directory and prints one
 * table row.
 *
 *   fault-runner [--rounds N] [--seed N] [--ttl S] [--scenarios a,b,...]
 *                [--duration 30m] [--out DIR] [--tag T] [--bin-dir DIR] [--list]
 *
 * --duration runs the random mix ("soak") for that long instead of the list.
 * Exit status: 0 no violation; 1 a safety or liveness violation or an unmet
 * expectation (a run-* round's "expect ... fail"); 3 the run could
 * not be set up or a scenario could not run; 130 interrupted. Every process it
 * started (by pid), the namespaces and the veth pair are removed on every exit. */
#define _GNU_SOURCE
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "checker.h"
#include "elector/etcd.h"
#include "futil.h"
#include "testlib.h"

fr_run R = {.ttl_s = 2, .rounds = 3, .slow_delay_ms = 40};

static volatile sig_atomic_t g_int;
static elector_etcd *g_admin;
static char g_etcd_version[32] = "?"; /* the members' version (Status), for the report */
static pid_t g_pids[FR_MAX_CANDS * 2];
static int g_npids;
static int64_t g_t0;
static uint64_t g_rng;
static char g_cand_bin[600], g_res_bin[600], g_proxy_bin[600], g_job_bin[600],
    g_elector_bin[600];
static bool g_cleaned;

static void cleanup_all(void);

/* ---------------------------------------------------------------- basics */

int64_t fr_now(void)
{
    return fu_now_ns();
}

uint64_t fr_rand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

int fr_rand_int(int n)
{
    return n <= 1 ? 0 : (int)(fr_rand() % (uint64_t)n);
}

void fr_say(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("[%8.3fs] %s\n", (double)(fr_now() - g_t0) / 1e9, msg);
    fflush(stdout);
}

void fr_log(fr_world *w, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fu_line(w->rlog, "%" PRId64 " %s", fr_now(), msg);
}

void fr_mark_fault(fr_world *w, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fr_log(w, "fault %d %s", w->round, msg);
    fr_say("%s round %d: %s", w->scenario, w->round, msg);
}

void fr_mark_heal(fr_world *w, const char *what)
{
    fr_log(w, "heal %d %s", w->round, what);
}

void fr_mark_heal_bound(fr_world *w, const char *what, int64_t bound_ms)
{
    fr_log(w, "heal %d bound_ms=%" PRId64 " %s", w->round, bound_ms, what);
}

void fr_mark_end(fr_world *w)
{
    fr_log(w, "endround %d", w->round);
}

void fr_quiet(fr_world *w, bool begin)
{
    fr_log(w, "%s %d", begin ? "quiet_begin" : "quiet_end", w->round);
}

static void track(pid_t p)
{
    if (p > 0 && g_npids < (int)(sizeof g_pids / sizeof g_pids[0])) g_pids[g_npids++] = p;
}

static void untrack(pid_t p)
{
    for (int i = 0; i < g_npids; i++)
        if (g_pids[i] == p) {
            g_pids[i] = g_pids[--g_npids];
            return;
        }
}

static void on_signal(int sig)
{
    g_int = sig;
}

static _Noreturn void interrupted(void)
{
    int sig = g_int;
    fprintf(stderr, "fault-runner: interrupted (signal %d), cleaning up\n", sig);
    cleanup_all();
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(130);
}

/* fork + exec with PDEATHSIG, stdin /dev/null, stdout/stderr to files (append),
 * optionally inside the network namespace, optionally in a process group of its
 * own (as a shell starts a job). */
static pid_t spawn_ex(const char *const argv[], const char *out_path,
                      const char *err_path, const char *netns, bool pgrp)
{
    int out = out_path ? fu_open_log(out_path) : -1;
    int err = err_path ? fu_open_log(err_path) : -1;
    int nsfd = -1;
    if (netns) {
        char p[128];
        snprintf(p, sizeof p, "/run/netns/%s", netns);
        nsfd = open(p, O_RDONLY | O_CLOEXEC);
        if (nsfd < 0) {
            fprintf(stderr, "fault-runner: %s: %s\n", p, strerror(errno));
            if (out >= 0) close(out);
            if (err >= 0) close(err);
            return -1;
        }
    }
    pid_t parent = getpid();
    fflush(NULL);
    /* Signals stay blocked across fork until the child has reset its handlers:
     * a SIGTERM sent right after the spawn must not run our handler in the
     * child (and be lost there), it must reach the program (or kill it). */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        if (pgrp) setpgid(0, 0);
        if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) != 0) _exit(126);
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(out >= 0 ? out : nul, 1);
        dup2(err >= 0 ? err : nul, 2);
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (int s = 1; s < NSIG; s++)
            sigaction(s, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* etcdctl reads flags from ETCDCTL_* variables: none may leak in. */
        extern char **environ;
        for (int again = 1; again;) {
            again = 0;
            for (char **e = environ; *e; e++)
                if (!strncmp(*e, "ETCDCTL_", 8)) {
                    char name[128];
                    size_t n = strcspn(*e, "=");
                    if (n >= sizeof name) n = sizeof name - 1;
                    memcpy(name, *e, n);
                    name[n] = '\0';
                    unsetenv(name);
                    again = 1;
                    break;
                }
        }
        setenv("ETCDCTL_API", "3", 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    /* here too: a signal to the group right after the spawn must find it */
    if (pid > 0 && pgrp) setpgid(pid, pid);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (out >= 0) close(out);
    if (err >= 0) close(err);
    if (nsfd >= 0) close(nsfd);
    if (pid < 0) return -1;
    track(pid);
    return pid;
}

static pid_t spawn(const char *const argv[], const char *out_path, const char *err_path,
                   const char *netns)
{
    return spawn_ex(argv, out_path, err_path, netns, false);
}

static void endpoints_for(int id, bool netns, bool slow, char *out, size_t cap);

/* `elector ARGS` (the tool, e.g. a switchover) with the cluster's endpoints
 * first, stdout and stderr to out_path; its pid (tracked), or -1. */
pid_t fr_spawn_elector(fr_world *w, const char *const args[], const char *out_path)
{
    (void)w;
    char eps[600];
    endpoints_for(0, false, false, eps, sizeof eps);
    const char *argv[40] = {g_elector_bin, "--endpoints", eps};
    int n = 3;
    for (int i = 0; args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return spawn(argv, out_path, out_path, NULL);
}

/* Waits (pumping) for a process from fr_spawn_elector; its wait status, or -1
 * after timeout_ms (then it is SIGKILLed and reaped). */
int fr_wait_pid(fr_world *w, pid_t pid, int timeout_ms)
{
    int64_t end = fr_now() + (int64_t)timeout_ms * 1000000;
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) {
            st = -1;
            break;
        }
        if (fr_now() >= end) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            st = -1;
            break;
        }
        fr_sleep(w, 5);
    }
    untrack(pid);
    return st;
}

/* Children of ours that we did not start: with PR_SET_CHILD_SUBREAPER, the
 * orphans of `elector run` candidates (a guard whose elector was SIGKILLed, a
 * job's descendants whose guard and elector are gone) are reparented to us. They
 * are reaped here (and killed first at cleanup), so nothing a scenario started
 * outlives the run or stays a zombie. */
static bool known_pid(pid_t p)
{
    for (int i = 0; i < g_npids; i++)
        if (g_pids[i] == p) return true;
    if (R.cl)
        for (int i = 0; i < eh_members(R.cl); i++)
            if (eh_pid(R.cl, i) == p) return true;
    return false;
}

/* Reaps (after SIGKILL if kill_them) the strays that are done; returns how many
 * are still alive. */
static int reap_strays(bool kill_them)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    char *s = fu_read_file(path, NULL);
    if (!s) return 0;
    int alive = 0;
    for (char *p = s, *end; *p; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p) break;
        if (pid <= 0 || known_pid((pid_t)pid)) continue;
        if (kill_them) {
            kill((pid_t)pid, SIGKILL);
            while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR) {
            }
        } else if (waitpid((pid_t)pid, NULL, WNOHANG) == 0) {
            alive++;
        }
    }
    free(s);
    return alive;
}

/* Reaps pid (waiting up to timeout_ms, then SIGKILL). Returns the wait status.
 * It waits on a pidfd, which turns readable the moment pid exits (when its
 * release helper's does too): the "death" line the caller writes next dates
 * the end of its term. Polling waitpid every 2 ms dated it up to a few ms
 * late, after a successor the helper let in had already begun: a false
 * overlap of microseconds (kill-release, CI run of 2026-11-29). */
static int reap(pid_t pid, int timeout_ms)
{
    int st = 0;
    int64_t end = fr_now() + (int64_t)timeout_ms * 1000000;
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd >= 0) {
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        for (;;) {
            int64_t left = (end - fr_now()) / 1000000;
            int r = poll(&p, 1, left > 0 ? (int)left : 0);
            if (r >= 0 || errno != EINTR) break;
        }
        close(pfd);
    }
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) break;
        if (fr_now() >= end) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            break;
        }
        fu_msleep(2);
    }
    untrack(pid);
    return st;
}

static void status_str(int st, char *buf, size_t cap)
{
    if (WIFEXITED(st))
        snprintf(buf, cap, "exit:%d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, cap, "signal:%s",
                 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
    else
        snprintf(buf, cap, "status:%d", st);
}

/* ---------------------------------------------------------------- candidate logs */

static void cand_line(fr_cand *c, char *line)
{
    long long t;
    char word[24];
    int off = 0;
    if (sscanf(line, "%lld %23s %n", &t, word, &off) < 2) return;
    const char *rest = line + off;
    long long token = 0;
    char key[FR_KEYMAX] = "";
    if (!strcmp(word, "elected")) {
        if (sscanf(rest, "%lld %199s", &token, key) < 1) return;
        c->leading = true;
        c->token = token;
        c->elected_at = t;
        snprintf(c->key, sizeof c->key, "%s", key);
        c->waiting = false;
        c->pred[0] = '\0';
        c->nelected++;
    } else if (!strcmp(word, "lost") || !strcmp(word, "resigned") ||
               !strcmp(word, "notleader")) {
        if (sscanf(rest, "%lld", &token) == 1 && token == c->token) c->leading = false;
    } else if (!strcmp(word, "waiting")) {
        c->waiting = true;
        sscanf(rest, "%199s", c->pred);
    } else if (!strcmp(word, "restart") || !strcmp(word, "failed")) {
        c->waiting = false;
        c->pred[0] = '\0';
    } else if (!strcmp(word, "endpoint")) {
        sscanf(rest, "%127s", c->endpoint);
    } else if (!strcmp(word, "stall")) {
        c->stall_at = t;
    } else if (!strcmp(word, "rw") && c->stall_at && !c->stall_done) {
        c->stall_done = t; /* the first write line after a stall is the stalled one */
    }
}

/* A line of an `elector run` candidate's job (fault-job): the job's main
 * process running is what "leading" means for such a candidate. */
static void job_line(fr_cand *c, char *line)
{
    long long t, token = 0;
    char word[24], role[16] = "", key[FR_KEYMAX] = "";
    int pid = 0, ppid = 0, off = 0;
    if (sscanf(line, "%lld %23s %n", &t, word, &off) < 2) return;
    const char *rest = line + off;
    if (!strcmp(word, "jstart")) {
        if (sscanf(rest, "%d %15s %lld %199s %d", &pid, role, &token, key, &ppid) < 5)
            return;
        if (!strcmp(role, "escapee")) c->escapee_pid = pid;
        if (strcmp(role, "main")) return;
        c->leading = true;
        c->token = token;
        c->elected_at = t;
        c->job_start = t;
        c->job_pid = pid;
        c->guard_pid = ppid;
        c->job_term_at = 0;
        c->escapee_pid = 0;
        snprintf(c->key, sizeof c->key, "%s", key);
        c->waiting = false;
        c->pred[0] = '\0';
        c->nelected++;
    } else if (!strcmp(word, "jterm") || !strcmp(word, "jend")) {
        if (sscanf(rest, "%d %15s", &pid, role) == 2 && !strcmp(role, "main")) {
            if (!strcmp(word, "jterm") && !c->job_term_at) c->job_term_at = t;
            if (!strstr(rest, "ignored")) c->leading = false;
        }
    }
    if (word[0] == 'j' && t > c->job_last) c->job_last = t;
    if (!strcmp(word, "jw")) {
        /* the completion time is the last field */
        const char *sp = strrchr(line, ' ');
        long long done = sp ? atoll(sp + 1) : 0;
        if (done > c->job_last) c->job_last = done;
    }
}

static const char *json_find(const char *line, const char *field, char *out, size_t cap)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", field);
    const char *p = strstr(line, pat);
    if (!p) return NULL;
    p += strlen(pat);
    if (*p == '"') p++;
    size_t n = strcspn(p, "\",}");
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

/* elector's own -w json events on its stderr: waiting (behind whom: the
 * predecessor; its key is our own), elected. */
static void err_line(fr_cand *c, char *line)
{
    if (line[0] != '{') return;
    char ev[32], key[FR_KEYMAX], mono[32];
    if (!json_find(line, "event", ev, sizeof ev)) return;
    if (!strcmp(ev, "waiting") && json_find(line, "predecessor", key, sizeof key)) {
        if (!c->leading) {
            c->waiting = true;
            snprintf(c->pred, sizeof c->pred, "%s", key);
        }
    } else if (!strcmp(ev, "elected") && json_find(line, "mono_ns", mono, sizeof mono)) {
        c->elected_ns = atoll(mono);
        c->waiting = false;
    }
}

static void read_lines(const char *path, off_t *offp, char *part, size_t *plen,
                       size_t cap, fr_cand *c, void (*fn)(fr_cand *, char *))
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[65536];
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, *offp);
        if (n <= 0) break;
        *offp += n;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                part[*plen] = '\0';
                fn(c, part);
                *plen = 0;
            } else if (*plen < cap - 1) {
                part[(*plen)++] = buf[i];
            }
        }
        if (n < (ssize_t)sizeof buf) break;
    }
    close(fd);
}

static void read_cand_log(fr_cand *c)
{
    if (!c->err_path[0]) {
        read_lines(c->log_path, &c->off, c->part, &c->plen, sizeof c->part, c, cand_line);
        return;
    }
    read_lines(c->err_path, &c->err_off, c->err_part, &c->err_plen, sizeof c->err_part, c,
               err_line);
    read_lines(c->log_path, &c->off, c->part, &c->plen, sizeof c->part, c, job_line);
}

/* ---------------------------------------------------------------- recorder */

/* Highest mod_revision in the history file's tail, and the compact revision if
 * the recorder's watch was canceled by compaction (0 otherwise). */
static int64_t history_scan(fr_world *w, int64_t *compacted)
{
    char path[600];
    snprintf(path, sizeof path, "%s/history.jsonl", w->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (compacted) *compacted = 0;
    if (fd < 0) return 0;
    struct stat st;
    fstat(fd, &st);
    static char buf[262144];
    off_t from =
        st.st_size > (off_t)sizeof buf - 1 ? st.st_size - (off_t)sizeof buf + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, from);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    int64_t max = 0;
    for (const char *p = buf; (p = strstr(p, "\"mod_revision\":")) != NULL; p += 15) {
        int64_t v = strtoll(p + 15, NULL, 10);
        if (v > max) max = v;
    }
    const char *last = strstr(buf, "\"Canceled\":true");
    if (last && compacted) {
        const char *lc = NULL;
        for (const char *p = buf; (p = strstr(p, "\"Canceled\":true")) != NULL; p++)
            lc = p;
        const char *line = lc;
        while (line > buf && line[-1] != '\n')
            line--;
        const char *cr = strstr(line, "\"CompactRevision\":");
        if (cr && cr < lc) *compacted = strtoll(cr + 18, NULL, 10);
    }
    return max;
}

static void recorder_start(fr_world *w, int64_t from)
{
    char eps[600], rev[40], out[600], err[600];
    snprintf(eps, sizeof eps, "--endpoints=%s", eh_endpoints(R.cl));
    snprintf(rev, sizeof rev, "--rev=%" PRId64, from);
    snprintf(out, sizeof out, "%s/history.jsonl", w->dir);
    snprintf(err, sizeof err, "%s/recorder.err", w->dir);
    const char *argv[] = {"etcdctl", eps,        "--dial-timeout=1s",
                          "watch",   "--prefix", w->prefix,
                          rev,       "-w",       "json",
                          NULL,      NULL,       NULL,
                          NULL};
    char tls[3][600]; /* a TLS run: the files, read at each start */
    if (eh_cacert(R.cl)) {
        snprintf(tls[0], sizeof tls[0], "--cacert=%s", eh_cacert(R.cl));
        snprintf(tls[1], sizeof tls[1], "--cert=%s", eh_cert(R.cl));
        snprintf(tls[2], sizeof tls[2], "--key=%s", eh_key(R.cl));
        argv[9] = tls[0];
        argv[10] = tls[1];
        argv[11] = tls[2];
    }
    w->recorder_pid = spawn(argv, out, err, NULL);
    fr_log(w, "recorder %d from %" PRId64, (int)w->recorder_pid, from);
}

static void recorder_check(fr_world *w)
{
    int st;
    if (w->recorder_pid < 0 && fr_now() >= w->recorder_restart_at) {
        /* restart (after a pause: without a Raft leader it is canceled at once) */
        int64_t compacted = 0, max = history_scan(w, &compacted);
        int64_t from = max + 1;
        if (from < w->history_from) from = w->history_from;
        if (compacted > from) from = compacted;
        recorder_start(w, from);
        return;
    }
    if (w->recorder_pid <= 0 || waitpid(w->recorder_pid, &st, WNOHANG) != w->recorder_pid)
        return;
    untrack(w->recorder_pid);
    w->recorder_pid = -1;
    w->recorder_restart_at = fr_now() + 300000000;
    fr_log(w, "note recorder exited (status %d); restarting in 300 ms", st);
}

/* ---------------------------------------------------------------- pumping */

void fr_pump(fr_world *w)
{
    if (g_int) interrupted();
    for (int i = 0; i < w->nc; i++) {
        fr_cand *c = &w->c[i];
        if (c->pid == 0) {
            /* an `elector run` job may outlive its elector (the guard stops it) */
            if (w->run && c->job_start && fr_now() - c->job_last < 10000000000LL)
                read_cand_log(c);
            continue;
        }
        read_cand_log(c);
        int st;
        if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
            char s[40];
            status_str(st, s, sizeof s);
            untrack(c->pid);
            c->pid = 0;
            c->stopped = false;
            c->status = st;
            c->reaped = true;
            fr_log(w, "death %d %s%s", c->id, s, w->tearing_down ? "" : " unexpected");
            read_cand_log(c);
            c->leading = false;
        }
    }
    recorder_check(w);
    static int64_t next_strays;
    if (w->run || fr_now() >= next_strays) { /* orphans: see reap_strays() */
        reap_strays(false);
        next_strays = fr_now() + 100000000;
    }
    int st;
    if (w->resource_pid > 0 &&
        waitpid(w->resource_pid, &st, WNOHANG) == w->resource_pid) {
        untrack(w->resource_pid);
        w->resource_pid = 0;
        fr_log(w, "note the resource server died (status %d)", st);
        fr_say("ERROR: the resource server died");
    }
    if (w->tick && fr_now() >= w->tick_next) w->tick(w);
}

void fr_sleep_until(fr_world *w, int64_t t)
{
    for (;;) {
        fr_pump(w);
        int64_t left = t - fr_now();
        if (left <= 0) return;
        fu_msleep(left > 10000000 ? 10 : (int)(left / 1000000) + 1);
    }
}

void fr_sleep(fr_world *w, int ms)
{
    fr_sleep_until(w, fr_now() + (int64_t)ms * 1000000);
}

/* ---------------------------------------------------------------- candidates */

static void endpoints_for(int id, bool netns, bool slow, char *out, size_t cap)
{
    int m = eh_members(R.cl);
    size_t n = 0;
    out[0] = '\0';
    for (int k = 0; k < m; k++) {
        int i = (id + k) % m;
        if (eh_member_removed(R.cl, i)) continue; /* member-replace */
        const char *sep = n ? "," : "";
        if (slow && !netns && R.slow_pid > 0 && R.slow_port[i])
            n +=
                (size_t)snprintf(out + n, cap - n, "%s127.0.0.1:%d", sep, R.slow_port[i]);
        else if (netns)
            n += (size_t)snprintf(out + n, cap - n, "%s%s:%d", sep, R.fw_ip,
                                  eh_client_port(R.cl, i));
        else
            n += (size_t)snprintf(out + n, cap - n, "%s%s", sep, eh_endpoint(R.cl, i));
        if (n >= cap) break;
    }
}

int fr_spawn(fr_world *w, bool netns)
{
    if (w->nc == FR_MAX_CANDS) return -1;
    int i = w->nc;
    fr_cand *c = &w->c[i];
    memset(c, 0, sizeof *c);
    c->id = i;
    c->netns = netns;
    snprintf(c->log_path, sizeof c->log_path, "%s/cand-%d.log", w->dir, i);
    char eps[600], id[16], ttl[16], err[600];
    endpoints_for(i, netns, w->slow, eps, sizeof eps);
    snprintf(id, sizeof id, "%d", i);
    snprintf(ttl, sizeof ttl, "%d", R.ttl_s);
    snprintf(err, sizeof err, "%s/cand-%d.err", w->dir, i);
    if (w->run) {
        /* elector run, as a shell job: its own process group; the job's lines go
         * to cand-N.log, elector's (stderr, -w json events) to cand-N.err */
        char ttl_s[16], value[32], lock[600];
        snprintf(ttl_s, sizeof ttl_s, "%ds", R.ttl_s);
        snprintf(value, sizeof value, "cand-%d", i);
        snprintf(lock, sizeof lock, "%s/job.lock", w->dir);
        snprintf(c->err_path, sizeof c->err_path, "%s", err);
        const char *argv[40] = {g_elector_bin,    "--endpoints", eps,  "--ttl", ttl_s,
                                "--dial-timeout", "1s",          "-w", "json",  "run",
                                w->election,      "--value",     value};
        int na = 13;
        char rargs[256];
        snprintf(rargs, sizeof rargs, "%s", w->run_args ? w->run_args : "");
        for (char *save = NULL, *t = strtok_r(rargs, " ", &save); t && na < 20;
             t = strtok_r(NULL, " ", &save))
            argv[na++] = t;
        const char *job[] = {"--",        g_job_bin, "--id", id,           "--log",
                             c->log_path, "--lock",  lock,   "--resource", w->res_sock};
        for (size_t k = 0; k < sizeof job / sizeof job[0]; k++)
            argv[na++] = job[k];
        char extra[256];
        snprintf(extra, sizeof extra, "%s", w->cand_args ? w->cand_args : "");
        for (char *save = NULL, *t = strtok_r(extra, " ", &save); t && na < 39;
             t = strtok_r(NULL, " ", &save))
            argv[na++] = t;
        argv[na] = NULL;
        c->pid = spawn_ex(argv, err, err, netns ? R.ns : NULL, true);
        if (c->pid <= 0) {
            c->pid = 0;
            return -1;
        }
        w->nc++;
        fr_log(w, "spawn %d %d%s run", i, (int)c->pid, netns ? " netns" : "");
        return i;
    }
    const char *argv[32] = {g_cand_bin,  "--id",       id,          "--endpoints",
                            eps,         "--election", w->election, "--log",
                            c->log_path, "--resource", w->res_sock, "--txn-key",
                            w->txn_key,  "--ttl",      ttl};
    int na = 15;
    if (eh_cacert(R.cl)) {
        argv[na++] = "--cacert";
        argv[na++] = eh_cacert(R.cl);
        argv[na++] = "--cert";
        argv[na++] = eh_cert(R.cl);
        argv[na++] = "--key";
        argv[na++] = eh_key(R.cl);
    }
    char extra[256];
    snprintf(extra, sizeof extra, "%s", w->cand_args ? w->cand_args : "");
    for (char *save = NULL, *t = strtok_r(extra, " ", &save); t && na < 31;
         t = strtok_r(NULL, " ", &save))
        argv[na++] = t;
    argv[na] = NULL;
    c->pid = spawn(argv, NULL, err, netns ? R.ns : NULL);
    if (c->pid <= 0) {
        c->pid = 0;
        return -1;
    }
    w->nc++;
    fr_log(w, "spawn %d %d%s", i, (int)c->pid, netns ? " netns" : "");
    return i;
}

int fr_replace(fr_world *w, int i)
{
    int n = fr_spawn(w, w->c[i].netns);
    if (n >= 0 && i == w->netns_idx) w->netns_idx = n;
    return n;
}

void fr_signal(fr_world *w, int i, int sig)
{
    fr_cand *c = &w->c[i];
    if (c->pid == 0) return;
    kill(c->pid, sig);
    if (sig == SIGSTOP) {
        c->stopped = true;
        c->stopped_at = fr_now();
    } else if (sig == SIGCONT) {
        c->stopped = false;
    }
    fr_log(w, "signal %d %s", c->id, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
}

void fr_signal_group(fr_world *w, int i, int sig)
{
    fr_cand *c = &w->c[i];
    if (c->pid == 0) return;
    kill(-c->pid, sig);
    if (sig == SIGSTOP) {
        c->stopped = true;
        c->stopped_at = fr_now();
    } else if (sig == SIGCONT) {
        c->stopped = false;
    }
    fr_log(w, "signal %d %s group %d", c->id, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?",
           (int)c->pid);
}

int fr_reap_wait(fr_world *w, int i, int timeout_ms)
{
    int64_t end = fr_now() + (int64_t)timeout_ms * 1000000;
    while (w->c[i].pid && fr_now() < end)
        fr_sleep(w, 2);
    return w->c[i].pid ? -1 : 0;
}

void fr_kill(fr_world *w, int i)
{
    fr_cand *c = &w->c[i];
    if (c->pid == 0) return;
    kill(c->pid, SIGKILL);
    fr_log(w, "signal %d KILL", c->id);
    int st = reap(c->pid, 5000);
    char s[40];
    status_str(st, s, sizeof s);
    fr_log(w, "death %d %s", c->id, s);
    c->pid = 0;
    c->status = st;
    c->reaped = true;
    c->stopped = false;
    read_cand_log(c);
    c->leading = false;
}

void fr_term(fr_world *w, int i, int wait_ms)
{
    fr_cand *c = &w->c[i];
    if (c->pid == 0) return;
    kill(c->pid, SIGTERM);
    if (c->stopped) kill(c->pid, SIGCONT);
    c->stopped = false;
    fr_log(w, "signal %d TERM", c->id);
    int64_t end = fr_now() + (int64_t)wait_ms * 1000000;
    pid_t pid = c->pid;
    int st = 0;
    for (;;) {
        read_cand_log(c);
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) break;
        if (fr_now() >= end) {
            kill(pid, SIGKILL);
            fr_log(w, "note cand %d ignored SIGTERM for %d ms: SIGKILL", c->id, wait_ms);
            waitpid(pid, &st, 0);
            break;
        }
        fu_msleep(2);
    }
    untrack(pid);
    char s[40];
    status_str(st, s, sizeof s);
    fr_log(w, "death %d %s", c->id, s);
    c->pid = 0;
    c->status = st;
    c->reaped = true;
    read_cand_log(c);
    c->leading = false;
}

static int leader_excluding(fr_world *w, int ex1, int ex2)
{
    int best = -1;
    for (int i = 0; i < w->nc; i++) {
        fr_cand *c = &w->c[i];
        if (i == ex1 || i == ex2 || !c->pid || c->stopped || !c->leading) continue;
        if (best < 0 || c->elected_at > w->c[best].elected_at) best = i;
    }
    return best;
}

int fr_leader(fr_world *w)
{
    return leader_excluding(w, -1, -1);
}

int fr_wait_leader(fr_world *w, int ex1, int ex2, int timeout_ms)
{
    int64_t end = fr_now() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        fr_pump(w);
        int l = leader_excluding(w, ex1, ex2);
        if (l >= 0) return l;
        if (fr_now() >= end) return -1;
        fu_msleep(2);
    }
}

int fr_live_count(fr_world *w)
{
    int n = 0;
    for (int i = 0; i < w->nc; i++)
        n += w->c[i].pid != 0;
    return n;
}

int fr_random_waiter(fr_world *w)
{
    int cand[FR_MAX_CANDS], n = 0;
    for (int i = 0; i < w->nc; i++)
        if (w->c[i].pid && !w->c[i].stopped && !w->c[i].leading && w->c[i].waiting &&
            !w->c[i].netns)
            cand[n++] = i;
    return n ? cand[fr_rand_int(n)] : -1;
}

int fr_next_in_line(fr_world *w, int leader)
{
    for (int i = 0; i < w->nc; i++)
        if (i != leader && w->c[i].pid && w->c[i].waiting &&
            !strcmp(w->c[i].pred, w->c[leader].key))
            return i;
    return -1;
}

bool fr_ensure_leader(fr_world *w, int want)
{
    for (int tries = 0; tries < 20; tries++) {
        int l = fr_wait_leader(w, -1, -1, (int)R.bound_ms + 3000);
        if (l < 0) return false;
        if (l == want) return true;
        int64_t end = fr_now() + 8000000000LL;
        while (!w->c[want].waiting && w->c[want].pid && fr_now() < end)
            fr_sleep(w, 10);
        if (!w->c[want].pid) return false;
        fr_log(w, "note rotating: SIGTERM cand %d so that cand %d leads", l, want);
        fr_term(w, l, 5000);
        fr_replace(w, l);
        fr_sleep(w, 20);
    }
    return false;
}

int fr_member_of(const char *endpoint)
{
    const char *colon = strrchr(endpoint, ':');
    if (!colon) return -1;
    int port = atoi(colon + 1);
    for (int i = 0; i < eh_members(R.cl); i++)
        if (eh_client_port(R.cl, i) == port) return i;
    return -1;
}

/* ---------------------------------------------------------------- etcd */

int fr_restore_members(fr_world *w)
{
    int rc = 0;
    for (int i = 0; i < eh_members(R.cl); i++) {
        if (eh_member_removed(R.cl, i)) continue; /* member-replace */
        if (!eh_member_running(R.cl, i)) {
            if (eh_member_restart(R.cl, i) != 0) rc = -1;
        } else {
            eh_member_resume(R.cl, i); /* SIGCONT: harmless if it runs */
        }
    }
    if (rc == 0 && eh_wait_healthy(R.cl, -1, 30) != 0) rc = -1;
    if (rc == 0 && eh_wait_leader(R.cl, 15) < 0) rc = -1;
    if (w) fr_pump(w);
    return rc;
}

static int admin_call(elector_rpc rpc, const ProtobufCMessage *req,
                      ProtobufCMessage **resp)
{
    elector_call_opts o = {.timeout_ms = 3000};
    return elector_etcd_call_sync(g_admin, rpc, req, &o, resp);
}

int64_t fr_revision(void)
{
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    req.key.data = (uint8_t *)"fault-revision-probe";
    req.key.len = strlen("fault-revision-probe");
    ProtobufCMessage *m = NULL;
    if (admin_call(ELECTOR_RPC_RANGE, &req.base, &m) != 0) return -1;
    Etcdserverpb__RangeResponse *r = (Etcdserverpb__RangeResponse *)m;
    int64_t rev = r->header ? r->header->revision : -1;
    protobuf_c_message_free_unpacked(m, NULL);
    return rev;
}

int64_t fr_noise(void)
{
    Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
    req.key.data = (uint8_t *)"fault-noise";
    req.key.len = strlen("fault-noise");
    req.value.data = (uint8_t *)"x";
    req.value.len = 1;
    ProtobufCMessage *m = NULL;
    if (admin_call(ELECTOR_RPC_PUT, &req.base, &m) != 0) return -1;
    Etcdserverpb__PutResponse *r = (Etcdserverpb__PutResponse *)m;
    int64_t rev = r->header ? r->header->revision : -1;
    protobuf_c_message_free_unpacked(m, NULL);
    return rev;
}

int fr_fill_until_nospace(int max, int *puts)
{
    static uint8_t big[100 * 1024];
    memset(big, 'f', sizeof big);
    int rc = 0;
    for (*puts = 0; *puts < max; (*puts)++) {
        char key[40];
        snprintf(key, sizeof key, "fault-fill/%04d", *puts);
        Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
        req.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)key};
        req.value = (ProtobufCBinaryData){sizeof big, big};
        ProtobufCMessage *m = NULL;
        rc = admin_call(ELECTOR_RPC_PUT, &req.base, &m);
        if (m) protobuf_c_message_free_unpacked(m, NULL);
        if (rc == ELECTOR_ENOSPACE) return 0;
        if (rc) return rc;
    }
    return -1;
}

int fr_clear_nospace(void)
{
    static const char pfx[] = "fault-fill/", end[] = "fault-fill0";
    Etcdserverpb__DeleteRangeRequest req = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    req.key = (ProtobufCBinaryData){strlen(pfx), (uint8_t *)pfx};
    req.range_end = (ProtobufCBinaryData){strlen(end), (uint8_t *)end};
    ProtobufCMessage *m = NULL;
    int rc = admin_call(ELECTOR_RPC_DELETE_RANGE, &req.base, &m);
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    if (rc) return rc;
    int64_t rev = fr_revision();
    if (rev <= 0 || fr_compact(rev) != 0) return -1;
    eh_ctl_opts o = {.timeout_s = 30};
    if (eh_etcdctl_opts(R.cl, &o, NULL, "defrag", "--cluster", NULL) != 0) return -1;
    return eh_etcdctl(R.cl, NULL, "alarm", "disarm", NULL);
}

int fr_revoke_key_lease(const char *key)
{
    const char *slash = strrchr(key, '/');
    if (!slash || !slash[1]) return -1;
    Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    req.id = (int64_t)strtoull(slash + 1, NULL, 16);
    ProtobufCMessage *m = NULL;
    int rc = admin_call(ELECTOR_RPC_LEASE_REVOKE, &req.base, &m);
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

int fr_compact(int64_t rev)
{
    Etcdserverpb__CompactionRequest req = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    req.revision = rev;
    ProtobufCMessage *m = NULL;
    int rc = admin_call(ELECTOR_RPC_COMPACT, &req.base, &m);
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    return rc == ELECTOR_ECOMPACTED ? 0 : rc;
}

static int64_t put_marker(fr_world *w, const char *name)
{
    char key[200];
    snprintf(key, sizeof key, "%s%s", w->prefix, name);
    Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
    req.key.data = (uint8_t *)key;
    req.key.len = strlen(key);
    req.value.data = (uint8_t *)"end";
    req.value.len = 3;
    ProtobufCMessage *m = NULL;
    for (int tries = 0; tries < 5; tries++) {
        if (admin_call(ELECTOR_RPC_PUT, &req.base, &m) == 0) break;
        fu_msleep(500);
    }
    if (!m) return -1;
    Etcdserverpb__PutResponse *r = (Etcdserverpb__PutResponse *)m;
    int64_t rev = r->header ? r->header->revision : -1;
    protobuf_c_message_free_unpacked(m, NULL);
    return rev;
}

bool fr_sync_recorder(fr_world *w)
{
    int64_t rev = put_marker(w, "sync");
    int64_t end = fr_now() + 5000000000LL;
    while (rev > 0 && history_scan(w, NULL) < rev && fr_now() < end)
        fr_sleep(w, 10);
    bool ok = rev > 0 && history_scan(w, NULL) >= rev;
    if (!ok) fr_log(w, "note the recorder did not catch up with revision %" PRId64, rev);
    return ok;
}

/* ---------------------------------------------------------------- netns */

static int run_quiet(const char *const argv[])
{
    tl_run_opts o = {.quiet_stderr = 1, .timeout_s = 10};
    return tl_run_ex(NULL, argv, &o);
}

static int run_loud(const char *const argv[])
{
    tl_run_opts o = {.timeout_s = 10};
    int rc = tl_run_ex(NULL, argv, &o);
    if (rc != 0) {
        fprintf(stderr, "fault-runner: failed (%d):", rc);
        for (int i = 0; argv[i]; i++)
            fprintf(stderr, " %s", argv[i]);
        fputc('\n', stderr);
    }
    return rc;
}

int fr_link(bool up)
{
    const char *argv[] = {
        "ip", "-n", R.fw_ns, "link", "set", R.veth_fw, up ? "up" : "down", NULL};
    return run_loud(argv);
}

/* Whether the root namespace (ours: the runner never leaves it) has gained an
 * address outside 127.0.0.0/8 and ::1 since the start; told, and counted in
 * R.root_gained, which fails the run. */
static bool root_isolated(const char *when)
{
    char *now = fu_addr_snapshot();
    char what[600];
    int n =
        now && R.root_addrs ? fu_addr_gained(R.root_addrs, now, what, sizeof what) : -1;
    free(now);
    if (n == 0) return true;
    if (n < 0)
        fr_say("ERROR: cannot read the root network namespace's addresses (%s)", when);
    else
        fr_say("ERROR: the root network namespace gained %d address%s outside "
               "127.0.0.0/8 and ::1 (%s): %s",
               n, n == 1 ? "" : "es", when, what);
    /* what is gained stays: the most seen at once, not a sum over the checks */
    if ((n < 0 ? 1 : n) > R.root_gained) R.root_gained = n < 0 ? 1 : n;
    return false;
}

static void netns_teardown(void)
{
    /* each veth end goes with its namespace */
    if (R.ns[0]) {
        const char *del_ns[] = {"ip", "netns", "del", R.ns, NULL};
        run_quiet(del_ns);
    }
    if (R.fw_ns[0]) {
        const char *del_fw[] = {"ip", "netns", "del", R.fw_ns, NULL};
        run_quiet(del_fw);
    }
}

/* Two namespaces of this run: the candidates' (R.ns, its veth end R.cand_ip) and
 * the forwarder's (R.fw_ns, R.fw_ip), the veth pair made inside them, so that it
 * never exists in the root namespace. fault-proxy starts in the root namespace,
 * makes its listening sockets in the forwarder's (--listen-netns) and connects
 * to the members on the root's 127.0.0.1: the candidates' traffic stays in the
 * run's namespaces and on loopback. */
static int netns_setup(void)
{
    unsigned sub = 20 + (unsigned)(strtoul(R.tag, NULL, 10) % 200);
    snprintf(R.ns, sizeof R.ns, "elf-%s", R.tag);
    snprintf(R.fw_ns, sizeof R.fw_ns, "elfw-%s", R.tag);
    snprintf(R.veth_cand, sizeof R.veth_cand, "elfc%s", R.tag);
    snprintf(R.veth_fw, sizeof R.veth_fw, "elff%s", R.tag);
    snprintf(R.fw_ip, sizeof R.fw_ip, "10.199.%u.1", sub);
    snprintf(R.cand_ip, sizeof R.cand_ip, "10.199.%u.2", sub);
    char fw_cidr[40], cand_cidr[40];
    snprintf(fw_cidr, sizeof fw_cidr, "%s/30", R.fw_ip);
    snprintf(cand_cidr, sizeof cand_cidr, "%s/30", R.cand_ip);
    const char *steps[][14] = {
        {"ip", "netns", "add", R.ns, NULL},
        {"ip", "netns", "add", R.fw_ns, NULL},
        {"ip", "-n", R.ns, "link", "add", R.veth_cand, "type", "veth", "peer", "name",
         R.veth_fw, "netns", R.fw_ns, NULL},
        {"ip", "-n", R.ns, "addr", "add", cand_cidr, "dev", R.veth_cand, NULL},
        {"ip", "-n", R.ns, "link", "set", R.veth_cand, "up", NULL},
        {"ip", "-n", R.ns, "link", "set", "lo", "up", NULL},
        {"ip", "-n", R.fw_ns, "addr", "add", fw_cidr, "dev", R.veth_fw, NULL},
        {"ip", "-n", R.fw_ns, "link", "set", R.veth_fw, "up", NULL},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (run_loud(steps[i]) != 0) {
            netns_teardown();
            return -1;
        }
    /* The forwarder: the forwarder's veth end -> each member on 127.0.0.1. */
    char maps[EH_MAX_MEMBERS][80], fw_path[80];
    snprintf(fw_path, sizeof fw_path, "/run/netns/%s", R.fw_ns);
    const char *argv[EH_MAX_MEMBERS + 4] = {g_proxy_bin, "--listen-netns", fw_path};
    int m = eh_members(R.cl);
    for (int i = 0; i < m; i++) {
        snprintf(maps[i], sizeof maps[i], "%s:%d=127.0.0.1:%d", R.fw_ip,
                 eh_client_port(R.cl, i), eh_client_port(R.cl, i));
        argv[i + 3] = maps[i];
    }
    argv[m + 3] = NULL;
    char err[600];
    snprintf(err, sizeof err, "%s/proxy.err", R.out);
    R.proxy_pid = spawn(argv, NULL, err, NULL);
    fu_msleep(100);
    int st;
    if (R.proxy_pid > 0 && waitpid(R.proxy_pid, &st, WNOHANG) == R.proxy_pid) {
        untrack(R.proxy_pid);
        fr_say("ERROR: the forwarder exited at once (status %d): see %s", st, err);
        R.proxy_pid = 0;
    }
    if (R.proxy_pid <= 0) {
        netns_teardown();
        return -1;
    }
    R.have_netns = true;
    return 0;
}

/* The delaying forwarder on free loopback ports, one per member. */
static int slow_proxy_setup(void)
{
    int m = eh_members(R.cl);
    char maps[EH_MAX_MEMBERS][80], delay[16];
    const char *argv[EH_MAX_MEMBERS + 4] = {g_proxy_bin, "--delay-ms", delay};
    snprintf(delay, sizeof delay, "%d", R.slow_delay_ms);
    for (int i = 0; i < m; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
            getsockname(fd, (struct sockaddr *)&a, &len)) {
            if (fd >= 0) close(fd);
            return -1;
        }
        R.slow_port[i] = ntohs(a.sin_port);
        close(fd);
        snprintf(maps[i], sizeof maps[i], "127.0.0.1:%d=127.0.0.1:%d", R.slow_port[i],
                 eh_client_port(R.cl, i));
        argv[i + 3] = maps[i];
    }
    argv[m + 3] = NULL;
    char err[600];
    snprintf(err, sizeof err, "%s/slow-proxy.err", R.out);
    R.slow_pid = spawn(argv, NULL, err, NULL);
    fu_msleep(100);
    return R.slow_pid > 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- cleanup */

static void cleanup_all(void)
{
    if (g_cleaned) return;
    g_cleaned = true;
    for (int i = 0; i < g_npids; i++)
        kill(g_pids[i], SIGKILL);
    for (int i = 0; i < g_npids; i++)
        while (waitpid(g_pids[i], NULL, 0) < 0 && errno == EINTR) {
        }
    g_npids = 0;
    reap_strays(true);
    if (g_admin) elector_etcd_free(g_admin);
    g_admin = NULL;
    if (R.cl) {
        /* keep the members' logs next to the results */
        for (int i = 0; i < eh_members(R.cl); i++) {
            char from[600], to[600];
            snprintf(from, sizeof from, "%s/m%d.log", eh_dir(R.cl), i);
            snprintf(to, sizeof to, "%s/etcd-m%d.log", R.out, i);
            char *s = fu_read_file(from, NULL);
            int fd = s ? open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
            if (fd >= 0) {
                ssize_t wr = write(fd, s, strlen(s));
                (void)wr;
                close(fd);
            }
            free(s);
        }
        eh_stop(R.cl);
        R.cl = NULL;
    }
    netns_teardown();
}

/* ---------------------------------------------------------------- scenario world */

static fr_world W;

static int world_begin(fr_world *w, const fr_scenario *s)
{
    memset(w, 0, sizeof *w);
    w->scenario = s->name;
    w->cand_args = s->cand_args;
    w->run_args = s->run_args;
    w->slow = s->slow;
    w->run = s->run;
    w->netns_idx = -1;
    w->rlog = -1;
    w->t_begin = fr_now();
    snprintf(w->dir, sizeof w->dir, "%s/%s", R.out, s->name);
    mkdir(w->dir, 0755);
    snprintf(w->prefix, sizeof w->prefix, "fault/%s/", s->name);
    snprintf(w->election, sizeof w->election, "fault/%s/election", s->name);
    snprintf(w->txn_key, sizeof w->txn_key, "fault/%s/resource", s->name);
    char p[700];
    snprintf(p, sizeof p, "%s/runner.log", w->dir);
    w->rlog = fu_open_log(p);
    if (w->rlog < 0) return -1;
    if (fr_restore_members(NULL) != 0) {
        fr_say("ERROR: etcd cluster not healthy before %s", s->name);
        return -1;
    }
    int64_t rev = fr_revision();
    if (rev < 0) {
        fr_say("ERROR: cannot read etcd's revision: %s", elector_etcd_errstr(g_admin));
        return -1;
    }
    w->history_from = rev + 1;
    fr_log(w,
           "config scenario=%s ttl_ms=%d bound_ms=%" PRId64 " election=%s txn_key=%s "
           "history_from=%" PRId64 " seed=%llu",
           s->name, R.ttl_s * 1000, R.bound_ms, w->election, w->txn_key, w->history_from,
           R.seed);
    snprintf(w->res_sock, sizeof w->res_sock, "%s/resource.sock", w->dir);
    if (strlen(w->res_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        snprintf(w->res_sock, sizeof w->res_sock, "/tmp/elf-%s-%s.sock", R.tag, s->name);
    char rlog[700];
    snprintf(rlog, sizeof rlog, "%s/resource.log", w->dir);
    const char *rargv[] = {g_res_bin, w->res_sock, rlog, NULL};
    w->resource_pid = spawn(rargv, NULL, NULL, NULL);
    for (int i = 0; i < 200 && access(w->res_sock, F_OK) != 0; i++)
        fu_msleep(5);
    recorder_start(w, w->history_from);
    fu_msleep(100);
    if (s->netns && R.have_netns) {
        w->netns_idx = fr_spawn(w, true);
        if (fr_wait_leader(w, -1, -1, 15000) != w->netns_idx)
            fr_log(w, "note the netns candidate did not lead first");
    }
    for (int i = 0; i < s->ncand; i++)
        fr_spawn(w, false);
    /* wait until every candidate campaigns (leads or waits) */
    int64_t end = fr_now() + 30000000000LL;
    for (;;) {
        fr_sleep(w, 20);
        int ready = 0, live = 0;
        for (int i = 0; i < w->nc; i++) {
            if (!w->c[i].pid) continue;
            live++;
            ready += w->c[i].leading || w->c[i].waiting;
        }
        if (ready == live && fr_leader(w) >= 0) break;
        if (fr_now() >= end) {
            fr_say("WARNING: only %d of %d candidates campaign after 30 s", ready, live);
            break;
        }
    }
    return 0;
}

static void world_end(fr_world *w, fc_result *res, int *check_rc)
{
    w->tick = NULL;
    w->tearing_down = true;
    fr_log(w, "teardown");
    for (int i = 0; i < w->nc; i++) {
        fr_cand *c = &w->c[i];
        if (!c->pid) continue;
        if (c->stopped) kill(w->run ? -c->pid : c->pid, SIGCONT);
        kill(c->pid, SIGTERM);
    }
    int64_t end = fr_now() + 6000000000LL;
    while (fr_live_count(w) > 0 && fr_now() < end)
        fr_sleep(w, 10);
    for (int i = 0; i < w->nc; i++)
        if (w->c[i].pid) fr_kill(w, i);
    if (w->run) {
        /* guards of killed electors finish their trees (and their revokes) */
        end = fr_now() + 5000000000LL;
        while (reap_strays(false) > 0 && fr_now() < end)
            fr_sleep(w, 20);
        reap_strays(true);
    }
    fr_restore_members(w);
    int64_t rev = put_marker(w, "end");
    end = fr_now() + 15000000000LL;
    while (rev > 0 && history_scan(w, NULL) < rev && fr_now() < end)
        fr_sleep(w, 20);
    if (rev < 0 || history_scan(w, NULL) < rev)
        fr_log(w, "note the recorder did not reach the sentinel revision %" PRId64, rev);
    if (w->recorder_pid > 0) {
        kill(w->recorder_pid, SIGTERM);
        reap(w->recorder_pid, 3000);
        w->recorder_pid = 0;
    }
    if (w->resource_pid > 0) {
        kill(w->resource_pid, SIGTERM);
        reap(w->resource_pid, 3000);
        w->resource_pid = 0;
    }
    close(w->rlog);
    w->rlog = -1;
    char p[700];
    snprintf(p, sizeof p, "%s/check.txt", w->dir);
    FILE *f = fopen(p, "we");
    *check_rc = fc_check(w->dir, NULL, res, f);
    if (f) fclose(f);
}

/* ---------------------------------------------------------------- results */

typedef struct row {
    fc_result r;
    int check_rc;
    int failed_rounds;
    double secs;
    bool ran;
} row;

static void fmt_row(FILE *f, const row *x, bool md)
{
    const fc_result *r = &x->r;
    int tok = r->token_order + r->token_mismatch + r->txn_order + r->txn_guard +
              r->unknown_token + r->not_etcd_leader + r->txn_phantom +
              r->no_quorum_elections;
    int unsafe = fc_safety(r);
    const char *verdict = x->check_rc < 0                 ? "NO DATA"
                          : unsafe                        ? "UNSAFE"
                          : r->liveness                   ? "LIVENESS"
                          : r->expect_fail                ? "UNEXPECTED"
                          : x->failed_rounds || r->errors ? "INCOMPLETE"
                                                          : "ok";
    char fo[64], tk[64];
    if (r->nfailover)
        snprintf(fo, sizeof fo, "%.0f / %.0f / %.0f", r->p50_ms, r->p99_ms, r->max_ms);
    else
        snprintf(fo, sizeof fo, "-");
    if (r->ntakeover)
        snprintf(tk, sizeof tk, "%.0f / %.0f", r->take_p50_ms, r->take_max_ms);
    else
        snprintf(tk, sizeof tk, "-");
    if (md)
        fprintf(
            f,
            "| %s | %d | %d | %d | %d | %d | %d | %d | %s | %s | %d | %d | %d | %s |\n",
            r->scenario, r->rounds, r->intervals, r->losses, r->overlaps,
            r->stale_accepted, tok, r->write_outside, fo, tk, r->kept, r->liveness,
            r->fenced_rejects, verdict);
    else
        fprintf(f, "%-19s %6d %5d %6d %8d %5d %5d %7d %20s %13s %4d %8d %6d  %s\n",
                r->scenario, r->rounds, r->intervals, r->losses, r->overlaps,
                r->stale_accepted, tok, r->write_outside, fo, tk, r->kept, r->liveness,
                r->fenced_rejects, verdict);
}

static void print_table(FILE *f, row *rows, int n, bool md)
{
    if (md) {
        fprintf(
            f,
            "| scenario | rounds | terms | losses | overlaps | stale writes accepted | "
            "token violations | writes outside term | leaderless after heal p50 / p99 / "
            "max (ms) | fault to new leader p50 / max (ms) | kept | liveness violations "
            "| "
            "fenced rejects | verdict |\n");
        fprintf(f, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    } else {
        fprintf(f, "%-19s %6s %5s %6s %8s %5s %5s %7s %20s %13s %4s %8s %6s  %s\n",
                "scenario", "rounds", "terms", "losses", "overlaps", "stale", "token",
                "outside", "leaderless p50/p99/max", "new ldr p50/max", "kept",
                "liveness", "fenced", "verdict");
    }
    for (int i = 0; i < n; i++)
        if (rows[i].ran) fmt_row(f, &rows[i], md);
}

static void print_rss(FILE *f, const row *x, double min_life)
{
    const fc_result *r = &x->r;
    fprintf(f,
            "\nRSS of candidate processes in %s that lived at least %.0f s (kB, first "
            "sample ~1 s after start, last at exit):\n\n",
            r->scenario, min_life);
    fprintf(
        f,
        "| cand | lived (s) | RSS start | RSS end | growth |\n|--:|--:|--:|--:|--:|\n");
    long worst = 0;
    for (int i = 0; i < r->nrss; i++) {
        const fc_rss *s = &r->rss[i];
        if (s->lived_s < min_life) continue;
        fprintf(f, "| %d | %.0f | %ld | %ld | %+ld |\n", s->id, s->lived_s, s->first_kb,
                s->last_kb, s->last_kb - s->first_kb);
        if (s->last_kb - s->first_kb > worst) worst = s->last_kb - s->first_kb;
    }
    fprintf(f, "\nlargest RSS growth of a candidate: %+ld kB\n", worst);
}

/* ---------------------------------------------------------------- main */

static double parse_duration(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    if (!*end || !strcmp(end, "s")) return v;
    if (!strcmp(end, "m")) return v * 60;
    if (!strcmp(end, "h")) return v * 3600;
    if (!strcmp(end, "ms")) return v / 1000;
    return -1;
}

static _Noreturn void usage(int st)
{
    fprintf(
        st ? stderr : stdout,
        "usage: fault-runner [--rounds N] [--seed N] [--ttl S] [--scenarios a,b,...]\n"
        "                    [--duration 30m] [--out DIR] [--tag T] [--bin-dir DIR] "
        "[--list]\n");
    exit(st);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"rounds", required_argument, 0, 'r'},
                                       {"seed", required_argument, 0, 's'},
                                       {"ttl", required_argument, 0, 't'},
                                       {"scenarios", required_argument, 0, 'S'},
                                       {"duration", required_argument, 0, 'd'},
                                       {"out", required_argument, 0, 'o'},
                                       {"tag", required_argument, 0, 'T'},
                                       {"bin-dir", required_argument, 0, 'b'},
                                       {"list", no_argument, 0, 'l'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *only = NULL;
    bool seeded = false;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'r':
            R.rounds = atoi(optarg);
            break;
        case 's':
            R.seed = strtoull(optarg, NULL, 0);
            seeded = true;
            break;
        case 't':
            R.ttl_s = atoi(optarg);
            break;
        case 'S':
            only = optarg;
            break;
        case 'd':
            R.duration_s = parse_duration(optarg);
            break;
        case 'o':
            R.out = optarg;
            break;
        case 'T':
            snprintf(R.tag, sizeof R.tag, "%s", optarg);
            break;
        case 'b':
            R.bin_dir = optarg;
            break;
        case 'l':
            for (int i = 0; i < fr_nscenarios; i++)
                printf("%-19s %s\n", fr_scenarios[i].name, fr_scenarios[i].what);
            return 0;
        case 'h':
            usage(0);
        default:
            usage(2);
        }
    }
    if (optind != argc || R.rounds <= 0 || R.ttl_s <= 0 || R.duration_s < 0) usage(2);
    g_t0 = fr_now();
    if (!seeded) R.seed = (unsigned long long)(fr_now() ^ ((int64_t)getpid() << 20));
    g_rng = R.seed ? R.seed * 0x9e3779b97f4a7c15ULL : 0x9e3779b97f4a7c15ULL;
    if (!R.tag[0]) snprintf(R.tag, sizeof R.tag, "%d", (int)getpid() % 10000000);
    R.bound_ms = (int64_t)R.ttl_s * 1000 + 2000;

    static char exe_dir[600];
    if (!R.bin_dir) {
        ssize_t n = readlink("/proc/self/exe", exe_dir, sizeof exe_dir - 1);
        if (n > 0) {
            exe_dir[n] = '\0';
            char *slash = strrchr(exe_dir, '/');
            if (slash) *slash = '\0';
        }
        R.bin_dir = exe_dir;
    }
    snprintf(g_cand_bin, sizeof g_cand_bin, "%s/fault-candidate", R.bin_dir);
    snprintf(g_res_bin, sizeof g_res_bin, "%s/fault-resource", R.bin_dir);
    snprintf(g_proxy_bin, sizeof g_proxy_bin, "%s/fault-proxy", R.bin_dir);
    snprintf(g_job_bin, sizeof g_job_bin, "%s/fault-job", R.bin_dir);
#ifdef ELECTOR_TOOL_PATH
    snprintf(g_elector_bin, sizeof g_elector_bin, "%s", ELECTOR_TOOL_PATH);
#else
    snprintf(g_elector_bin, sizeof g_elector_bin, "%s/../tool/elector", R.bin_dir);
#endif
#ifdef ELECTOR_RELEASE_HELPER_BIN
    /* kill-release: the candidates' release helper, from this build */
    setenv("ELECTOR_RELEASE_HELPER", ELECTOR_RELEASE_HELPER_BIN, 0);
#endif
    /* orphans of `elector run` candidates come to us, to be reaped */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    static char outbuf[600];
    if (!R.out) {
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char ts[32];
        strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", &tmv);
        snprintf(outbuf, sizeof outbuf, "fault-run-%s", ts);
        R.out = outbuf;
    }
    mkdir(R.out, 0755);

    /* which scenarios */
    const fr_scenario *sel[64];
    int nsel = 0;
    static fr_scenario mix;
    if (R.duration_s > 0) {
        mix = (fr_scenario){.name = "mix",
                            .what = "random mix of all faults (soak)",
                            .ncand = 5,
                            .netns = true,
                            .round = fr_round_mix};
        /* (the mix's candidates talk to etcd directly: no added latency) */
        sel[nsel++] = &mix;
    } else {
        for (int i = 0; i < fr_nscenarios; i++) {
            const fr_scenario *s = &fr_scenarios[i];
            bool want = !only && !s->optional;
            if (only) {
                char list[512];
                snprintf(list, sizeof list, "%s", only);
                for (char *save = NULL, *t = strtok_r(list, ",", &save); t;
                     t = strtok_r(NULL, ",", &save))
                    if (!strcmp(t, s->name)) want = true;
            }
            if (want) sel[nsel++] = s;
        }
        if (only && strstr(only, "mix")) {
            mix = (fr_scenario){.name = "mix",
                                .what = "random mix of all faults",
                                .ncand = 5,
                                .netns = true,
                                .round = fr_round_mix};
            sel[nsel++] = &mix;
        }
    }
    if (nsel == 0) {
        fprintf(stderr, "fault-runner: no scenario selected (see --list)\n");
        return 2;
    }
    bool need_netns = false, need_slow = false, need_tls = false, need_quota = false;
    for (int i = 0; i < nsel; i++) {
        need_netns |= sel[i]->netns;
        need_slow |= sel[i]->slow;
        need_tls |= sel[i]->tls;
        need_quota |= sel[i]->quota;
    }
    for (int i = 0; need_quota && i < nsel; i++) {
        if (!sel[i]->quota) {
            fprintf(stderr,
                    "fault-runner: a selected scenario runs etcd with a small quota, "
                    "which %s does not expect: run them apart\n",
                    sel[i]->name);
            return 2;
        }
    }
    for (int i = 0; need_tls && i < nsel; i++) {
        if (sel[i]->run || sel[i]->netns || sel[i]->slow) {
            fprintf(stderr,
                    "fault-runner: a selected scenario needs a TLS cluster, which %s "
                    "cannot use (its candidates or proxies are plaintext): run them "
                    "apart\n",
                    sel[i]->name);
            return 2;
        }
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    atexit(cleanup_all);

    fr_say("fault run: seed %llu, ttl %ds, rounds %d%s, liveness bound %" PRId64
           " ms, out %s",
           R.seed, R.ttl_s, R.rounds, R.duration_s > 0 ? " (soak)" : "", R.bound_ms,
           R.out);
    eh_opts eo = {.members = 3,
                  .tls = need_tls,
                  .extra_args = need_quota ? "--quota-backend-bytes=8388608" : NULL};
    /* the root namespace's addresses before anything of ours: the reference */
    R.root_addrs = fu_addr_snapshot();
    if (!R.root_addrs) {
        fprintf(stderr, "fault-runner: cannot read this network namespace's addresses\n");
        return 3;
    }
    R.cl = eh_start(&eo);
    if (!R.cl) {
        fprintf(stderr, "fault-runner: cannot start etcd\n");
        return 3;
    }
    fr_say("etcd cluster: %s", eh_endpoints(R.cl));
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(R.cl);
    cfg.dial_timeout_ms = 1000;
    cfg.request_timeout_ms = 3000;
    /* member-replace replaces every member the run started with. */
    cfg.auto_sync_interval_ms = 1000;
    cfg.cacert = eh_cacert(R.cl); /* NULLs without TLS */
    cfg.cert = eh_cert(R.cl);
    cfg.key = eh_key(R.cl);
    g_admin = elector_etcd_new(&cfg);
    if (!g_admin || elector_etcd_err(g_admin)) {
        fprintf(stderr, "fault-runner: admin client failed\n");
        return 3;
    }
    {
        Etcdserverpb__StatusRequest sreq = ETCDSERVERPB__STATUS_REQUEST__INIT;
        ProtobufCMessage *sm = NULL;
        if (elector_etcd_call_sync(g_admin, ELECTOR_RPC_STATUS, &sreq.base, NULL, &sm) ==
            0) {
            const Etcdserverpb__StatusResponse *sr = (const void *)sm;
            snprintf(g_etcd_version, sizeof g_etcd_version, "%s",
                     sr->version ? sr->version : "?");
        }
        if (sm) protobuf_c_message_free_unpacked(sm, NULL);
        fr_say("etcd version: %s", g_etcd_version);
    }
    if (need_slow) {
        if (slow_proxy_setup() != 0)
            fr_say("WARNING: the delaying proxy did not start: compact runs without "
                   "latency");
        else
            fr_say("delaying proxy: %d ms each way, ports %d,%d,%d", R.slow_delay_ms,
                   R.slow_port[0], R.slow_port[1], R.slow_port[2]);
    }
    if (need_netns) {
        if (geteuid() != 0)
            fr_say("WARNING: not root: the netns scenarios are skipped (they need "
                   "namespaces)");
        else if (netns_setup() != 0)
            fr_say("WARNING: network namespace setup failed: the netns scenarios are "
                   "skipped");
        else
            fr_say("netns %s: candidates, %s on %s; netns %s: forwarder, %s on %s -> "
                   "127.0.0.1 of the root namespace",
                   R.ns, R.cand_ip, R.veth_cand, R.fw_ns, R.fw_ip, R.veth_fw);
    }
    if (!root_isolated("after the setup")) {
        cleanup_all();
        return 3;
    }

    static row rows[64];
    int setup_fail = 0;
    for (int k = 0; k < nsel; k++) {
        const fr_scenario *s = sel[k];
        row *x = &rows[k];
        if (s->netns && s->round != fr_round_mix && !R.have_netns) {
            fr_say("%s: skipped (no network namespace)", s->name);
            continue;
        }
        fr_say("== %s: %s", s->name, s->what);
        fr_world *w = &W;
        int64_t t_start = fr_now();
        if (world_begin(w, s) != 0) {
            setup_fail++;
            continue;
        }
        int rounds = s->rounds ? s->rounds : R.rounds;
        int64_t soak_end = R.duration_s > 0 ? t_start + (int64_t)(R.duration_s * 1e9) : 0;
        for (int r = 1; soak_end ? fr_now() < soak_end : r <= rounds; r++) {
            w->round = r;
            /* a round starts from a running cluster with a leader */
            bool all_up = true;
            for (int i = 0; i < eh_members(R.cl); i++)
                all_up &= eh_member_removed(R.cl, i) || eh_member_running(R.cl, i);
            if (!all_up && fr_restore_members(w) != 0)
                fr_say("WARNING: cluster not healthy before round %d", r);
            if (fr_wait_leader(w, -1, -1, (int)R.bound_ms + 5000) < 0) {
                fr_log(w, "stuck %d no leader before the round", r);
                fr_say("%s round %d: no leader before the round (liveness)", s->name, r);
            }
            if (s->round(w, r) != 0) {
                x->failed_rounds++;
                fr_log(w, "note round %d could not run", r);
                fr_say("%s round %d: could not run", s->name, r);
            }
        }
        world_end(w, &x->r, &x->check_rc);
        char when[80];
        snprintf(when, sizeof when, "after %s", s->name);
        root_isolated(when);
        x->secs = (double)(fr_now() - t_start) / 1e9;
        x->ran = true;
        char line[512];
        FILE *mf = fmemopen(line, sizeof line, "w");
        fmt_row(mf, x, false);
        fclose(mf);
        line[strcspn(line, "\n")] = '\0';
        fr_say("%s (%.0f s) -> %s", s->name, x->secs, line);
        if (fc_safety(&x->r) || x->r.liveness || x->r.expect_fail)
            fr_say("   violations: see %s/check.txt (lines starting with VIOLATION)",
                   w->dir);
    }

    /* report */
    root_isolated("at the end");
    int unsafe = 0, liveness = 0, unexpected = 0, incomplete = setup_fail;
    for (int k = 0; k < nsel; k++) {
        if (!rows[k].ran) continue;
        unsafe += fc_safety(&rows[k].r);
        liveness += rows[k].r.liveness;
        unexpected += rows[k].r.expect_fail;
        incomplete += rows[k].failed_rounds + (rows[k].check_rc < 0) + rows[k].r.errors;
    }
    printf("\n");
    print_table(stdout, rows, nsel, false);
    char path[700];
    snprintf(path, sizeof path, "%s/fault-results.md", R.out);
    FILE *f = fopen(path, "we");
    if (f) {
        fprintf(f, "# elector fault-injection results\n\n");
        fprintf(f,
                "seed %llu, TTL %d s, %s, liveness bound %" PRId64
                " ms (TTL + 2 s after each heal; a heal by a new etcd Raft leader has "
                "its own, "
                "docs/FAULTS.md \"Bounds\"), etcd %s 3-member cluster on loopback\n\n",
                R.seed, R.ttl_s,
                R.duration_s > 0 ? "random-mix soak" : "fixed rounds per scenario",
                R.bound_ms, g_etcd_version);
        print_table(f, rows, nsel, true);
        fprintf(
            f,
            "\nsafety violations: %d, liveness violations: %d, unmet expectations: %d, "
            "incomplete: %d\n",
            unsafe, liveness, unexpected, incomplete);
        fprintf(f,
                "root network namespace: %d address%s gained outside 127.0.0.0/8 and "
                "::1\n",
                R.root_gained, R.root_gained == 1 ? "" : "es");
        for (int k = 0; k < nsel; k++)
            if (rows[k].ran && R.duration_s > 0) print_rss(f, &rows[k], 60);
        fclose(f);
    }
    for (int k = 0; k < nsel; k++)
        if (rows[k].ran && R.duration_s > 0) print_rss(stdout, &rows[k], 60);
    printf("\nsafety violations: %d, liveness violations: %d, unmet expectations: %d, "
           "incomplete: %d\nresults: %s\n",
           unsafe, liveness, unexpected, incomplete, path);
    printf("root network namespace: %d address%s gained outside 127.0.0.0/8 and ::1\n",
           R.root_gained, R.root_gained == 1 ? "" : "es");
    cleanup_all();
    if (unsafe || liveness || unexpected) return 1;
    return incomplete || R.root_gained ? 3 : 0;
}
