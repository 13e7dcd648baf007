/* SPDX-License-Identifier: MIT */
/* Supervision of `elector run`'s command: a guard process that owns the command's
 * whole process tree.
 *
 * The command is not elector's child. A guard process (forked from elector, no
 * exec) starts it and enforces the leadership deadline on its own clock
 * (a CLOCK_BOOTTIME timerfd, read through elector_now_ns(), so a suspended host
 * counts). elector tells the guard each new validity deadline over a pipe; the
 * guard sends SIGTERM to the command's process group at deadline - grace and
 * kills the whole tree at the deadline unless a later deadline arrived.
 *
 * What the guard guarantees:
 *   - It runs in a session of its own (setsid): signals to elector's process
 *     group or session (^Z, ^C, kill -STOP -PGID, kill -KILL -PGID, a closed
 *     terminal) do not reach it. The command runs in the guard's session, in a
 *     process group of its own, without a controlling terminal (so reading a
 *     terminal on stdin does not stop it with SIGTTIN).
 *   - The tree is contained: in a cgroup v2 of its own when the process may
 *     create one ("cgroup": cgroup.kill ends every member at once, wherever it
 *     moved in the process tree), and always with the guard as child subreaper
 *     ("subreaper": orphaned descendants are reparented to the guard, which
 *     kills every descendant it finds in /proc until it has no child left).
 *     Either way, a descendant that left the command's process group dies too.
 *   - The command starts clean: forked with every signal blocked (a stop sent
 *     before it resets the guard's SIG_IGN dispositions stays pending), then
 *     every disposition SIG_DFL, an empty mask, no fd above 2, exec.
 *   - "Gone" means reaped: the guard reports the end only when it has no child
 *     left, so elector releases the lease only after the whole tree is gone.
 *   - elector dies (SIGKILL, OOM, crash): EOF on the pipe; the guard stops the
 *     tree (SIGTERM, then SIGKILL after grace, never after the deadline), and
 *     then calls the release hook (elector's: revoke the lease on a connection
 *     of its own), so the successor need not wait for the TTL.
 *   - The guard dies: the command has PR_SET_PDEATHSIG(SIGKILL) on it; elector,
 *     a subreaper too, sees the guard gone, kills the cgroup and every
 *     descendant of its own, and reports TOOL_CHILD_GUARD_DIED.
 *   - The guard stops answering (SIGSTOPped, stuck): elector pings it every
 *     ping_ns over a pipe that never blocks elector; a ping unanswered for
 *     answer_ns, a due stop the guard has not shown to act on within 100 ms,
 *     or a ping unanswered for 100 ms from 100 ms before the deadline, and
 *     elector kills the tree and the guard itself (TOOL_CHILD_GUARD_HUNG).
 *   - The guard is stopped and elector dies: the guard has
 *     PR_SET_PDEATHSIG(SIGCONT), so the kernel resumes it; it reads the EOF and
 *     stops the tree as when elector dies alone.
 *   - With pid_ns, the command runs below an init that is PID 1 of a PID
 *     namespace of its own; the init has PDEATHSIG, so when the guard dies the
 *     kernel kills the whole namespace.
 * What it cannot do: without pid_ns, if elector and the guard are both
 * SIGKILLed, descendants of the command (in their cgroup, if there is one)
 * survive until someone else kills them; if both are stopped, the command runs
 * on; a process stuck in uninterruptible sleep cannot be reaped, and the guard
 * waits for it. The fencing token covers these. */
#ifndef ELECTOR_TOOL_SUPERVISE_H
#define ELECTOR_TOOL_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

typedef struct tool_child tool_child;

/* Why the command ended. */
typedef enum tool_child_cause {
    TOOL_CHILD_RUNNING = 0,
    TOOL_CHILD_EXITED,     /* it ended on its own */
    TOOL_CHILD_STOPPED,    /* elector asked (tool_child_stop/_signal/_free) */
    TOOL_CHILD_DEADLINE,   /* the guard stopped it: the deadline came first */
    TOOL_CHILD_ORPHANED,   /* elector was gone (only the guard sees this) */
    TOOL_CHILD_GUARD_DIED, /* the guard died; elector killed the tree itself */
    TOOL_CHILD_GUARD_HUNG  /* the guard stopped answering (SIGSTOPped, stuck):
                              elector killed the tree and the guard itself */
} tool_child_cause;

