/* SPDX-License-Identifier: MIT */
/* The candidate's watchers in the tool's loop (ops/loop.h): the supervised
 * command, the health checks, and the campaign's own timers (--timeout, a
 * campaign again after a pause). leader_cmd.c and health.c report what they see to
 * these callers, which hand it to decide.c, the one that decides: the reports
 * go up by return value, the decisions down by call. */
#include <poll.h>
#include "app/app.h"

static int child_fd(void *ud, short *events)
{
    const struct app *a = ud;
    *events = POLLIN;
    return a->sup.child ? tool_child_fd(a->sup.child) : -1;
}

static int64_t child_timeout(void *ud)
{
    const struct app *a = ud;
    if (!a->sup.child) return -1;
    /* Every 100 ms at most: the command's deadline follows the session's. */
    int64_t ct = tool_child_timeout_ms(a->sup.child); /* the watch on the guard */
    return ct >= 0 && ct < 100 ? ct : 100;
}

static void child_process(void *ud, short revents)
{
    (void)revents; /* the guard's pipe is read by tool_child_poll */
    struct app *a = ud;
    if (app_check_child(a)) app_child_gone(a);
}

tool_watcher app_child_watcher(struct app *a)
{
    return (tool_watcher){a, child_fd, child_timeout, child_process};
}

static int64_t health_timeout(void *ud)
{
    const struct app *a = ud;
    return a->hc.health ? tool_health_timeout(a->hc.health) : -1;
}

static void health_process(void *ud, short revents)
{
    (void)revents;
    struct app *a = ud;
    app_health_report r;
    if (app_health_process(a, &r)) app_on_health(a, &r);
}

tool_watcher app_health_watcher(struct app *a)
{
    return (tool_watcher){a, NULL, health_timeout, health_process};
}

static int64_t until(int64_t at_ms, int64_t now)
{
    return at_ms > now ? at_ms - now : 0;
}

/* --timeout's end (wait_until_ms), a campaign after a pause (retry_at_ms). */
static int64_t timers_timeout(void *ud)
{
    const struct app *a = ud;
    int64_t now = app_now_ms(), t = -1;
    if (a->retry_at_ms) t = until(a->retry_at_ms, now);
    if (a->wait_until_ms && (t < 0 || until(a->wait_until_ms, now) < t))
        t = until(a->wait_until_ms, now);
    return t;
}

static void timers_process(void *ud, short revents)
{
    (void)revents;
    struct app *a = ud;
    if (a->wait_until_ms && app_now_ms() >= a->wait_until_ms && !a->stopping && !a->done)
        app_give_up_waiting(a, NULL);
    if (a->retry_at_ms && app_now_ms() >= a->retry_at_ms && !a->stopping) {
        a->retry_at_ms = 0;
        app_start_campaign(a);
    }
}

tool_watcher app_timers_watcher(struct app *a)
{
    return (tool_watcher){a, NULL, timers_timeout, timers_process};
}
