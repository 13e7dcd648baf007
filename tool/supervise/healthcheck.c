/* SPDX-License-Identifier: MIT */
/* See healthcheck.h. */
#define _GNU_SOURCE /* close_range */
#include "supervise/healthcheck.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elector/etcd.h"        /* elector_now_ns() */
#include "supervise/supervise.h" /* tool_reset_signals(), the cgroup */

static void make_cgroup(tool_health *h);

struct tool_health {
    tool_health_spec sp;
    char *cmd;
    pid_t pid;          /* the reaper of the running check, 0 if none */
    int64_t started_ns; /* when the running check started */
    int64_t next_ns;    /* when the next check starts */
    int64_t start_end_ns;
    tool_health_state state;
    int failures;
    char last[128];
    char cg[PATH_MAX]; /* the checks' cgroup, "" if none */
};

const char *tool_health_state_name(tool_health_state s)
{
    switch (s) {
    case TOOL_HEALTH_STARTING:
        return "starting";
    case TOOL_HEALTH_HEALTHY:
        return "healthy";
    case TOOL_HEALTH_UNHEALTHY:
        return "unhealthy";
    default:
        return "none";
    }
}

tool_health *tool_health_new(const tool_health_spec *spec)
{
    tool_health *h = calloc(1, sizeof(*h));
    if (!h) return NULL;
    h->sp = *spec;
    h->cmd = strdup(spec->cmd);
    if (!h->cmd) {
        free(h);
        return NULL;
    }
    h->sp.cmd = h->cmd;
    if (h->sp.retries < 1) h->sp.retries = 1;
    int64_t now = elector_now_ns();
    h->next_ns = now;
    h->start_end_ns = now + h->sp.start_ms * 1000000;
    h->state = TOOL_HEALTH_STARTING;
    make_cgroup(h);
    return h;
}

/* ---------------------------------------------------------------- the cgroup */

#define HEALTH_CG "elector-health."

/* Removes the health cgroups of electors that are gone (SIGKILLed): rmdir
 * succeeds only on an empty cgroup, so a live check's stays. */
static void sweep_stale(const char *base)
{
    DIR *d = *base ? opendir(base) : NULL;
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        if (strncmp(de->d_name, HEALTH_CG, strlen(HEALTH_CG))) continue;
        long pid = strtol(de->d_name + strlen(HEALTH_CG), &end, 10);
        if ((*end && *end != '.') || pid <= 0 || kill((pid_t)pid, 0) == 0 ||
            errno != ESRCH)
            continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
        rmdir(path);
    }
    closedir(d);
}

/* The checks' cgroup, BASE/elector-health.<elector's pid>.<n>, if we may make
 * one (n: one per tool_health of the process). */
static void make_cgroup(tool_health *h)
{
    static unsigned n;
    char base[PATH_MAX];
    h->cg[0] = 0;
    tool_cgroup_base(base, sizeof(base));
    if (!*base) return;
    sweep_stale(base);
    if (snprintf(h->cg, sizeof(h->cg), "%s/" HEALTH_CG "%d.%u", base, (int)getpid(),
                 n++) >= (int)sizeof(h->cg) ||
        (mkdir(h->cg, 0755) && errno != EEXIST))
        h->cg[0] = 0;
}

/* ---------------------------------------------------------------- the reaper */

/* The shell, in a process group of its own and in the checks' cgroup (a
 * failure to enter it leaves the subreaper walk). */
static _Noreturn void exec_check(const char *cmd, const char *cg)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the reaper is gone: so is the shell */
    setpgid(0, 0);
    if (*cg) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "0\n", 2) != 2) { /* subreaper only */
            }
            close(fd);
        }
    }
    tool_reset_signals();
    int in = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (in >= 0) {
        dup2(in, 0);
        dup2(in, 1);
    }
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
}

/* Ends everything the check started and reaps it: the shell's group, the
 * cgroup, and every descendant of ours (we are a subreaper: a process that
 * left the group, with setsid or a double fork, is reparented to us). */
static void end_all(pid_t sh, bool reaped, const char *cg)
{
    kill(-sh, SIGKILL);
    if (!reaped) kill(sh, SIGKILL);
    tool_cgroup_kill(cg);
    /* No child left at all: no descendant either (orphans come to us), and
     * no need to read /proc. */
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
    }
    if (p < 0 && errno == ECHILD) return;
    tool_kill_tree(cg, 2000); /* a process in uninterruptible sleep: elector's backstop */
}

/* The reaper: starts the shell, waits for it, its timeout, a SIGTERM (elector
 * frees it, or died: PDEATHSIG), and always ends what the check started before
 * it exits. Exits with the shell's status (128 + N for signal N); a timeout
 * ends it by SIGALRM. */
