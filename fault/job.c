/* SPDX-License-Identifier: MIT */
/* fault-job: the command that `elector run` candidates of the fault suite run
 * (runner.c starts `elector ... run NAME -- fault-job ...`). What the checker
 * judges for those candidates is this command's activity, not elector's belief.
 *
 *   fault-job --id N --log FILE --lock FILE [--resource SOCKET] [--write-ms MS]
 *             [--ignore-term] [--hold-mb N]
 *
 * It reads ELECTOR_TOKEN and ELECTOR_KEY from its environment and runs as a tree
 * of three processes, each of which appends lines to FILE (one write(2) per
 * line, CLOCK_MONOTONIC nanoseconds first, like every log of a run):
 *
 *   main      the command itself (elector's guard starts it in a process group
 *             of its own)
 *   worker    its child, in the same process group
 *   escapee   the worker's child, which leaves the group and the session
 *             (setsid): only a cgroup or a subreaper finds it
 *
 *   T jstart PID ROLE TOKEN KEY PPID PGID SID   the process runs (main's line
 *                                               is the start of the term)
 *   T jbusy PID main TOKEN                      the lock below was held by
 *                                               another job's tree at our start
 *   T jlocked PID main TOKEN                    ... and was obtained only now
 *   T jw PID ROLE TOKEN SEQ ok|rej MAX|err T_DONE
 *                                               a fenced write of "W TOKEN SEQ N"
 *                                               to fault-resource: T = before it
 *                                               was sent, T_DONE = after the
 *                                               reply (the last moment the
 *                                               process is known to have acted)
 *   T jterm PID ROLE [ignored]                  SIGTERM received
 *   T jend PID ROLE REASON                      the process exits by itself
 *
 * Exactness: main takes an exclusive flock() on FILE --lock (one per scenario)
 * before anything else, and the lock's open file description is inherited by
 * the worker and the escapee. The kernel releases it only when the last process
 * of the tree holding it has closed it, i.e. has died. So a job that starts
 * while any process of another job's tree is still alive finds the lock taken:
 * "jbusy" is an overlap of two trees, measured by the kernel, not by clocks.
 *
 * On SIGTERM every process exits at once (logging "jterm", then "jend"), unless
 * --ignore-term: then it logs "jterm ... ignored" and goes on until SIGKILLed.
 *
 * --hold-mb N: the escapee touches N MiB of private memory at its start, so that
 * after a SIGKILL it takes a while to die (the kernel tears the address space
 * down before it closes files: the job lock stays held until then, ~150 ms for
 * 1 GiB here). A tree that is slow to be reaped, as one with a process in
 * uninterruptible sleep is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "futil.h"

static struct {
    int id;
    const char *log, *lock, *resource;
    int write_ms;
    bool ignore_term;
    int hold_mb;
} opt = {.write_ms = 20};

static volatile sig_atomic_t g_term;
static int g_log = -1, g_res = -1;
static const char *g_role = "main";
static long long g_token;
static const char *g_key = "-";

static void on_term(int sig)
{
    (void)sig;
    g_term = 1;
}

static void log_start(void)
{
    fu_line(g_log, "%" PRId64 " jstart %d %s %lld %s %d %d %d", fu_now_ns(),
            (int)getpid(), g_role, g_token, g_key, (int)getppid(), (int)getpgrp(),
            (int)getsid(0));
}

static void res_connect(void)
{
    if (g_res >= 0 || !opt.resource) return;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", opt.resource);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        g_res = fd;
        return;
    }
    if (fd >= 0) close(fd);
}

/* One fenced write, synchronously. */
static void fenced_write(uint64_t seq)
{
    int64_t t0 = fu_now_ns();
    res_connect();
    char msg[96], rep[64] = "";
    ssize_t got = -1;
    if (g_res >= 0) {
        int n = snprintf(msg, sizeof msg, "W %lld %" PRIu64 " %d", g_token, seq, opt.id);
        if (send(g_res, msg, (size_t)n, MSG_NOSIGNAL) == n) {
            struct pollfd p = {.fd = g_res, .events = POLLIN};
            if (poll(&p, 1, 1000) == 1) got = recv(g_res, rep, sizeof rep - 1, 0);
        }
    }
    int64_t t1 = fu_now_ns();
    if (got <= 0) {
        fu_line(g_log, "%" PRId64 " jw %d %s %lld %" PRIu64 " err %" PRId64, t0,
                (int)getpid(), g_role, g_token, seq, t1);
        if (g_res >= 0) close(g_res);
        g_res = -1;
        return;
    }
    rep[got] = '\0';
    if (rep[0] == 'A')
        fu_line(g_log, "%" PRId64 " jw %d %s %lld %" PRIu64 " ok %" PRId64, t0,
                (int)getpid(), g_role, g_token, seq, t1);
    else
        fu_line(g_log, "%" PRId64 " jw %d %s %lld %" PRIu64 " rej %s %" PRId64, t0,
                (int)getpid(), g_role, g_token, seq,
                rep[0] == 'R' && rep[1] == ' ' ? rep + 2 : "?", t1);
}

