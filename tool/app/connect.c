/* SPDX-License-Identifier: MIT */
/* The etcd client as the options describe it, and what the tool says about the
 * connection and the session as they change. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "app/app.h"

int64_t app_dial_ms(const tool_opts *o)
{
    return o->dial_timeout_ms ? o->dial_timeout_ms : 5000;
}

/* A request may first wait for a connection: the dial timeout, then the
 * command timeout (etcdctl's --command-timeout excludes the dial too). */
int64_t app_request_ms(const tool_opts *o)
{
    return app_dial_ms(o) + (o->command_timeout_ms ? o->command_timeout_ms : 2000);
}

elector_etcd *app_make_client(const tool_opts *o, const tool_creds *c)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    if (o->endpoints) cfg.endpoints = o->endpoints;
    cfg.require_tls = !o->insecure_transport;
    cfg.cacert = o->cacert;
    cfg.cert = o->cert;
    cfg.key = o->key;
    cfg.user = c ? c->user : NULL;
    cfg.password = c ? c->password : NULL;
    cfg.password_file = c && c->user ? c->file : NULL;
    cfg.auto_sync_interval_ms = o->auto_sync_interval_ms;
    cfg.insecure_skip_verify = o->insecure_skip_verify;
    cfg.dial_timeout_ms = app_dial_ms(o);
    cfg.request_timeout_ms = app_request_ms(o);
    if (o->keepalive_time_ms) cfg.keepalive_idle_ms = o->keepalive_time_ms;
    if (o->keepalive_timeout_ms) cfg.keepalive_timeout_ms = o->keepalive_timeout_ms;
    elector_etcd *e = elector_etcd_new(&cfg); /* copies every string */
    if (e) elector_etcd_set_notice(e, app_notice, NULL);
    return e;
}

/* What the client did on its own: TLS files or the password file read again
 * (or refused: the previous ones stay in use), the endpoint list synced. */
void app_notice(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e;
    (void)ud;
    if (err)
        tool_log(LOG_ERROR, "%s", msg);
    else
        tool_log(LOG_INFO, "%s", msg);
}

/* Says when the connection to etcd is lost and when it is back. */
void app_note_connection(struct app_conn *c, elector_etcd *etcd)
{
    const char *ep = elector_etcd_current_endpoint(etcd);
    if (!strcmp(ep, c->endpoint)) return;
    if (*ep && c->lost_at_ms) {
        tool_log(LOG_INFO, "connected to %s again after %.1f s without a connection", ep,
                 (double)(app_now_ms() - c->lost_at_ms) / 1000.0);
        c->lost_at_ms = 0;
    } else if (*ep) {
        tool_log(*c->endpoint ? LOG_INFO : LOG_DEBUG, "connected to %s", ep);
    } else {
        const char *why = elector_etcd_errstr(etcd);
        tool_log(LOG_WARN, "connection to %s lost%s%s; reconnecting", c->endpoint,
                 *why ? ": " : "", why);
        c->lost_at_ms = app_now_ms();
    }
    snprintf(c->endpoint, sizeof(c->endpoint), "%s", ep);
}

/* Debug lines: the lease granted, each renewal. */
void app_note_session(struct app_conn *c, const tool_opts *o, elector_session *s)
{
    if (!s) return;
    int64_t lease = elector_session_lease(s);
    int64_t ttl = lease ? elector_session_ttl(s) : 0;
    if (lease && o->ttl_s && ttl != o->ttl_s && !c->ttl_noted) {
        /* etcd raises a TTL below its minimum (1.5 election timeouts, rounded up
         * to whole seconds: 2 s with its defaults) without an error. */
        tool_log(LOG_WARN,
                 "--ttl %llds: etcd granted a TTL of %llds instead (etcd's minimum "
                 "lease TTL is 1.5 election timeouts: 2s with its defaults)",
                 (long long)o->ttl_s, (long long)ttl);
        c->ttl_noted = true;
    }
    if (!tool_log_enabled(LOG_DEBUG)) return;
    if (lease && lease != c->seen_lease) {
        tool_log(LOG_DEBUG, "lease %llx granted with a TTL of %lld s",
                 (unsigned long long)lease, (long long)elector_session_ttl(s));
        c->seen_lease = lease;
        c->seen_renewals = 0;
    }
    elector_session_stats st;
    elector_session_get_stats(s, &st);
    if (st.renewals != c->seen_renewals) {
        c->seen_renewals = st.renewals;
        int64_t left = elector_session_deadline_ns(s) - elector_now_ns();
        tool_log(LOG_DEBUG,
                 "lease %llx renewed: leadership provable for %.2f s more "
                 "(round trip %.2f ms)",
                 (unsigned long long)lease, left > 0 ? (double)left / 1e9 : 0.0,
                 (double)st.last_rtt_ns / 1e6);
    }
}

static void notes_process(void *ud, short revents)
{
    (void)revents;
    struct app *a = ud;
    app_note_connection(&a->conn, a->etcd);
    app_note_session(&a->conn, a->o, a->s);
}

/* After the client's pass: what changed in the connection and the session. */
tool_watcher app_notes_watcher(struct app *a)
{
    return (tool_watcher){a, NULL, NULL, notes_process};
}
