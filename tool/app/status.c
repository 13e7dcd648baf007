/* SPDX-License-Identifier: MIT */
/* How the tool tells others what it is doing:
 *
 * - The follower: campaign, run and lock follow the election's leader with the
 *   library's observer, so that GET /leader names the leader while this process
 *   waits (the election itself only knows its predecessor). While this process
 *   leads, its own belief is what counts and the follower's events are ignored.
 * - systemd (sd_notify's protocol, notify.c): READY=1 once the campaign reached
 *   etcd (observe: once the observer reported the leader), STATUS= on every change of
 *   what the tool does, WATCHDOG=1 every $WATCHDOG_USEC/2 from the event loop,
 *   STOPPING=1 when it begins to stop.
 * - The HTTP view (--http): what /leader, /healthz and /metrics show, filled
 *   from the app for ops/http.c (app_fill_view). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "app/app.h"
#include "ops/http.h"
#include "ops/notify.h"
#include "text/escape.h"

/* ---------------------------------------------------------------- follower */

static void on_follow(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    struct app *a = ud;
    if (a->el && elector_is_leader(a->el)) return; /* our own belief counts */
    if (ev->type == ELECTOR_EV_LEADER) {
        app_remember_leader(&a->leader, ev);
    } else if (ev->type == ELECTOR_EV_FAILED) {
        /* EPROTO only: the server broke the protocol. The election goes on;
         * /leader then knows only what the election itself knows. */
        tool_log(LOG_WARN, "following the leader failed: %s", ev->detail);
        app_remember_leader(&a->leader, NULL);
    } else {
        app_remember_leader(&a->leader, NULL);
    }
}

void app_start_follow(struct app *a)
{
    a->leader.follow = elector_observe(a->etcd, a->o->name, on_follow, a);
    if (!a->leader.follow) tool_log(LOG_WARN, "cannot follow the leader: out of memory");
}

/* The election's events that the status needs: the key we wait behind. */
void app_note_event(struct app_leader *l, const elector_event *ev)
{
    free(l->pred);
    l->pred = NULL;
    l->predlen = 0;
    if (ev->type != ELECTOR_EV_WAITING || !ev->key) return;
    l->pred = malloc(ev->key_len + 1);
    if (!l->pred) return;
    memcpy(l->pred, ev->key, ev->key_len);
    l->pred[ev->key_len] = 0;
    l->predlen = ev->key_len;
}

/* ---------------------------------------------------------------- systemd */

void app_notify_open(struct app_systemd *sd)
{
    char err[300];
    sd->notify = tool_notify_open(err, sizeof(err));
    if (*err) tool_log(LOG_WARN, "%s; systemd is not told anything", err);
    if (sd->notify && tool_notify_watchdog_ms(sd->notify))
        tool_log(LOG_DEBUG, "systemd watchdog: WATCHDOG=1 every %lld ms",
                 (long long)tool_notify_watchdog_ms(sd->notify));
}

/* A key for the status line: escaped (no newline can end the STATUS= field)
 * and cut at 100 bytes. */
static void short_key(char *out, size_t cap, const char *k, size_t n)
{
    size_t len = tool_escape(out, cap, k, n);
    if (len >= cap && cap > 4) memcpy(out + cap - 4, "...", 4);
}

static void fmt_time(char *out, size_t cap, int64_t unix_ms)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, cap, "?");
}

/* What the tool is doing, in one line. */
static void status_line(const struct app *a, char *out, size_t cap)
{
    char key[104], pred[104], since[32];
    key[0] = pred[0] = since[0] = 0;
    if (a->leader.has_leader) {
        short_key(key, sizeof(key), a->leader.lkey, a->leader.lklen);
        fmt_time(since, sizeof(since), a->leader.lsince_ms);
    }
    const char *name = a->o->name;
    if (a->stopping || a->done) {
        snprintf(out, cap, "stopping");
    } else if (a->o->cmd == CMD_OBSERVE) {
        if (!a->leader.leader_looked)
            snprintf(out, cap, "observing %s: reading the leader", name);
        else if (a->leader.has_leader)
            snprintf(out, cap, "observing %s: leader %s (token %lld) since %s%s", name,
                     key, (long long)a->leader.ltoken, since,
                     a->leader.lsince_kind == TOOL_SINCE_FIRST_SEEN ? " or before" : "");
        else
            snprintf(out, cap, "observing %s: no leader", name);
    } else if (a->el && elector_is_leader(a->el)) {
        snprintf(out, cap, "%s %s since %s as %s (token %lld)",
                 a->o->cmd == CMD_LOCK ? "holding the lock" : "leading", name, since, key,
                 (long long)a->leader.ltoken);
    } else if (a->start_retries && !a->joined) {
        snprintf(out, cap,
                 "etcd unreachable: retrying to campaign for %s (%d failed attempt%s)",
                 name, a->start_retries, a->start_retries == 1 ? "" : "s");
    } else if (a->retry_at_ms) {
        snprintf(out, cap, "not campaigning: campaigning again for %s shortly", name);
    } else if (!a->joined) {
        snprintf(out, cap, "connecting to etcd to campaign for %s", name);
    } else if (a->leader.pred) {
        short_key(pred, sizeof(pred), a->leader.pred, a->leader.predlen);
        if (a->leader.has_leader && a->leader.lklen == a->leader.predlen &&
            !memcmp(a->leader.lkey, a->leader.pred, a->leader.predlen))
            snprintf(out, cap, "waiting behind the leader %s (token %lld) for %s", key,
                     (long long)a->leader.ltoken, name);
        else if (a->leader.has_leader)
            snprintf(out, cap, "waiting behind %s for %s; leader %s (token %lld)", pred,
                     name, key, (long long)a->leader.ltoken);
        else
            snprintf(out, cap, "waiting behind %s for %s", pred, name);
    } else {
        snprintf(out, cap, "campaigning for %s", name);
    }
}

