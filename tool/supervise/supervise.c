/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* pipe2, close_range */
#include "supervise/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elector/etcd.h" /* elector_now_ns(): the deadline clock */
#include "text/log.h"

extern char **environ;

/* elector -> guard. The pipe is non-blocking on elector's side: a guard that
 * does not read (SIGSTOPped) never blocks elector; the heartbeat (M_PING) finds
 * it out, and elector ends the tree itself. */
enum msg_type { M_DEADLINE = 1, M_STOP, M_SIGNAL, M_QUIT, M_PING };
struct msg {
    int64_t type, value;
};

/* guard -> elector (non-blocking on the guard's side: a stopped elector never
 * holds the guard). R_PONG answers M_PING with its number; R_GONE says the tree
 * is gone before the release hook runs (it may take a dial timeout). */
enum rep_type { R_STARTED = 1, R_DONE, R_PONG, R_GONE };

/* Once a stop is due (its kill time passed), the guard must show within this
 * long that it acts on it, or elector ends the tree itself. */
#define STOP_SLACK_NS (100 * 1000000LL)
struct rep {
    int32_t type, a, b, pad;
};

enum { MODE_SUBREAPER = 1, MODE_CGROUP = 2, MODE_PIDNS = 4 /* a flag on either */ };

struct tool_child {
    pid_t guard;
    int fd;  /* write end: elector -> guard */
    int rfd; /* read end: guard -> elector */
    int mode;
    int64_t grace;
    char cg[PATH_MAX]; /* the command's cgroup, if the guard made one */
    int status;
    tool_child_cause cause;
    bool got_done, done;
    bool gone; /* R_GONE: the tree is gone, the guard releases */
    /* The heartbeat: elector is the guard's watchdog. */
    int64_t ping_ns, answer_ns; /* interval, and the longest wait for an answer */
    int64_t next_ping;          /* when the next M_PING is due */
    uint32_t seq, acked;        /* the last ping sent and the last one answered */
    int64_t waiting_since;      /* the oldest unanswered ping was sent then (0: none) */
    int64_t stop_at;            /* a stop's kill time (0: no stop asked) */
    int64_t deadline;           /* the latest validity deadline sent */
    uint32_t stop_seq;          /* the ping sent right after the stop */
};

int tool_exit_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

/* ---------------------------------------------------------------- the tree */

struct proc {
    pid_t pid, ppid;
};

/* Every process of the system with its parent, from /proc. */
static size_t list_procs(struct proc **out)
{
    *out = NULL;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    struct proc *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0) continue;
        buf[k] = 0;
        char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        char state;
        long ppid;
        if (!p || sscanf(p + 1, " %c %ld", &state, &ppid) != 2) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            struct proc *q = realloc(v, nc * sizeof(*v));
            if (!q) break;
            v = q;
            cap = nc;
        }
        v[n++] = (struct proc){(pid_t)pid, (pid_t)ppid};
    }
    closedir(d);
    *out = v;
    return n;
}

/* Children elector had before it started any guard (a shell's `2> >(logger)`
 * makes the logger elector's child): never ours to kill. */
static pid_t g_keep[16];
static size_t g_nkeep;

static bool kept(pid_t pid)
{
    for (size_t i = 0; i < g_nkeep; i++)
        if (g_keep[i] == pid) return true;
    return false;
}

/* Sends sig to every descendant of root but the kept ones and theirs; returns
 * how many there were (zombies included). */
static size_t signal_descendants(pid_t root, int sig)
{
    struct proc *v;
    size_t n = list_procs(&v), found = 0;
    bool changed = true;
    for (size_t i = 0; i < n; i++)
        if (v[i].ppid == root && kept(v[i].pid)) v[i].ppid = 0;
    /* Mark by setting ppid to root: a fixpoint over the parent links. */
    while (changed) {
        changed = false;
        for (size_t i = 0; i < n; i++) {
            if (v[i].pid == root || v[i].ppid == root || v[i].ppid == 0) continue;
            for (size_t j = 0; j < n; j++) {
                if (v[j].pid == v[i].ppid && v[j].ppid == root && v[j].pid != root) {
                    v[i].ppid = root;
                    changed = true;
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i].ppid == root && v[i].pid != root) {
            kill(v[i].pid, sig);
            found++;
        }
    }
    free(v);
    return found;
}

static int write_str(const char *dir, const char *file, const char *s)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, s, strlen(s));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* Kills every member of a cgroup: cgroup.kill (Linux 5.14+), else one by one. */
static void cgroup_kill(const char *cg)
{
    if (!*cg || write_str(cg, "cgroup.kill", "1") == 0) return;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
    FILE *f = fopen(path, "re");
    if (!f) return;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        kill((pid_t)pid, SIGKILL);
    fclose(f);
}

