/* SPDX-License-Identifier: MIT */
/* --health-cmd: a health check run now and then, without blocking the event loop.
 *
 * Each check is `/bin/sh -c CMD`, run under a small reaper process in a process
 * group of its own: stdin is /dev/null, stdout goes to /dev/null, stderr is
 * elector's. Everything a check starts is contained as `run`'s command is: in
 * a cgroup v2 of the checks' own (BASE/elector-health.<elector's pid>.<n>, when
 * elector may create one; cgroup.kill ends every member), and always under
 * the reaper, a child subreaper (a process that left the group with setsid or
 * a double fork is reparented to it, and it kills every descendant it finds).
 * When the check ends, at its timeout (a failure), or when elector frees it or
 * dies (even by SIGKILL: the reaper has PR_SET_PDEATHSIG), the reaper kills
 * the check's group, the cgroup and every descendant, reaps them, and only
 * then exits. The shell has PR_SET_PDEATHSIG too; if the reaper itself is
 * SIGKILLed, elector kills the cgroup.
 *
 * The state follows Docker's HEALTHCHECK: "starting" until a check passes or
 * `retries` failures in a row were counted; failures during the start period
 * are not counted (a pass there still makes it healthy); `retries` consecutive
 * failures make it "unhealthy"; one pass makes it "healthy" again.
 * Unlike Docker, the first check runs at once (not after one interval). */
#ifndef ELECTOR_TOOL_HEALTHCHECK_H
#define ELECTOR_TOOL_HEALTHCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum tool_health_state {
    TOOL_HEALTH_NONE = 0, /* no --health-cmd */
    TOOL_HEALTH_STARTING,
    TOOL_HEALTH_HEALTHY,
    TOOL_HEALTH_UNHEALTHY
} tool_health_state;

/* "none", "starting", "healthy", "unhealthy". */
const char *tool_health_state_name(tool_health_state s);

typedef struct tool_health_spec {
    const char *cmd;     /* shell command */
    int64_t interval_ms; /* from one check's start to the next's */
    int64_t timeout_ms;  /* a check running longer fails */
    int retries;         /* consecutive failures that make it unhealthy */
    int64_t start_ms;    /* start period: failures not counted */
} tool_health_spec;

typedef struct tool_health tool_health;

/* Starts checking (the first check runs at the first tool_health_process). The
 * spec's cmd is copied. NULL when out of memory. */
tool_health *tool_health_new(const tool_health_spec *spec);

/* Kills a running check's group and reaps it; frees. NULL is a no-op. */
void tool_health_free(tool_health *h);

/* Does what is due: reaps a finished check, kills one past its timeout, starts
 * the next. Returns true when the state changed (read it with the getters). */
bool tool_health_process(tool_health *h);

/* Milliseconds until tool_health_process must run again (a running check is
 * polled every 50 ms at most; the loop also wakes on SIGCHLD). */
int64_t tool_health_timeout(const tool_health *h);

tool_health_state tool_health_get_state(const tool_health *h);
int tool_health_failures(const tool_health *h); /* consecutive failures counted */
/* The last check's result in words: "exit status 0", "exit status 1", "timed
 * out after 5000 ms", "killed by signal 9", "cannot start: ..." ("" before the first). */
const char *tool_health_last(const tool_health *h);
pid_t tool_health_pid(const tool_health *h); /* the running check's reaper, or 0 */

#endif
