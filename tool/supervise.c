#define _GNU_SOURCE /* pipe2, close_range */
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum msg_type { M_DEADLINE = 1, M_STOP, M_SIGNAL };
struct msg {
    int64_t type, value;
};

struct tool_child {
    pid_t guard;
    int fd; /* write end of the command pipe */
    int status;
    bool done;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---------------------------------------------------------------- the command */

static void exec_command(char *const argv[], char *const env_add[], pid_t guard)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guard) _exit(127); /* the guard is already gone */
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
    for (int i = 0; env_add[i]; i++) putenv(env_add[i]);
    execvp(argv[0], argv);
    fprintf(stderr, "elector: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* ---------------------------------------------------------------- the guard */

struct guard {
    pid_t cmd;
    int64_t deadline, grace, term_at, kill_at;
    bool termed, killed, eof;
};

static void group_kill(struct guard *g, int sig)
{
    kill(-g->cmd, sig);
    kill(g->cmd, sig); /* in case setpgid had not run yet */
}

static void guard_apply(struct guard *g, const struct msg *m)
{
    if (m->type == M_DEADLINE && m->value > g->deadline) {
        g->deadline = m->value;
        if (!g->termed) g->term_at = g->deadline - g->grace;
        g->kill_at = g->deadline;
    } else if (m->type == M_STOP) {
        g->term_at = 0;
        if (m->value < g->kill_at) g->kill_at = m->value;
    } else if (m->type == M_SIGNAL) {
        group_kill(g, (int)m->value);
    }
}

static int64_t guard_timers(struct guard *g)
{
    int64_t now = now_ns();
    if (!g->termed && now >= g->term_at) {
        group_kill(g, SIGTERM);
        g->termed = true;
    }
    if (!g->killed && now >= g->kill_at) {
        group_kill(g, SIGKILL);
        g->killed = true;
    }
    int64_t next = g->killed ? INT64_MAX : g->kill_at;
    if (!g->termed && g->term_at < next) next = g->term_at;
    return next;
}

static void guard_read(struct guard *g, int in)
{
    struct msg m;
    ssize_t n = read(in, &m, sizeof(m));
    if (n == (ssize_t)sizeof(m)) {
        guard_apply(g, &m);
    } else if (n == 0) {
        /* elector is gone: nobody can prove leadership any more. */
        g->eof = true;
        g->term_at = 0;
        int64_t soon = now_ns() + g->grace;
        if (soon < g->kill_at) g->kill_at = soon;
    }
}

static int exit_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

static void guard_main(int in, int sfd, struct guard *g)
{
    for (;;) {
        int64_t next = guard_timers(g);
        int st;
        pid_t r = waitpid(g->cmd, &st, WNOHANG);
        if (r == g->cmd) {
            /* Whatever the command left in its group must not act as leader. */
            kill(-g->cmd, SIGKILL);
            _exit(exit_code(st));
        }
        int64_t wait = next == INT64_MAX ? -1 : (next - now_ns()) / 1000000 + 1;
        struct pollfd p[2] = {{.fd = in, .events = g->eof ? 0 : POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, wait < 0 ? -1 : (int)(wait > 1000 ? 1000 : wait)) > 0) {
            if (p[0].revents) guard_read(g, in);
            if (p[1].revents) {
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) < 0) { /* retried by the next poll */
                }
            }
        }
    }
}

static void guard_start(int in, char *const argv[], char *const env_add[], int64_t deadline,
                        int64_t grace)
{
    /* Keep only stdio and our pipe: elector's etcd socket and HTTP listener must
     * close when elector exits, not live on in the guard. */
    if (in != 3) {
        dup2(in, 3);
        close(in);
        in = 3;
    }
    close_range(4, ~0U, 0);
    /* Signals meant for elector (terminal ^C) must not take the guard down: it
     * stops the command only on elector's word or by the clock. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
    pid_t me = getpid();
    pid_t cmd = fork();
    if (cmd < 0) _exit(126);
    if (cmd == 0) {
        close(in);
        exec_command(argv, env_add, me);
    }
    setpgid(cmd, cmd);
    struct guard g = {.cmd = cmd, .deadline = deadline, .grace = grace,
                      .term_at = deadline - grace, .kill_at = deadline};
    guard_main(in, sfd, &g);
}

/* ---------------------------------------------------------------- elector side */

tool_child *tool_child_start(char *const argv[], char *const env_add[], int64_t deadline_ns,
                             int64_t grace_ns, char *err, size_t cap)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) {
        snprintf(err, cap, "pipe: %s", strerror(errno));
        return NULL;
    }
    tool_child *c = calloc(1, sizeof(*c));
    if (!c) {
        close(p[0]);
        close(p[1]);
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    pid_t g = fork();
    if (g < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        free(c);
        return NULL;
    }
    if (g == 0) {
        close(p[1]);
        /* The guard must outlive elector to stop the command, so no PDEATHSIG
         * here; it notices elector's death by EOF on the pipe. Unblock what
         * elector blocked for its signalfd. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        guard_start(p[0], argv, env_add, deadline_ns, grace_ns);
        _exit(1);
    }
    close(p[0]);
    c->guard = g;
    c->fd = p[1];
    return c;
}

static void send_msg(tool_child *c, int64_t type, int64_t value)
{
    struct msg m = {type, value};
    if (c->fd >= 0 && write(c->fd, &m, sizeof(m)) != (ssize_t)sizeof(m)) {
        /* The guard has exited; tool_child_poll reports it. */
    }
}

void tool_child_deadline(tool_child *c, int64_t deadline_ns)
{
    send_msg(c, M_DEADLINE, deadline_ns);
}

void tool_child_stop(tool_child *c, int64_t kill_at_ns)
{
    send_msg(c, M_STOP, kill_at_ns);
}

void tool_child_signal(tool_child *c, int sig)
{
    send_msg(c, M_SIGNAL, sig);
}

pid_t tool_child_pid(const tool_child *c)
{
    return c->guard;
}

int tool_child_poll(tool_child *c, int *status)
{
    if (!c->done) {
        int st;
        if (waitpid(c->guard, &st, WNOHANG) != c->guard) return 0;
        c->done = true;
        c->status = exit_code(st);
    }
    *status = c->status;
    return 1;
}

void tool_child_free(tool_child *c)
{
    if (!c) return;
    if (c->fd >= 0) close(c->fd); /* EOF: the guard stops the command within grace */
    if (!c->done) waitpid(c->guard, NULL, 0);
    free(c);
}
