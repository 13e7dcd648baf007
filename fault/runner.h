/* SPDX-License-Identifier: MIT */
/* fault-runner internals shared by runner.c (processes, logs, etcd, netns) and
 * scenarios.c (what each scenario does per round). */
#ifndef ELECTOR_FAULT_RUNNER_H
#define ELECTOR_FAULT_RUNNER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "etcd_harness.h"

#define FR_MAX_CANDS 4096
#define FR_KEYMAX 200

typedef struct fr_cand {
    int id;
    pid_t pid; /* 0 once reaped */
    bool netns;
    bool stopped;
    int64_t stopped_at;
    char log_path[512];
    off_t off;      /* how far its log has been read */
    char part[512]; /* an incomplete last line */
    size_t plen;
    /* what its log says */
    bool leading;
    int64_t token, elected_at;
    char key[FR_KEYMAX];
    bool waiting; /* campaigning: a "waiting" line since the last restart */
    char pred[FR_KEYMAX];
    char endpoint[128];
    int nelected;
    int64_t stall_at,
        stall_done; /* --stall-*: its stall began / its stalled write done */
    /* `elector run` candidates (fr_world.run): pid is elector's, also its process
     * group; the job's lines are in log_path, elector's stderr in err_path */
    char err_path[600];
    off_t err_off;
    char err_part[512];
    size_t err_plen;
    pid_t job_pid, guard_pid;    /* from the job main's "jstart" (guard = its parent) */
    pid_t escapee_pid;           /* the job's descendant outside its process group */
    int64_t job_term_at;         /* the job main's SIGTERM ("jterm"), 0 if none */
    int64_t job_start, job_last; /* job main's start, last line of any of its tree */
    int64_t elected_ns;          /* elector's own "elected" event (mono_ns) */
    int status;                  /* wait status once reaped */
    bool reaped;
} fr_cand;

typedef struct fr_world fr_world;
typedef void (*fr_tick_fn)(fr_world *w);

struct fr_world {
    const char *scenario;
    char dir[256];
    char election[128], txn_key[160], prefix[128];
    int rlog;                         /* runner.log */
    pid_t resource_pid, recorder_pid; /* recorder_pid -1: restart due */
    int64_t recorder_restart_at;
    const char *cand_args; /* extra candidate options of the scenario */
    const char *run_args;  /* extra `elector run` options of the scenario */
    bool slow;
    bool run; /* candidates are `elector run ... -- fault-job` processes */
    char res_sock[512];
    int64_t history_from;
    fr_cand c[FR_MAX_CANDS];
    int nc;
    int netns_idx; /* the candidate inside the network namespace, -1 if none */
    int round;
    fr_tick_fn tick; /* called while the runner waits (compaction storm) */
    int64_t tick_next;
    int64_t t_begin;
    bool tearing_down;
};

/* Options and run-wide state. */
typedef struct fr_run {
    int ttl_s;
    int rounds;
    unsigned long long seed;
    double duration_s; /* > 0: soak (random mix) for this long */
    const char *out;
    const char *bin_dir;
    char tag[9];
    eh_cluster *cl;
    /* the netns scenarios: the candidates' namespace (ns) and the forwarder's
     * (fw_ns), joined by a veth pair; nothing of it in the root namespace */
    bool have_netns;
    char ns[32], fw_ns[32], veth_cand[16], veth_fw[16];
    char cand_ip[32], fw_ip[32];
    pid_t proxy_pid;
    char *root_addrs; /* the root namespace's addresses at the start */
    int root_gained;  /* addresses it gained since (must stay 0) */
    pid_t slow_pid;   /* the delaying proxy: slow_port[i] -> member i */
    int slow_port[EH_MAX_MEMBERS];
    int slow_delay_ms;
    int64_t bound_ms;
} fr_run;

extern fr_run R;

/* ---- time, randomness ---- */
int64_t fr_now(void);
uint64_t fr_rand(void);
int fr_rand_int(int n); /* 0..n-1 */