/* The cgroup v2 directory this process is in ("" if there is no cgroup2 mount). */
static void cgroup_base(char *out, size_t cap)
{
    out[0] = 0;
    char line[PATH_MAX + 256], own[sizeof(line)] = "", mnt[PATH_MAX] = "";
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "0::", 3)) snprintf(own, sizeof(own), "%s", line + 3);
    fclose(f);
    own[strcspn(own, "\n")] = 0;
    if (!*own) return;
    if (!(f = fopen("/proc/self/mountinfo", "re"))) return;
    while (fgets(line, sizeof(line), f)) {
        /* id parent maj:min root mountpoint opts... - fstype source superopts */
        char *sep = strstr(line, " - cgroup2 ");
        char root[PATH_MAX], mp[PATH_MAX];
        if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mp) != 2) continue;
        if (strcmp(root, "/")) continue; /* a bind mount of a subtree */
        snprintf(mnt, sizeof(mnt), "%s", mp);
        break;
    }
    fclose(f);
    size_t ml = strlen(mnt), ol = strcmp(own, "/") ? strlen(own) : 0;
    if (!ml || ml + ol + 32 >= cap) return; /* room for "/elector-run.PID" */
    memcpy(out, mnt, ml);
    memcpy(out + ml, own, ol);
    out[ml + ol] = 0;
}

/* Kills the tree under root until nothing is left below it (all reaped),
 * calling reaped(pid, status) for each; gives up after max_ms (a process in
 * uninterruptible sleep). Returns 0 when the tree is gone. */
static int kill_tree(pid_t root, const char *cg, int sfd, int64_t max_ms,
                     void (*reaped)(void *, pid_t, int), void *ud, int (*infd)(void *),
                     void (*input)(void *))
{
    int64_t end = elector_now_ns() + max_ms * 1000000;
    for (;;) {
        cgroup_kill(cg);
        size_t left = signal_descendants(root, SIGKILL);
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0)
            if (reaped) reaped(ud, p, st);
        if (left == 0) return 0; /* zombies counted last round are reaped now */
        if (max_ms >= 0 && elector_now_ns() >= end) return -1;
        /* The guard answers elector's heartbeat while it waits (a large
         * address space takes a while to tear down). */
        struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN},
                               {.fd = infd ? infd(ud) : -1, .events = POLLIN}};
        if (poll(pf, 2, 10) > 0) {
            struct signalfd_siginfo si;
            if (pf[0].revents && read(sfd, &si, sizeof(si)) < 0) { /* drained; retried */
            }
            if (pf[1].revents && input) input(ud);
        }
    }
}

/* Removes the cgroups of guards that died without cleaning up (SIGKILLed with
 * elector): rmdir succeeds only on an empty cgroup, so a live tree stays. */
static void cgroup_sweep_stale(const char *base)
{
    DIR *d = *base ? opendir(base) : NULL;
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid;
        char *end;
        if (strncmp(de->d_name, "elector-run.", 12)) continue;
        pid = strtol(de->d_name + 12, &end, 10);
        if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
        rmdir(path);
    }
    closedir(d);
}

static void cgroup_remove(const char *cg)
{
    for (int i = 0; *cg && i < 100 && rmdir(cg) && errno == EBUSY; i++)
        usleep(2000);
}

/* ---------------------------------------------------------------- the command */

void tool_stop_signals(sigset_t *set, bool with_chld)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    if (with_chld) sigaddset(set, SIGCHLD);
}

