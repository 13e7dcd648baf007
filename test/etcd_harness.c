/* SPDX-License-Identifier: MIT */
/* Real-etcd harness; see etcd_harness.h. */
/* pipe2/O_CLOEXEC-style calls and strtok_r; tests may fork from threads. */
#define _GNU_SOURCE
#include "etcd_harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

extern char **environ;

const char EH_ROOT_PASSWORD[] = "root-pw-3c1f";
const char EH_USER[] = "alice";
const char EH_USER_PASSWORD[] = "alice-pw-9b2e";
const char EH_USER_PREFIX[] = "/alice/";

#define EH_START_TIMEOUT 20.0
#define EH_STOP_TIMEOUT 10.0
#define EH_CTL_TIMEOUT 30.0
/* Below Linux's default ephemeral range (32768-60999), so that no outgoing
 * connection (etcdctl, peer links) grabs a port between probe and bind. */
#define EH_PORT_LO 15000
#define EH_PORT_HI 32000

/* ------------------------------------------------------------ utilities */

/* A NULL-terminated vector of owned strings (argv, envp). */
typedef struct eh_vec {
    char **v;
    size_t n, cap;
} eh_vec;

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (p == NULL) abort(); /* tests: out of memory is not worth handling */
    return p;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (d == NULL) abort();
    return d;
}

static char *vstrf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *s = xrealloc(NULL, (size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

static char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vstrf(fmt, ap);
    va_end(ap);
    return s;
}

static void vec_push(eh_vec *v, char *owned)
{
    if (v->n + 2 > v->cap) {
        v->cap = v->cap != 0 ? v->cap * 2 : 16;
        v->v = xrealloc(v->v, v->cap * sizeof *v->v);
    }
    v->v[v->n++] = owned;
    v->v[v->n] = NULL;
}

static void vec_pushf(eh_vec *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void vec_pushf(eh_vec *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vec_push(v, vstrf(fmt, ap));
    va_end(ap);
}

static void vec_free(eh_vec *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->v[i]);
    free(v->v);
    *v = (eh_vec){0};
}

/* Pushes each space-separated word of s. */
static void vec_push_words(eh_vec *v, const char *s)
{
    if (s == NULL) return;
    char *copy = xstrdup(s), *save = NULL;
    for (char *w = strtok_r(copy, " \t", &save); w != NULL;
         w = strtok_r(NULL, " \t", &save))
        vec_push(v, xstrdup(w));
    free(copy);
}

/* ELECTOR_ETCD_DIR selects the etcd version (scripts/etcd35.sh prints such a
 * directory): it goes first in PATH, so the harness and every test that runs
 * etcdctl by name use its etcd, etcdctl and etcdutl. A directory without an
 * etcd in it is a setup error, not a silent fallback to the one in PATH. */
static void use_etcd_dir(void)
{
    const char *dir = getenv("ELECTOR_ETCD_DIR");
    if (dir == NULL || dir[0] == '\0') return;
    char *etcd = strf("%s/etcd", dir), *ctl = strf("%s/etcdctl", dir);
    if (access(etcd, X_OK) != 0 || access(ctl, X_OK) != 0) {
        fprintf(stderr,
                "etcd_harness: ELECTOR_ETCD_DIR=%s has no executable etcd and etcdctl "
                "(scripts/etcd35.sh prints a directory that has)\n",
                dir);
        exit(2);
    }
    free(etcd);
    free(ctl);
    const char *path = getenv("PATH");
    size_t n = strlen(dir);
    if (path != NULL && strncmp(path, dir, n) == 0 && (path[n] == ':' || path[n] == '\0'))
        return;
    char *np = strf("%s:%s", dir, path != NULL ? path : "/usr/bin:/bin");
    setenv("PATH", np, 1);
    free(np);
}

/* $env_name, else name found in PATH, else /usr/bin/name. */
static char *find_bin(const char *env_name, const char *name)
{
    const char *e = getenv(env_name);
    if (e != NULL && e[0] != '\0') return xstrdup(e);
    const char *path = getenv("PATH");
    char *copy = xstrdup(path != NULL ? path : ""), *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d != NULL;
         d = strtok_r(NULL, ":", &save)) {
        char *p = strf("%s/%s", d, name);
        if (access(p, X_OK) == 0) {
            free(copy);
            return p;
        }
        free(p);
    }
    free(copy);
    return strf("/usr/bin/%s", name);
}

