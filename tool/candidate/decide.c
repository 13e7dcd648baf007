/* SPDX-License-Identifier: MIT */
/* campaign, run and lock: the one file that decides the candidate's next step.
 * It takes the election's events, and the reports of leader_cmd.c (the command
 * ended), health.c (a check's result) and switchover (step down); it
 * campaigns again on a new session (transient failures, --restart), steps down
 * and rejoins. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/app.h"
#include "text/output.h"

/* Failures that may heal by themselves: campaign again, on a new session. */
static bool transient(int err)
{
    return err == ELECTOR_ESESSION || err == ELECTOR_ELEASE || err == ELECTOR_ECLOSED ||
           err == ELECTOR_ENOLEADER || err == ELECTOR_ETIMEDOUT ||
           err == ELECTOR_EUNAVAILABLE || err == ELECTOR_ECONNECT ||
           err == ELECTOR_ERESTORED;
}

/* etcd was reached after failed attempts at start: say so once. */
static void reached(struct app *a)
{
    if (a->start_retries)
        tool_log(LOG_INFO, "etcd reached after %d failed attempt%s", a->start_retries,
                 a->start_retries == 1 ? "" : "s");
    a->start_retries = 0;
}

static void on_elected(struct app *a, const elector_event *ev)
{
    reached(a);
    a->joined = true;
    a->wait_until_ms = 0;
    a->changes++;
    app_remember_leader(&a->leader, ev);
    bool supervised = app_supervised(a->o);
    if (!supervised && a->o->fmt == FMT_SIMPLE) {
        /* The key and the value, as `etcdctl elect` and `etcdctl lock` print them
         * (a lock's value is empty: an empty line); first, as what waits for it
         * reads stdout, then the log line. */
        tool_write_kv(stdout, a->out.stdout_tty, a->o->hex, ev->key, ev->key_len,
                      ev->value, ev->value_len);
    }
    tool_log(LOG_INFO, "%s: %.*s (token %lld)",
             a->o->cmd == CMD_LOCK ? "lock acquired" : "elected", (int)ev->key_len,
             (const char *)ev->key, (long long)ev->token);
    if (a->s && elector_session_helper(a->s) > 0)
        tool_log(LOG_DEBUG, "release helper: pid %d revokes the lease if elector dies",
                 elector_session_helper(a->s));
    else if (a->s && elector_session_helper(a->s) < 0)
        tool_log(LOG_DEBUG,
                 "no release helper (%s): if elector dies, the lease ends by "
                 "its TTL",
                 elector_strerror(elector_session_helper(a->s)));
    /* stdout is the command's; the line above says it on stderr. */
    if (supervised) app_start_child(a, ev);
    app_proclaim_pending(&a->in, a->el); /* lines read while waiting: the latest one */
    if (a->el) {
        elector_election_stats st;
        elector_election_get_stats(a->el, &st);
        tool_log(
            LOG_DEBUG,
            "decided by a %s check (serializable checks: %llu, taken %llu; "
            "fallbacks: error %llu, member %llu, connection %llu, below the "
            "delete %llu, malformed %llu)",
            st.last_decided_by == 2 ? "serializable" : "linearizable",
            (unsigned long long)st.checks_serializable,
            (unsigned long long)st.serializable_taken,
            (unsigned long long)st.fallback_error, (unsigned long long)st.fallback_member,
            (unsigned long long)st.fallback_conn, (unsigned long long)st.fallback_stale,
            (unsigned long long)st.fallback_reply);
    }
}

