/* SPDX-License-Identifier: MIT */
/* The elector tool's state and the parts of the program that share it
 * (paths from tool/; docs/DESIGN.md, "The tool's layout", has the rooms):
 *
 *   main.c                setup (options, credentials, client), the loop, signals
 *   app/connect.c         the etcd client from the options; endpoint, session notes
 *   app/report.c          what the tool reports: -w json events, hints for errors
 *   candidate/campaign.c  campaign, run, lock: decides the next step; step-downs
 *   candidate/child.c     run and lock CMD: the supervised command
 *   candidate/proclaim.c  --proclaim-stdin: lines from stdin
 *   candidate/health.c    --health-cmd: the checks, reported to campaign.c
 *   candidate/slots.c     lock -n N: the semaphore's slots
 *   commands/observe.c    observe and leader
 *   app/status.c          the followed leader, systemd's notifications, HTTP view
 *   switchover/           request.c (the requester), candidate.c (the candidates'
 *                         side), keys.c
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
 * (candidate/watchers.c), which hands it to campaign.c's app_on_health: the
 * check, a new state or not, whether we lead (not in a step-down), the time. */
typedef struct app_health_report {
    tool_health_state st;
    bool changed, leading;
    int64_t now;
} app_health_report;

struct app {
    tool_opts *o;
    tool_creds creds; /* wiped at exit; run/lock keep them for the guard's release */
    elector_etcd *etcd;
    elector_session *s;
    elector_election *el;
    /* lock -n N (N > 1): a semaphore of N slots, each an election of its own
     * (__elector/semaphore/NAME/<slot>/), campaigned for at once on one session;
     * the first slot won becomes el, the others are resigned. */
    elector_election **slots;
    char **slot_names;
    int nslots, slots_waiting, slots_failed;
    elector_observer *obs;
    struct tool_http *http;
    tool_child *child;
    char *value; /* the value to campaign with */
    size_t vlen;
    bool done, stopping, restart_pending, session_dead;
    bool joined;     /* the first campaign reached etcd (WAITING or ELECTED) */
    bool stdout_tty; /* keys and values on a terminal are escaped */
    int exit_code, child_status;
    int64_t child_deadline;
    int64_t child_lease;     /* the lease the guard releases if elector dies */
    int64_t child_start_ms;  /* when the command started (restart backoff) */
    int restarts;            /* quick restarts in a row */
    int alarm_retries;       /* campaigns refused by an etcd alarm in a row */
    uint64_t alarm_refusals; /* campaigns refused by an etcd alarm, in all */
    bool alarm_on;           /* the last campaign was refused by an etcd alarm */
    uint64_t restores;       /* sessions ended because etcd was restored (ERESTORED) */
    bool child_noted;        /* its containment was logged */
    FILE *events;            /* where -w json events go: stdout, stderr or --events-fd */
    int64_t retry_at_ms;     /* campaign again on a new session after this */
    int64_t wait_until_ms;   /* --timeout: give up waiting at this time (0: none) */
    int stop_sig;            /* SIGINT or SIGTERM that asked us to stop (0: none) */
    bool interrupted;        /* ... before being elected (logged after the signal) */
    bool event_lost;         /* a -w json event could not be written: stop, exit 1 */
    int start_retries;       /* etcd unreachable at start: attempts so far */
    uint64_t start_retries_total; /* the metric elector_start_retries_total */

    /* The leader as last known, for --http. */
    bool has_leader;
    char *lkey, *lval;
    size_t lklen, lvlen;
    int64_t ltoken, llease, lsince_ms;
    uint64_t changes;

    /* The connection and the session, as last noted (connect.c). */
    char endpoint[256];
    int64_t lost_at_ms;
    int64_t seen_lease;
    bool ttl_noted; /* --ttl raised by etcd: said once */
    uint64_t seen_renewals;

    /* --proclaim-stdin: the partial line, and the latest line not yet proclaimed. */
    char *in_buf;
    size_t in_len, in_cap;
    bool in_eof, in_skip;
    char *next;
    size_t next_len;
    bool has_next;

    char hint_buf[512]; /* app_hint's composed texts */

