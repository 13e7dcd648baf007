/* SPDX-License-Identifier: MIT */
/* elector — the command-line tool. It uses only the library's public API.
 *
 *   elector campaign NAME [VALUE]     campaign, hold leadership until SIGINT/SIGTERM
 *   elector observe NAME              print every leader change
 *   elector leader NAME               print the current leader once
 *   elector run NAME -- CMD [ARGS]    run CMD only while leader
 *   elector lock NAME [-- CMD ARGS]   etcdctl lock: hold a lock, or run CMD under it
 *   elector switchover NAME --to V    make the candidate with value V the leader
 *   elector timing [--ttl D ...]      the failover and outage times of the settings
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
#include <time.h>
#include <unistd.h>
#include "app/app.h"
#include "ops/http.h"
#include "options/help.h"
#include "timing/command.h"

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
        if (a->sup.child)
            tool_child_signal(a->sup.child, SIGKILL);
        else
            a->done = true;
        return sig;
    }
    a->stopping = true;
    if (!a->stop_sig) a->stop_sig = sig;
    if (a->sup.child) {
        tool_child_signal(a->sup.child, sig);
        return sig;
    }
    a->retry_at_ms = 0;
    a->wait_until_ms = 0;
    if (a->o->cmd != CMD_OBSERVE && !a->done && !a->sup.child_start_ms &&
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

/* A stop signal came before we were elected: said after the signal's line. */
static void note_interrupted(struct app *a)
{
    a->interrupted = false;
    if (a->o->cmd == CMD_LOCK)
        tool_log(LOG_ERROR,
                 "interrupted while waiting for the lock %s: not acquired%s%s%s "
                 "(exit 1)",
                 a->o->name, app_supervised(a->o) ? ", " : "",
                 app_supervised(a->o) ? a->o->argv[0] : "",
                 app_supervised(a->o) ? " not run" : "");
    else
        tool_log(LOG_INFO, "interrupted while waiting: never elected for %s%s%s (exit 0)",
                 a->o->name, app_supervised(a->o) ? ", never started " : "",
                 app_supervised(a->o) ? a->o->argv[0] : "");
}

/* An event could not be written (app_event_lost): stop as on SIGTERM, exit 1. */
static void stop_if_event_lost(void *ud, short revents)
{
    (void)revents;
    struct app *a = ud;
    if (!a->out.event_lost || a->stopping || a->done) return;
    a->out.event_lost = false;
    a->exit_code = EXIT_ERROR;
    on_signal(a, SIGTERM);
}

/* Signals: read and acted on first; said after the client's pass (said_process). */
struct signals {
    struct app *a;
    int fd;  /* the signalfd */
    int say; /* the signal to log this pass (0: none) */
};

static int signals_fd(void *ud, short *events)
{
    *events = POLLIN;
    return ((struct signals *)ud)->fd;
}