static void on_lost(struct app *a, const elector_event *ev)
{
    a->changes++;
    app_remember_leader(&a->leader, NULL);
    tool_log(LOG_ERROR, "%s lost: %s", a->o->cmd == CMD_LOCK ? "lock" : "leadership",
             ev->detail);
    a->session_dead = transient(ev->reason) && ev->reason != ELECTOR_ENOLEADER;
    /* The key or the lease is gone (an outside `etcdctl del` or `lease revoke`):
     * a successor may lead already, so the time is up; any grace would be
     * overlap. A deadline approaching (no renewal) still leaves the grace. */
    bool outside = ev->reason == ELECTOR_ENOTLEADER || ev->reason == ELECTOR_ELEASE;
    if (a->sup.child) {
        bool at_once = outside && !a->o->grace_on_loss;
        if (at_once)
            tool_log(LOG_WARN, "%s is gone: killing %s and its descendants at once",
                     ev->reason == ELECTOR_ELEASE ? "our lease" : "our key",
                     a->o->argv[0]);
        app_stop_child(&a->sup, at_once ? 0 : a->o->grace_ms);
        a->exit_code = EXIT_LOST;
        a->restart_pending = a->o->restart;
    } else if (app_supervised(a->o) && a->o->restart) {
        a->retry_at_ms = app_now_ms() + 1000;
    } else {
        a->exit_code = EXIT_LOST;
        a->done = true;
    }
}

/* An etcd alarm (NOSPACE: the database is full; CORRUPT) refuses new leases
 * and writes until an operator clears it: campaign again, backing off from 1 s
 * doubling to 30 s, and say why each time. A leader is not affected: keepalives
 * still work under the alarm. */
static bool alarm_err(int err)
{
    return err == ELECTOR_ENOSPACE || err == ELECTOR_EALARM;
}

static void retry_after_alarm(struct app *a, const elector_event *ev)
{
    int n = a->alarm_retries < 5 ? a->alarm_retries : 5;
    int64_t d = 1000LL << n;
    if (d > 30000) d = 30000;
    a->alarm_retries++;
    a->alarm_refusals++;
    a->alarm_on = true;
    tool_log(LOG_WARN, "%s (%s); campaigning again in %lld ms",
             elector_strerror(ev->reason), ev->detail, (long long)d);
    a->session_dead = true;
    a->retry_at_ms = app_now_ms() + d;
}

static void on_failed(struct app *a, const elector_event *ev)
{
    if (a->stopping) {
        a->done = true;
    } else if (alarm_err(ev->reason)) {
        retry_after_alarm(a, ev);
    } else if (!a->joined && !(a->s && elector_session_lease(a->s)) && !a->o->fail_fast &&
               transient(ev->reason)) {
        /* etcd not reachable yet (at boot, services often start before it):
         * retry with backoff (500 ms doubling up to 30 s, jittered), saying so
         * (a log line, systemd's STATUS=, elector_start_retries_total).
         * --fail-fast: exit 1 at once instead. */
        int64_t d = 500LL << (a->start_retries < 6 ? a->start_retries : 6);
        if (d > 30000) d = 30000;
        d = d / 2 + (int64_t)((uint64_t)random() % (uint64_t)(d / 2 + 1));
        a->start_retries++;
        a->start_retries_total++;
        tool_log(LOG_WARN,
                 "cannot start a session (%s): etcd unreachable; retrying in %.1f s "
                 "(attempt %d; --fail-fast to exit instead)",
                 ev->detail, (double)d / 1000.0, a->start_retries);
        a->session_dead = true;
        a->retry_at_ms = app_now_ms() + d;
    } else if (!a->joined && !(a->s && elector_session_lease(a->s))) {
        /* Never reached etcd, and --fail-fast or an error that waiting cannot
         * fix (TLS, authentication): say so at once, as `leader` does. */
        app_fail(a, "cannot start a session", ev);
        a->exit_code = EXIT_ERROR;
        a->done = true;
    } else if (transient(ev->reason)) {
        tool_log(LOG_WARN,
                 "campaign interrupted (%s); campaigning again on a new session",
                 ev->detail);
        a->session_dead = true;
        a->retry_at_ms = app_now_ms() + 1000;
    } else {
        app_fail(a, "campaign failed", ev);
        a->exit_code = EXIT_ERROR;
        a->done = true;
    }
}