typedef struct tool_child_spec {
    char *const *argv;    /* the command (PATH lookup) */
    char *const *env_add; /* "NAME=VALUE" entries added to the environment, NULL-ended */
    int64_t deadline_ns;  /* validity deadline, on elector_now_ns()'s clock */
    int64_t grace_ns;     /* SIGTERM this long before the deadline */
    /* Runs in the guard once the tree is gone, when elector is gone or the
     * deadline passed: nobody can act on the lease any more, so releasing it
     * lets the successor start at once. May be NULL. */
    void (*release)(void *ud);
    void *ud;
    /* Run the command under an init of its own as PID 1 of a new PID namespace
     * (with its own /proc): when that init dies, the kernel kills every process
     * of the namespace, so the tree cannot outlive elector and the guard even
     * when both are SIGKILLed. Needs CAP_SYS_ADMIN. */
    bool pid_ns;
    /* elector's watch on the guard: a ping every ping_ns (default 1 s); a
     * guard that leaves one unanswered for answer_ns (default 3 pings), or for
     * 100 ms once a stop or the deadline is due, is killed with the tree. */
    int64_t ping_ns, answer_ns;
} tool_child_spec;

/* Starts the guard, which starts the command. Returns NULL with a message in err. */
tool_child *tool_child_start(const tool_child_spec *spec, char *err, size_t cap);

/* Moves the deadline (the guard takes the latest). */
void tool_child_deadline(tool_child *c, int64_t deadline_ns);

/* Stops the command: SIGTERM to its group now, the whole tree killed at
 * kill_at_ns (or at the deadline, whichever comes first). */
void tool_child_stop(tool_child *c, int64_t kill_at_ns);

/* Forwards a signal to the command's process group (SIGKILL: to the whole tree);
 * the tree is killed grace later if it is still there. */
void tool_child_signal(tool_child *c, int sig);

/* A descriptor that becomes readable when the guard has news (poll it). */
int tool_child_fd(const tool_child *c);

/* When tool_child_poll must next run for the watch on the guard, in ms from
 * now (-1: no need). */
int64_t tool_child_timeout_ms(const tool_child *c);

/* "cgroup", "subreaper" (each may be preceded by "pid namespace, "), or ""
 * until the guard has reported. */
const char *tool_child_containment(const tool_child *c);

/* Non-blocking: 1 when the command's whole tree is gone (and the guard too), with
 * *status its exit code (128 + N if killed by signal N; for GUARD_DIED, the
 * guard's) and *cause why; 0 while it runs. */
int tool_child_poll(tool_child *c, int *status, tool_child_cause *cause);

/* Stops the command if it still runs (kill at most grace later), waits until the
 * tree is gone, frees. The release hook is not called: elector releases. */
void tool_child_free(tool_child *c);

/* Makes the calling process a child subreaper, so that if the guard dies the
 * command's orphans come to us, and notes the children it already has (a
 * shell's `2> >(logger)`), which are never killed. Call once, before the first
 * tool_child_start. */
void tool_child_init(void);

/* In a child about to exec a command: every signal's disposition to SIG_DFL
 * (also glibc's internal ones, which signal() refuses) and an empty mask, so that
 * nothing ignored or blocked here is inherited. */
void tool_reset_signals(void);

/* The signals that ask elector to stop: SIGINT, SIGTERM and SIGHUP, and SIGCHLD
 * too when with_chld (the event loop and the health check's reaper take all
 * four). The one place that lists them; set is emptied first. */
void tool_stop_signals(sigset_t *set, bool with_chld);

/* Whether this process may run a command with pid_ns (a trial child creates
 * the namespaces): 0, or -1 with the reason in err. */
int tool_child_check_pid_ns(char *err, size_t cap);

/* Whether execvp() could run cmd, as found now: a name with a '/' as is, else
 * each directory of $PATH (the default path if unset). Returns 0, or the shell's
 * status with the reason in err: 127 not found, 126 found but not executable
 * (a directory, no permission). Checked before campaigning: the command is
 * then run as it is, and its own exec failure still gives 126/127. */
int tool_child_check_cmd(const char *cmd, char *err, size_t cap);

/* Exit status of a wait() status: the code, or 128 + signal. */
int tool_exit_code(int wstatus);

/* The containment parts, shared with the health checks (tool/supervise/healthcheck.c). */

/* The cgroup v2 directory this process is in ("" if there is no cgroup2 mount). */
void tool_cgroup_base(char *out, size_t cap);
/* Kills every member of the cgroup cg (cgroup.kill, else one by one); "" is a no-op. */
void tool_cgroup_kill(const char *cg);
/* Removes the cgroup cg once it is empty (retries a while); "" is a no-op. */
void tool_cgroup_remove(const char *cg);
/* Kills the cgroup cg's members and every descendant of the calling process
 * (found in /proc; a subreaper has them all), reaping each, until none is
 * left or max_ms passed (-1: no limit). Returns 0 when none is left. */
int tool_kill_tree(const char *cg, int64_t max_ms);

#endif
