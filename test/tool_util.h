/* SPDX-License-Identifier: MIT */
/* Helpers shared by the tests that run the elector tool as a process
 * (test_tool.c, test_tool_run.c). */
#ifndef ELECTOR_TEST_TOOL_UTIL_H
#define ELECTOR_TEST_TOOL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "elect_util.h"
#include "etcd_harness.h"
#include "testlib.h"

eh_cluster *start1(void); /* a 1-member etcd */

/* Runs elector to completion; returns its exit status, output in out and err. */
int tool(char **out, char **err, const char *const args[]);

/* Starts elector in the background; its stdout lines are read with
 * eu_child_expect. */
void tool_bg(eu_child *ch, const char *const args[]);

/* Waits for a background elector to exit; returns its exit status (-1: timeout). */
int tool_wait(eu_child *ch, double timeout_s);

/* tool() with an environment of its own (envp: "NAME=VALUE" entries, NULL-ended;
 * it replaces the test's environment). */
int tool_with_env(char **out, char **err, const char *const envp[],
                  const char *const args[]);

/* tool_bg with more: stderr to err_path (if set), variables added to the
 * inherited environment (set: "NAME=VALUE", NULL-ended), stdin from in_fd
 * (if >= 0; else /dev/null). */
typedef struct tool_bg_opts {
    const char *err_path;
    const char *const *set;
    int in_fd;
} tool_bg_opts;
void tool_bg_ex(eu_child *ch, const tool_bg_opts *o, const char *const args[]);

/* Checks the JSON lines of a file the tool wrote (json_check_text); returns
 * the file's contents (malloc'd) or NULL. */
char *check_file(const char *path);

/* Waits until the file at path contains needle; false after timeout_s. */
bool wait_contains(const char *path, const char *needle, double timeout_s);

/* A loopback listener that accepts connections (the kernel does, from the
 * backlog) and never answers; its port in *port. */
int silent_listener(int *port);

bool file_exists(const char *p);
bool wait_file(const char *p, double timeout_s);
char *slurp(const char *p); /* a static buffer: the file's first 4 KiB */
bool pid_alive(pid_t pid);

/* A shell script that writes its pid to DIR/pid, loops, and on SIGTERM writes
 * DIR/term and exits 0. */
void stoppable(char *buf, size_t cap, const char *dir);
pid_t read_pid(const char *dir); /* waits for DIR/pid */

#endif