void tool_reset_signals(void)
{
    for (int s = 1; s < NSIG; s++) {
        if (signal(s, SIG_DFL) != SIG_ERR || s == SIGKILL || s == SIGSTOP) continue;
        /* glibc refuses its own signals (32 and 33: thread cancellation and
         * setxid), but an ignored one is inherited across exec all the same
         * (glibc's posix_spawn itself leaves them SIG_IGN in the child it
         * starts). The kernel's struct is all zero for SIG_DFL, whatever its
         * layout: no flags, no restorer, an empty mask. */
        unsigned long dfl[8] = {0};
        syscall(SYS_rt_sigaction, s, dfl, NULL, (size_t)(_NSIG / 8));
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Execs the command: no descriptor but 0, 1 and 2 (dup2 cleared FD_CLOEXEC on
 * the guard's pipes), default dispositions and an empty mask, last (it was
 * forked with every signal blocked, so a stop sent before this point is
 * pending, not lost). */
static _Noreturn void exec_command(const tool_child_spec *sp)
{
    close_range(3, ~0U, 0);
    for (int i = 0; sp->env_add[i]; i++)
        putenv(sp->env_add[i]);
    tool_reset_signals();
    execvp(sp->argv[0], sp->argv);
    int e = errno;
    tool_log(LOG_ERROR, "cannot run '%s': %s", sp->argv[0], strerror(e));
    _exit(e == ENOENT ? 127 : 126); /* as shells do */
}

/* Waits for the guard's word that we are in the cgroup; _exit if the guard is
 * gone (the write end closes with it). */
static void wait_go(int go)
{
    char b;
    if (read(go, &b, 1) != 1) _exit(127);
    close(go);
}

static void nop_handler(int sig)
{
    (void)sig;
}

/* --pid-namespace: we are PID 1 of a new PID namespace, in a process group of
 * our own, with every signal blocked. When we die, by the guard's SIGKILL or by
 * PDEATHSIG when the guard dies (also when elector and the guard are SIGKILLed
 * together), the kernel SIGKILLs every process of the namespace: no descendant
 * can outlive both supervisors. We start the command in its own group, relay
 * to that group every signal sent to us (the guard signals our group), reap
 * whatever is reparented to us, and exit with the command's exit code. */
static _Noreturn void ns_init(const tool_child_spec *sp, int go)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setpgid(0, 0);
    wait_go(go);
    /* A /proc of the namespace, so that the pids the command sees in /proc are
     * the ones it can signal. Slave propagation: the host's later mounts still
     * show inside, the command's do not leak out. */
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) ||
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) {
        tool_log(LOG_ERROR, "--pid-namespace: cannot mount /proc for the namespace: %s",
                 strerror(errno));
        _exit(126);
    }
    /* A handler makes a signal from the guard's namespace deliverable to a
     * namespace init at all; it never runs: the mask stays full and we take
     * signals with sigwaitinfo. */
    struct sigaction sa = {.sa_handler = nop_handler};
    sigfillset(&sa.sa_mask);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP) sigaction(s, &sa, NULL);
    pid_t cmd = fork();
    if (cmd < 0) _exit(126);
    if (cmd == 0) {
        setpgid(0, 0);
        exec_command(sp);
    }
    setpgid(cmd, cmd); /* both sides: a relayed signal may come at once */
    close_range(0, ~0U, 0);
    sigset_t all;
    sigfillset(&all);
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&all, &si);
        if (sig < 0) continue;
        if (sig != SIGCHLD) {
            if (kill(-cmd, sig) && errno == ESRCH) kill(cmd, sig);
            continue;
        }
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0)
            if (p == cmd) _exit(tool_exit_code(st)); /* the kernel ends the rest */
    }
}

/* The child of the guard: the command itself, or with --pid-namespace the
 * namespace's init, which starts it. */
static _Noreturn void start_command(const tool_child_spec *sp, pid_t guard, int go)
{
    if (sp->pid_ns) ns_init(sp, go);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guard) _exit(127); /* the guard is already gone */
    setpgid(0, 0);
    wait_go(go); /* the guard died before placing us */
    exec_command(sp);
}

/* ---------------------------------------------------------------- the guard */

struct guard {
    const tool_child_spec *sp;
    pid_t cmd; /* also its process group */
    int in, out, sfd, tfd;
    int64_t deadline, grace, term_at, kill_at;
    bool termed, killing, eof, quit, cmd_done;
    int cmd_status;
    tool_child_cause cause;
    char cg[PATH_MAX];
};

static void report(struct guard *g, int type, int a, int b)
{
    struct rep r = {type, a, b, 0};
    if (write(g->out, &r, sizeof(r)) < 0) { /* elector is gone */
    }
}

static void stop_for(struct guard *g, tool_child_cause why)
{
    if (!g->cause) g->cause = why;
}

static void guard_apply(struct guard *g, const struct msg *m)
{
    int64_t now = elector_now_ns();
    switch (m->type) {
    case M_DEADLINE:
        if (m->value <= g->deadline) break;
        g->deadline = m->value;
        if (!g->cause) g->term_at = g->deadline - g->grace;
        if (!g->cause || g->kill_at > g->deadline) g->kill_at = g->deadline;
        break;
    case M_STOP:
    case M_QUIT:
        if (m->type == M_QUIT) g->quit = true;
        stop_for(g, TOOL_CHILD_STOPPED);
        g->term_at = 0;
        int64_t at = m->value ? m->value : now + g->grace;
        if (at < g->kill_at) g->kill_at = at;
        if (at <= now) g->termed = true; /* killed at once: no SIGTERM first */
        break;
    case M_SIGNAL:
        /* A relayed stop: the command gets grace to end, then the tree dies. */
        stop_for(g, TOOL_CHILD_STOPPED);
        if (m->value == SIGKILL)
            g->kill_at = 0;
        else
            kill(-g->cmd, (int)m->value);
        if (now + g->grace < g->kill_at) g->kill_at = now + g->grace;
        break;
    case M_PING:
        report(g, R_PONG, (int)(uint32_t)m->value, 0);
        break;
    }
}

