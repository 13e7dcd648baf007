/* SPDX-License-Identifier: MIT */
/* Helpers shared by the election tests: in-process candidates pumped by one
 * poll loop, and candidates in child processes (for SIGKILL / SIGSTOP faults)
 * that report their events as text lines on a pipe. */
#ifndef ELECTOR_TEST_ELECT_UTIL_H
#define ELECTOR_TEST_ELECT_UTIL_H

#include <stdbool.h>
#include <sys/types.h>
#include "elector/election.h"
#include "etcd_harness.h"

#define EU_MAX_EVENTS 64

typedef struct eu_cand {
    elector_etcd *etcd;
    elector_session *s;
    elector_election *el;
    int n; /* events received */
    elector_event_type types[EU_MAX_EVENTS];
    int reasons[EU_MAX_EVENTS];
    int64_t tokens[EU_MAX_EVENTS];
    int64_t mono[EU_MAX_EVENTS];      /* ev->mono_ns: when the belief changed */
    int64_t delivered[EU_MAX_EVENTS]; /* when the callback ran (deadline clock) */
    bool leader_in_cb[EU_MAX_EVENTS]; /* elector_is_leader() inside the callback */
    int64_t deadline_seen;            /* last session deadline observed by pumping */
    char last_key[256];               /* key of the last event */
    char last_value[256];
} eu_cand;

/* A client on the given endpoints (dial timeout 2 s, request timeout 3 s). */
elector_etcd *eu_client(const char *endpoints);

/* Client + session(ttl) + election(name); the session is granted before return. */
eu_cand *eu_cand_new(const char *endpoints, const char *name, int ttl_s);
void eu_cand_free(eu_cand *c); /* closes the session synchronously */
/* The candidates' event callback (ud: the eu_cand): for a new election of c. */
void eu_cand_cb(elector_election *el, const elector_event *ev, void *ud);
/* The same on a client made by the caller (TLS, auto-sync, ...); it takes it. */
eu_cand *eu_cand_new_client(elector_etcd *etcd, const char *name, int ttl_s);

/* Pumps every live candidate's client (and extra clients) for up to ms, or until
 * pred(arg) is true; returns pred's last value. */
bool eu_pump_until(int ms, bool (*pred)(void *), void *arg);
void eu_pump(int ms);
void eu_register_client(elector_etcd *e);
void eu_unregister_client(elector_etcd *e);

/* Waits until candidate c received an event of `type` (counting from index
 * `from`); returns its index or -1 on timeout. */
int eu_wait_event(eu_cand *c, int from, elector_event_type type, int ms);

/* ---- candidates in child processes ---- */
typedef struct eu_child {
    pid_t pid;
    int fd; /* read end: one event per line */
    char buf[4096];
    size_t len;
    void (*on_line)(const char *line); /* optional: sees every line read */
} eu_child;

/* Forks a candidate campaigning for name with value. Its lines:
 *   "elected TOKEN MONO_NS", "lost REASON MONO_NS", "failed REASON MONO_NS",
 *   "waiting KEY", "leader 0|1 MONO_NS" (each change of elector_is_leader()),
 *   "proclaim RC" (after a loss it tries to proclaim once and reports rc). */
int eu_child_start(eu_child *ch, const char *endpoints, const char *name,
                   const char *value, int ttl_s);
/* Reads the next line that starts with prefix (others are skipped) into line;
 * returns 0, or -1 on timeout/EOF. */
int eu_child_expect(eu_child *ch, const char *prefix, char *line, size_t cap, int ms);
void eu_child_kill(eu_child *ch); /* SIGKILL + reap */

/* Wraps an already spawned process (pid, its stdout pipe) so that
 * eu_child_expect can read its lines. */
void eu_child_wrap(eu_child *ch, pid_t pid, int fd);

/* The stall settings of a client with own_thread. */
typedef struct eu_stall {
    int64_t stall_ms;
    void (*on_stall)(elector_etcd *etcd, int64_t running_ms, void *ud);
    void *ud;
} eu_stall;

/* elector_etcd_new() with own_thread, and sc's stall settings (NULL: the
 * defaults): 0 and *out, or the client's error (the client freed, *out
 * NULL). */
int eu_own_new(const elector_etcd_config *cfg, const eu_stall *sc, elector_etcd **out);

#endif
