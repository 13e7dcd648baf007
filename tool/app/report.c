/* SPDX-License-Identifier: MIT */
/* What the tool reports: -w json events (docs/elector-events.schema.json), the
 * leader as last known (for --http), and errors with a hint at the cause. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "app/app.h"
#include "ops/http.h" /* TOOL_SINCE_* */
#include "text/output.h"

int64_t app_now_ms(void)
{
    return elector_now_ns() / 1000000;
}

/* CLOCK_MONOTONIC, the clock of the events' mono_ns (elector_now_ns() is the
 * deadline clock, CLOCK_BOOTTIME). */
int64_t app_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What to do about an error, by its kind. */
const char *app_hint(struct app *a, int err)
{
    switch (err) {
    case ELECTOR_ECONNECT:
    case ELECTOR_EUNAVAILABLE:
    case ELECTOR_ETIMEDOUT:
        return "check --endpoints (or $ELECTOR_ENDPOINTS, $ETCDCTL_ENDPOINTS) and that "
               "etcd "
               "is running";
    case ELECTOR_ETLS:
        return "check --cacert, --cert and --key, and the endpoint's host name";
    case ELECTOR_EAUTH:
    case ELECTOR_ETOKEN:
        if (!a->creds.user)
            return "the cluster has authentication enabled: give --user (and the "
                   "password "
                   "in $ELECTOR_PASSWORD, --password-file or --user NAME:PASSWORD)";
        if (!*a->creds.from)
            return "no password was given: set $ELECTOR_PASSWORD (or $ETCDCTL_PASSWORD) "
                   "or "
                   "use --password-file";
        snprintf(a->out.hint_buf, sizeof(a->out.hint_buf),
                 "check --user and the password (from %s)", a->creds.from);
        return a->out.hint_buf;
    case ELECTOR_EPERM:
        if (!a->creds.user)
            return "the cluster has authentication enabled: give --user (and the "
                   "password "
                   "in $ELECTOR_PASSWORD, --password-file or --user NAME:PASSWORD)";
        snprintf(a->out.hint_buf, sizeof(a->out.hint_buf),
                 "the etcd user '%s' needs read/write permission on the prefix %s/",
                 a->creds.user, a->o->name ? a->o->name : "NAME");
        return a->out.hint_buf;
    case ELECTOR_ETOOLARGE:
        return "the value is larger than etcd accepts (--max-request-bytes, 1.5 MiB by "
               "default)";
    case ELECTOR_ENOLEADER:
        return "the etcd cluster has lost its quorum";
    case ELECTOR_ENOSPACE:
        return "etcd's quota (--quota-backend-bytes) is reached: `etcdctl compact`, "
               "`etcdctl defrag`, then `etcdctl alarm disarm`";
    case ELECTOR_ERESTORED:
        return "etcd was restored from a snapshot: restore with `etcdutl snapshot "
               "restore "
               "--bump-revision N --mark-compacted` so that fencing tokens keep "
               "increasing";
    case ELECTOR_EALARM:
        return "`etcdctl alarm list` shows the alarm; an operator must clear it";
    case ELECTOR_EPROTO:
        return "the endpoint does not answer as etcd does; check --endpoints";
    default:
        return NULL;
    }
}

void app_fatal_etcd(struct app *a, int err, const char *what)
{
    const char *h = app_hint(a, err);
    const char *detail = elector_etcd_errstr(a->etcd);
    tool_log(LOG_ERROR, "%s: %s%s%s", what, *detail ? detail : elector_strerror(err),
             h ? "; " : "", h ? h : "");
    a->exit_code = EXIT_ERROR;
    a->done = true;
}

void app_out_of_memory(struct app *a)
{
    tool_log(LOG_ERROR, "out of memory");
    a->exit_code = EXIT_ERROR;
    a->done = true;
}

/* An error event (FAILED, LOST, ...) said on stderr with its hint. */
void app_fail(struct app *a, const char *what, const elector_event *ev)
{
    const char *h = app_hint(a, ev->reason);
    tool_log(LOG_ERROR, "%s: %s%s%s", what, ev->detail, h ? "; " : "", h ? h : "");
}