static void guard_read(struct guard *g)
{
    struct msg m[16];
    ssize_t n = read(g->in, m, sizeof(m));
    if (n < 0) return;
    for (ssize_t i = 0; i + (ssize_t)sizeof(m[0]) <= n; i += (ssize_t)sizeof(m[0]))
        guard_apply(g, &m[i / (ssize_t)sizeof(m[0])]);
    if (n == 0) {
        /* elector is gone: nobody renews the lease or can prove leadership. */
        g->eof = true;
        stop_for(g, TOOL_CHILD_ORPHANED);
        g->term_at = 0;
        int64_t soon = elector_now_ns() + g->grace;
        if (soon < g->kill_at) g->kill_at = soon;
    }
}

/* Applies the clock; returns when it next matters (INT64_MAX: never). */
static int64_t guard_timers(struct guard *g)
{
    int64_t now = elector_now_ns();
    if (!g->termed && now >= g->term_at) {
        /* Said here, as it happens, before anything says the command is gone
         * (elector's LOST event with the reason may come up to --grace later). */
        if (!g->cause)
            tool_log(LOG_WARN,
                     "guard: stopping %s: no lease renewal reached elector, so the "
                     "deadline in %.0f ms cannot be moved (SIGTERM now, the tree killed "
                     "at the deadline)",
                     g->sp->argv[0],
                     g->deadline > now ? (double)(g->deadline - now) / 1e6 : 0.0);
        stop_for(g, TOOL_CHILD_DEADLINE);
        kill(-g->cmd, SIGTERM);
        g->termed = true;
    }
    if (!g->killing && now >= g->kill_at) {
        stop_for(g, TOOL_CHILD_DEADLINE);
        g->killing = true;
    }
    int64_t next = g->killing ? INT64_MAX : g->kill_at;
    if (!g->termed && g->term_at < next) next = g->term_at;
    return next;
}

static int guard_infd(void *ud)
{
    struct guard *g = ud;
    return g->eof ? -1 : g->in;
}

static void guard_input(void *ud)
{
    guard_read(ud);
}

static void note_reaped(void *ud, pid_t p, int st)
{
    struct guard *g = ud;
    if (p != g->cmd) return;
    g->cmd_done = true;
    g->cmd_status = tool_exit_code(st);
}

static void arm(int tfd, int64_t at)
{
    struct itimerspec its = {0};
    if (at != INT64_MAX) {
        int64_t d = at - elector_now_ns();
        if (d < 1000) d = 1000;
        its.it_value.tv_sec = d / 1000000000;
        its.it_value.tv_nsec = d % 1000000000;
    }
    timerfd_settime(tfd, 0, &its, NULL);
}

static _Noreturn void guard_main(struct guard *g)
{
    for (;;) {
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0)
            note_reaped(g, p, st);
        if (g->cmd_done && !g->killing) {
            stop_for(g, TOOL_CHILD_EXITED);
            g->killing = true; /* what it left behind must not act as leader */
        }
        int64_t next = guard_timers(g);
        if (g->killing) break;
        /* Relative arming on CLOCK_BOOTTIME: it counts while the host sleeps. */
        arm(g->tfd, next);
        /* After EOF the pipe would report POLLHUP forever: leave it out. */
        struct pollfd pf[3] = {{.fd = g->eof ? -1 : g->in, .events = POLLIN},
                               {.fd = g->sfd, .events = POLLIN},
                               {.fd = g->tfd, .events = POLLIN}};
        if (poll(pf, 3, -1) <= 0) continue;
        if (pf[0].revents) guard_read(g);
        if (pf[1].revents) {
            struct signalfd_siginfo si;
            if (read(g->sfd, &si, sizeof(si)) < 0) { /* retried by the next poll */
            }
        }
        if (pf[2].revents) {
            uint64_t x;
            if (read(g->tfd, &x, sizeof(x)) < 0) { /* spurious */
            }
        }
    }
    /* The command's group and every descendant, until none is left. The group
     * first, at once; its number is not reused while the leader is unreaped. */
    if (!g->cmd_done) kill(-g->cmd, SIGKILL);
    kill_tree(getpid(), g->cg, g->sfd, -1, note_reaped, g, guard_infd, guard_input);
    cgroup_remove(g->cg);
    report(g, R_GONE, 0, 0);
    /* elector gone without a word (also while it was stopping the command: a
     * step-down cut short) or the deadline passed: nobody else releases. */
    if ((g->cause == TOOL_CHILD_ORPHANED || g->cause == TOOL_CHILD_DEADLINE ||
         (g->eof && !g->quit)) &&
        g->sp->release)
        g->sp->release(g->sp->ud);
    report(g, R_DONE, g->cause, g->cmd_done ? g->cmd_status : 128 + SIGKILL);
    _exit(0);
}

