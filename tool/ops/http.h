/* SPDX-License-Identifier: MIT */
/* The tool's HTTP status endpoint (libmicrohttpd, driven by our own event loop:
 * no server threads). GET /leader (JSON), /healthz (200 while the session is
 * healthy; ?leader=1: 200 only while leader), /metrics (Prometheus text format). */
#ifndef ELECTOR_TOOL_HTTP_H
#define ELECTOR_TOOL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "elector/election.h"
#include "ops/loop.h"

/* A snapshot of what the endpoints report, filled by the tool on each request. */
typedef struct tool_view {
    const char *name;     /* election name */
    bool session_healthy; /* we hold a live session (or, observe: connected) */
    bool is_leader;       /* elector_is_leader() now */
    bool has_leader;      /* a leader is known (ours or observed) */
    const uint8_t *key;   /* the leader's key, value, token, lease */
    size_t key_len;
    const uint8_t *value;
    size_t value_len;
    int64_t token;
    int64_t lease;
    int64_t since_unix_ms;       /* wall time when this process learned of this leader */
    int since_kind;              /* what since_unix_ms is: a tool_since */
    uint64_t leadership_changes; /* times this process became or stopped being leader */
    uint64_t leader_changes;     /* times the election's leader changed, as seen here */
    uint64_t start_retries;      /* failed attempts to reach etcd at start */
    const char *version;         /* elector_build_info's label; NULL: not shown */
    double lease_remaining_s;    /* validity deadline - now, 0 if none */
    const char *health;      /* --health-cmd: starting, healthy, unhealthy; NULL: none */
    int health_failures;     /* consecutive failed checks */
    bool alarm_on;           /* the last campaign was refused by an etcd alarm */
    uint64_t alarm_refusals; /* campaigns refused by an etcd alarm */
    uint64_t restores;       /* sessions ended by a restore of etcd (ERESTORED) */
    const elector_session_stats *ka; /* NULL without a session */
    const elector_etcd_stats *etcd;  /* never NULL */
} tool_view;

/* What a leader's "since" is (GET /leader's since_kind). */
enum tool_since {
    TOOL_SINCE_NONE = 0,
    TOOL_SINCE_ELECTED,   /* this process won: the time it was elected */
    TOOL_SINCE_CHANGE,    /* seen taking over from the leader before it: at or
                             shortly after leadership began (the watch's delay, or
                             a lost connection's length) */
    TOOL_SINCE_FIRST_SEEN /* it already led when this process first looked:
                             leadership began at or before, how long is unknown */
};

typedef void (*tool_view_fn)(void *ud, tool_view *v);

typedef struct tool_http tool_http;

/* Listens on addr: "HOST:PORT", ":PORT" or "PORT" (host defaults to 127.0.0.1;
 * "[::1]:PORT" for IPv6). Returns NULL with a message in err (e.g. "cannot listen
 * on 127.0.0.1:80: Permission denied") on failure. */
tool_http *tool_http_start(const char *addr, tool_view_fn fn, void *ud, char *err,
                           size_t cap);

/* 0 when addr is a valid address for tool_http_start (the host resolves), else
 * -1 with a message in err: a usage error, unlike a port already taken. */
int tool_http_check_addr(const char *addr, char *err, size_t cap);

/* One fd to poll for POLLIN, the ms until tool_http_process() must run (-1: none). */
int tool_http_fd(const tool_http *h);
int64_t tool_http_timeout(tool_http *h);
void tool_http_process(tool_http *h);
/* The three as a watcher of the tool's loop (ops/loop.h). */
tool_watcher tool_http_watcher(tool_http *h);
void tool_http_stop(tool_http *h); /* NULL is a no-op */

/* The port listened on (the one the kernel chose for port 0), and the address
 * as "127.0.0.1:8080" or "[::1]:8080", for logs. */
int tool_http_port(const tool_http *h);
const char *tool_http_addr(const tool_http *h);

/* Renders the Prometheus text exposition of v into a malloc'd string. */
char *tool_metrics_render(const tool_view *v);

/* GET /healthz's body with a health check: "ok\nhealth: healthy\n", or
 * "unhealthy\nhealth: unhealthy (3 failures)\n" (malloc'd). */
char *tool_healthz_body(const tool_view *v);

/* Renders GET /leader's JSON object (one line, no newline) into a malloc'd string. */
char *tool_leader_json(const tool_view *v);

#endif