/* lock -n N: an event of one of the slots while none is won yet. Returns true
 * when the event is to be handled as the lock's own (the slot just won, or the
 * first failure); the other slots' events are consumed here. */
static bool slot_event(struct app *a, elector_election *el, const elector_event *ev)
{
    if (a->el) return false; /* a slot was won: the others are being resigned */
    switch (ev->type) {
    case ELECTOR_EV_ELECTED:
        a->el = el;
        for (int i = 0; i < a->slots.n; i++)
            if (a->slots.els[i] != el) elector_resign(a->slots.els[i]);
        return true;
    case ELECTOR_EV_WAITING:
        reached(a);
        a->joined = true;
        if (++a->slots.waiting == a->slots.n) {
            tool_log(LOG_INFO, "all %d slots of %s are taken: waiting for one",
                     a->slots.n, a->o->name);
            if (a->o->no_wait && !a->stopping) app_give_up_waiting(a, "--no-wait");
        }
        return false;
    case ELECTOR_EV_FAILED:
        if (a->stopping) {
            a->done = true;
            return false;
        }
        return !a->slots.failed++; /* the first says what happened */
    default:
        return false;
    }
}

void app_on_event(elector_election *el, const elector_event *ev, void *ud)
{
    struct app *a = ud;
    if (a->slots.els && el != a->el && !slot_event(a, el, ev)) return;
    if (a->o->fmt == FMT_JSON && app_event(a, ev)) app_event_lost(a, ev, errno);
    app_note_event(&a->leader, ev);
    if (ev->reason == ELECTOR_ERESTORED) a->restores++;
    if (app_stepdown_event(a, ev)) return; /* a step-down: out of the queue, or back */
    switch (ev->type) {
    case ELECTOR_EV_WAITING:
        a->alarm_retries = 0;
        a->alarm_on = false;
        reached(a);
        a->joined = true;
        if (ev->reason == ELECTOR_EBLOCKED)
            tool_log(LOG_ERROR, "%s", ev->detail); /* it waits on, until deleted */
        else
            tool_log(LOG_INFO, "waiting behind %.*s", (int)ev->key_len,
                     (const char *)ev->key);
        if (a->o->no_wait && !a->stopping) app_give_up_waiting(a, "--no-wait");
        break;
    case ELECTOR_EV_ELECTED:
        a->alarm_retries = 0;
        a->alarm_on = false;
        on_elected(a, ev);
        break;
    case ELECTOR_EV_PROCLAIMED:
        if (ev->reason)
            app_fail(a, "proclaim failed", ev);
        else
            app_remember_leader(&a->leader, ev);
        if (!ev->reason)
            tool_log(LOG_DEBUG, "proclaimed a value of %zu bytes", ev->value_len);
        app_proclaim_pending(&a->in, a->el);
        break;
    case ELECTOR_EV_LOST:
        on_lost(a, ev);
        break;
    case ELECTOR_EV_RESIGNED:
        a->changes++;
        app_remember_leader(&a->leader, NULL);
        tool_log(LOG_DEBUG, "resigned: %.*s deleted", (int)ev->key_len,
                 (const char *)ev->key);
        if (a->restart_pending && !a->stopping) {
            a->restart_pending = false;
            app_schedule_restart(a);
        } else if (a->stopping && !a->sup.child) {
            a->done = true;
            if (!ev->reason) a->handed_over_ns = app_mono_ns();
        }
        break;
    case ELECTOR_EV_FAILED:
        on_failed(a, ev);
        break;
    default:
        break;
    }
}

/* Campaigns on the current session, or on a new one if it died. The new session
 * is granted asynchronously (the campaign waits for it), so the loop keeps
 * serving signals and HTTP; a failed grant comes back as a FAILED event. */