static void signals_process(void *ud, short revents)
{
    struct signals *sg = ud;
    struct signalfd_siginfo si;
    sg->say = 0;
    if (revents && read(sg->fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        sg->say = on_signal(sg->a, (int)si.ssi_signo);
}

static void said_process(void *ud, short revents)
{
    (void)revents;
    struct signals *sg = ud;
    if (sg->say) tool_log(LOG_INFO, "%s received", strsignal(sg->say));
    if (sg->say && sg->a->interrupted) note_interrupted(sg->a);
}

static int etcd_fd(void *ud, short *events)
{
    *events = POLLIN;
    return elector_etcd_fd(ud);
}

static int64_t etcd_timeout(void *ud)
{
    return elector_etcd_timeout(ud);
}

static void etcd_process(void *ud, short revents)
{
    (void)revents; /* the client reads what is there */
    elector_etcd_process(ud);
}

/* observe: a reader that went away (`| head -1`) shows as POLLERR on stdout. */
static int stdout_fd(void *ud, short *events)
{
    (void)ud;
    *events = 0;
    return STDOUT_FILENO;
}

static void stdout_process(void *ud, short revents)
{
    struct app *a = ud;
    if (!(revents & (POLLERR | POLLHUP)) || a->done) return;
    tool_log(LOG_DEBUG, "stdout was closed: done");
    a->exit_code = EXIT_OK;
    a->done = true;
}

/* The loop's watchers, each part once; a pass processes them in this order. */
static void watch(tool_loop *l, struct app *a, struct signals *sg)
{
    tool_loop_add(l, (tool_watcher){sg, signals_fd, NULL, signals_process});
    tool_loop_add(l, (tool_watcher){a->etcd, etcd_fd, etcd_timeout, etcd_process});
    tool_loop_add(l, (tool_watcher){sg, NULL, NULL, said_process});
    tool_loop_add(l, app_notes_watcher(a));
    if (a->web.http) tool_loop_add(l, tool_http_watcher(a->web.http));
    if (a->o->proclaim_stdin) tool_loop_add(l, app_stdin_watcher(a));
    if (a->o->cmd == CMD_OBSERVE)
        tool_loop_add(l, (tool_watcher){a, stdout_fd, NULL, stdout_process});
    tool_loop_add(l, (tool_watcher){a, NULL, NULL, stop_if_event_lost});
    tool_loop_add(l, app_child_watcher(a));
    tool_loop_add(l, app_health_watcher(a));
    tool_loop_add(l, app_sw_watcher(a->sw)); /* made by start_candidate, if at all */
    tool_loop_add(l, app_timers_watcher(a));
    tool_loop_add(l, app_notify_watcher(a));
}

/* ---------------------------------------------------------------- setup */

static int setup_signals(void)
{
    sigset_t set;
    tool_stop_signals(&set, true);
    sigprocmask(SIG_BLOCK, &set, NULL);
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The value to campaign with (malloc'd, its length in *len): NULL if out of
 * memory. */
static char *default_value(const tool_opts *o, size_t *len)
{
    const char *v = o->value;
    char host[256];
    if (o->cmd == CMD_LOCK) {
        v = ""; /* etcd's Mutex: an empty value */
    } else if (!v) {
        if (gethostname(host, sizeof(host))) snprintf(host, sizeof(host), "elector");
        host[sizeof(host) - 1] = 0;
        v = host;
    }
    char *value = strdup(v);
    *len = value ? strlen(v) : 0;
    return value;
}

/* --http: the endpoint started (0), or the exit status. */
static int start_http(struct app *a)
{
    char err[300];
    a->web.http = tool_http_start(a->o->http, app_fill_view, a, err, sizeof(err));
    if (!a->web.http) {
        /* The address was checked at start: this is a runtime failure (a port
         * taken, no permission), not bad usage. */
        tool_log(LOG_ERROR, "--http: %s", err);
        return EXIT_ERROR;
    }
    tool_log(LOG_INFO, "serving /leader, /healthz and /metrics on http://%s",
             tool_http_addr(a->web.http));
    return 0;
}

/* campaign, run, lock: the value, the command checked, the timers, health
 * checks and switchover, the first campaign. 0 or the exit status. */
static int start_candidate(struct app *a)
{
    a->value = default_value(a->o, &a->vlen);
    if (!a->value) {
        tool_log(LOG_ERROR, "out of memory");
        return EXIT_ERROR;
    }
    if (app_supervised(a->o)) tool_child_init();
    char err[256];
    if (app_supervised(a->o) && a->o->pid_ns &&
        tool_child_check_pid_ns(err, sizeof(err))) {
        /* Before campaigning: never take leadership only to fail to start. */
        tool_log(LOG_ERROR, "--pid-namespace: %s", err);
        return 126;
    }
    if (app_supervised(a->o)) {
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
    if (!app_health_start(&a->hc, a->o)) app_out_of_memory(a);
    if (a->o->cmd != CMD_LOCK) app_sw_start(a);
    /* The session is granted while the loop runs, so signals are served while
     * connecting; a failure before etcd was reached ends it (FAILED). */
    a->session_dead = true;
    /* /leader and systemd's status name the leader also while we wait. */
    if ((a->o->http || a->systemd.notify) && a->o->limit < 2) app_start_follow(a);
    app_start_campaign(a);
    return 0;
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
    struct signals sg = {a, setup_signals(), 0};
    app_notify_open(&a->systemd);
    int rc = a->o->http ? start_http(a) : 0;
    if (!rc && a->o->cmd != CMD_OBSERVE) rc = start_candidate(a);
    if (!rc) {
        tool_loop l = {.n = 0};
        watch(&l, a, &sg);
        tool_loop_run(&l, &a->done);
        rc = a->exit_code;
    }
    if (sg.fd >= 0) close(sg.fd);
    return rc;
}

/* How long a leader that resigned to stop leaves the field to its successor
 * before its own teardown. Our Delete's answer and the successor's watch event
 * leave the member at the same instant, and the successor's check follows at
 * once. What this process does next (the lease's revoke, one more Raft
 * proposal through the same member; the release helper's exit; closing the
 * connection; its own exit) competed with that check for the member and, with
 * candidates on one host, for its CPUs: 0.1-0.15 ms of the handover's p50
 * (bench/RESULTS.md 8d). The lease holds no key any more, so nothing waits on
 * its revoke; the stop takes this much longer. */
#define HANDOVER_YIELD_NS (5 * 1000000LL)

static void yield_to_successor(const struct app *a)
{
    if (!a->handed_over_ns) return;
    int64_t left = a->handed_over_ns + HANDOVER_YIELD_NS - app_mono_ns();
    if (left <= 0) return;
    struct timespec ts = {0, (long)left};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static void cleanup(struct app *a)
{
    app_notify_stop(&a->systemd);
    elector_observer_free(a->leader.follow);
    free(a->leader.pred);
    if (a->sup.child) {
        app_stop_child(&a->sup, a->o->grace_ms);
        tool_child_free(a->sup.child);
    }
    app_health_free(&a->hc);
    app_sw_free(a->sw);
    elector_observer_free(a->obs);
    app_free_slots(&a->slots, a->el);
    if (a->el) {
        if (elector_is_leader(a->el)) elector_resign(a->el);
        elector_election_free(a->el);
    }
    yield_to_successor(a);
    if (a->s) elector_session_close_sync(a->s, 2000); /* revoke: nothing lingers */
    tool_http_stop(a->web.http);
    elector_etcd_free(a->etcd);
    app_sw_release(a->sw);
    a->sw = NULL;
    free(a->value);
    free(a->in.in_buf);
    free(a->in.next);
    free(a->leader.lkey);
    free(a->leader.lval);
    tool_creds_free(&a->creds);
    if (a->out.events && a->out.events != stderr && a->out.events != stdout)
        fclose(a->out.events);
}

/* Credentials, the client, the command, the cleanup: the exit status. */
static int run_app(struct app *a, char **argv)
{
    int rc = app_credentials(a->o, &a->creds, argv);
    if (rc) return rc;
    app_note_settings(a->o);
    app_log_config(a->o, &a->creds);
    rc = app_open_client(a);
    if (rc) return rc;
    /* Only the guard's release connection needs the password after this. */
    if (!app_supervised(a->o)) {
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
    if (o.cmd == CMD_TIMING) return tool_timing_main(&o, stdout, stderr); /* no etcd */
    tool_log_setup(o.log, o.log_format);
    /* A malformed --http address is bad usage, found before anything starts (a
     * port that cannot be had is found later: exit 1). */
    if (o.http && tool_http_check_addr(o.http, err, sizeof(err))) {
        tool_log(LOG_ERROR, "--http: %s", err);
        return EXIT_USAGE;
    }
    struct app a = {.o = &o, .out.stdout_tty = isatty(STDOUT_FILENO)};
    /* stdout's buffer now: stdio would allocate it (and fstat() the fd) at the
     * first line, which is the elected line, on the handover path. Every write
     * to stdout is flushed at once, so full buffering changes nothing else. */
    setvbuf(stdout, NULL, _IOFBF, BUFSIZ);
    char *srv_eps = NULL;
    if (o.discovery_srv && app_discover(&o, &srv_eps, err, sizeof(err)))
        return EXIT_ERROR;
    int rc = run_app(&a, argv);
    free(srv_eps);
    return rc;
}