/* The activity loop of every process of the tree; returns only on SIGTERM. */
static void activity(int role_no)
{
    uint64_t n = 0;
    bool said = false;
    for (;;) {
        if (g_term) {
            if (!opt.ignore_term) {
                fu_line(g_log, "%" PRId64 " jterm %d %s", fu_now_ns(), (int)getpid(),
                        g_role);
                return;
            }
            if (!said)
                fu_line(g_log, "%" PRId64 " jterm %d %s ignored", fu_now_ns(),
                        (int)getpid(), g_role);
            said = true;
        }
        /* sequence numbers unique per job: role in the low bits */
        fenced_write(++n * 4 + (uint64_t)role_no);
        /* one nanosleep: a SIGTERM ends it at once (prompt exit) */
        struct timespec ts = {opt.write_ms / 1000, (long)(opt.write_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
}

static _Noreturn void usage(int st)
{
    fprintf(st ? stderr : stdout,
            "usage: fault-job --id N --log FILE --lock FILE [--resource SOCKET] "
            "[--write-ms MS] [--ignore-term]\n");
    exit(st);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"id", required_argument, 0, 'i'},
                                       {"log", required_argument, 0, 'l'},
                                       {"lock", required_argument, 0, 'k'},
                                       {"resource", required_argument, 0, 'r'},
                                       {"write-ms", required_argument, 0, 'w'},
                                       {"ignore-term", no_argument, 0, 'I'},
                                       {"hold-mb", required_argument, 0, 'H'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'i':
            opt.id = atoi(optarg);
            break;
        case 'l':
            opt.log = optarg;
            break;
        case 'k':
            opt.lock = optarg;
            break;
        case 'r':
            opt.resource = optarg;
            break;
        case 'w':
            opt.write_ms = atoi(optarg);
            break;
        case 'I':
            opt.ignore_term = true;
            break;
        case 'H':
            opt.hold_mb = atoi(optarg);
            break;
        case 'h':
            usage(0);
        default:
            usage(2);
        }
    }
    if (!opt.log || !opt.lock || opt.write_ms <= 0 || optind != argc) usage(2);
    /* The handler before anything else: a SIGTERM right at the start is seen. */
    struct sigaction sa = {.sa_handler = on_term};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int64_t t_start = fu_now_ns();
    g_log = fu_open_log(opt.log);
    if (g_log < 0) {
        perror(opt.log);
        return 1;
    }
    const char *tok = getenv("ELECTOR_TOKEN");
    g_token = tok ? atoll(tok) : -1;
    if (getenv("ELECTOR_KEY") && *getenv("ELECTOR_KEY")) g_key = getenv("ELECTOR_KEY");
    /* Inherited by the worker and the escapee (fork keeps the description). */
    int lk = open(opt.lock, O_RDWR | O_CREAT, 0644);
    if (lk < 0) {
        fu_line(g_log, "%" PRId64 " jend %d main nolock", fu_now_ns(), (int)getpid());
        return 1;
    }
    bool busy = flock(lk, LOCK_EX | LOCK_NB) != 0;
    fu_line(g_log, "%" PRId64 " jstart %d main %lld %s %d %d %d", t_start, (int)getpid(),
            g_token, g_key, (int)getppid(), (int)getpgrp(), (int)getsid(0));
    if (busy) {
        fu_line(g_log, "%" PRId64 " jbusy %d main %lld", fu_now_ns(), (int)getpid(),
                g_token);
        while (flock(lk, LOCK_EX) != 0 && errno == EINTR) {
        }
        fu_line(g_log, "%" PRId64 " jlocked %d main %lld", fu_now_ns(), (int)getpid(),
                g_token);
    }
    int role_no = 0;
    pid_t w = fork();
    if (w == 0) {
        g_role = "worker";
        role_no = 1;
        log_start();
        pid_t e = fork();
        if (e == 0) {
            setsid(); /* out of the command's process group and session */
            g_role = "escapee";
            role_no = 2;
            if (opt.hold_mb > 0) {
                size_t n = (size_t)opt.hold_mb << 20;
                char *m = mmap(NULL, n, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (m != MAP_FAILED) memset(m, 1, n);
            }
            log_start();
        }
    }
    activity(role_no);
    fu_line(g_log, "%" PRId64 " jend %d %s term", fu_now_ns(), (int)getpid(), g_role);
    return 0;
}