void app_start_campaign(struct app *a)
{
    if (app_campaign_blocked(a)) return; /* unhealthy: app_on_health campaigns later */
    if (a->session_dead) {
        app_free_slots(&a->slots, a->el);
        if (a->el) elector_election_free(a->el);
        a->el = NULL;
        if (a->s) elector_session_close(a->s);
        elector_session_config sc;
        elector_session_config_init(&sc);
        if (a->o->ttl_s) sc.ttl_s = a->o->ttl_s;
        /* A supervised command: a session that dies must keep its lease until the
         * command's tree is reaped; closing it (here, cleanup) revokes it then. */
        sc.manual_release = app_supervised(a->o);
        /* Without a command (campaign, lock): if elector dies, its release
         * helper revokes the lease at once, as run's guard does after the
         * command's tree. With a command, the guard does it, after the tree. */
        sc.release_on_exit = !app_supervised(a->o) && !a->o->no_release;
        a->s = elector_session_new(a->etcd, &sc, NULL, NULL);
        if (!a->s) {
            app_out_of_memory(a);
            return;
        }
        a->session_dead = false;
    }
    if (a->o->limit > 1 && !a->el) {
        if (!a->slots.els) app_campaign_slots(a, app_on_event);
        return;
    }
    if (!a->el) a->el = elector_election_new(a->s, a->o->name, app_on_event, a);
    tool_log(LOG_DEBUG, "campaigning for %s with a value of %zu bytes", a->o->name,
             a->vlen);
    int rc = a->el ? elector_campaign(a->el, a->value, a->vlen) : ELECTOR_ENOMEM;
    if (rc) app_fatal_etcd(a, rc, "cannot campaign");
}

/* --restart: campaign again after a pause. Quick failures back off exponentially
 * (200 ms doubling up to 30 s, each drawn from [d/2, d] so that candidates
 * restarting together spread out); a command that ran 10 s or more resets it. */
void app_schedule_restart(struct app *a)
{
    if (app_now_ms() - a->sup.child_start_ms >= 10000) a->sup.restarts = 0;
    int64_t d = 200LL << (a->sup.restarts < 8 ? a->sup.restarts : 8);
    if (d > 30000) d = 30000;
    a->sup.restarts++;
    d = d / 2 + (int64_t)((uint64_t)random() % (uint64_t)(d / 2 + 1));
    tool_log(LOG_INFO, "campaigning again in %lld ms", (long long)d);
    a->retry_at_ms = app_now_ms() + d;
}

/* --timeout passed (why NULL), or --no-wait and another leads: stop waiting,
 * delete our key (the resign), exit EXIT_TIMEOUT. */
void app_give_up_waiting(struct app *a, const char *why)
{
    char t[64];
    if (!why) {
        snprintf(t, sizeof(t), "--timeout %.3gs passed",
                 (double)a->o->timeout_ms / 1000.0);
        why = t;
    } else if (a->o->cmd == CMD_LOCK) {
        why = "--no-wait: another holds it";
    } else {
        why = "--no-wait: another leads";
    }
    a->wait_until_ms = 0;
    a->retry_at_ms = 0;
    bool cmd = app_supervised(a->o);
    tool_log(LOG_ERROR, "%s %s %s: %s%s%s (exit %d)",
             a->o->cmd == CMD_LOCK ? "lock" : "not elected for", a->o->name,
             a->o->cmd == CMD_LOCK ? "not acquired" : "(gave up)", why,
             cmd ? "; not started: " : "", cmd ? a->o->argv[0] : "", EXIT_TIMEOUT);
    a->exit_code = EXIT_TIMEOUT;
    a->stopping = true;
    if (a->el && elector_resign(a->el) == 0) return; /* done on FAILED (canceled) */
    a->done = true;
}

/* ---------------------------------------------------------------- stepping down
 *
 * Stepping down without exiting, for --health-cmd and switchover. A step-down
 * walks SD_NONE -> [SD_STOPPING: run's command is being stopped, as on any loss
 * of leadership; we still lead and nobody else can] -> SD_RESIGNING (our key's
 * delete was sent; the successor is elected by the usual protocol once it is
 * gone) -> SD_OUT (no key in the election). From SD_OUT the tool campaigns
 * again, to the back of the queue, unless the health check fails: then it stays
 * out until a check passes. A signal that stops elector during a step-down
 * takes the usual way out (the hooks below let it). */