/* Small PRNG for port choice, seeded per process (tests are forked). */
static uint64_t rng_next(void)
{
    static uint64_t s;
    static pid_t seeded_by;
    if (seeded_by != getpid()) {
        s = (uint64_t)tl_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15u;
        seeded_by = getpid();
    }
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

/* --------------------------------------------------------------- cluster */

typedef struct eh_member {
    pid_t pid; /* 0 when not running */
    int paused;
    int removed; /* eh_member_remove'd: its index stays taken */
    int client_port, peer_port;
    char *endpoint; /* as etcdctl and tests use it */
    char *log_path;
    eh_vec argv; /* built once, reused by restarts */
} eh_member;

struct eh_cluster {
    int n;
    int tls, auth;
    int auth_enabled; /* default --user root only once auth is on */
    char *dir;
    char *endpoints;
    char *etcd_bin, *etcdctl_bin;
    char *cacert, *cert, *key, *srv_cert, *srv_key, *wrong_cacert;
    char *token;          /* --initial-cluster-token */
    char *extra;          /* extra_args, for members added later */
    char *advertise_more; /* eh_opts.advertise_more */
    int tls_rotations;    /* eh_tls_rotate() calls so far */
    eh_vec etcd_env, ctl_env;
    eh_member m[EH_MAX_MEMBERS];
    pid_t owner; /* process that started it: only it may stop it */
    eh_cluster *next;
};

static eh_cluster *live_clusters;

static void live_add(eh_cluster *c)
{
    c->next = live_clusters;
    live_clusters = c;
}

static void live_remove(eh_cluster *c)
{
    for (eh_cluster **p = &live_clusters; *p != NULL; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            return;
        }
}

/* A test that fails through exit(1) never reaches eh_stop. Forked children
 * of a test inherit this handler and the list, hence the owner check. */
static void eh_atexit(void)
{
    eh_cluster *c = live_clusters, *next;
    for (; c != NULL; c = next) {
        next = c->next;
        if (c->owner == getpid()) eh_stop(c);
    }
}

static int valid(eh_cluster *c, int i)
{
    if (c != NULL && i >= 0 && i < c->n) return 1;
    fprintf(stderr, "etcd_harness: bad member index %d\n", i);
    return 0;
}

/* Reaps member i if it has exited; returns 1 while its process is alive. */
static int member_alive(eh_cluster *c, int i)
{
    eh_member *m = &c->m[i];
    if (m->pid == 0) return 0;
    int st;
    if (waitpid(m->pid, &st, WNOHANG) != m->pid) return 1;
    if (WIFEXITED(st))
        fprintf(stderr, "etcd_harness: member m%d exited with status %d\n", i,
                WEXITSTATUS(st));
    else
        fprintf(stderr, "etcd_harness: member m%d died of signal %d\n", i, WTERMSIG(st));
    m->pid = 0;
    m->paused = 0;
    return 0;
}

static void print_log_tail(eh_cluster *c, int i)
{
    FILE *f = fopen(c->m[i].log_path, "re");
    if (f == NULL) return;
    char buf[3000];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    fprintf(stderr, "---- tail of %s ----\n%s---- end of m%d log ----\n",
            c->m[i].log_path, buf, i);
}

/* ------------------------------------------------------------- etcdctl */

static void ctl_argv(eh_cluster *c, const eh_ctl_opts *o, eh_vec *argv)
{
    vec_push(argv, xstrdup(c->etcdctl_bin));
    vec_pushf(argv, "--endpoints=%s", o->endpoints ? o->endpoints : c->endpoints);
    if (c->tls) {
        vec_pushf(argv, "--cacert=%s", o->cacert ? o->cacert : c->cacert);
        if (!o->no_client_cert) {
            vec_pushf(argv, "--cert=%s", c->cert);
            vec_pushf(argv, "--key=%s", c->key);
        }
    }
    if (o->user != NULL && o->user[0] != '\0')
        vec_pushf(argv, "--user=%s", o->user);
    else if (o->user == NULL && c->auth_enabled)
        vec_pushf(argv, "--user=root:%s", EH_ROOT_PASSWORD);
}

static int ctl_va(eh_cluster *c, const eh_ctl_opts *o, char **out, const char *arg,
                  va_list ap)
{
    static const eh_ctl_opts defaults = {0};
    if (o == NULL) o = &defaults;
    eh_vec argv = {0};
    ctl_argv(c, o, &argv);
    for (; arg != NULL; arg = va_arg(ap, const char *))
        vec_push(&argv, xstrdup(arg));
    tl_run_opts ro = {
        .envp = (const char *const *)c->ctl_env.v,
        .err = o->err,
        .timeout_s = o->timeout_s > 0 ? o->timeout_s : EH_CTL_TIMEOUT,
    };
    int rc = tl_run_ex(out, (const char *const *)argv.v, &ro);
    vec_free(&argv);
    return rc;
}

int eh_etcdctl_opts(eh_cluster *c, const eh_ctl_opts *o, char **out, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int rc = ctl_va(c, o, out, arg, ap);
    va_end(ap);
    return rc;
}

int eh_etcdctl(eh_cluster *c, char **out, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int rc = ctl_va(c, NULL, out, arg, ap);
    va_end(ap);
    return rc;
}

/* ------------------------------------------------------- health, leader */

/* A plain TCP connect first: etcdctl against a port nobody listens on yet
 * waits for its whole command timeout instead of failing fast. */
static int port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static int member_healthy(eh_cluster *c, int i)
{
    if (!port_open(c->m[i].client_port)) return 0;
    char *err = NULL;
    eh_ctl_opts o = {.endpoints = c->m[i].endpoint, .err = &err, .timeout_s = 5};
    int rc = eh_etcdctl_opts(c, &o, NULL, "endpoint", "health", "--dial-timeout=1s",
                             "--command-timeout=2s", NULL);
    free(err);
    return rc == 0;
}

static int wait_member(eh_cluster *c, int i, double deadline)
{
    for (;;) {
        if (!member_alive(c, i)) {
            fprintf(stderr, "etcd_harness: member m%d is not running\n", i);
            return -1;
        }
        if (member_healthy(c, i)) return 0;
        if (tl_now() >= deadline) {
            fprintf(stderr, "etcd_harness: member m%d not healthy in time\n", i);
            return -1;
        }
        tl_msleep(50);
    }
}

int eh_wait_healthy(eh_cluster *c, int i, double timeout_s)
{
    double deadline = tl_now() + timeout_s;
    if (i >= 0) return valid(c, i) ? wait_member(c, i, deadline) : -1;
    for (int k = 0; k < c->n; k++) {
        if (!member_alive(c, k) || c->m[k].paused) continue;
        if (wait_member(c, k, deadline) != 0) return -1;
    }
    return 0;
}

/* Value of the unsigned number after "key": in [p, end), or 0. */
static unsigned long long json_u64(const char *p, const char *end, const char *key)
{
    const char *k = strstr(p, key);
    if (k == NULL || k >= end) return 0;
    return strtoull(k + strlen(key), NULL, 10);
}

/* In `endpoint status -w json` output, whether ep's own member id is the
 * leader id it reports. */
static int reports_itself_leader(const char *json, const char *ep)
{
    char *needle = strf("\"Endpoint\":\"%s\"", ep);
    const char *p = strstr(json, needle);
    free(needle);
    if (p == NULL) return 0;
    const char *end = strstr(p + 1, "\"Endpoint\":");
    if (end == NULL) end = p + strlen(p);
    unsigned long long id = json_u64(p, end, "\"member_id\":");
    return id != 0 && id == json_u64(p, end, "\"leader\":");
}

/* Comma-joined endpoints of the running, unpaused members; NULL if none. */
static char *live_endpoints(eh_cluster *c)
{
    char *eps = NULL;
    for (int i = 0; i < c->n; i++) {
        if (!member_alive(c, i) || c->m[i].paused) continue;
        char *next =
            eps ? strf("%s,%s", eps, c->m[i].endpoint) : xstrdup(c->m[i].endpoint);
        free(eps);
        eps = next;
    }
    return eps;
}

int eh_leader(eh_cluster *c)
{
    char *eps = live_endpoints(c), *out = NULL, *err = NULL;
    if (eps == NULL) return -1;
    eh_ctl_opts o = {.endpoints = eps, .err = &err, .timeout_s = 10};
    eh_etcdctl_opts(c, &o, &out, "endpoint", "status", "-w", "json", "--dial-timeout=1s",
                    "--command-timeout=2s", NULL);
    int leader = -1;
    for (int i = 0; i < c->n && leader < 0 && out != NULL; i++)
        if (c->m[i].pid != 0 && !c->m[i].paused &&
            reports_itself_leader(out, c->m[i].endpoint))
            leader = i;
    free(out);
    free(err);
    free(eps);
    return leader;
}

int eh_wait_leader(eh_cluster *c, double timeout_s)
{
    double deadline = tl_now() + timeout_s;
    for (;;) {
        int l = eh_leader(c);
        if (l >= 0) return l;
        if (tl_now() >= deadline) return -1;
        tl_msleep(50);
    }
}

/* ------------------------------------------------------- member process */

/* Child side of the fork: only async-signal-safe calls, since the test may
 * have threads. Plain fork + execve instead of posix_spawn because we need
 * PR_SET_PDEATHSIG: if the test process dies in any way (even SIGKILL from
 * the runner's timeout), the kernel kills its etcd members too. */
static _Noreturn void exec_member(eh_cluster *c, int i, int log_fd, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127); /* parent died before the prctl */
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    /* Fds the library under test forgot to mark close-on-exec must not leak
     * into a long-lived etcd (a held socket or pipe end changes behaviour). */
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    /* execve keeps ignored signals ignored; etcd must see SIGTERM etc. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(c->etcd_bin, c->m[i].argv.v, c->etcd_env.v);
    _exit(127);
}

static int member_spawn(eh_cluster *c, int i)
{
    eh_member *m = &c->m[i];
    int log_fd = open(m->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "etcd_harness: %s: %s\n", m->log_path, strerror(errno));
        return -1;
    }
    fflush(NULL); /* the child never returns into stdio, but be tidy */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) exec_member(c, i, log_fd, parent);
    close(log_fd);
    if (pid < 0) {
        perror("etcd_harness: fork");
        return -1;
    }
    m->pid = pid;
    m->paused = 0;
    return 0;
}

