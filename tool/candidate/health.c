/* SPDX-License-Identifier: MIT */
/* --health-cmd: runs the checks (supervise/healthcheck.c), counts the failures
 * of a leader, says what it sees (logs, -w json healthy/unhealthy) and reports
 * each result to its caller (candidate/watchers.c), which hands it to decide.c's
 * app_on_health, the one to decide: step down, stay out, campaign again. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "app/app.h"
#include "text/output.h"

bool app_health_start(struct app_hc *hc, const tool_opts *o)
{
    if (!o->health_cmd) return true;
    tool_health_spec sp = {.cmd = o->health_cmd,
                           .interval_ms = o->health_interval_ms,
                           .timeout_ms = o->health_timeout_ms,
                           .retries = o->health_retries,
                           .start_ms = o->health_start_ms};
    hc->health = tool_health_new(&sp);
    if (!hc->health) return false;
    tool_log(LOG_DEBUG,
             "health check every %lld ms (timeout %lld ms, %d failures in a row, "
             "start period %lld ms): %s",
             (long long)o->health_interval_ms, (long long)o->health_timeout_ms,
             o->health_retries, (long long)o->health_start_ms, o->health_cmd);
    return true;
}

void app_health_free(struct app_hc *hc)
{
    tool_health_free(hc->health);
    hc->health = NULL;
}

/* A healthy or unhealthy event for -w json. */
static void health_event(struct app *a, tool_health_state st)
{
    if (a->o->fmt != FMT_JSON) return;
    int64_t mono = app_mono_ns();
    tool_event_out e = {.event = st == TOOL_HEALTH_UNHEALTHY ? "unhealthy" : "healthy",
                        .name = a->o->name,
                        .check = tool_health_last(a->hc.health),
                        .failures = tool_health_failures(a->hc.health),
                        .mono_ns = mono,
                        .unix_ms = tool_wall_ms()};
    char *line = tool_event_json(&e);
    if (line) tool_write_line(a->out.events ? a->out.events : stdout, line);
    free(line);
}

/* A leader steps down for its health: out of the election for the hold-off,
 * doubled with each such step-down in a row (up to the max); a candidate that
 * stayed in after its last hold-off for the max starts again from the base. */
void app_health_holdoff(struct app_hc *hc, const tool_opts *o)
{
    if (!o->health_holdoff_ms) return;
    int64_t now = app_now_ms();
    if (hc->holdoffs && now - hc->holdoff_until_ms >= o->health_holdoff_max_ms)
        hc->holdoffs = 0; /* stable since the last one */
    int64_t d = o->health_holdoff_ms;
    for (int i = 0; i < hc->holdoffs && d < o->health_holdoff_max_ms; i++)
        d *= 2;
    if (d > o->health_holdoff_max_ms) d = o->health_holdoff_max_ms;
    hc->holdoffs++;
    hc->holdoff_until_ms = now + d;
    tool_log(LOG_INFO,
             "out of the election for at least %lld ms (health step-down %d in a row; "
             "--health-holdoff)",
             (long long)d, hc->holdoffs);
}

bool app_health_process(struct app *a, app_health_report *r)
{
    if (!a->hc.health || a->stopping) return false;
    static int seen; /* failures already logged */
    int64_t now = app_now_ms();
    bool leading = a->el && elector_is_leader(a->el) && a->sd_state == SD_NONE;
    if (leading && !a->hc.was_leader) { /* newly elected */
        a->hc.elected_ms = now;
        a->hc.lead_fails = 0;
        a->hc.lead_early = false;
    }
    a->hc.was_leader = leading;
    bool changed = tool_health_process(a->hc.health);
    int f = tool_health_failures(a->hc.health);
    if (f > seen) {
        tool_log(f <= a->o->health_retries ? LOG_WARN : LOG_DEBUG,
                 "health check failed (%s): %d of %d", tool_health_last(a->hc.health), f,
                 a->o->health_retries);
        if (leading) {
            if (!a->hc.lead_fails)
                a->hc.lead_early = now - a->hc.elected_ms < a->o->health_interval_ms;
            a->hc.lead_fails += f - seen;
        }
    }
    if (f == 0) a->hc.lead_fails = 0;
    seen = f;
    if (changed) health_event(a, tool_health_get_state(a->hc.health));
    tool_health_state st = tool_health_get_state(a->hc.health);
    if (st == TOOL_HEALTH_HEALTHY && changed)
        tool_log(a->hc.health_out ? LOG_INFO : LOG_DEBUG, "health check passes (%s)",
                 tool_health_last(a->hc.health));
    /* What follows is decide.c's to decide: the caller hands it over. */
    *r = (app_health_report){st, changed, leading, now};
    return true;
}
