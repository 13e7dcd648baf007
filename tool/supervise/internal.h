/* SPDX-License-Identifier: MIT */
/* Private to supervise/: the guard's protocol and what its files share (tree.c,
 * command.c, guard.c, child.c; supervise.h is the interface). */
#ifndef ELECTOR_TOOL_SUPERVISE_INTERNAL_H
#define ELECTOR_TOOL_SUPERVISE_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "supervise/supervise.h"

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

/* tree.c */
struct proc {
    pid_t pid, ppid;
};

/* Every process of the system with its parent, from /proc. */
size_t sv_list_procs(struct proc **out);

/* Children elector had before it started any guard (a shell's `2> >(logger)`):
 * never ours to kill (tool_child_init fills them in). */
extern pid_t sv_keep[16];
extern size_t sv_nkeep;

/* Sends sig to every descendant of root but the kept ones and theirs; returns
 * how many there were (zombies included). */
size_t sv_signal_descendants(pid_t root, int sig);

/* Writes s to dir/file (a cgroup control file): 0 or -1. */
int sv_write_str(const char *dir, const char *file, const char *s);

/* Kills every member of a cgroup: cgroup.kill (Linux 5.14+), else one by one. */
void sv_cgroup_kill(const char *cg);

/* The cgroup v2 directory this process is in ("" if there is no cgroup2 mount). */
void sv_cgroup_base(char *out, size_t cap);

/* Kills the tree under root until nothing is left below it (all reaped),
 * calling reaped(pid, status) for each; gives up after max_ms (a process in
 * uninterruptible sleep). Returns 0 when the tree is gone. */
int sv_kill_tree(pid_t root, const char *cg, int sfd, int64_t max_ms,
                 void (*reaped)(void *, pid_t, int), void *ud, int (*infd)(void *),
                 void (*input)(void *));

/* Removes the cgroups of guards that died without cleaning up (SIGKILLed with
 * elector): rmdir succeeds only on an empty cgroup, so a live tree stays. */
void sv_cgroup_sweep_stale(const char *base);

void sv_cgroup_remove(const char *cg);

/* command.c */

/* The child of the guard: the command itself, or with --pid-namespace the
 * namespace's init, which starts it. */
_Noreturn void sv_start_command(const tool_child_spec *sp, pid_t guard, int go);

/* guard.c: the guard, forked by tool_child_start; never returns. */
_Noreturn void sv_guard_start(const tool_child_spec *sp, int in, int out,
                              const char *base);

#endif