/* Places the command in a cgroup of its own, if we may create one. */
static int contain(struct guard *g, const char *base)
{
    g->cg[0] = 0;
    if (!*base) return MODE_SUBREAPER;
    if (snprintf(g->cg, sizeof(g->cg), "%s/elector-run.%d", base, (int)getpid()) >=
        (int)sizeof(g->cg)) { /* cgroup_base left room: never */
        g->cg[0] = 0;
        return MODE_SUBREAPER;
    }
    char pid[32];
    snprintf(pid, sizeof(pid), "%d\n", (int)g->cmd);
    if ((mkdir(g->cg, 0755) && errno != EEXIST) ||
        write_str(g->cg, "cgroup.procs", pid)) {
        rmdir(g->cg);
        g->cg[0] = 0;
        return MODE_SUBREAPER;
    }
    return MODE_CGROUP;
}

static _Noreturn void guard_start(const tool_child_spec *sp, int in, int out,
                                  const char *base)
{
    /* Dispositions first, then the mask, so that no signal meant for elector
     * lands in the gap. The guard stops the command only on elector's word or by
     * the clock; SIGKILL and SIGSTOP aimed at it alone are the only ways around. */
    int ign[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGTSTP,
                 SIGTTIN, SIGTTOU, SIGPIPE, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(ign) / sizeof(ign[0]); i++)
        signal(ign[i], SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_SETMASK, &chld, NULL);
    /* A session of its own: no group or session signal of elector's reaches it. */
    setsid();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* Keep only stdio and our pipes: elector's etcd socket and HTTP listener must
     * close when elector exits, not live on in the guard. */
    if (dup2(in, 3) < 0 || dup2(out, 4) < 0) _exit(126);
    close_range(5, ~0U, 0);
    /* Never blocked by a stopped elector: reports are few (one per ping). */
    fcntl(4, F_SETFL, O_NONBLOCK);
    struct guard g = {.sp = sp,
                      .in = 3,
                      .out = 4,
                      .deadline = sp->deadline_ns,
                      .grace = sp->grace_ns,
                      .term_at = sp->deadline_ns - sp->grace_ns,
                      .kill_at = sp->deadline_ns};
    g.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    g.tfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    int go[2];
    if (g.sfd < 0 || g.tfd < 0 || pipe2(go, O_CLOEXEC)) _exit(126);
    pid_t me = getpid();
    /* Our next child is PID 1 of a new PID namespace. */
    if (sp->pid_ns && unshare(CLONE_NEWPID)) {
        tool_log(LOG_ERROR,
                 "--pid-namespace: cannot create a PID namespace: %s (it needs "
                 "CAP_SYS_ADMIN)",
                 strerror(errno));
        report(&g, R_DONE, TOOL_CHILD_EXITED, 126);
        _exit(0);
    }
    /* The command starts with every signal blocked: it inherits the guard's
     * SIG_IGN dispositions until exec_command resets them, and a stop signal
     * sent to it meanwhile would be discarded (an ignored signal that is not
     * blocked is dropped when sent; a blocked one stays pending until the
     * command unblocks it with the default disposition). */
    sigset_t all, before;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &before);
    g.cmd = fork();
    if (g.cmd != 0) sigprocmask(SIG_SETMASK, &before, NULL);
    if (g.cmd < 0) {
        report(&g, R_DONE, TOOL_CHILD_EXITED, 126);
        _exit(0);
    }
    if (g.cmd == 0) {
        close(go[1]);
        start_command(sp, me, go[0]);
    }
    close(go[0]);
    setpgid(g.cmd, g.cmd);
    int mode = contain(&g, base) | (sp->pid_ns ? MODE_PIDNS : 0);
    report(&g, R_STARTED, mode, (int)g.cmd);
    if (write(go[1], "g", 1) != 1) { /* it died; reaped below */
    }
    close(go[1]);
    guard_main(&g);
}

/* ---------------------------------------------------------------- elector side */

/* 0: runnable; else errno (ENOENT, EACCES, EISDIR). */
static int runnable(const char *path)
{
    struct stat st;
    if (stat(path, &st)) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (!S_ISREG(st.st_mode) || access(path, X_OK)) return EACCES;
    return 0;
}

