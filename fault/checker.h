/* SPDX-License-Identifier: MIT */
/* The leadership-history checker of the fault suite (plain C, no library).
 *
 * It reads one scenario directory, written by fault-runner and the processes it
 * started (all on one machine, all times CLOCK_MONOTONIC nanoseconds):
 *
 *   runner.log     what the runner did: config, spawn/death of candidates,
 *                  fault/heal/endround marks per round, teardown
 *   cand-N.log     each candidate's beliefs and writes (see candidate.c), or, for
 *                  `elector run` candidates, its command's tree's activity (job.c)
 *   resource.log   each write that reached the fenced resource (see resource.c)
 *   history.jsonl  etcd's own history of the scenario's keys: the output of
 *                  `etcdctl watch --prefix PREFIX --rev=START -w json`
 *
 * and verifies the safety and liveness properties listed in docs/FAULTS.md.
 */
#ifndef ELECTOR_FAULT_CHECKER_H
#define ELECTOR_FAULT_CHECKER_H

#include <stdint.h>
#include <stdio.h>

typedef struct fc_opts {
    int64_t bound_ms; /* liveness bound after a heal; 0: from runner.log (TTL + 2 s) */
} fc_opts;

typedef struct fc_rss {
    int id;
    long first_kb, last_kb;
    double lived_s;
} fc_rss;

typedef struct fc_result {
    char scenario[64];
    int rounds;
    int intervals; /* leadership terms seen */
    int losses;    /* terms that ended by LOST (not resign, not death) */
    /* safety */
    int overlaps;            /* pairs of terms that overlap in time */
    int token_order;         /* token not strictly above the previous term's */
    int token_mismatch;      /* token is not the create revision etcd holds for the key */
    int token_unverified;    /* no etcd history for that revision (compaction gap) */
    int stale_accepted;      /* resource accepted a write while another term was active,
                                or a token below one it had accepted (self-check) */
    int write_outside;       /* a candidate wrote while not within its own term */
    int txn_order;           /* guarded Txn puts in etcd history with decreasing token */
    int txn_guard;           /* guarded Txn put at a revision where the token's key
                                was already gone */
    int unknown_token;       /* accepted write or Txn with a token no term had */
    int not_etcd_leader;     /* a term's key was deleted while a key created before it
                                still existed: it never was the lowest (etcd's leader) */
    int txn_phantom;         /* a guarded Txn reported success but etcd has no such put */
    int transitions;         /* a candidate's own account leaves the model's automaton
                                (model/election.pml: idle -> leader -> idle): elected
                                while its term was open, or lost/resigned for a token
                                it never was elected with */
    int no_quorum_elections; /* a term began while etcd had no quorum */
    /* information */
    int late_writes;    /* accepted after the writer's term ended, nobody else leading */
    int fenced_rejects; /* writes the resource refused (fencing at work) */
    long accepted_writes;
    long txn_puts; /* guarded puts found in etcd history */
    int history_gaps;
    long watch_requests; /* watch create/cancel messages the candidates sent */
    /* liveness */
    int liveness;             /* leaderless longer than the bound after a heal */
    int kept;                 /* rounds without any leaderless moment */
    int nfailover;            /* rounds with a leaderless moment */
    double failover_ms[4096]; /* leaderless time after the heal (the bounded one) */
    double p50_ms, p99_ms, max_ms;
    int ntakeover;
    double takeover_ms[4096]; /* fault -> first term that began after it */
    double take_p50_ms, take_max_ms;
    int64_t bound_ms;
    /* memory of candidates (RSS from their logs) */
    int nrss;
    fc_rss rss[4096];
    /* what a scenario expects of the tool beyond safety and liveness (runner.log
     * "expect R ok|fail TEXT": an exit status, a lease released by the guard) */
    int expect_ok, expect_fail;
    int errors; /* unreadable or malformed inputs */
} fc_result;

/* Checks the scenario in dir, writes a human report (every violation with
 * candidates, times and tokens, one line per round) to report (may be NULL),
 * fills r. Returns the number of safety + liveness violations (0: all good), or
 * -1 if the directory could not be read. */
int fc_check(const char *dir, const fc_opts *o, fc_result *r, FILE *report);

/* Safety violations only. */
int fc_safety(const fc_result *r);

#endif
