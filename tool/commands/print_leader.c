/* SPDX-License-Identifier: MIT */
/* observe and leader: the leader of an election, once or as it changes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "app/app.h"
#include "text/output.h"

/* A closed stdout (`elector observe x | head -1`) ends observe quietly, exit 0;
 * another write error (a full disk) is an error. */
static void wrote(struct app *a, int rc, int err)
{
    if (!rc || a->done) return;
    if (err == EPIPE) {
        tool_log(LOG_DEBUG, "stdout was closed: done");
        a->exit_code = EXIT_OK;
    } else {
        tool_log(LOG_ERROR, "cannot write to stdout: %s", strerror(err));
        a->exit_code = EXIT_ERROR;
    }
    a->done = true;
}

/* The text format prints a key and a value; the same two lines again (the same
 * key leading again with the same value, its interim successors too brief to be
 * seen, as in quick switchovers) would say nothing: printed once. -w json
 * reports every change, with tokens. */
static void print_new_leader(struct app *a, const elector_event *ev)
{
    const struct app_leader *l = &a->leader;
    bool same = l->has_leader && l->lklen == ev->key_len && l->lvlen == ev->value_len &&
                !memcmp(l->lkey, ev->key, ev->key_len) &&
                (!ev->value_len || !memcmp(l->lval, ev->value, ev->value_len));
    if (same) return;
    int rc = tool_write_kv(stdout, a->out.stdout_tty, a->o->hex, ev->key, ev->key_len,
                           ev->value, ev->value_len);
    wrote(a, rc, errno);
}

static void on_observe(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    struct app *a = ud;
    elector_event none;
    if (ev->reason == ELECTOR_EBLOCKED) {
        /* A key without a lease comes first: nobody leads (it is printed as
         * no leader, never as one), and nobody can until it is deleted. */
        tool_log(LOG_ERROR, "%s", ev->detail);
        none = (elector_event){.type = ELECTOR_EV_NO_LEADER,
                               .detail = "",
                               .name = ev->name,
                               .mono_ns = ev->mono_ns};
        ev = &none;
    }
    if (ev->reason == ELECTOR_ERESTORED && ev->type != ELECTOR_EV_FAILED) {
        /* The observer forgot what it knew and read the leader again. */
        a->restores++;
        tool_log(LOG_WARN, "%s: leader read again", ev->detail);
    }
    if (a->o->fmt == FMT_JSON) {
        /* leader / no_leader events carry no error in the JSON contract: the
         * restore is the warning above. */
        elector_event e = *ev;
        if (e.type != ELECTOR_EV_FAILED) {
            e.reason = 0;
            e.detail = "";
        }
        int rc = app_event(a, &e);
        wrote(a, rc, errno);
    }
    if (ev->type == ELECTOR_EV_LEADER) {
        tool_log(LOG_DEBUG, "leader %.*s (token %lld), a value of %zu bytes",
                 (int)ev->key_len, (const char *)ev->key, (long long)ev->token,
                 ev->value_len);
        if (a->o->fmt == FMT_SIMPLE) print_new_leader(a, ev);
        app_remember_leader(&a->leader, ev);
    } else if (ev->type == ELECTOR_EV_FAILED) {
        /* The observer ends only when etcd's answers make no sense (EPROTO). */
        app_fail(a, "observe failed", ev);
        app_remember_leader(&a->leader, NULL);
        a->exit_code = EXIT_ERROR;
        a->done = true;
    } else {
        tool_log(LOG_INFO, "no leader");
        app_remember_leader(&a->leader, NULL);
    }
}

/* Reads the leader once first, so that an unreachable cluster, a TLS or an
 * authentication failure is an error within the dial timeout (exit 1), as with
 * `leader`, rather than an observer retrying in silence. Later failures are
 * retried by the observer; the loop reports the connection lost and back. */
int app_start_observe(struct app *a)
{
    elector_leader_info li;
    int rc;
    /* etcd not reachable yet: retry with backoff (as campaign, run and lock do),
     * unless --fail-fast. TLS and authentication failures end it at once. */
    for (int n = 0;; n++) {
        rc = elector_leader_sync(a->etcd, a->o->name, app_request_ms(a->o), &li);
        bool transient = rc == ELECTOR_ECONNECT || rc == ELECTOR_EUNAVAILABLE ||
                         rc == ELECTOR_ETIMEDOUT;
        if (rc >= 0 || !transient || a->o->fail_fast) break;
        int64_t d = 500LL << (n < 6 ? n : 6);
        if (d > 30000) d = 30000;
        d = d / 2 + (int64_t)((uint64_t)random() % (uint64_t)(d / 2 + 1));
        a->start_retries_total++;
        tool_log(LOG_WARN,
                 "cannot observe (%s): etcd unreachable; retrying in %.1f s (attempt %d; "
                 "--fail-fast to exit instead)",
                 elector_strerror(rc), (double)d / 1000.0, n + 1);
        struct timespec ts = {(time_t)(d / 1000), (long)(d % 1000) * 1000000};
        nanosleep(&ts, NULL);
        if (n == 0) a->start_retries = 1;
    }
    /* A key without a lease in the way is the observer's to report (LEADER
     * with ELECTOR_EBLOCKED), and it may be deleted: observing goes on. */
    elector_leader_free(&li);
    if (rc < 0 && rc != ELECTOR_EBLOCKED) {
        app_fatal_etcd(a, rc, "cannot observe");
        return EXIT_ERROR;
    }
    if (a->start_retries) tool_log(LOG_INFO, "etcd reached: observing %s", a->o->name);
    a->start_retries = 0;
    app_note_connection(&a->conn, a->etcd);
    a->obs = elector_observe(a->etcd, a->o->name, on_observe, a);
    if (!a->obs) {
        tool_log(LOG_ERROR, "out of memory");
        return EXIT_ERROR;
    }
    return 0;
}

int app_cmd_leader(struct app *a)
{
    elector_leader_info li;
    int rc = elector_leader_sync(a->etcd, a->o->name, app_request_ms(a->o), &li);
    if (rc < 0) {
        elector_leader_free(&li); /* ELECTOR_EBLOCKED fills it */
        app_fatal_etcd(a, rc, "cannot read the leader");
        return EXIT_ERROR;
    }
    int w = 0, werr = 0;
    if (rc == 1) {
        if (a->o->fmt == FMT_JSON) {
            elector_event ev = {
                .type = ELECTOR_EV_NO_LEADER, .detail = "", .mono_ns = app_mono_ns()};
            w = app_event(a, &ev);
            werr = errno;
        }
        tool_log(LOG_INFO, "no leader for %s", a->o->name);
    } else {
        elector_event ev = {.type = ELECTOR_EV_LEADER,
                            .detail = "",
                            .key = li.key,
                            .key_len = li.key_len,
                            .value = li.value,
                            .value_len = li.value_len,
                            .token = li.token,
                            .lease = li.lease,
                            .mono_ns = app_mono_ns()};
        w = a->o->fmt == FMT_JSON
                ? app_event(a, &ev)
                : tool_write_kv(stdout, a->out.stdout_tty, a->o->hex, li.key, li.key_len,
                                li.value, li.value_len);
        werr = errno;
        elector_leader_free(&li);
    }
    if (w) {
        tool_log(LOG_ERROR, "cannot write to stdout: %s", strerror(werr));
        return EXIT_ERROR;
    }
    return rc == 1 ? EXIT_NOLEADER : EXIT_OK;
}