int tool_child_check_cmd(const char *cmd, char *err, size_t cap)
{
    int e = ENOENT;
    if (!*cmd) {
        e = ENOENT;
    } else if (strchr(cmd, '/')) {
        e = runnable(cmd);
    } else {
        const char *path = getenv("PATH");
        if (!path || !*path) path = "/bin:/usr/bin";
        int found = 0; /* a match that is not executable: 126 unless another is */
        while (*path) {
            size_t n = strcspn(path, ":");
            char full[PATH_MAX];
            if (n == 0)
                snprintf(full, sizeof(full), "./%s", cmd); /* an empty entry: "." */
            else
                snprintf(full, sizeof(full), "%.*s/%s", (int)n, path, cmd);
            int r = runnable(full);
            if (!r) return 0;
            if (r != ENOENT && r != ENOTDIR) found = r;
            path += n;
            if (*path == ':') path++;
        }
        e = found ? found : ENOENT;
        if (e == ENOENT) {
            snprintf(err, cap, "command not found in $PATH");
            return 127;
        }
    }
    if (!e) return 0;
    snprintf(err, cap, "%s", strerror(e == EISDIR ? EACCES : e));
    if (e == EISDIR) snprintf(err, cap, "%s (a directory)", strerror(EACCES));
    return e == ENOENT || e == ENOTDIR ? 127 : 126;
}

int tool_child_check_pid_ns(char *err, size_t cap)
{
    pid_t p = fork();
    if (p < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        return -1;
    }
    if (p == 0) _exit(unshare(CLONE_NEWPID | CLONE_NEWNS) ? errno & 0xff : 0);
    int st;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    int e = WIFEXITED(st) ? WEXITSTATUS(st) : EINVAL;
    if (!e) return 0;
    snprintf(err, cap, "cannot create a PID namespace: %s (it needs CAP_SYS_ADMIN)",
             strerror(e));
    return -1;
}

void tool_child_init(void)
{
    struct proc *v;
    size_t n = list_procs(&v);
    pid_t me = getpid();
    for (size_t i = 0; i < n && g_nkeep < sizeof(g_keep) / sizeof(g_keep[0]); i++)
        if (v[i].ppid == me) g_keep[g_nkeep++] = v[i].pid;
    free(v);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
}

tool_child *tool_child_start(const tool_child_spec *sp, char *err, size_t cap)
{
    int down[2], up[2];
    tool_child *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    if (pipe2(down, O_CLOEXEC)) {
        snprintf(err, cap, "pipe: %s", strerror(errno));
        free(c);
        return NULL;
    }
    if (pipe2(up, O_CLOEXEC)) {
        snprintf(err, cap, "pipe: %s", strerror(errno));
        close(down[0]);
        close(down[1]);
        free(c);
        return NULL;
    }
    char base[PATH_MAX];
    cgroup_base(base, sizeof(base));
    cgroup_sweep_stale(base);
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t g = fork();
    if (g < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        close(down[0]);
        close(down[1]);
        close(up[0]);
        close(up[1]);
        free(c);
        return NULL;
    }
    if (g == 0) {
        close(down[1]);
        close(up[0]);
        /* The guard must outlive elector to stop the command, so it is not
         * killed when elector dies; it notices elector's death by EOF on the
         * pipe. But a guard that was SIGSTOPped would never read that EOF:
         * the kernel sends it SIGCONT when elector (its parent, a single
         * thread) dies, and a SIGCONT resumes a stopped process whatever its
         * mask or disposition. So `kill -STOP guard; kill -9 elector` leaves
         * the guard running: it stops the tree and releases the lease. */
        prctl(PR_SET_PDEATHSIG, SIGCONT);
        guard_start(sp, down[0], up[1], base);
    }
    close(down[0]);
    close(up[1]);
    fcntl(up[0], F_SETFL, O_NONBLOCK);
    fcntl(down[1], F_SETFL, O_NONBLOCK); /* a stopped guard never blocks elector */
    c->ping_ns = sp->ping_ns > 0 ? sp->ping_ns : 1000000000;
    c->answer_ns = sp->answer_ns > 0 ? sp->answer_ns : 3 * c->ping_ns;
    c->next_ping = elector_now_ns();
    c->deadline = sp->deadline_ns;
    c->guard = g;
    c->fd = down[1];
    c->rfd = up[0];
    c->grace = sp->grace_ns;
    if (*base && snprintf(c->cg, sizeof(c->cg), "%s/elector-run.%d", base, (int)g) >=
                     (int)sizeof(c->cg))
        c->cg[0] = 0;
    return c;
}

/* Never blocks: a message (16 bytes, written whole or not at all) that does not
 * fit is dropped. The pipe holds thousands; it fills only if the guard stops
 * reading, and the heartbeat ends such a guard long before. */
