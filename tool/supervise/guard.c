/* SPDX-License-Identifier: MIT */
/* The guard: the process between elector and the command, which owns the tree
 * and ends it when elector asks, misses a deadline, or dies. */
#define _GNU_SOURCE /* pipe2, close_range */
#include "supervise/internal.h"

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
        /* A relayed stop: the command gets grace to end, then the tree dies.
         * It was told: the deadline's own SIGTERM is not sent on top (a second
         * SIGTERM during a graceful stop means "quit now" to many programs, and
         * cut a shell's trap short). */
        stop_for(g, TOOL_CHILD_STOPPED);
        if (m->value == SIGKILL)
            g->kill_at = 0;
        else
            kill(-g->cmd, (int)m->value);
        g->termed = true;
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
    sv_kill_tree(getpid(), g->cg, g->sfd, -1, note_reaped, g, guard_infd, guard_input);
    sv_cgroup_remove(g->cg);
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
        (int)sizeof(g->cg)) { /* sv_cgroup_base left room: never */
        g->cg[0] = 0;
        return MODE_SUBREAPER;
    }
    char pid[32];
    snprintf(pid, sizeof(pid), "%d\n", (int)g->cmd);
    if ((mkdir(g->cg, 0755) && errno != EEXIST) ||
        sv_write_str(g->cg, "cgroup.procs", pid)) {
        rmdir(g->cg);
        g->cg[0] = 0;
        return MODE_SUBREAPER;
    }
    return MODE_CGROUP;
}

/* The guard's process: its signals (chld: the mask, SIGCHLD only), a session of
 * its own, and only stdio and the pipes (in as fd 3, out as fd 4) kept. */
static void guard_detach(int in, int out, sigset_t *chld)
{
    /* Dispositions first, then the mask, so that no signal meant for elector
     * lands in the gap. The guard stops the command only on elector's word or by
     * the clock; SIGKILL and SIGSTOP aimed at it alone are the only ways around. */
    int ign[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGTSTP,
                 SIGTTIN, SIGTTOU, SIGPIPE, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(ign) / sizeof(ign[0]); i++)
        signal(ign[i], SIG_IGN);
    sigemptyset(chld);
    sigaddset(chld, SIGCHLD);
    sigprocmask(SIG_SETMASK, chld, NULL);
    /* A session of its own: no group or session signal of elector's reaches it. */
    setsid();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* Keep only stdio and our pipes: elector's etcd socket and HTTP listener must
     * close when elector exits, not live on in the guard. */
    if (dup2(in, 3) < 0 || dup2(out, 4) < 0) _exit(126);
    close_range(5, ~0U, 0);
    /* Never blocked by a stopped elector: reports are few (one per ping). */
    fcntl(4, F_SETFL, O_NONBLOCK);
}

_Noreturn void sv_guard_start(const tool_child_spec *sp, int in, int out,
                              const char *base)
{
    sigset_t chld;
    guard_detach(in, out, &chld);
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
        sv_start_command(sp, me, go[0]);
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