int eh_member_kill(eh_cluster *c, int i)
{
    if (!valid(c, i) || !member_alive(c, i)) return -1;
    tl_reap(c->m[i].pid, SIGKILL, EH_STOP_TIMEOUT);
    c->m[i].pid = 0;
    c->m[i].paused = 0;
    return 0;
}

int eh_member_stop(eh_cluster *c, int i)
{
    if (!valid(c, i) || !member_alive(c, i)) return -1;
    pid_t pid = c->m[i].pid;
    kill(pid, SIGTERM);
    if (c->m[i].paused) kill(pid, SIGCONT); /* a stopped process can't exit */
    int st = tl_reap(pid, 0, EH_STOP_TIMEOUT);
    if (st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        fprintf(stderr, "etcd_harness: m%d ignored SIGTERM, killed\n", i);
    c->m[i].pid = 0;
    c->m[i].paused = 0;
    return 0;
}

/* Whether every thread of pid is stopped ('T' or 't' in its stat). */
static bool all_threads_stopped(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return true; /* gone */
    bool all = true;
    struct dirent *de;
    while (all && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[128], buf[512];
        snprintf(p, sizeof(p), "/proc/%d/task/%.20s/stat", (int)pid, de->d_name);
        FILE *f = fopen(p, "r");
        if (!f) continue; /* the thread ended */
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *rp = strrchr(buf, ')');
        if (rp && rp[1] == ' ' && rp[2] != 'T' && rp[2] != 't') all = false;
    }
    closedir(d);
    return all;
}

int eh_member_pause(eh_cluster *c, int i)
{
    if (!valid(c, i) || !member_alive(c, i) || kill(c->m[i].pid, SIGSTOP) != 0) return -1;
    c->m[i].paused = 1;
    /* SIGSTOP takes effect asynchronously: until every thread of the member has
     * stopped, a request sent now can still be answered (seen on etcd 3.5: a
     * put right after the pause succeeded). Up to 2 s. */
    for (int k = 0; k < 200 && !all_threads_stopped(c->m[i].pid); k++)
        usleep(10000);
    return 0;
}

int eh_member_resume(eh_cluster *c, int i)
{
    if (!valid(c, i) || !member_alive(c, i) || kill(c->m[i].pid, SIGCONT) != 0) return -1;
    c->m[i].paused = 0;
    return 0;
}

int eh_member_restart(eh_cluster *c, int i)
{
    if (!valid(c, i)) return -1;
    if (member_alive(c, i)) {
        fprintf(stderr, "etcd_harness: m%d is still running\n", i);
        return -1;
    }
    return member_spawn(c, i);
}

/* The value of member i's flag "--NAME=" (in its argv), or NULL. */
static const char *member_flag(eh_cluster *c, int i, const char *name)
{
    size_t n = strlen(name);
    for (size_t k = 0; k < c->m[i].argv.n; k++) {
        const char *a = c->m[i].argv.v[k];
        if (a != NULL && strncmp(a, name, n) == 0 && a[n] == '=') return a + n + 1;
    }
    return NULL;
}

int eh_member_restore(eh_cluster *c, int i, const char *snapshot,
                      const char *restore_args)
{
    if (!valid(c, i) || c->n != 1) return -1;
    if (member_alive(c, i) && eh_member_stop(c, i) != 0) return -1;
    const char *data = member_flag(c, i, "--data-dir");
    if (data == NULL) return -1;
    char *utl = xstrdup(c->etcd_bin);
    char *slash = strrchr(utl, '/');
    char *tool = slash != NULL ? strf("%.*s/etcdutl", (int)(slash - utl), utl)
                               : xstrdup("etcdutl");
    free(utl);
    if (access(tool, X_OK) != 0) { /* 3.4: etcdctl restores */
        free(tool);
        tool = xstrdup(c->etcdctl_bin);
    }
    char *old = strf("%s.old", data);
    eh_vec argv = {0};
    vec_push(&argv, xstrdup("sh"));
    vec_push(&argv, xstrdup("-c"));
    vec_push(&argv,
             strf("rm -rf '%s' && mv '%s' '%s' && '%s' snapshot restore '%s' --name='%s' "
                  "--data-dir='%s' --initial-cluster='%s' --initial-cluster-token='%s' "
                  "--initial-advertise-peer-urls='%s' %s && rm -rf '%s'",
                  old, data, old, tool, snapshot, member_flag(c, i, "--name"), data,
                  member_flag(c, i, "--initial-cluster"),
                  member_flag(c, i, "--initial-cluster-token"),
                  member_flag(c, i, "--initial-advertise-peer-urls"),
                  restore_args != NULL ? restore_args : "", old));
    tl_run_opts ro = {
        .envp = (const char *const *)c->ctl_env.v, .timeout_s = 30, .merge_stderr = 1};
    char *out = NULL;
    int rc = tl_run_ex(&out, (const char *const *)argv.v, &ro);
    if (rc != 0)
        fprintf(stderr, "etcd_harness: restore of m%d failed:\n%s\n", i, out ? out : "");
    free(out);
    vec_free(&argv);
    free(old);
    free(tool);
    if (rc != 0) return -1;
    if (member_spawn(c, i) != 0) return -1;
    return eh_wait_healthy(c, i, 20);
}

int eh_member_removed(eh_cluster *c, int i)
{
    return valid(c, i) && c->m[i].removed;
}

int eh_member_running(eh_cluster *c, int i)
{
    return valid(c, i) && member_alive(c, i);
}

pid_t eh_pid(eh_cluster *c, int i)
{
    return valid(c, i) && member_alive(c, i) ? c->m[i].pid : 0;
}

/* ------------------------------------------------------------ accessors */

int eh_members(eh_cluster *c)
{
    return c->n;
}
const char *eh_endpoints(eh_cluster *c)
{
    return c->endpoints;
}
const char *eh_endpoint(eh_cluster *c, int i)
{
    return valid(c, i) ? c->m[i].endpoint : NULL;
}
int eh_client_port(eh_cluster *c, int i)
{
    return valid(c, i) ? c->m[i].client_port : -1;
}
const char *eh_dir(eh_cluster *c)
{
    return c->dir;
}
const char *eh_cacert(eh_cluster *c)
{
    return c->cacert;
}
const char *eh_cert(eh_cluster *c)
{
    return c->cert;
}
const char *eh_key(eh_cluster *c)
{
    return c->key;
}
const char *eh_wrong_cacert(eh_cluster *c)
{
    return c->wrong_cacert;
}

/* ------------------------------------------------------------------ TLS */

static const char openssl_cnf[] = "[req]\n"
                                  "distinguished_name = dn\n"
                                  "[dn]\n"
                                  "[v3_ca]\n"
                                  "basicConstraints = critical,CA:TRUE\n"
                                  "keyUsage = critical,keyCertSign,cRLSign\n"
                                  "subjectKeyIdentifier = hash\n"
                                  /* etcd also presents the server cert as a client (its
                                   * gRPC gateway dials itself), hence clientAuth. */
                                  "[v3_server]\n"
                                  "basicConstraints = critical,CA:FALSE\n"
                                  "keyUsage = critical,digitalSignature,keyEncipherment\n"
                                  "extendedKeyUsage = serverAuth,clientAuth\n"
                                  "subjectAltName = IP:127.0.0.1,DNS:localhost\n"
                                  "[v3_client]\n"
                                  "basicConstraints = critical,CA:FALSE\n"
                                  "keyUsage = critical,digitalSignature\n"
                                  "extendedKeyUsage = clientAuth\n";

static int openssl(const char *const argv[])
{
    char *err = NULL;
    tl_run_opts o = {.err = &err, .timeout_s = 30};
    int rc = tl_run_ex(NULL, argv, &o);
    if (rc != 0) fprintf(stderr, "etcd_harness: openssl %s failed:\n%s", argv[1], err);
    free(err);
    return rc == 0 ? 0 : -1;
}

/* Self-signed CA; EC P-256 keys because RSA key generation is slow. */
static int make_ca(const char *cnf, const char *key, const char *crt, const char *cn)
{
    char *subj = strf("/CN=%s", cn);
    const char *argv[] = {
        "openssl", "req",     "-x509",       "-new",
        "-config", cnf,       "-extensions", "v3_ca",
        "-newkey", "ec",      "-pkeyopt",    "ec_paramgen_curve:prime256v1",
        "-nodes",  "-keyout", key,           "-out",
        crt,       "-days",   "30",          "-subj",
        subj,      NULL};
    int rc = openssl(argv);
    free(subj);
    return rc;
}

/* Key + certificate signed by the cluster CA, with extension section ext. */
static int make_leaf(eh_cluster *c, const char *cnf, const char *key, const char *crt,
                     const char *cn, const char *ext, const char *serial)
{
    char *subj = strf("/CN=%s", cn), *csr = strf("%s.csr", crt);
    const char *req[] = {"openssl", "req",      "-new",
                         "-config", cnf,        "-newkey",
                         "ec",      "-pkeyopt", "ec_paramgen_curve:prime256v1",
                         "-nodes",  "-keyout",  key,
                         "-out",    csr,        "-subj",
                         subj,      NULL};
    char *ca_key = strf("%s/ca.key", c->dir);
    const char *sign[] = {"openssl",     "x509",    "-req",   "-in",      csr,
                          "-CA",         c->cacert, "-CAkey", ca_key,     "-set_serial",
                          serial,        "-days",   "30",     "-extfile", cnf,
                          "-extensions", ext,       "-out",   crt,        NULL};
    int rc = openssl(req) == 0 && openssl(sign) == 0 ? 0 : -1;
    free(ca_key);
    free(csr);
    free(subj);
    return rc;
}

static int make_tls(eh_cluster *c)
{
    char *cnf = strf("%s/openssl.cnf", c->dir);
    char *ca_key = strf("%s/ca.key", c->dir);
    char *wrong_key = strf("%s/wrong-ca.key", c->dir);
    FILE *f = fopen(cnf, "we");
    int rc = -1;
    if (f != NULL) {
        fputs(openssl_cnf, f);
        rc = fclose(f) == 0 ? 0 : -1;
    }
    c->cacert = strf("%s/ca.crt", c->dir);
    c->srv_cert = strf("%s/server.crt", c->dir);
    c->srv_key = strf("%s/server.key", c->dir);
    c->cert = strf("%s/client.crt", c->dir);
    c->key = strf("%s/client.key", c->dir);
    c->wrong_cacert = strf("%s/wrong-ca.crt", c->dir);
    if (rc == 0) rc = make_ca(cnf, ca_key, c->cacert, "elector-test-ca");
    if (rc == 0)
        rc = make_leaf(c, cnf, c->srv_key, c->srv_cert, "localhost", "v3_server", "1");
    if (rc == 0) rc = make_leaf(c, cnf, c->key, c->cert, "root", "v3_client", "2");
    if (rc == 0) rc = make_ca(cnf, wrong_key, c->wrong_cacert, "elector-wrong-ca");
    free(wrong_key);
    free(ca_key);
    free(cnf);
    return rc;
}

/* ---------------------------------------------------------------- setup */

/* Probes n distinct free ports; the probe sockets stay open until all are
 * chosen so no port is picked twice. */
static int pick_ports(int *ports, int n)
{
    int fds[2 * EH_MAX_MEMBERS], got = 0;
    for (int tries = 0; got < n && tries < 1000; tries++) {
        int port = EH_PORT_LO + (int)(rng_next() % (EH_PORT_HI - EH_PORT_LO));
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            continue;
        }
        fds[got] = fd;
        ports[got++] = port;
    }
    for (int k = 0; k < got; k++)
        close(fds[k]);
    if (got == n) return 0;
    fprintf(stderr, "etcd_harness: cannot find %d free ports\n", n);
    return -1;
}