int app_event(struct app *a, const elector_event *ev)
{
    const char *name = ev->type == ELECTOR_EV_PROCLAIMED && ev->reason
                           ? "proclaim_failed"
                           : elector_event_name(ev->type);
    tool_event_out e = {.event = name, .name = a->o->name, .mono_ns = ev->mono_ns};
    e.unix_ms = tool_wall_ms() - (app_mono_ns() - ev->mono_ns) / 1000000;
    if (ev->type != ELECTOR_EV_NO_LEADER) {
        e.key = ev->key_len ? ev->key : NULL;
        e.key_len = ev->key_len;
        if (ev->type == ELECTOR_EV_WAITING) {
            /* The library's WAITING carries the predecessor's key with our
             * lease; the event says ours, and the one ahead as predecessor. */
            e.predecessor = e.key;
            e.predecessor_len = e.key_len;
            e.key = a->el ? elector_election_key(a->el, &e.key_len) : NULL;
        }
        if (e.key) {
            e.value = ev->value ? ev->value : (const uint8_t *)"";
            e.value_len = ev->value ? ev->value_len : 0;
            e.token = ev->token;
            e.lease = ev->lease;
        }
    }
    if (ev->reason) {
        e.error = elector_err_name(ev->reason);
        e.reason = ev->detail ? ev->detail : "";
    }
    char *line = tool_event_json(&e);
    if (!line) {
        errno = ENOMEM;
        return -1;
    }
    int rc = tool_write_line(a->out.events ? a->out.events : stdout, line);
    int err = errno;
    free(line);
    errno = err;
    return rc;
}

/* decide.c: a -w json event that could not be written (out of memory for its
 * line, a write error other than a closed stdout). Whatever waits for it would
 * never learn, e.g., that we lead: campaign and lock stop as on SIGTERM and exit
 * 1 (the loop does it: main.c). run goes on: its command is what tells. */
void app_event_lost(struct app *a, const elector_event *ev, int err)
{
    if (err == EPIPE || a->stopping || a->done) return;
    bool stop = !app_supervised(a->o);
    tool_log(LOG_ERROR, "cannot write the %s event: %s%s", elector_event_name(ev->type),
             strerror(err ? err : EIO), stop ? ": resigning (exit 1)" : "");
    if (stop) a->out.event_lost = true;
}

/* The leader as last known: from our own election (ELECTED, PROCLAIMED), from
 * observe or the follower (LEADER), none (NULL). Its "since" is kept while the
 * same key (token) leads; a new one is timed now, and said to be when this
 * process was elected, saw the change, or first saw a leader already in place. */
void app_remember_leader(struct app_leader *l, const elector_event *ev)
{
    bool same = l->has_leader && ev && ev->key && ev->token == l->ltoken &&
                ev->type != ELECTOR_EV_ELECTED;
    free(l->lkey);
    free(l->lval);
    l->lkey = l->lval = NULL;
    l->has_leader = ev && ev->key;
    if (!l->has_leader) {
        l->leader_looked = true;
        return;
    }
    l->lkey = malloc(ev->key_len + 1);
    l->lval = malloc(ev->value_len + 1);
    if (!l->lkey || !l->lval) {
        l->has_leader = false;
        return;
    }
    memcpy(l->lkey, ev->key, ev->key_len);
    if (ev->value_len) memcpy(l->lval, ev->value, ev->value_len);
    l->lklen = ev->key_len;
    l->lvlen = ev->value_len;
    l->ltoken = ev->token;
    l->llease = ev->lease;
    if (!same) {
        l->lsince_ms = tool_wall_ms();
        l->lsince_kind =
            ev->type == ELECTOR_EV_ELECTED || ev->type == ELECTOR_EV_PROCLAIMED
                ? TOOL_SINCE_ELECTED
            : l->leader_looked ? TOOL_SINCE_CHANGE
                               : TOOL_SINCE_FIRST_SEEN;
    }
    if (l->last_token && ev->token != l->last_token) l->leader_changes++;
    l->last_token = ev->token;
    l->leader_looked = true;
}