static void send_msg(tool_child *c, int64_t type, int64_t value)
{
    struct msg m = {type, value};
    if (c->fd >= 0 && write(c->fd, &m, sizeof(m)) != (ssize_t)sizeof(m)) {
        /* The guard has exited (tool_child_poll reports it), or does not read
         * (the heartbeat finds it out). */
    }
}

static void send_ping(tool_child *c, int64_t now)
{
    send_msg(c, M_PING, ++c->seq);
    if (!c->waiting_since) c->waiting_since = now;
    c->next_ping = now + c->ping_ns;
}

/* A stop is asked with its kill time: right after it, a ping, whose answer
 * shows that the guard read the stop. */
static void note_stop(tool_child *c, int64_t kill_at)
{
    if (c->stop_at && c->stop_at <= kill_at) return;
    c->stop_at = kill_at;
    send_ping(c, elector_now_ns());
    c->stop_seq = c->seq;
}

void tool_child_deadline(tool_child *c, int64_t deadline_ns)
{
    send_msg(c, M_DEADLINE, deadline_ns);
    if (deadline_ns > c->deadline) c->deadline = deadline_ns;
}

void tool_child_stop(tool_child *c, int64_t kill_at_ns)
{
    int64_t now = elector_now_ns();
    send_msg(c, M_STOP, kill_at_ns ? kill_at_ns : 1);
    note_stop(c, kill_at_ns > now ? kill_at_ns : now);
}

void tool_child_signal(tool_child *c, int sig)
{
    send_msg(c, M_SIGNAL, sig);
    note_stop(c, elector_now_ns() + (sig == SIGKILL ? 0 : c->grace));
}

int tool_child_fd(const tool_child *c)
{
    return c->rfd;
}

const char *tool_child_containment(const tool_child *c)
{
    static const char *const names[] = {"",
                                        "subreaper",
                                        "cgroup",
                                        "",
                                        "",
                                        "pid namespace, subreaper",
                                        "pid namespace, cgroup",
                                        ""};
    return names[c->mode & 7];
}

static void read_reports(tool_child *c)
{
    struct rep r[8];
    ssize_t n;
    while ((n = read(c->rfd, r, sizeof(r))) > 0) {
        for (size_t i = 0; i < (size_t)n / sizeof(r[0]); i++) {
            if (r[i].type == R_STARTED) {
                c->mode = r[i].a;
                if (!(c->mode & MODE_CGROUP)) c->cg[0] = 0;
            } else if (r[i].type == R_PONG) {
                c->acked = (uint32_t)r[i].a;
                /* Answers come in order: one for the last ping means none waits. */
                c->waiting_since = c->acked == c->seq ? 0 : elector_now_ns();
            } else if (r[i].type == R_GONE) {
                c->gone = true;
            } else if (r[i].type == R_DONE) {
                c->got_done = true;
                c->cause = (tool_child_cause)r[i].a;
                c->status = r[i].b;
            }
        }
    }
}

/* The guard is gone: whatever of the tree is left is ours to end. The command
 * itself has PDEATHSIG; its orphans came to us (a subreaper). */
static void guard_ended(tool_child *c, int st)
{
    read_reports(c);
    if (!c->got_done) {
        kill_tree(getpid(), c->cg, -1, 5000, NULL, NULL, NULL, NULL);
        c->cause = TOOL_CHILD_GUARD_DIED;
        c->status = tool_exit_code(st);
    }
    if (*c->cg) cgroup_remove(c->cg);
    c->done = true;
}

/* From when the guard must be seen to act: a stop's kill time, or just before
 * the validity deadline (where the guard kills the tree if no renewal came). */
static int64_t due_at(const tool_child *c)
{
    int64_t due = c->deadline - STOP_SLACK_NS;
    return c->stop_at && c->stop_at < due ? c->stop_at : due;
}

/* Whether the guard fails its watch: a ping unanswered for answer_ns; a stop
 * it has not read STOP_SLACK_NS after its kill time; or, once a stop or the
 * deadline is due, a ping unanswered for STOP_SLACK_NS (pings come every
 * STOP_SLACK_NS / 4 then). So a guard stopped just before the deadline of a
 * cut-off leader is found by the deadline, not TTL/2 later. */
static bool guard_hung(const tool_child *c, int64_t now)
{
    if (c->gone || c->got_done) return false;
    if (c->waiting_since && now - c->waiting_since >= c->answer_ns) return true;
    if (c->stop_at && now >= c->stop_at + STOP_SLACK_NS &&
        (int32_t)(c->acked - c->stop_seq) < 0)
        return true;
    int64_t due = due_at(c);
    if (!c->waiting_since || now < due) return false;
    int64_t from = c->waiting_since > due ? c->waiting_since : due;
    return now - from >= STOP_SLACK_NS;
}

