/* SPDX-License-Identifier: MIT */
/* The child handle: elector's side of the guard (tool_child_*), and the
 * heartbeat with which elector watches the guard. */
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
        /* Every entry, a trailing empty one too ("/usr/bin:"), as execvp. */
        for (;;) {
            size_t n = strcspn(path, ":");
            char full[PATH_MAX];
            if (n == 0)
                snprintf(full, sizeof(full), "./%s", cmd); /* an empty entry: "." */
            else
                snprintf(full, sizeof(full), "%.*s/%s", (int)n, path, cmd);
            int r = runnable(full);
            if (!r) return 0;
            if (r != ENOENT && r != ENOTDIR) found = r;
            if (!path[n]) break;
            path += n + 1;
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
    size_t n = sv_list_procs(&v);
    pid_t me = getpid();
    for (size_t i = 0; i < n && sv_nkeep < sizeof(sv_keep) / sizeof(sv_keep[0]); i++)
        if (v[i].ppid == me) sv_keep[sv_nkeep++] = v[i].pid;
    free(v);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
}

/* The two pipes: down (elector -> guard) and up (guard -> elector). 0 or -1. */
static int open_pipes(int down[2], int up[2], char *err, size_t cap)
{
    if (pipe2(down, O_CLOEXEC)) {
        snprintf(err, cap, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(up, O_CLOEXEC)) {
        snprintf(err, cap, "pipe: %s", strerror(errno));
        close(down[0]);
        close(down[1]);
        return -1;
    }
    return 0;
}

tool_child *tool_child_start(const tool_child_spec *sp, char *err, size_t cap)
{
    int down[2], up[2];
    tool_child *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    if (open_pipes(down, up, err, cap)) {
        free(c);
        return NULL;
    }
    char base[PATH_MAX];
    sv_cgroup_base(base, sizeof(base));
    sv_cgroup_sweep_stale(base);
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
        sv_guard_start(sp, down[0], up[1], base);
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
        sv_kill_tree(getpid(), c->cg, -1, 5000, NULL, NULL, NULL, NULL);
        c->cause = TOOL_CHILD_GUARD_DIED;
        c->status = tool_exit_code(st);
    }
    if (*c->cg) sv_cgroup_remove(c->cg);
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
 * and reaped by sv_kill_tree. */
static void take_over(tool_child *c, int64_t now)
{
    int64_t silent = c->waiting_since ? now - c->waiting_since : now - c->stop_at;
    sv_cgroup_kill(c->cg);
    sv_signal_descendants(c->guard, SIGKILL);
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
    sv_kill_tree(getpid(), c->cg, -1, 5000, NULL, NULL, NULL, NULL);
    if (*c->cg) sv_cgroup_remove(c->cg);
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
