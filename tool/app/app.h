/* SPDX-License-Identifier: MIT */
/* The elector tool's state and the parts of the program that share it
 * (paths from tool/; docs/DESIGN.md, "The tool's layout", has the rooms):
 *
 *   main.c                  the loop's watchers, signals, the commands' start,
 *                           cleanup
 *   app/setup.c             credentials, settings, the client, where events go
 *   app/connect.c           the etcd client from the options; endpoint, session
 *                           notes
 *   app/report.c            what the tool reports: -w json events, hints for errors
 *   candidate/decide.c      campaign, run, lock: decides the next step; step-downs
 *   candidate/leader_cmd.c  run and lock CMD: the supervised command
 *   candidate/proclaim.c    --proclaim-stdin: lines from stdin
 *   candidate/health.c      --health-cmd: the checks
 *   candidate/watchers.c    the command's and the checks' passes, whose reports
 *                           it hands to decide.c; --timeout, the retry's timer
 *   candidate/slots.c       lock -n N: the semaphore's slots
 *   commands/print_leader.c observe and leader
 *   app/status.c            the followed leader, systemd's notifications, HTTP view
 *   switchover/             request.c (the requester), handover.c (the
 *                           candidates' side), protocol_keys.c
 *
 * One event loop (ops/loop.h) serves etcd, signals (signalfd), the optional
 * HTTP endpoint, stdin (--proclaim-stdin), the supervised command, the health
 * checks, switchover and systemd: each part registers a watcher (main.c,
 * watch()), its fd, its timeout and its pass. */
#ifndef ELECTOR_TOOL_APP_H
#define ELECTOR_TOOL_APP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "elector/election.h"
#include "ops/loop.h"
#include "options/opts.h"
#include "options/secret.h"
#include "supervise/healthcheck.h"
#include "supervise/supervise.h"
#include "text/log.h"

/* Only pointers to these are kept here: the files that use them include
 * ops/http.h and ops/notify.h. */
struct tool_http;
struct tool_notify;
struct tool_view;
struct app;

/* A health check's result as health.c reports it to its caller
 * (candidate/watchers.c), which hands it to decide.c's app_on_health: the
 * check, a new state or not, whether we lead (not in a step-down), the time. */
typedef struct app_health_report {
    tool_health_state st;
    bool changed, leading;
    int64_t now;
} app_health_report;

/* The parts of struct app, one per concern; a function that needs only one
 * part takes that part. */

/* The leader as last known (report.c, status.c): /leader, systemd's status. */
struct app_leader {
    bool has_leader;
    char *lkey, *lval;
    size_t lklen, lvlen;
    int64_t ltoken, llease, lsince_ms;
    int lsince_kind;          /* what lsince_ms is: a tool_since */
    bool leader_looked;       /* a state of the election was known before */
    int64_t last_token;       /* the last leader's token ever known */
    uint64_t leader_changes;  /* times the leader changed to another key */
    elector_observer *follow; /* campaign, run, lock: the election's leader */
    char *pred;               /* waiting: the key just ahead of ours */
    size_t predlen;
};

/* The connection and the session, as last noted (connect.c). */
struct app_conn {
    char endpoint[256];
    int64_t lost_at_ms;
    int64_t seen_lease;
    bool ttl_noted; /* --ttl raised by etcd: said once */
    uint64_t seen_renewals;
};

/* --proclaim-stdin (proclaim.c): the partial line, and the latest line not yet
 * proclaimed. */
struct app_stdin {
    char *in_buf;
    size_t in_len, in_cap;
    bool in_eof, in_skip;
    char *next;
    size_t next_len;
    bool has_next;
};

/* systemd (status.c). */
struct app_systemd {
    struct tool_notify *notify; /* $NOTIFY_SOCKET; NULL: not under systemd */
    bool notified_ready, notified_stopping;
    char notified_status[512];
};

/* run and lock CMD: the supervised command (leader_cmd.c). */
struct app_sup {
    tool_child *child;
    int child_status;
    int64_t child_deadline;
    int64_t child_lease;    /* the lease the guard releases if elector dies */
    int64_t child_start_ms; /* when the command started (restart backoff) */
    int restarts;           /* quick restarts in a row */
    bool child_noted;       /* its containment was logged */
};

/* --health-cmd (health.c) and its damping: the hold-off after a health
 * step-down, and a new leader's first interval. */
