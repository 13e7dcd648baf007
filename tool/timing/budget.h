/* SPDX-License-Identifier: MIT */
/* `elector timing`: the timing budget that follows from the settings (issue 40
 * item 4). Pure arithmetic over the library's and etcd's constants, no I/O but
 * the report; docs/OPERATIONS.md "Timing budget" explains every line. */
#ifndef ELECTOR_TOOL_TIMING_BUDGET_H
#define ELECTOR_TOOL_TIMING_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* etcd's lessor looks for expired leases this often (lease/lessor.go). */
#define TOOL_TIMING_ETCD_SCAN_MS 500
/* A renewal that failed is tried again this much later (session.c). */
#define TOOL_TIMING_RENEW_RETRY_MS 250

typedef struct tool_timing_in {
    int64_t ttl_ms;              /* the session's TTL (whole seconds, as etcd's) */
    int64_t margin_ms;           /* 0: the library's max(TTL/10, 200 ms) */
    int64_t grace_ms;            /* -1: run's min(2 s, TTL/4) */
    int64_t rtt_ms;              /* one round trip to etcd */
    int64_t election_timeout_ms; /* etcd's --election-timeout */
    double drift;       /* how much slower the leader's clock may run (0.01: 1 %) */
    bool release;       /* a release helper revokes at a crash */
    bool grace_on_loss; /* run --grace-on-loss */
} tool_timing_in;

typedef struct tool_timing_out {
    int64_t margin_ms, grace_ms, renew_every_ms;
    int64_t believe_ms;      /* after a renewal's send, the belief lasts this long */
    int64_t crash_helper_ms; /* crash, the helper revokes: about this */
    int64_t expiry_ms;       /* crash without helper, freeze, partition: at most */
    int64_t raft_change_ms;  /* the same with a new etcd Raft leader meanwhile */
    int64_t outage_ms;       /* etcd unreachable this long: still leading */
    int64_t outage_cmd_ms;   /* ... and run's command not yet stopped */
    int64_t gap_ms;          /* old belief's end to the earliest expiry, drift included */
    double drift_max;        /* the slowest clock that keeps gap_ms > 0 */
} tool_timing_out;

/* Fills out from in. Returns 0, or -1 with a sentence in err when the settings
 * are refused: the guard could not stop the command before the lease can
 * expire (the drift eats the margin), the belief would lapse between two
 * healthy renewals, or --grace would stop the command between two healthy
 * renewals. */
int tool_timing_budget(const tool_timing_in *in, tool_timing_out *out, char *err,
                       size_t cap);

/* The report of `elector timing` on f. */
void tool_timing_report(const tool_timing_in *in, const tool_timing_out *out, FILE *f);

#endif
