/* SPDX-License-Identifier: MIT */
/* elector — the command-line tool. It uses only the library's public API.
 *
 *   elector campaign NAME [VALUE]     campaign, hold leadership until SIGINT/SIGTERM
 *   elector observe NAME              print every leader change
 *   elector leader NAME               print the current leader once
 *   elector run NAME -- CMD [ARGS]    run CMD only while leader
 *   elector lock NAME [-- CMD ARGS]   etcdctl lock: hold a lock, or run CMD under it
 *   elector switchover NAME --to V    make the candidate with value V the leader
 *
 * This file: setup (options, credentials, the client), the event loop, signals,
 * the HTTP view, cleanup. The rest is described in app.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include "app/app.h"
#include "app/srv.h"
#include "ops/http.h"
#include "options/help.h"

/* ---------------------------------------------------------------- loop */

/* Returns the signal to log (0: none). The caller logs it after the client's
 * pass, so that a resign's Txn is on the wire before the log line is written:
 * the successor is waiting for it. */
static int on_signal(struct app *a, int sig)
{
    if (sig == SIGCHLD) return 0;
    if (sig == SIGHUP) sig = SIGTERM; /* terminal closed, ssh dropped: stop and resign */
    if (a->stopping && sig == SIGINT) {
        /* A second ^C: stop waiting for a graceful end. */
        if (a->child)
            tool_child_signal(a->child, SIGKILL);
        else
            a->done = true;
        return sig;
    }
    a->stopping = true;
    if (!a->stop_sig) a->stop_sig = sig;
    if (a->child) {
        tool_child_signal(a->child, sig);
        return sig;
    }
    a->retry_at_ms = 0;
    a->wait_until_ms = 0;
    if (a->o->cmd != CMD_OBSERVE && !a->done && !a->child_start_ms &&
        !(a->el && elector_is_leader(a->el)) && a->exit_code == EXIT_OK) {
        /* Interrupted before being elected: a lock was not acquired (exit 1, as
         * etcdctl lock's "context canceled"); a standby of run or campaign just
         * stops (exit 0: systemctl stop of a standby is a normal stop). */
        a->interrupted = true;
        if (a->o->cmd == CMD_LOCK) a->exit_code = EXIT_ERROR;
    }
    if (a->el && elector_resign(a->el) == 0) return sig; /* done on RESIGNED/FAILED */
    a->done = true;
    return sig;
}

/* How long poll may sleep: the nearest of every timer (-1: none). */
static int64_t poll_timeout(struct app *a)
{
    int64_t t = elector_etcd_timeout(a->etcd);
    int64_t ht = a->http ? tool_http_timeout(a->http) : -1;
    if (ht >= 0 && (t < 0 || ht < t)) t = ht;
    int64_t nt = app_notify_timeout(a); /* the systemd watchdog's next ping */
    if (nt >= 0 && (t < 0 || nt < t)) t = nt;
    int64_t now = app_now_ms();
    if (a->retry_at_ms && (t < 0 || a->retry_at_ms - now < t))
        t = a->retry_at_ms > now ? a->retry_at_ms - now : 0;
    if (a->wait_until_ms && (t < 0 || a->wait_until_ms - now < t))
        t = a->wait_until_ms > now ? a->wait_until_ms - now : 0;
    if (a->child && (t < 0 || t > 100)) t = 100; /* deadline pushes */
    int64_t ct = a->child ? tool_child_timeout_ms(a->child) : -1;
    if (ct >= 0 && (t < 0 || ct < t)) t = ct; /* the watch on the guard */
    int64_t st = app_health_timeout(a), wt = app_sw_timeout(a);
    if (st >= 0 && (t < 0 || st < t)) t = st;
    if (wt >= 0 && (t < 0 || wt < t)) t = wt;
    return t;
}

/* A stop signal came before we were elected: said after the signal's line. */
static void note_interrupted(struct app *a)
{
    a->interrupted = false;
    if (a->o->cmd == CMD_LOCK)
        tool_log(LOG_ERROR,
                 "interrupted while waiting for the lock %s: not acquired%s%s%s "
                 "(exit 1)",
                 a->o->name, app_supervised(a) ? ", " : "",
                 app_supervised(a) ? a->o->argv[0] : "",
                 app_supervised(a) ? " not run" : "");
    else
        tool_log(LOG_INFO, "interrupted while waiting: never elected for %s%s%s (exit 0)",
                 a->o->name, app_supervised(a) ? ", never started " : "",
                 app_supervised(a) ? a->o->argv[0] : "");
}