/* Each pass: the status if it changed, the watchdog's ping when due. */
static void notify_process(void *ud, short revents)
{
    (void)revents;
    struct app *a = ud;
    if (!a->systemd.notify) return;
    int64_t now = app_now_ms();
    char st[sizeof(a->systemd.notified_status)], msg[sizeof(st) + 64];
    status_line(a, st, sizeof(st));
    /* Ready: the campaign reached etcd; observe: the observer's first answer. */
    bool ready = !a->systemd.notified_ready &&
                 (a->o->cmd == CMD_OBSERVE ? a->leader.leader_looked : a->joined);
    bool stopping = !a->systemd.notified_stopping && (a->stopping || a->done);
    if (ready || stopping || strcmp(st, a->systemd.notified_status) != 0) {
        snprintf(msg, sizeof(msg), "%s%sSTATUS=%s", ready ? "READY=1\n" : "",
                 stopping ? "STOPPING=1\n" : "", st);
        if (tool_notify_send(a->systemd.notify, msg) == 0 || !ready) {
            a->systemd.notified_ready |= ready;
            a->systemd.notified_stopping |= stopping;
            snprintf(a->systemd.notified_status, sizeof(a->systemd.notified_status), "%s",
                     st);
        }
    }
    tool_notify_tick(a->systemd.notify, now);
}

static int64_t notify_timeout(void *ud)
{
    const struct app *a = ud;
    return tool_notify_timeout(a->systemd.notify, app_now_ms());
}

tool_watcher app_notify_watcher(struct app *a)
{
    return (tool_watcher){a, NULL, notify_timeout, notify_process};
}

void app_notify_stop(struct app_systemd *sd)
{
    if (sd->notify && !sd->notified_stopping) {
        tool_notify_send(sd->notify, "STOPPING=1\nSTATUS=stopping");
        sd->notified_stopping = true;
    }
    tool_notify_free(sd->notify);
    sd->notify = NULL;
}

/* ---------------------------------------------------------------- the HTTP view */

/* --http: the view of /leader, /healthz and /metrics (a tool_view_fn; ud: app). */
void app_fill_view(void *ud, tool_view *v)
{
    struct app *a = ud;
    memset(v, 0, sizeof(*v));
    elector_etcd_get_stats(a->etcd, &a->web.view_st);
    v->etcd = &a->web.view_st;
    v->name = a->o->name;
    v->is_leader = a->el && elector_is_leader(a->el);
    if (a->s) {
        elector_session_get_stats(a->s, &a->web.view_ka);
        v->ka = &a->web.view_ka;
        v->session_healthy = elector_session_alive(a->s);
        int64_t left = elector_session_deadline_ns(a->s) - elector_now_ns();
        v->lease_remaining_s = left > 0 ? (double)left / 1e9 : 0;
    } else {
        v->session_healthy = a->obs && *elector_etcd_current_endpoint(a->etcd);
    }
    v->has_leader = a->leader.has_leader;
    if (a->leader.has_leader) {
        v->key = (const uint8_t *)a->leader.lkey;
        v->key_len = a->leader.lklen;
        v->value = (const uint8_t *)a->leader.lval;
        v->value_len = a->leader.lvlen;
        v->token = a->leader.ltoken;
        v->lease = a->leader.llease;
        v->since_unix_ms = a->leader.lsince_ms;
        v->since_kind = a->leader.lsince_kind;
    }
    v->leadership_changes = a->changes;
    v->leader_changes = a->leader.leader_changes;
    v->start_retries = a->start_retries_total;
    v->version = elector_version();
    v->alarm_on = a->alarm_on;
    v->alarm_refusals = a->alarm_refusals;
    v->restores = a->restores;
    if (a->hc.health) {
        v->health = tool_health_state_name(tool_health_get_state(a->hc.health));
        v->health_failures = tool_health_failures(a->hc.health);
    }
}