/* Copy of environ without prefix* variables (etcd and etcdctl read their
 * flags from ETCD_* / ETCDCTL_* variables, which must not leak in). */
static void env_without(eh_vec *env, const char *prefix, const char *keep)
{
    for (char **e = environ; *e != NULL; e++) {
        if (strncmp(*e, prefix, strlen(prefix)) == 0 &&
            (keep == NULL || strncmp(*e, keep, strlen(keep)) != 0))
            continue;
        vec_push(env, xstrdup(*e));
    }
}

static char *initial_cluster(eh_cluster *c)
{
    char *s = NULL;
    for (int i = 0; i < c->n; i++) {
        char *next = strf("%s%sm%d=http://127.0.0.1:%d", s ? s : "", s ? "," : "", i,
                          c->m[i].peer_port);
        free(s);
        s = next;
    }
    return s;
}

static void build_member_argv(eh_cluster *c, int i, const char *cluster,
                              const char *token, const char *extra)
{
    eh_member *m = &c->m[i];
    eh_vec *a = &m->argv;
    const char *scheme = c->tls ? "https" : "http";
    const char *level = getenv("EH_LOG_LEVEL");
    vec_push(a, xstrdup(c->etcd_bin));
    vec_pushf(a, "--name=m%d", i);
    vec_pushf(a, "--data-dir=%s/m%d.etcd", c->dir, i);
    vec_pushf(a, "--listen-client-urls=%s://127.0.0.1:%d", scheme, m->client_port);
    vec_pushf(a, "--advertise-client-urls=%s://127.0.0.1:%d%s%s", scheme, m->client_port,
              c->advertise_more ? "," : "", c->advertise_more ? c->advertise_more : "");
    vec_pushf(a, "--listen-peer-urls=http://127.0.0.1:%d", m->peer_port);
    vec_pushf(a, "--initial-advertise-peer-urls=http://127.0.0.1:%d", m->peer_port);
    vec_pushf(a, "--initial-cluster=%s", cluster);
    vec_pushf(a, "--initial-cluster-token=%s", token);
    vec_push(a, xstrdup("--initial-cluster-state=new")); /* ignored on restart */
    vec_push(a, xstrdup("--logger=zap"));
    vec_push(a, xstrdup("--log-outputs=stderr")); /* redirected to mN.log */
    vec_pushf(a, "--log-level=%s", level != NULL && level[0] ? level : "warn");
    if (c->auth) /* cost 10 makes every Authenticate take ~50 ms */
        vec_push(a, xstrdup("--bcrypt-cost=4"));
    if (c->tls) {
        vec_pushf(a, "--cert-file=%s", c->srv_cert);
        vec_pushf(a, "--key-file=%s", c->srv_key);
        vec_pushf(a, "--trusted-ca-file=%s", c->cacert);
        vec_push(a, xstrdup("--client-cert-auth"));
    }
    vec_push_words(a, extra);
}

