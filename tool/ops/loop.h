/* SPDX-License-Identifier: MIT */
/* The tool's event loop: a table of watchers, each registered once by the part
 * of the program it serves (the etcd client, signals, the HTTP endpoint, the
 * supervised command, systemd, the candidate's timers...). A pass polls the fds
 * the watchers name, sleeps until the nearest of their timeouts (at most a
 * second), then calls every watcher's process in the order they were added:
 * a watcher added after another sees what that one did in the same pass. */
#ifndef ELECTOR_TOOL_LOOP_H
#define ELECTOR_TOOL_LOOP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tool_watcher {
    void *ud; /* given to each of the callbacks */
    /* The fd to poll this pass and the events to poll for (-1: none this pass).
     * NULL: the watcher has no fd. */
    int (*fd)(void *ud, short *events);
    /* Milliseconds until it needs a pass (0: now; -1: none). NULL: never. */
    int64_t (*timeout)(void *ud);
    /* Every pass; revents: what poll saw on its fd (0 when none). */
    void (*process)(void *ud, short revents);
} tool_watcher;

enum { TOOL_LOOP_MAX = 16 };

typedef struct tool_loop {
    tool_watcher w[TOOL_LOOP_MAX];
    int n;
} tool_loop;

/* Adds a watcher after those already added. Returns 0, or -1 when the table is
 * full (a program error: TOOL_LOOP_MAX is sized for the tool's parts). */
int tool_loop_add(tool_loop *l, tool_watcher w);
/* The nearest of the watchers' timeouts in milliseconds (-1: none). */
int64_t tool_loop_timeout(const tool_loop *l);
/* One pass: poll, then process every watcher. */
void tool_loop_pass(tool_loop *l);
/* Passes until *done. */
void tool_loop_run(tool_loop *l, const bool *done);

#endif