struct app_hc {
    tool_health *health;
    bool health_out;          /* unhealthy: out of the queue until a check passes */
    int64_t holdoff_until_ms; /* no campaign before this */
    int holdoffs;             /* health step-downs in a row (the doubling) */
    bool was_leader;          /* led at the last health pass */
    int64_t elected_ms;       /* when we last became leader */
    int lead_fails;           /* failures in a row counted since then */
    bool lead_early;          /* the first of them came in the first interval */
};

/* --http: the server, and snapshots for its view (they must outlive
 * fill_view's return). */
struct app_web {
    struct tool_http *http;
    elector_session_stats view_ka;
    elector_etcd_stats view_st;
};

/* What the tool writes (report.c). */
struct app_out {
    FILE *events;       /* where -w json events go: stdout, stderr or --events-fd */
    bool stdout_tty;    /* keys and values on a terminal are escaped */
    bool event_lost;    /* a -w json event could not be written: stop, exit 1 */
    char hint_buf[512]; /* app_hint's composed texts */
};

/* lock -n N (N > 1): a semaphore of N slots, each an election of its own
 * (__elector/semaphore/NAME/<slot>/), campaigned for at once on one session;
 * the first slot won becomes the app's el, the others are resigned (slots.c;
 * decide.c: what a slot's event means). */
struct app_slots {
    elector_election **els; /* NULL: no semaphore, or its slots freed */
    char **names;
    int n, waiting, failed; /* slots; WAITING, FAILED seen */
};

/* The tool's state: the options, the client, the election and the run's
 * course here; each other concern in its part. */
struct app {
    tool_opts *o;
    tool_creds creds; /* wiped at exit; run/lock keep them for the guard's release */
    elector_etcd *etcd;
    elector_session *s;
    elector_election *el;
    elector_observer *obs;
    char *value; /* the value to campaign with */
    size_t vlen;
    bool done, stopping, restart_pending, session_dead;
    bool joined; /* the first campaign reached etcd (WAITING or ELECTED) */
    int exit_code;
    int sd_state;                 /* SD_*: a step-down (decide.c) */
    int alarm_retries;            /* campaigns refused by an etcd alarm in a row */
    uint64_t alarm_refusals;      /* campaigns refused by an etcd alarm, in all */
    bool alarm_on;                /* the last campaign was refused by an etcd alarm */
    uint64_t restores;            /* sessions ended because etcd was restored */
    int64_t retry_at_ms;          /* campaign again on a new session after this */
    int64_t wait_until_ms;        /* --timeout: give up waiting at this time (0: none) */
    int stop_sig;                 /* SIGINT or SIGTERM that asked us to stop (0: none) */
    bool interrupted;             /* ... before being elected (said after the signal) */
    int64_t handed_over_ns;       /* stopping, our key's Delete answered (0: not) */
    int start_retries;            /* etcd unreachable at start: attempts so far */
    uint64_t start_retries_total; /* the metric elector_start_retries_total */
    uint64_t changes;             /* times we became or stopped being leader */
    struct app_sw *sw;            /* the candidates' side of switchover */

    struct app_slots slots;
    struct app_leader leader;
    struct app_conn conn;
    struct app_stdin in;
    struct app_systemd systemd;
    struct app_sup sup;
    struct app_hc hc;
    struct app_web web;
    struct app_out out;
};

/* A step-down's state (candidate/decide.c, "stepping down"). */
enum { SD_NONE, SD_STOPPING, SD_RESIGNING, SD_OUT };

/* run, or lock with a command: a supervised command. */
static inline bool app_supervised(const tool_opts *o)
{
    return o->argv && o->argv[0];
}

/* app/connect.c */
elector_etcd *app_make_client(const tool_opts *o, const tool_creds *c);
void app_notice(elector_etcd *e, int err, const char *msg, void *ud);
void app_note_connection(struct app_conn *c, elector_etcd *etcd);
void app_note_session(struct app_conn *c, const tool_opts *o, elector_session *s);
tool_watcher app_notes_watcher(struct app *a); /* both, after the client's pass */
int64_t app_dial_ms(const tool_opts *o);
int64_t app_request_ms(const tool_opts *o);
static inline int64_t app_ttl_ms(const tool_opts *o)
{
    return (o->ttl_s ? o->ttl_s : 10) * 1000;
}

/* app/setup.c: each 0 or the exit status. */
/* The user and password: resolved, asked for on a terminal if missing, and
 * removed from the environment and argv. */
