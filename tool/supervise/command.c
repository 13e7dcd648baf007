/* SPDX-License-Identifier: MIT */
/* The command's start: the signals it starts with, the PID namespace, exec. */
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

extern char **environ;

int tool_exit_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
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
_Noreturn void sv_start_command(const tool_child_spec *sp, pid_t guard, int go)
{
    if (sp->pid_ns) ns_init(sp, go);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guard) _exit(127); /* the guard is already gone */
    setpgid(0, 0);
    wait_go(go); /* the guard died before placing us */
    exec_command(sp);
}