/* ---- the runner's log (runner.log) and console ---- */
void fr_log(fr_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fr_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fr_mark_fault(fr_world *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void fr_mark_heal(fr_world *w, const char *what);
/* ... with this round's own liveness bound (a fault whose recovery etcd slows) */
void fr_mark_heal_bound(fr_world *w, const char *what, int64_t bound_ms);
void fr_mark_end(fr_world *w);
void fr_quiet(fr_world *w, bool begin); /* no term may start inside (no quorum) */

/* ---- waiting: reads logs, reaps, runs the tick, honours ^C ---- */
void fr_pump(fr_world *w);
void fr_sleep(fr_world *w, int ms);
void fr_sleep_until(fr_world *w, int64_t t);

/* ---- candidates ---- */
int fr_spawn(fr_world *w, bool netns); /* index, or -1 */
int fr_replace(fr_world *w, int i);    /* a new candidate where i was (netns too) */
void fr_signal(fr_world *w, int i, int sig);
void fr_signal_group(fr_world *w, int i, int sig);    /* to elector's process group */
int fr_reap_wait(fr_world *w, int i, int timeout_ms); /* wait for its exit: 0, or -1 */
void fr_kill(fr_world *w, int i);                     /* SIGKILL + reap */
void fr_term(fr_world *w, int i, int wait_ms); /* SIGTERM, wait, SIGKILL if needed */
int fr_leader(fr_world *w);                    /* live, running leader, or -1 */
int fr_wait_leader(fr_world *w, int exclude, int exclude2, int timeout_ms);
int fr_live_count(fr_world *w);
int fr_random_waiter(fr_world *w);
int fr_next_in_line(fr_world *w, int leader);
bool fr_ensure_leader(fr_world *w, int want); /* rotate with SIGTERM until want leads */
int fr_member_of(const char *endpoint);       /* member index of an endpoint, -1 */

/* `elector ARGS` against the cluster (fr_spawn_elector), and its end */
pid_t fr_spawn_elector(fr_world *w, const char *const args[], const char *out_path);
int fr_wait_pid(fr_world *w, pid_t pid, int timeout_ms); /* wait status, -1: timeout */

/* ---- etcd ---- */
int fr_restore_members(fr_world *w); /* restart/resume every member, wait healthy */
int64_t fr_revision(void);           /* current store revision, -1 on error */
int fr_compact(int64_t rev);
int fr_revoke_key_lease(const char *key); /* `etcdctl lease revoke` of NAME/<lease hex> */
int64_t fr_noise(void);                   /* a put outside the scenario: a new revision */
/* nospace: 100 KiB puts under fault-fill/ until etcd refuses with ENOSPACE (0),
 * and the operator's way back: delete them, compact, defrag, alarm disarm. */
int fr_fill_until_nospace(int max, int *puts);
int fr_clear_nospace(void);
bool fr_sync_recorder(fr_world *w); /* wait until etcd's history is recorded to now */

/* ---- network namespaces ---- */
int fr_link(bool up); /* the veth pair between the candidates and the forwarder */

/* ---- scenarios (scenarios.c) ---- */
typedef struct fr_scenario {
    const char *name;
    const char *what;
    int ncand;             /* candidates on the host */
    bool netns;            /* plus one in the network namespace */
    int rounds;            /* 0: --rounds */
    const char *cand_args; /* extra fault-candidate options, space separated */
    bool slow;             /* candidates reach etcd through the delaying proxy */
    bool run;              /* `elector run` candidates; cand_args go to fault-job */
    const char *run_args;  /* with run: extra options of `elector run` */
    bool optional;         /* run only when named in --scenarios */
    bool tls;   /* the cluster runs with TLS (fault-candidate scenarios only) */
    bool quota; /* the members run with a small backend quota (nospace) */
    int (*round)(fr_world *w, int r); /* 0 ok, -1 could not run the round */
} fr_scenario;

extern const fr_scenario fr_scenarios[];
extern const int fr_nscenarios;
int fr_round_mix(fr_world *w, int r);

#endif