static _Noreturn void reaper(const char *cmd, const char *cg, pid_t elector,
                             int64_t timeout_ms)
{
    sigset_t set;
    tool_stop_signals(&set, true);
    sigprocmask(SIG_SETMASK, &set, NULL);
    signal(SIGALRM, SIG_DFL);
    close_range(3, ~0U, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (getppid() != elector) _exit(1);
    pid_t sh = fork();
    if (sh < 0) _exit(126);
    if (sh == 0) exec_check(cmd, cg);
    setpgid(sh, sh); /* also here: no window where a kill misses it */
    int64_t end = elector_now_ns() + timeout_ms * 1000000;
    for (;;) {
        int st;
        if (waitpid(sh, &st, WNOHANG) == sh) {
            end_all(sh, true, cg);
            _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
        if (getppid() != elector) { /* elector died: nothing may outlive it */
            end_all(sh, false, cg);
            _exit(1);
        }
        int64_t left = end - elector_now_ns();
        if (left <= 0) {
            end_all(sh, false, cg);
            sigset_t alrm;
            sigemptyset(&alrm);
            sigaddset(&alrm, SIGALRM);
            sigprocmask(SIG_UNBLOCK, &alrm, NULL);
            raise(SIGALRM);
            _exit(1);
        }
        struct timespec ts = {left / 1000000000, left % 1000000000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig > 0 && sig != SIGCHLD) { /* elector (or its group) says stop */
            end_all(sh, false, cg);
            _exit(128 + sig);
        }
    }
}

/* ---------------------------------------------------------------- the state */

static void start_check(tool_health *h, int64_t now)
{
    h->started_ns = now;
    h->next_ns = now + h->sp.interval_ms * 1000000;
    fflush(NULL);
    pid_t me = getpid();
    pid_t p = fork();
    if (p < 0) {
        snprintf(h->last, sizeof(h->last), "cannot start: %s", strerror(errno));
        return;
    }
    if (p == 0) reaper(h->cmd, h->cg, me, h->sp.timeout_ms);
    h->pid = p;
}

/* Applies one result; returns true when the state changed. */
static bool result(tool_health *h, bool pass)
{
    tool_health_state before = h->state;
    if (pass) {
        h->failures = 0;
        h->state = TOOL_HEALTH_HEALTHY;
    } else if (h->started_ns >= h->start_end_ns) {
        h->failures++;
        if (h->failures >= h->sp.retries) h->state = TOOL_HEALTH_UNHEALTHY;
    }
    return h->state != before;
}

static void describe(tool_health *h, int st)
{
    if (WIFEXITED(st))
        snprintf(h->last, sizeof(h->last), "exit status %d", WEXITSTATUS(st));
    else if (WTERMSIG(st) == SIGALRM)
        snprintf(h->last, sizeof(h->last), "timed out after %lld ms",
                 (long long)h->sp.timeout_ms);
    else
        snprintf(h->last, sizeof(h->last), "killed by signal %d", WTERMSIG(st));
}

bool tool_health_process(tool_health *h)
{
    int64_t now = elector_now_ns();
    if (h->pid) {
        int st;
        pid_t r = waitpid(h->pid, &st, WNOHANG);
        if (r == 0) {
            /* The reaper ends a check at its timeout; this is a backstop. */
            if (now - h->started_ns > (h->sp.timeout_ms + 2000) * 1000000)
                kill(h->pid, SIGKILL);
            return false;
        }
        h->pid = 0;
        /* The reaper died before it could end the check (SIGKILL): the shell
         * has PDEATHSIG; what it started is in the cgroup. */
        if (r < 0 || (WIFSIGNALED(st) && WTERMSIG(st) != SIGALRM))
            tool_cgroup_kill(h->cg);
        if (r < 0) { /* reaped by someone else (a dying guard's cleanup) */
            snprintf(h->last, sizeof(h->last), "lost: %s", strerror(errno));
            return result(h, false);
        }
        describe(h, st);
        return result(h, WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    if (now < h->next_ns) return false;
    start_check(h, now);
    return h->pid ? false : result(h, false);
}

int64_t tool_health_timeout(const tool_health *h)
{
    if (h->pid) return 50;
    int64_t d = (h->next_ns - elector_now_ns()) / 1000000;
    return d > 0 ? d + 1 : 0;
}

tool_health_state tool_health_get_state(const tool_health *h)
{
    return h->state;
}

int tool_health_failures(const tool_health *h)
{
    return h->failures;
}

const char *tool_health_last(const tool_health *h)
{
    return h->last;
}

pid_t tool_health_pid(const tool_health *h)
{
    return h->pid;
}

void tool_health_free(tool_health *h)
{
    if (!h) return;
    if (h->pid) {
        /* SIGTERM: the reaper kills the check's group and exits. */
        kill(h->pid, SIGTERM);
        int st;
        int64_t end = elector_now_ns() + 2000000000LL;
        while (waitpid(h->pid, &st, WNOHANG) == 0) {
            if (elector_now_ns() > end) {
                kill(h->pid, SIGKILL);
                waitpid(h->pid, &st, 0);
                break;
            }
            usleep(5000);
        }
    }
    tool_cgroup_kill(h->cg); /* the reaper ended it all; in case it was killed */
    tool_cgroup_remove(h->cg);
    free(h->cmd);
    free(h);
}
