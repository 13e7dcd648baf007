/* Supervision of `elector run`'s command.
 *
 * The command is not our direct child: a small guard process (forked from
 * elector, no exec) starts it and enforces the leadership deadline on its own
 * clock. elector tells the guard each new validity deadline over a pipe; the
 * guard sends SIGTERM to the command's process group at deadline - grace and
 * SIGKILL at the deadline unless a later deadline arrived. So the command is
 * gone by the deadline even when elector is frozen (SIGSTOP) or dead:
 *   - elector SIGKILLed: the guard sees EOF on the pipe and stops the command;
 *   - guard SIGKILLed: the command has PR_SET_PDEATHSIG(SIGKILL) on the guard;
 *   - elector SIGSTOPped: no new deadline comes; the guard kills at the old one.
 * CLOCK_MONOTONIC is system wide, so both processes read the same deadline. */
#ifndef ELECTOR_TOOL_SUPERVISE_H
#define ELECTOR_TOOL_SUPERVISE_H

#include <stdint.h>
#include <sys/types.h>

typedef struct tool_child tool_child;

/* Starts argv (PATH lookup) with extra "NAME=VALUE" entries added to the
 * environment (NULL-terminated). Returns NULL with a message in err. */
tool_child *tool_child_start(char *const argv[], char *const env_add[], int64_t deadline_ns,
                             int64_t grace_ns, char *err, size_t cap);

/* Moves the deadline (only forward makes sense; the guard takes the latest). */
void tool_child_deadline(tool_child *c, int64_t deadline_ns);

/* Stops the command: SIGTERM now, SIGKILL at kill_at_ns. */
void tool_child_stop(tool_child *c, int64_t kill_at_ns);

/* Forwards a signal to the command's process group. */
void tool_child_signal(tool_child *c, int sig);

/* The guard's pid, to recognize it in SIGCHLD handling. */
pid_t tool_child_pid(const tool_child *c);

/* Non-blocking: 1 when the command (and the guard) ended, with *status its
 * exit code (or 128 + signal); 0 while it runs. */
int tool_child_poll(tool_child *c, int *status);

/* Kills (SIGKILL) whatever still runs, reaps, frees. */
void tool_child_free(tool_child *c);

#endif