static int setup_members(eh_cluster *c, const char *extra)
{
    int ports[2 * EH_MAX_MEMBERS];
    if (pick_ports(ports, 2 * c->n) != 0) return -1;
    for (int i = 0; i < c->n; i++) {
        eh_member *m = &c->m[i];
        m->client_port = ports[2 * i];
        m->peer_port = ports[2 * i + 1];
        m->endpoint = c->tls ? strf("https://127.0.0.1:%d", m->client_port)
                             : strf("127.0.0.1:%d", m->client_port);
        m->log_path = strf("%s/m%d.log", c->dir, i);
        char *next = c->endpoints ? strf("%s,%s", c->endpoints, m->endpoint)
                                  : xstrdup(m->endpoint);
        free(c->endpoints);
        c->endpoints = next;
    }
    char *cluster = initial_cluster(c);
    /* Unique per cluster so members of different clusters never merge. */
    char *token = strf("eh-%d-%lld", (int)getpid(), (long long)tl_now_ns());
    for (int i = 0; i < c->n; i++)
        build_member_argv(c, i, cluster, token, extra);
    c->token = token;
    c->extra = extra ? xstrdup(extra) : NULL;
    free(cluster);
    return 0;
}

static eh_cluster *cluster_new(const eh_opts *o)
{
    eh_cluster *c = calloc(1, sizeof *c);
    if (c == NULL) abort();
    c->n = o->members > 0 ? o->members : 1;
    c->tls = o->tls;
    c->auth = o->auth;
    c->advertise_more = o->advertise_more ? xstrdup(o->advertise_more) : NULL;
    c->owner = getpid();
    use_etcd_dir();
    c->etcd_bin = find_bin("ETCD_BIN", "etcd");
    c->etcdctl_bin = find_bin("ETCDCTL_BIN", "etcdctl");
    env_without(&c->etcd_env, "ETCD_", "ETCD_UNSUPPORTED_ARCH=");
    env_without(&c->ctl_env, "ETCDCTL_", NULL);
    vec_push(&c->ctl_env, xstrdup("ETCDCTL_API=3"));
    c->dir = tl_tmpdir("etcd");
    return c;
}

