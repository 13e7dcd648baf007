/* SPDX-License-Identifier: MIT */
/* Stepping down without exiting, for --health-cmd and switchover.
 *
 * A step-down walks SD_NONE -> [SD_STOPPING: run's command is being stopped, as
 * on any loss of leadership; we still lead and nobody else can] -> SD_RESIGNING
 * (our key's delete was sent; the successor is elected by the usual protocol
 * once it is gone) -> SD_OUT (no key in the election). From SD_OUT the tool
 * campaigns again, to the back of the queue, unless the health check fails:
 * then it stays out until a check passes. A signal that stops elector during a
 * step-down takes the usual way out (the hooks below let it). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "app/app.h"
#include "text/output.h"

enum { SD_NONE, SD_STOPPING, SD_RESIGNING, SD_OUT };

void app_health_start(struct app *a)
{
    const tool_opts *o = a->o;
    if (!o->health_cmd) return;
    tool_health_spec sp = {.cmd = o->health_cmd,
                           .interval_ms = o->health_interval_ms,
                           .timeout_ms = o->health_timeout_ms,
                           .retries = o->health_retries,
                           .start_ms = o->health_start_ms};
    a->health = tool_health_new(&sp);
    if (!a->health) {
        app_out_of_memory(a);
        return;
    }
    tool_log(LOG_DEBUG,
             "health check every %lld ms (timeout %lld ms, %d failures in a row, "
             "start period %lld ms): %s",
             (long long)o->health_interval_ms, (long long)o->health_timeout_ms,
             o->health_retries, (long long)o->health_start_ms, o->health_cmd);
}

void app_health_free(struct app *a)
{
    tool_health_free(a->health);
    a->health = NULL;
}

int64_t app_health_timeout(const struct app *a)
{
    return a->health ? tool_health_timeout(a->health) : -1;
}

/* A healthy or unhealthy event for -w json. */
static void health_event(struct app *a, tool_health_state st)
{
    if (a->o->fmt != FMT_JSON) return;
    int64_t mono = app_mono_ns();
    tool_event_out e = {.event = st == TOOL_HEALTH_UNHEALTHY ? "unhealthy" : "healthy",
                        .name = a->o->name,
                        .check = tool_health_last(a->health),
                        .failures = tool_health_failures(a->health),
                        .mono_ns = mono,
                        .unix_ms = tool_wall_ms()};
    char *line = tool_event_json(&e);
    if (line) tool_write_line(a->events ? a->events : stdout, line);
    free(line);
}

/* SD_OUT reached: campaign again (to the back), unless unhealthy. */
static void settle(struct app *a)
{
    a->sd_state = SD_OUT;
    if (a->health_out) {
        tool_log(LOG_INFO, "out of the election until the health check passes");
        return;
    }
    a->sd_state = SD_NONE;
    a->exit_code = EXIT_OK;
    app_start_campaign(a);
}

static void resign_now(struct app *a)
{
    a->retry_at_ms = 0; /* settle() campaigns when it is time */
    a->restart_pending = false;
    a->exit_code = EXIT_OK;
    if (a->el && elector_resign(a->el) == 0) {
        a->sd_state = SD_RESIGNING;
        return;
    }
    settle(a);
}

void app_step_down(struct app *a, const char *why)
{
    if (a->stopping || a->sd_state != SD_NONE) return; /* already on the way */
    /* A switchover's step is planned: info; a failed health check: warn. */
    int lvl = strncmp(why, "switchover", 10) ? LOG_WARN : LOG_INFO;
    if (a->child) {
        tool_log(lvl, "%s: stopping %s, then resigning", why, a->o->argv[0]);
        app_stop_child(a);
        a->sd_state = SD_STOPPING;
        return;
    }
    tool_log(lvl, "%s: resigning", why);
    resign_now(a);
}

bool app_stepdown_child_gone(struct app *a)
{
    if (a->sd_state != SD_STOPPING || a->stopping) return false;
    resign_now(a); /* the tree is gone: only now may our key go */
    return true;
}

bool app_stepdown_event(struct app *a, const elector_event *ev)
{
    if (a->sd_state != SD_RESIGNING || a->stopping) return false;
    if (ev->type == ELECTOR_EV_RESIGNED) {
        a->changes++;
        app_remember_leader(a, NULL);
        tool_log(LOG_INFO, "resigned: %.*s deleted", (int)ev->key_len,
                 (const char *)ev->key);
    } else if (ev->type == ELECTOR_EV_FAILED) {
        /* ECANCELED: a waiting campaign ended; else the session died meanwhile. */
        if (ev->reason != ELECTOR_ECANCELED) a->session_dead = true;
        tool_log(LOG_INFO, "left the queue");
    } else {
        return false;
    }
    settle(a);
    return true;
}

