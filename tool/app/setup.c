/* SPDX-License-Identifier: MIT */
/* The tool's setup before a command runs: the credentials, the settings worth a
 * word, the endpoints from DNS, the etcd client and where -w json events go. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/app.h"
#include "app/srv.h"

/* The user and password: resolved, asked for on a terminal if missing, and
 * removed from the environment and argv. Returns 0 or an exit status. */
int app_credentials(tool_opts *o, tool_creds *c, char **argv)
{
    char err[400], warn[600];
    /* Secrets: no core dump or ptrace while the password (then the token) is held. */
    if (o->user.value || o->password.value || o->password_file.value)
        tool_secret_protect();
    int rc = tool_creds_resolve(o, c, err, sizeof(err), warn, sizeof(warn));
    /* Whatever happens next, no password stays where others can read it, nor
     * goes to a command that `run` or `lock` starts. */
    tool_creds_scrub(o, argv);
    if (*warn) tool_log(LOG_WARN, "%s", warn);
    if (rc) {
        tool_log(LOG_ERROR, "%s", err);
        return rc;
    }
    if (c->user && !c->password) {
        c->password = tool_password_prompt(c->user);
        if (c->password)
            snprintf(c->from, sizeof(c->from), "the terminal");
        else
            tool_log(LOG_WARN,
                     "%s given without a password (set $ELECTOR_PASSWORD or "
                     "$ETCDCTL_PASSWORD, or use --password-file)",
                     o->user.from);
    }
    if (tool_check_key_file(o->key, "--key", warn, sizeof(warn)))
        tool_log(LOG_WARN, "%s", warn);
    return 0;
}

void app_log_config(const tool_opts *o, const tool_creds *c)
{
    if (!tool_log_enabled(LOG_DEBUG)) return;
    tool_log(LOG_DEBUG,
             "elector %s: endpoints %s, dial timeout %lld ms, request timeout %lld "
             "ms, TTL %lld s, user %s%s%s%s",
             elector_version(), o->endpoints ? o->endpoints : "127.0.0.1:2379",
             (long long)app_dial_ms(o), (long long)app_request_ms(o),
             (long long)(o->ttl_s ? o->ttl_s : 10), c->user ? c->user : "(none)",
             c->password ? " (password from " : "", c->password ? c->from : "",
             c->password ? ")" : "");
    if (*o->env_used) tool_log(LOG_DEBUG, "from the environment: %s", o->env_used);
}

/* A client in error at creation: a bad endpoint list or TLS files. */
static int client_error(elector_etcd *etcd)
{
    int e = elector_etcd_err(etcd);
    bool usage = e == ELECTOR_EINVAL;
    const char *msg = elector_etcd_errstr(etcd);
    elector_endpoint_info ep0; /* none when the endpoint list is what failed */
    bool bad_eps = elector_etcd_endpoint_info(etcd, 0, &ep0) != 0;
    const char *h = !usage    ? ""
                    : bad_eps ? " (check --endpoints, $ELECTOR_ENDPOINTS or "
                                "$ETCDCTL_ENDPOINTS)"
                              : " (check --cacert, --cert and --key)";
    tool_log(LOG_ERROR, "%s%s", msg, h);
    return usage ? EXIT_USAGE : EXIT_ERROR;
}

/* --discovery-srv: the members from DNS, into o->endpoints, which points to
 * *list (malloc'd; the caller frees it once o is no longer used). */
int app_discover(tool_opts *o, char **list, char *err, size_t cap)
{
    /* TLS configured: DNS must not take the client (and its password) to
     * cleartext, whatever --insecure-discovery says. */
    bool tls = o->cacert || o->cert || o->key || !o->insecure_transport;
    char skipped[512];
    char *srv_eps =
        tool_srv_endpoints(o->discovery_srv, o->discovery_srv_name,
                           o->srv_secure_only || tls, skipped, sizeof(skipped), err, cap);
    if (*skipped)
        tool_log(LOG_WARN, "--discovery-srv %s: cleartext records skipped (%s): %s",
                 o->discovery_srv, skipped,
                 tls ? "TLS is configured, only https (_etcd-client-ssl) records are used"
                     : "--insecure-discovery=false");
    if (!srv_eps) {
        tool_log(LOG_ERROR, "--discovery-srv %s: %s", o->discovery_srv, err);
        return EXIT_ERROR;
    }
    tool_log(LOG_INFO, "--discovery-srv %s: endpoints %s", o->discovery_srv, srv_eps);
    o->endpoints = *list = srv_eps;
    return 0;
}

/* --grace's default, and the settings worth a warning. */
void app_note_settings(tool_opts *o)
{
    bool supervised = app_supervised(o);
    int64_t ttl_ms = app_ttl_ms(o);
    if (supervised && o->grace_ms < 0)
        o->grace_ms = ttl_ms / 4 < 2000 ? ttl_ms / 4 : 2000;
    if (supervised && o->grace_ms * 2 >= ttl_ms)
        tool_log(LOG_WARN,
                 "--grace %lldms is at least half the TTL: the command may be "
                 "stopped while leadership is still fine",
                 (long long)o->grace_ms);
    if (o->insecure_skip_verify)
        tool_log(LOG_WARN,
                 "--insecure-skip-tls-verify: etcd's certificate is not checked; "
                 "anyone between here and etcd can pose as it and read the password. For "
                 "tests only");
}

/* The client, the cleartext warning, and where -w json events go: 0 or the exit
 * status (the client and the credentials freed). */
int app_open_client(struct app *a)
{
    const tool_opts *o = a->o;
    a->etcd = app_make_client(o, &a->creds);
    if (!a->etcd) {
        tool_log(LOG_ERROR, "out of memory"); /* elector_etcd_new's only NULL */
        tool_creds_free(&a->creds);
        return EXIT_ERROR;
    }
    if (elector_etcd_err(a->etcd)) {
        int rc = client_error(a->etcd);
        elector_etcd_free(a->etcd);
        tool_creds_free(&a->creds);
        return rc;
    }
    char warn[600];
    if (a->creds.user && a->creds.password &&
        tool_check_cleartext(a->etcd, a->creds.user, warn, sizeof(warn)))
        tool_log(LOG_WARN, "%s", warn);
    /* Events go to stdout, but a supervised command owns stdout: stderr or
     * --events-fd then. */
    a->out.events = stdout;
    if (app_supervised(o) && o->fmt == FMT_JSON) {
        a->out.events = o->events_fd > 0 ? fdopen(o->events_fd, "w") : stderr;
        if (!a->out.events) {
            tool_log(LOG_ERROR, "--events-fd %d: %s", o->events_fd, strerror(errno));
            elector_etcd_free(a->etcd);
            tool_creds_free(&a->creds);
            return EXIT_USAGE;
        }
    }
    return 0;
}