/* Password auth: root (needs the root role for `auth enable`) and EH_USER,
 * limited to its prefix. Before `auth enable` no --user is given. */
static int setup_auth(eh_cluster *c)
{
    char *root = strf("root:%s", EH_ROOT_PASSWORD);
    char *user = strf("%s:%s", EH_USER, EH_USER_PASSWORD);
    char *role = strf("%s-role", EH_USER);
    const char *steps[][6] = {
        {"user", "add", root, NULL},
        {"role", "add", "root", NULL},
        {"user", "grant-role", "root", "root", NULL},
        {"user", "add", user, NULL},
        {"role", "add", role, NULL},
        {"role", "grant-permission", role, "--prefix=true", "readwrite", EH_USER_PREFIX},
        {"user", "grant-role", EH_USER, role, NULL},
        {"auth", "enable", NULL},
    };
    eh_ctl_opts o = {.user = ""};
    int rc = 0;
    for (size_t k = 0; k < sizeof steps / sizeof steps[0] && rc == 0; k++) {
        const char *const *s = steps[k];
        rc = eh_etcdctl_opts(c, &o, NULL, s[0], s[1], s[2], s[3], s[4], s[5], NULL);
        if (rc != 0) fprintf(stderr, "etcd_harness: etcdctl %s %s failed\n", s[0], s[1]);
    }
    c->auth_enabled = rc == 0;
    free(role);
    free(user);
    free(root);
    return rc == 0 ? 0 : -1;
}