bool app_campaign_blocked(struct app *a)
{
    int64_t now = app_now_ms();
    if (!a->health_out && now >= a->holdoff_until_ms) {
        if (a->sd_state == SD_OUT) a->sd_state = SD_NONE; /* the hold-off is over */
        return false;
    }
    if (a->sd_state == SD_NONE) a->sd_state = SD_OUT; /* a retry came due */
    if (a->health_out) {
        tool_log(LOG_DEBUG, "unhealthy: not campaigning");
    } else {
        /* Healthy, held off: the loop campaigns when it ends (said once). */
        bool first = a->retry_at_ms != a->holdoff_until_ms;
        if (!a->retry_at_ms || a->retry_at_ms < a->holdoff_until_ms)
            a->retry_at_ms = a->holdoff_until_ms;
        tool_log(first ? LOG_INFO : LOG_DEBUG,
                 "healthy again: campaigning in %lld ms (hold-off)",
                 (long long)(a->holdoff_until_ms - now));
    }
    return true;
}

/* A leader steps down for its health: out of the election for the hold-off,
 * doubled with each such step-down in a row (up to the max); a candidate that
 * stayed in after its last hold-off for the max starts again from the base. */
static void hold_off(struct app *a)
{
    const tool_opts *o = a->o;
    if (!o->health_holdoff_ms) return;
    int64_t now = app_now_ms();
    if (a->holdoffs && now - a->holdoff_until_ms >= o->health_holdoff_max_ms)
        a->holdoffs = 0; /* stable since the last one */
    int64_t d = o->health_holdoff_ms;
    for (int i = 0; i < a->holdoffs && d < o->health_holdoff_max_ms; i++)
        d *= 2;
    if (d > o->health_holdoff_max_ms) d = o->health_holdoff_max_ms;
    a->holdoffs++;
    a->holdoff_until_ms = now + d;
    tool_log(LOG_INFO,
             "out of the election for at least %lld ms (health step-down %d in a row; "
             "--health-holdoff)",
             (long long)d, a->holdoffs);
}

void app_health_process(struct app *a)
{
    if (!a->health || a->stopping) return;
    static int seen; /* failures already logged */
    int64_t now = app_now_ms();
    bool leading = a->el && elector_is_leader(a->el) && a->sd_state == SD_NONE;
    if (leading && !a->was_leader) { /* newly elected */
        a->elected_ms = now;
        a->lead_fails = 0;
        a->lead_early = false;
    }
    a->was_leader = leading;
    bool changed = tool_health_process(a->health);
    int f = tool_health_failures(a->health);
    if (f > seen) {
        tool_log(f <= a->o->health_retries ? LOG_WARN : LOG_DEBUG,
                 "health check failed (%s): %d of %d", tool_health_last(a->health), f,
                 a->o->health_retries);
        if (leading) {
            if (!a->lead_fails)
                a->lead_early = now - a->elected_ms < a->o->health_interval_ms;
            a->lead_fails += f - seen;
        }
    }
    if (f == 0) a->lead_fails = 0;
    seen = f;
    if (changed) health_event(a, tool_health_get_state(a->health));
    tool_health_state st = tool_health_get_state(a->health);
    if (st == TOOL_HEALTH_UNHEALTHY && !a->health_out) {
        /* A new leader is not stepped down by one failure in its first interval:
         * the next check decides. */
        if (leading && a->lead_early && a->lead_fails < 2) {
            if (changed)
                tool_log(LOG_INFO,
                         "unhealthy, but elected %lld ms ago: one failure in the first "
                         "interval is not enough; the next check decides",
                         (long long)(now - a->elected_ms));
            return;
        }
        a->health_out = true;
        if (leading) hold_off(a);
        app_step_down(a, "unhealthy");
        if (a->sd_state == SD_NONE) a->sd_state = SD_OUT;
    } else if (st == TOOL_HEALTH_HEALTHY && changed) {
        tool_log(a->health_out ? LOG_INFO : LOG_DEBUG, "health check passes (%s)",
                 tool_health_last(a->health));
        if (!a->health_out) return;
        a->health_out = false;
        if (a->sd_state == SD_OUT) {
            if (now >= a->holdoff_until_ms)
                tool_log(LOG_INFO, "healthy again: campaigning");
            settle(a);
        }
    }
}