/* An event could not be written (app_event_lost): stop as on SIGTERM, exit 1. */
static void stop_if_event_lost(struct app *a)
{
    if (!a->event_lost || a->stopping || a->done) return;
    a->event_lost = false;
    a->exit_code = EXIT_ERROR;
    on_signal(a, SIGTERM);
}

static void loop(struct app *a)
{
    /* observe: a reader that went away (`| head -1`) shows as POLLERR on stdout. */
    bool watch_stdout = a->o->cmd == CMD_OBSERVE;
    while (!a->done) {
        struct pollfd p[6];
        int n = 0;
        p[n++] = (struct pollfd){.fd = elector_etcd_fd(a->etcd), .events = POLLIN};
        p[n++] = (struct pollfd){.fd = a->sfd, .events = POLLIN};
        int http_i = -1, in_i = -1, out_i = -1;
        if (a->http) {
            http_i = n;
            p[n++] = (struct pollfd){.fd = tool_http_fd(a->http), .events = POLLIN};
        }
        if (a->o->proclaim_stdin && !a->in_eof) {
            in_i = n;
            p[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
        }
        if (watch_stdout) {
            out_i = n;
            p[n++] = (struct pollfd){.fd = 1, .events = 0};
        }
        if (a->child)
            p[n++] = (struct pollfd){.fd = tool_child_fd(a->child), .events = POLLIN};
        int64_t t = poll_timeout(a);
        poll(p, (nfds_t)n, t < 0 || t > 1000 ? 1000 : (int)t);
        int logsig = 0;
        if (p[1].revents) {
            struct signalfd_siginfo si;
            if (read(a->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                logsig = on_signal(a, (int)si.ssi_signo);
        }
        elector_etcd_process(a->etcd);
        if (logsig) tool_log(LOG_INFO, "%s received", strsignal(logsig));
        if (logsig && a->interrupted) note_interrupted(a);
        app_note_connection(a);
        app_note_session(a);
        if (http_i >= 0) tool_http_process(a->http);
        if (in_i >= 0 && p[in_i].revents) app_read_stdin(a);
        if (out_i >= 0 && (p[out_i].revents & (POLLERR | POLLHUP)) && !a->done) {
            tool_log(LOG_DEBUG, "stdout was closed: done");
            a->exit_code = EXIT_OK;
            a->done = true;
        }
        stop_if_event_lost(a);
        app_check_child(a);
        app_health_process(a);
        app_sw_process(a);
        if (a->wait_until_ms && app_now_ms() >= a->wait_until_ms && !a->stopping &&
            !a->done)
            app_give_up_waiting(a, NULL);
        if (a->retry_at_ms && app_now_ms() >= a->retry_at_ms && !a->stopping) {
            a->retry_at_ms = 0;
            app_start_campaign(a);
        }
        app_notify_update(a);
    }
}

/* ---------------------------------------------------------------- setup */

static int setup_signals(void)
{
    sigset_t set;
    tool_stop_signals(&set, true);
    sigprocmask(SIG_BLOCK, &set, NULL);
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The value to campaign with, copied into a->value: false if out of memory. */
static bool default_value(struct app *a)
{
    const char *v = a->o->value;
    char host[256];
    if (a->o->cmd == CMD_LOCK) {
        v = ""; /* etcd's Mutex: an empty value */
    } else if (!v) {
        if (gethostname(host, sizeof(host))) snprintf(host, sizeof(host), "elector");
        host[sizeof(host) - 1] = 0;
        v = host;
    }
    a->value = strdup(v);
    a->vlen = a->value ? strlen(v) : 0;
    return a->value != NULL;
}

static int run_command(struct app *a)
{
    if (a->o->cmd == CMD_LEADER) return app_cmd_leader(a);
    if (a->o->cmd == CMD_SWITCHOVER) return app_cmd_switchover(a);
    if (a->o->cmd == CMD_OBSERVE) {
        /* Before the signal mask: a ^C while the first read hangs just ends us. */
        int rc = app_start_observe(a);
        if (rc) return rc;
    }
    a->sfd = setup_signals();
    app_notify_open(a);
    if (a->o->http) {
        char err[300];
        a->http = tool_http_start(a->o->http, app_fill_view, a, err, sizeof(err));
        if (!a->http) {
            /* The address was checked at start: this is a runtime failure (a port
             * taken, no permission), not bad usage. */
            tool_log(LOG_ERROR, "--http: %s", err);
            return EXIT_ERROR;
        }
        tool_log(LOG_INFO, "serving /leader, /healthz and /metrics on http://%s",
                 tool_http_addr(a->http));
    }
    if (a->o->cmd != CMD_OBSERVE) {
        if (!default_value(a)) {
            tool_log(LOG_ERROR, "out of memory");
            return EXIT_ERROR;
        }
        if (app_supervised(a)) tool_child_init();
        char err[256];
        if (app_supervised(a) && a->o->pid_ns &&
            tool_child_check_pid_ns(err, sizeof(err))) {
            /* Before campaigning: never take leadership only to fail to start. */
            tool_log(LOG_ERROR, "--pid-namespace: %s", err);
            return 126;
        }
        if (app_supervised(a)) {
            /* Before campaigning too: a command that cannot be found or run must
             * not take leadership from a candidate that could use it. */
            int st = tool_child_check_cmd(a->o->argv[0], err, sizeof(err));
            if (st) {
                tool_log(LOG_ERROR, "cannot run %s: %s (checked before campaigning)",
                         a->o->argv[0], err);
                return st;
            }
        }
        if (a->o->timeout_ms) a->wait_until_ms = app_now_ms() + a->o->timeout_ms;
        app_health_start(a);
        if (a->o->cmd != CMD_LOCK) app_sw_start(a);
        /* The session is granted while the loop runs, so signals are served while
         * connecting; a failure before etcd was reached ends it (FAILED). */
        a->session_dead = true;
        /* /leader and systemd's status name the leader also while we wait. */
        if ((a->o->http || a->notify) && a->o->limit < 2) app_start_follow(a);
        app_start_campaign(a);
    }
    loop(a);
    return a->exit_code;
}

static void cleanup(struct app *a)
{
    app_notify_stop(a);
    elector_observer_free(a->follow);
    free(a->pred);
    if (a->child) {
        app_stop_child(a);
        tool_child_free(a->child);
    }
    app_health_free(a);
    app_sw_free(a);
    elector_observer_free(a->obs);
    if (a->slots) app_free_slots(a);
    if (a->el) {
        if (elector_is_leader(a->el)) elector_resign(a->el);
        elector_election_free(a->el);
    }
    if (a->s) elector_session_close_sync(a->s, 2000); /* revoke: nothing lingers */
    tool_http_stop(a->http);
    elector_etcd_free(a->etcd);
    app_sw_release(a);
    free(a->value);
    free(a->in_buf);
    free(a->next);
    free(a->lkey);
    free(a->lval);
    tool_creds_free(&a->creds);
    if (a->events && a->events != stderr && a->events != stdout) fclose(a->events);
    if (a->sfd > 0) close(a->sfd);
}

/* The user and password: resolved, asked for on a terminal if missing, and
 * removed from the environment and argv. Returns 0 or an exit status. */
static int credentials(struct app *a, char **argv)
{
    tool_opts *o = a->o;
    char err[400], warn[600];
    /* Secrets: no core dump or ptrace while the password (then the token) is held. */
    if (o->user.value || o->password.value || o->password_file.value)
        tool_secret_protect();
    int rc = tool_creds_resolve(o, &a->creds, err, sizeof(err), warn, sizeof(warn));
    /* Whatever happens next, no password stays where others can read it, nor
     * goes to a command that `run` or `lock` starts. */
    tool_creds_scrub(o, argv);
    if (*warn) tool_log(LOG_WARN, "%s", warn);
    if (rc) {
        tool_log(LOG_ERROR, "%s", err);
        return rc;
    }
    if (a->creds.user && !a->creds.password) {
        a->creds.password = tool_password_prompt(a->creds.user);
        if (a->creds.password)
            snprintf(a->creds.from, sizeof(a->creds.from), "the terminal");
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

static void log_config(const struct app *a)
{
    const tool_opts *o = a->o;
    if (!tool_log_enabled(LOG_DEBUG)) return;
    tool_log(LOG_DEBUG,
             "elector %s: endpoints %s, dial timeout %lld ms, request timeout %lld "
             "ms, TTL %lld s, user %s%s%s%s",
             elector_version(), o->endpoints ? o->endpoints : "127.0.0.1:2379",
             (long long)app_dial_ms(o), (long long)app_request_ms(o),
             (long long)(o->ttl_s ? o->ttl_s : 10),
             a->creds.user ? a->creds.user : "(none)",
             a->creds.password ? " (password from " : "",
             a->creds.password ? a->creds.from : "", a->creds.password ? ")" : "");
    if (*o->env_used) tool_log(LOG_DEBUG, "from the environment: %s", o->env_used);
}

/* A client in error at creation: a bad endpoint list or TLS files. */
static int client_error(struct app *a)
{
    int e = elector_etcd_err(a->etcd);
    bool usage = e == ELECTOR_EINVAL;
    const char *msg = elector_etcd_errstr(a->etcd);
    elector_endpoint_info ep0; /* none when the endpoint list is what failed */
    bool bad_eps = elector_etcd_endpoint_info(a->etcd, 0, &ep0) != 0;
    const char *h = !usage    ? ""
                    : bad_eps ? " (check --endpoints, $ELECTOR_ENDPOINTS or "
                                "$ETCDCTL_ENDPOINTS)"
                              : " (check --cacert, --cert and --key)";
    tool_log(LOG_ERROR, "%s%s", msg, h);
    return usage ? EXIT_USAGE : EXIT_ERROR;
}

/* --discovery-srv: the members from DNS, into o->endpoints, which points to
 * *list (malloc'd; the caller frees it once o is no longer used). */
static int discover(tool_opts *o, char **list, char *err, size_t cap)
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
static void note_settings(struct app *a)
{
    tool_opts *o = a->o;
    int64_t ttl_ms = (o->ttl_s ? o->ttl_s : 10) * 1000;
    if (app_supervised(a) && o->grace_ms < 0)
        o->grace_ms = ttl_ms / 4 < 2000 ? ttl_ms / 4 : 2000;
    if (app_supervised(a) && o->grace_ms * 2 >= ttl_ms)
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
static int open_client(struct app *a)
{
    const tool_opts *o = a->o;
    a->etcd = app_make_client(o, &a->creds);
    if (!a->etcd) {
        tool_log(LOG_ERROR, "out of memory"); /* elector_etcd_new's only NULL */
        tool_creds_free(&a->creds);
        return EXIT_ERROR;
    }
    if (elector_etcd_err(a->etcd)) {
        int rc = client_error(a);
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
    a->events = stdout;
    if (app_supervised(a) && o->fmt == FMT_JSON) {
        a->events = o->events_fd > 0 ? fdopen(o->events_fd, "w") : stderr;
        if (!a->events) {
            tool_log(LOG_ERROR, "--events-fd %d: %s", o->events_fd, strerror(errno));
            elector_etcd_free(a->etcd);
            tool_creds_free(&a->creds);
            return EXIT_USAGE;
        }
    }
    return 0;
}

/* Credentials, the client, the command, the cleanup: the exit status. */
static int run_app(struct app *a, char **argv)
{
    int rc = credentials(a, argv);
    if (rc) return rc;
    note_settings(a);
    log_config(a);
    rc = open_client(a);
    if (rc) return rc;
    /* Only the guard's release connection needs the password after this. */
    if (!app_supervised(a)) {
        tool_secret_free(a->creds.password);
        a->creds.password = NULL;
    }
    srandom((unsigned)(elector_now_ns() ^ getpid()));
    rc = run_command(a);
    cleanup(a);
    return rc;
}

int main(int argc, char **argv)
{
    /* A peer or a reader that went away is an error to report, not a reason to
     * die: SIGPIPE is ignored in every command (the supervisor resets it for
     * `run`'s command). */
    signal(SIGPIPE, SIG_IGN);
    tool_opts o;
    char err[400];
    if (tool_parse_args(argc, argv, &o, err, sizeof(err))) {
        /* A log line as every other error (time, level), in the text format: the
         * command line that names another could not be read. */
        tool_log_setup(LOG_INFO, LOGFMT_TEXT);
        tool_log(LOG_ERROR, "%s", err);
        return EXIT_USAGE;
    }
    if (o.cmd == CMD_HELP || o.help) {
        fputs(tool_help(o.help_cmd), stdout);
        return EXIT_OK;
    }
    if (o.cmd == CMD_VERSION || o.version) {
        printf("elector %s\n", elector_version()); /* the library's */
        return EXIT_OK;
    }
    tool_log_setup(o.log, o.log_format);
    /* A malformed --http address is bad usage, found before anything starts (a
     * port that cannot be had is found later: exit 1). */
    if (o.http && tool_http_check_addr(o.http, err, sizeof(err))) {
        tool_log(LOG_ERROR, "--http: %s", err);
        return EXIT_USAGE;
    }
    struct app a = {.up = &app_candidate_reports,
                    .o = &o,
                    .sfd = -1,
                    .stdout_tty = isatty(STDOUT_FILENO)};
    /* stdout's buffer now: stdio would allocate it (and fstat() the fd) at the
     * first line, which is the elected line, on the handover path. Every write
     * to stdout is flushed at once, so full buffering changes nothing else. */
    setvbuf(stdout, NULL, _IOFBF, BUFSIZ);
    char *srv_eps = NULL;
    if (o.discovery_srv && discover(&o, &srv_eps, err, sizeof(err))) return EXIT_ERROR;
    int rc = run_app(&a, argv);
    free(srv_eps);
    return rc;
}