/* SD_OUT reached: campaign again (to the back), unless unhealthy. */
static void settle(struct app *a)
{
    a->sd_state = SD_OUT;
    if (a->hc.health_out) {
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
    if (a->sup.child) {
        tool_log(lvl, "%s: stopping %s, then resigning", why, a->o->argv[0]);
        app_stop_child(&a->sup, a->o->grace_ms);
        a->sd_state = SD_STOPPING;
        return;
    }
    tool_log(lvl, "%s: resigning", why);
    resign_now(a);
}

static bool stepdown_child_gone(struct app *a)
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
        app_remember_leader(&a->leader, NULL);
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
    if (!a->hc.health_out && now >= a->hc.holdoff_until_ms) {
        if (a->sd_state == SD_OUT) a->sd_state = SD_NONE; /* the hold-off is over */
        return false;
    }
    if (a->sd_state == SD_NONE) a->sd_state = SD_OUT; /* a retry came due */
    if (a->hc.health_out) {
        tool_log(LOG_DEBUG, "unhealthy: not campaigning");
    } else {
        /* Healthy, held off: the loop campaigns when it ends (said once). */
        bool first = a->retry_at_ms != a->hc.holdoff_until_ms;
        if (!a->retry_at_ms || a->retry_at_ms < a->hc.holdoff_until_ms)
            a->retry_at_ms = a->hc.holdoff_until_ms;
        tool_log(first ? LOG_INFO : LOG_DEBUG,
                 "healthy again: campaigning in %lld ms (hold-off)",
                 (long long)(a->hc.holdoff_until_ms - now));
    }
    return true;
}

/* leader_cmd.c reports: the command's whole tree is gone (it said why). */
void app_child_gone(struct app *a)
{
    if (stepdown_child_gone(a)) return; /* resigns, and maybe rejoins */
    /* The whole tree is gone: only now may the lease (our key) be released. */
    if (a->o->restart && !a->stopping) {
        a->restart_pending = true;
        if (a->el && elector_resign(a->el) == 0) return; /* campaign again on RESIGNED */
        a->restart_pending = false;
        app_schedule_restart(a);
        a->exit_code = 0;
        return;
    }
    a->stopping = true;
    if (a->el && elector_resign(a->el) == 0) return;
    a->done = true;
}

/* health.c reports a check's result: st, changed (a new state), whether we lead
 * (not in a step-down), and its pass's time. */
void app_on_health(struct app *a, const app_health_report *r)
{
    tool_health_state st = r->st;
    bool changed = r->changed, leading = r->leading;
    int64_t now = r->now;
    if (st == TOOL_HEALTH_UNHEALTHY && !a->hc.health_out) {
        /* A new leader is not stepped down by one failure in its first interval:
         * the next check decides. */
        if (leading && a->hc.lead_early && a->hc.lead_fails < 2) {
            if (changed)
                tool_log(LOG_INFO,
                         "unhealthy, but elected %lld ms ago: one failure in the first "
                         "interval is not enough; the next check decides",
                         (long long)(now - a->hc.elected_ms));
            return;
        }
        a->hc.health_out = true;
        if (leading) app_health_holdoff(&a->hc, a->o);
        app_step_down(a, "unhealthy");
        if (a->sd_state == SD_NONE) a->sd_state = SD_OUT;
    } else if (st == TOOL_HEALTH_HEALTHY && changed) {
        if (!a->hc.health_out) return;
        a->hc.health_out = false;
        if (a->sd_state == SD_OUT) {
            if (now >= a->hc.holdoff_until_ms)
                tool_log(LOG_INFO, "healthy again: campaigning");
            settle(a);
        }
    }
}