int app_credentials(tool_opts *o, tool_creds *c, char **argv);
void app_note_settings(tool_opts *o); /* --grace's default, warnings */
void app_log_config(const tool_opts *o, const tool_creds *c);
/* --discovery-srv: the endpoints into o->endpoints, which points to *list
 * (malloc'd; the caller frees it once o is no longer used). */
int app_discover(tool_opts *o, char **list, char *err, size_t cap);
/* The client and where events go (on failure, the client and credentials freed). */
int app_open_client(struct app *a);

/* app/report.c */
const char *app_hint(struct app *a, int err);
void app_fatal_etcd(struct app *a, int err, const char *what);
/* Out of memory: said, and the tool ends (exit 1) at the loop's next turn. */
void app_out_of_memory(struct app *a);
void app_fail(struct app *a, const char *what, const elector_event *ev);
int app_event(struct app *a, const elector_event *ev);
void app_event_lost(struct app *a, const elector_event *ev, int err);
void app_remember_leader(struct app_leader *l, const elector_event *ev);
int64_t app_mono_ns(void);
int64_t app_now_ms(void);

/* candidate/decide.c */
void app_on_event(elector_election *el, const elector_event *ev, void *ud);
void app_start_campaign(struct app *a);
void app_schedule_restart(struct app *a);
/* --timeout, --no-wait: stop waiting; exit EXIT_TIMEOUT. */
void app_give_up_waiting(struct app *a, const char *why);
void app_child_gone(struct app *a); /* the command's tree is gone */
void app_on_health(struct app *a, const app_health_report *r);
void app_step_down(struct app *a, const char *why);
bool app_stepdown_event(struct app *a, const elector_event *ev);
bool app_campaign_blocked(struct app *a);

/* candidate/slots.c */
void app_campaign_slots(struct app *a, elector_election_cb on_event);
/* Frees the slots' elections, all but won (the app's el, kept), and their
 * names; the part is left empty. */
void app_free_slots(struct app_slots *sl, const elector_election *won);

/* candidate/leader_cmd.c */
void app_start_child(struct app *a, const elector_event *ev);
/* Stops the command: SIGTERM, the tree killed grace_ms later (or at the
 * deadline); grace_ms 0: the whole tree killed now (no SIGTERM first). */
void app_stop_child(struct app_sup *sup, int64_t grace_ms);
/* A pass of the command's supervisor: true when its tree is gone (said why). */
bool app_check_child(struct app *a);

/* candidate/proclaim.c */
tool_watcher app_stdin_watcher(struct app *a);
void app_proclaim_pending(struct app_stdin *in, elector_election *el);

/* candidate/watchers.c: the command, the checks, --timeout and the retry. */
tool_watcher app_child_watcher(struct app *a);
tool_watcher app_health_watcher(struct app *a);
tool_watcher app_timers_watcher(struct app *a);

/* candidate/health.c */
/* --health-cmd's checks started (or none to start): false if out of memory. */
bool app_health_start(struct app_hc *hc, const tool_opts *o);
/* A pass of the checks: true when *r holds a result for decide.c. */
bool app_health_process(struct app *a, app_health_report *r);
void app_health_free(struct app_hc *hc);
/* A leader stepped down for its health: the hold-off, doubled in a row. */
void app_health_holdoff(struct app_hc *hc, const tool_opts *o);

/* switchover/request.c */
int app_cmd_switchover(struct app *a);
/* switchover/handover.c */
void app_sw_start(struct app *a); /* candidates: join the protocol */
/* The candidates' side (NULL: none): its watcher, its watch canceled before the
 * client is freed, its memory released after. */
tool_watcher app_sw_watcher(struct app_sw *sw);
void app_sw_free(struct app_sw *sw);
void app_sw_release(struct app_sw *sw);

/* commands/print_leader.c */
int app_cmd_leader(struct app *a);
int app_start_observe(struct app *a);

/* app/status.c */
void app_start_follow(struct app *a);
void app_note_event(struct app_leader *l, const elector_event *ev);
void app_notify_open(struct app_systemd *sd);
tool_watcher app_notify_watcher(struct app *a); /* status, watchdog pings */
void app_notify_stop(struct app_systemd *sd);
/* --http's view (ops/http.h's tool_view_fn: ud is the app, v a tool_view *). */
void app_fill_view(void *ud, struct tool_view *v);

#endif