    /* Stepping down without exiting (health.c): --health-cmd, switchover. */
    tool_health *health;
    int sd_state;    /* SD_*: a step-down (campaign.c) */
    bool health_out; /* unhealthy: out of the queue until a check passes */
    /* Damping (health.c): the hold-off after a health step-down, and a new
     * leader's first interval. */
    int64_t holdoff_until_ms; /* no campaign before this */
    int holdoffs;             /* health step-downs in a row (the doubling) */
    bool was_leader;          /* led at the last health pass */
    int64_t elected_ms;       /* when we last became leader */
    int lead_fails;           /* failures in a row counted since then */
    bool lead_early;          /* the first of them came in the first interval */
    struct app_sw *sw;        /* the candidates' side of switchover */

    /* Snapshots for the HTTP view (they must outlive fill_view's return). */
    elector_session_stats view_ka;
    elector_etcd_stats view_st;

    /* The leader followed while not leading, and systemd (status.c). */
    elector_observer *follow; /* campaign, run, lock: the election's leader */
    int lsince_kind;          /* what lsince_ms is: a tool_since */
    bool leader_looked;       /* a state of the election was known before */
    int64_t last_token;       /* the last leader's token ever known */
    uint64_t leader_changes;  /* times the leader changed to another key */
    char *pred;               /* waiting: the key just ahead of ours */
    size_t predlen;
    struct tool_notify *notify; /* $NOTIFY_SOCKET; NULL: not under systemd */
    bool notified_ready, notified_stopping;
    char notified_status[512];
};

/* A step-down's state (candidate/campaign.c, "stepping down"). */
enum { SD_NONE, SD_STOPPING, SD_RESIGNING, SD_OUT };

/* run, or lock with a command: a supervised command. */
static inline bool app_supervised(const struct app *a)
{
    return a->o->argv && a->o->argv[0];
}

/* "the lock" for lock, "leadership" otherwise: what is held and lost. */
static inline const char *app_held(const struct app *a)
{
    return a->o->cmd == CMD_LOCK ? "the lock" : "leadership";
}

/* app/connect.c */
elector_etcd *app_make_client(const tool_opts *o, const tool_creds *c);
void app_notice(elector_etcd *e, int err, const char *msg, void *ud);
void app_note_connection(struct app *a);
void app_note_session(struct app *a);
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
int app_credentials(struct app *a, char **argv);
void app_note_settings(struct app *a); /* --grace's default, warnings */
void app_log_config(const struct app *a);
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
void app_remember_leader(struct app *a, const elector_event *ev);
int64_t app_mono_ns(void);
int64_t app_now_ms(void);

/* candidate/campaign.c */
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
void app_free_slots(struct app *a); /* all but el (the slot won) */

/* candidate/child.c */
void app_start_child(struct app *a, const elector_event *ev);
/* Stops the command: SIGTERM, the tree killed grace later (or at the deadline). */
void app_stop_child(struct app *a);
/* Kills the command's whole tree now (no SIGTERM first). */
void app_kill_child(struct app *a);
/* A pass of the command's supervisor: true when its tree is gone (said why). */
bool app_check_child(struct app *a);

/* candidate/proclaim.c */
tool_watcher app_stdin_watcher(struct app *a);
void app_proclaim_pending(struct app *a);

/* candidate/watchers.c: the command, the checks, --timeout and the retry. */
tool_watcher app_child_watcher(struct app *a);
tool_watcher app_health_watcher(struct app *a);
tool_watcher app_timers_watcher(struct app *a);

/* candidate/health.c */
void app_health_start(struct app *a);
/* A pass of the checks: true when *r holds a result for campaign.c. */
bool app_health_process(struct app *a, app_health_report *r);
void app_health_free(struct app *a);
/* A leader stepped down for its health: the hold-off, doubled in a row. */
void app_health_holdoff(struct app *a);

/* switchover/request.c */
int app_cmd_switchover(struct app *a);
/* switchover/candidate.c */
void app_sw_start(struct app *a); /* candidates: join the protocol */
tool_watcher app_sw_watcher(struct app *a);
void app_sw_free(struct app *a);    /* before the client is freed */
void app_sw_release(struct app *a); /* after */

/* commands/observe.c */
int app_cmd_leader(struct app *a);
int app_start_observe(struct app *a);

/* app/status.c */
void app_start_follow(struct app *a);
void app_note_event(struct app *a, const elector_event *ev);
void app_notify_open(struct app *a);
tool_watcher app_notify_watcher(struct app *a); /* status, watchdog pings */
void app_notify_stop(struct app *a);
/* --http's view (ops/http.h's tool_view_fn: ud is the app, v a tool_view *). */
void app_fill_view(void *ud, struct tool_view *v);

#endif