static int any_member_died(eh_cluster *c)
{
    for (int i = 0; i < c->n; i++)
        if (!member_alive(c, i)) return 1;
    return 0;
}

/* One attempt; *retry says whether a member died (likely a port race). */
static eh_cluster *start_once(const eh_opts *o, int *retry)
{
    static int atexit_done;
    if (!atexit_done) atexit_done = atexit(eh_atexit) == 0;
    eh_cluster *c = cluster_new(o);
    live_add(c);
    int ok = c->dir != NULL && (!c->tls || make_tls(c) == 0) &&
             setup_members(c, o->extra_args) == 0;
    for (int i = 0; ok && i < c->n; i++)
        ok = member_spawn(c, i) == 0;
    if (ok && eh_wait_healthy(c, -1, EH_START_TIMEOUT) != 0) {
        *retry = any_member_died(c);
        ok = 0;
    }
    if (ok && c->auth) ok = setup_auth(c) == 0;
    if (ok) return c;
    for (int i = 0; i < c->n; i++)
        if (c->m[i].log_path != NULL) print_log_tail(c, i);
    eh_stop(c);
    return NULL;
}

eh_cluster *eh_start(const eh_opts *o)
{
    static const eh_opts defaults = {.members = 1};
    if (o == NULL) o = &defaults;
    if (o->members < 0 || o->members > EH_MAX_MEMBERS) {
        fprintf(stderr, "eh_start: members must be 1..%d\n", EH_MAX_MEMBERS);
        return NULL;
    }
    int retry = 0;
    eh_cluster *c = start_once(o, &retry);
    if (c == NULL && retry) {
        fprintf(stderr, "eh_start: a member died during startup, retrying\n");
        c = start_once(o, &retry);
    }
    if (c == NULL) fprintf(stderr, "eh_start: failed\n");
    return c;
}

void eh_stop(eh_cluster *c)
{
    if (c == NULL) return;
    live_remove(c);
    /* In a forked child only free the copy: the members are the parent's. */
    int owner = c->owner == getpid();
    for (int i = 0; i < c->n; i++) {
        eh_member *m = &c->m[i];
        if (owner && m->pid != 0) tl_reap(m->pid, SIGKILL, EH_STOP_TIMEOUT);
        free(m->endpoint);
        free(m->log_path);
        vec_free(&m->argv);
    }
    if (owner && c->dir != NULL && !tl_keep_tmp()) tl_rmtree(c->dir);
    free(c->dir);
    free(c->endpoints);
    free(c->etcd_bin);
    free(c->etcdctl_bin);
    free(c->cacert);
    free(c->cert);
    free(c->key);
    free(c->srv_cert);
    free(c->srv_key);
    free(c->wrong_cacert);
    free(c->token);
    free(c->extra);
    free(c->advertise_more);
    vec_free(&c->etcd_env);
    vec_free(&c->ctl_env);
    free(c);
}

/* ------------------------------------------ day 2: TLS rotation, membership */

int eh_tls_rotate(eh_cluster *c)
{
    if (c == NULL || !c->tls) return -1;
    c->tls_rotations++;
    char *cnf = strf("%s/openssl.cnf", c->dir);
    char *ca_key = strf("%s/ca.key", c->dir);
    char *cn = strf("elector-test-ca-%d", c->tls_rotations);
    char *s1 = strf("%d", 10 * c->tls_rotations + 1);
    char *s2 = strf("%d", 10 * c->tls_rotations + 2);
    int rc = make_ca(cnf, ca_key, c->cacert, cn);
    if (rc == 0)
        rc = make_leaf(c, cnf, c->srv_key, c->srv_cert, "localhost", "v3_server", s1);
    if (rc == 0) rc = make_leaf(c, cnf, c->key, c->cert, "root", "v3_client", s2);
    free(s2);
    free(s1);
    free(cn);
    free(ca_key);
    free(cnf);
    return rc;
}

/* c->endpoints: the members running now. */
static void running_endpoints(eh_cluster *c)
{
    char *s = NULL;
    for (int i = 0; i < c->n; i++) {
        if (c->m[i].pid == 0) continue;
        char *next = s ? strf("%s,%s", s, c->m[i].endpoint) : xstrdup(c->m[i].endpoint);
        free(s);
        s = next;
    }
    if (s == NULL) return;
    free(c->endpoints);
    c->endpoints = s;
}