/* The guard does not answer (SIGSTOPped, stuck): nothing supervises the tree.
 * End it here, at once and whole, and the guard with it: the cgroup, then
 * every descendant of the guard, then the guard (SIGKILL ends a stopped
 * process too); what the guard leaves comes to us (a subreaper) and is killed
 * and reaped by kill_tree. */
static void take_over(tool_child *c, int64_t now)
{
    int64_t silent = c->waiting_since ? now - c->waiting_since : now - c->stop_at;
    cgroup_kill(c->cg);
    signal_descendants(c->guard, SIGKILL);
    kill(c->guard, SIGKILL);
    tool_log(LOG_WARN,
             "the guard (pid %d) has not answered for %lld ms%s: elector kills the "
             "command's tree and the guard itself",
             (int)c->guard, (long long)(silent / 1000000),
             c->stop_at && now >= c->stop_at ? " while a stop is due" : "");
    /* Reaped at once, unless it sleeps uninterruptibly: then not waited for. */
    int st;
    for (int i = 0; i < 500 && waitpid(c->guard, &st, WNOHANG) == 0; i++)
        poll(NULL, 0, 10);
    read_reports(c);
    kill_tree(getpid(), c->cg, -1, 5000, NULL, NULL, NULL, NULL);
    if (*c->cg) cgroup_remove(c->cg);
    if (!c->got_done) {
        c->cause = TOOL_CHILD_GUARD_HUNG;
        c->status = 128 + SIGKILL;
    }
    c->done = true;
}

/* When the next ping is due: every ping_ns, and every STOP_SLACK_NS / 4 once
 * a stop or the deadline is due (the guard is then expected to act). */
static int64_t next_ping_at(const tool_child *c)
{
    int64_t fast = c->next_ping - c->ping_ns + STOP_SLACK_NS / 4, due = due_at(c);
    if (fast < due) fast = due;
    return fast < c->next_ping ? fast : c->next_ping;
}

int64_t tool_child_timeout_ms(const tool_child *c)
{
    if (c->done || c->gone || c->got_done) return -1;
    int64_t now = elector_now_ns(), at;
    if (c->waiting_since) { /* when it would count as hung */
        int64_t due = due_at(c);
        at = c->waiting_since + c->answer_ns;
        int64_t from = (c->waiting_since > due ? c->waiting_since : due) + STOP_SLACK_NS;
        if (from < at) at = from;
        if (c->stop_at && c->stop_at + STOP_SLACK_NS < at)
            at = c->stop_at + STOP_SLACK_NS;
    } else {
        at = next_ping_at(c);
    }
    return at <= now ? 0 : (at - now + 999999) / 1000000;
}

static void maybe_ping(tool_child *c, int64_t now)
{
    if (c->gone || c->got_done || c->waiting_since) return;
    if (now >= next_ping_at(c)) send_ping(c, now);
}

int tool_child_poll(tool_child *c, int *status, tool_child_cause *cause)
{
    if (!c->done) {
        read_reports(c);
        int st;
        int64_t now = elector_now_ns();
        if (waitpid(c->guard, &st, WNOHANG) == c->guard)
            guard_ended(c, st);
        else if (guard_hung(c, now))
            take_over(c, now);
        else {
            maybe_ping(c, now);
            return 0;
        }
    }
    *status = c->status;
    *cause = c->cause;
    return 1;
}

void tool_child_free(tool_child *c)
{
    if (!c) return;
    if (!c->done) {
        send_msg(c, M_QUIT, 0);
        if (!c->stop_at) note_stop(c, elector_now_ns() + c->grace);
        /* Waits for the guard, but not for one that stopped answering. */
        int st;
        pid_t p;
        while ((p = waitpid(c->guard, &st, WNOHANG)) == 0) {
            read_reports(c);
            int64_t now = elector_now_ns();
            if (guard_hung(c, now)) break;
            maybe_ping(c, now);
            poll(NULL, 0, 5);
        }
        close(c->fd);
        c->fd = -1;
        if (p == c->guard)
            guard_ended(c, st);
        else
            take_over(c, elector_now_ns());
    }
    if (c->fd >= 0) close(c->fd);
    close(c->rfd);
    free(c);
}

/* ---------------------------------------------------------------- shared */

void tool_cgroup_base(char *out, size_t cap)
{
    cgroup_base(out, cap);
}

void tool_cgroup_kill(const char *cg)
{
    cgroup_kill(cg);
}

void tool_cgroup_remove(const char *cg)
{
    cgroup_remove(cg);
}

int tool_kill_tree(const char *cg, int64_t max_ms)
{
    return kill_tree(getpid(), cg, -1, max_ms, NULL, NULL, NULL, NULL);
}
