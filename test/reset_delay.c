/* SPDX-License-Identifier: MIT */
/* An LD_PRELOAD library for test_tool_run: it widens the start window of `run`'s
 * command to a chosen length, so that a stop sent in it is a test, not a race.
 *
 * The command (tool/supervise/command.c, exec_command) is forked from the guard, which
 * ignores SIGTERM and more; before exec it resets every disposition to SIG_DFL,
 * beginning with signal(SIGHUP, SIG_DFL). This library's signal() sleeps
 * ELECTOR_TEST_RESET_DELAY_MS before that first reset, and only in the command:
 * the one process that calls it with PR_SET_PDEATHSIG set to SIGKILL (the
 * health check's shell has none, elector and the guard have none). Before the
 * sleep it appends its pid to ELECTOR_TEST_RESET_DELAY_MARK, so a test knows the
 * window is open, and fails loudly if the code it hooks changed (no mark). It
 * removes LD_PRELOAD from the environment: the command runs without it.
 *
 * Nothing of this is in the shipped binary: it interposes libc's signal(). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

typedef sighandler_t (*signal_fn)(int, sighandler_t);

sighandler_t signal(int sig, sighandler_t handler)
{
    signal_fn next = (signal_fn)dlsym(RTLD_NEXT, "signal");
    int pdeath = 0;
    const char *ms = getenv("ELECTOR_TEST_RESET_DELAY_MS");
    if (sig == SIGHUP && handler == SIG_DFL && ms &&
        prctl(PR_GET_PDEATHSIG, &pdeath) == 0 && pdeath == SIGKILL) {
        const char *mark = getenv("ELECTOR_TEST_RESET_DELAY_MARK");
        if (mark) {
            int fd = open(mark, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
            if (fd >= 0) {
                char line[32];
                int n = snprintf(line, sizeof(line), "%d\n", (int)getpid());
                if (write(fd, line, (size_t)n) != n) { /* the test sees no mark */
                }
                close(fd);
            }
        }
        unsetenv("LD_PRELOAD");
        long v = strtol(ms, NULL, 10);
        struct timespec ts = {v / 1000, (v % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    return next(sig, handler);
}