static int member_add(eh_cluster *c, int learner);

int eh_member_add(eh_cluster *c)
{
    return member_add(c, 0);
}

int eh_member_add_learner(eh_cluster *c)
{
    return member_add(c, 1);
}

/* A learner refuses `endpoint health` (a linearizable read): its Status
 * answering is what "up" means for it. */
static int wait_learner(eh_cluster *c, int i, double deadline)
{
    while (tl_now() < deadline) {
        if (!member_alive(c, i)) return -1;
        if (port_open(c->m[i].client_port)) {
            eh_ctl_opts o = {.endpoints = c->m[i].endpoint, .timeout_s = 5};
            char *err = NULL;
            o.err = &err;
            int rc = eh_etcdctl_opts(c, &o, NULL, "endpoint", "status", NULL);
            free(err);
            if (rc == 0) return 0;
        }
        tl_msleep(100);
    }
    return -1;
}

static int member_add(eh_cluster *c, int learner)
{
    if (c == NULL || c->n >= EH_MAX_MEMBERS) {
        fprintf(stderr, "etcd_harness: no room for another member\n");
        return -1;
    }
    int ports[2];
    if (pick_ports(ports, 2) != 0) return -1;
    int i = c->n;
    eh_member *m = &c->m[i];
    memset(m, 0, sizeof(*m));
    m->client_port = ports[0];
    m->peer_port = ports[1];
    m->endpoint = c->tls ? strf("https://127.0.0.1:%d", m->client_port)
                         : strf("127.0.0.1:%d", m->client_port);
    m->log_path = strf("%s/m%d.log", c->dir, i);
    c->n++;
    char *name = strf("m%d", i);
    char *peer = strf("--peer-urls=http://127.0.0.1:%d", m->peer_port);
    char *out = NULL;
    int rc = -1;
    /* etcd refuses a change that its members have not all been connected for
     * 5 s to carry ("unhealthy cluster", --strict-reconfig-check): retry. */
    for (double end = tl_now() + 20; rc != 0 && tl_now() < end;) {
        free(out);
        out = NULL;
        rc = learner ? eh_etcdctl(c, &out, "member", "add", name, peer, "--learner", NULL)
                     : eh_etcdctl(c, &out, "member", "add", name, peer, NULL);
        if (rc != 0) tl_msleep(500);
    }
    free(peer);
    free(name);
    const char *k = out ? strstr(out, "ETCD_INITIAL_CLUSTER=\"") : NULL;
    if (rc != 0 || k == NULL) {
        fprintf(stderr, "etcd_harness: member add failed (%d): %s\n", rc, out ? out : "");
        free(out);
        return -1;
    }
    k += strlen("ETCD_INITIAL_CLUSTER=\"");
    const char *q = strchr(k, '"');
    char *cluster = strndup(k, q ? (size_t)(q - k) : strlen(k));
    free(out);
    build_member_argv(c, i, cluster, c->token, c->extra);
    free(cluster);
    for (size_t a = 0; a < m->argv.n; a++)
        if (m->argv.v[a] && !strcmp(m->argv.v[a], "--initial-cluster-state=new")) {
            free(m->argv.v[a]);
            m->argv.v[a] = xstrdup("--initial-cluster-state=existing");
        }
    if (member_spawn(c, i) != 0) return -1;
    if ((learner ? wait_learner(c, i, tl_now() + 30)
                 : wait_member(c, i, tl_now() + 30)) != 0) {
        print_log_tail(c, i);
        return -1;
    }
    running_endpoints(c);
    return i;
}

int eh_member_remove(eh_cluster *c, int i)
{
    if (!valid(c, i)) return -1;
    char *out = NULL, *needle = strf(", m%d, ", i);
    int rc = eh_etcdctl(c, &out, "member", "list", NULL);
    const char *hit = out ? strstr(out, needle) : NULL;
    free(needle);
    if (rc != 0 || hit == NULL) {
        fprintf(stderr, "etcd_harness: m%d not in the member list: %s\n", i,
                out ? out : "");
        free(out);
        return -1;
    }
    const char *line = hit;
    while (line > out && line[-1] != '\n')
        line--;
    char *id = strndup(line, strcspn(line, ","));
    free(out);
    /* Ask the others, not the member that goes. */
    char *others = NULL;
    for (int k = 0; k < c->n; k++) {
        if (k == i || c->m[k].pid == 0) continue;
        char *next =
            others ? strf("%s,%s", others, c->m[k].endpoint) : xstrdup(c->m[k].endpoint);
        free(others);
        others = next;
    }
    eh_ctl_opts o = {.endpoints = others};
    rc = -1;
    for (double end = tl_now() + 20; rc != 0 && tl_now() < end;) {
        rc = eh_etcdctl_opts(c, &o, NULL, "member", "remove", id, NULL);
        if (rc != 0) tl_msleep(500);
    }
    free(others);
    free(id);
    if (rc != 0) return -1;
    /* A removed member stops on its own; SIGTERM in case it has not yet. */
    if (c->m[i].pid != 0) tl_reap(c->m[i].pid, SIGTERM, EH_STOP_TIMEOUT);
    c->m[i].pid = 0;
    c->m[i].paused = 0;
    c->m[i].removed = 1;
    running_endpoints(c);
    return 0;
}
