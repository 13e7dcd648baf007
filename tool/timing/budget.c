/* SPDX-License-Identifier: MIT */
/* `elector timing`: see budget.h. The constants are the code's own: the
 * margin (session.c margin_ns), renewals every TTL/3 and again every 250 ms
 * after a failure (session.c), run's --grace default (main.c), etcd's 500 ms
 * expiry scan and its Promote on a new Raft leader (docs/FAULTS.md "Bounds"). */
#include "timing/budget.h"

#include <stdio.h>

/* The figures, whatever they say. */
static void figures(const tool_timing_in *in, tool_timing_out *out)
{
    int64_t ttl = in->ttl_ms, rtt = in->rtt_ms > 0 ? in->rtt_ms : 0;
    out->margin_ms = in->margin_ms > 0 ? in->margin_ms : ttl / 10 < 200 ? 200 : ttl / 10;
    out->grace_ms = in->grace_ms >= 0 ? in->grace_ms : ttl / 4 < 2000 ? ttl / 4 : 2000;
    out->renew_every_ms = ttl / 3;
    out->believe_ms = ttl - out->margin_ms;
    out->crash_helper_ms = 3 * rtt; /* revoke; the DELETE event; the successor's check */
    out->expiry_ms = ttl + TOOL_TIMING_ETCD_SCAN_MS + 2 * rtt;
    /* A new Raft leader is elected within about two election timeouts, then
     * extends every lease to now + election timeout + its whole TTL. */
    out->raft_change_ms = 3 * in->election_timeout_ms + out->expiry_ms;
    out->drift_max = (double)out->margin_ms / (double)ttl;
    /* The leader's clock runs slow by drift: its deadline, believe_ms by its
     * clock, comes believe / (1 - drift) after the renewal's send; etcd expires
     * the lease ttl after receiving it, at the earliest ttl after the send. */
    double real_end = in->drift < 1 ? (double)out->believe_ms / (1 - in->drift) : 1e18;
    out->gap_ms = ttl - (int64_t)(real_end + 0.999);
    /* An outage that begins just before a renewal is sent: the renewals are
     * tried every 250 ms, each answered a round trip later, until the deadline. */
    out->outage_ms =
        out->believe_ms - out->renew_every_ms - TOOL_TIMING_RENEW_RETRY_MS - rtt;
    out->outage_cmd_ms = out->outage_ms - out->grace_ms;
}

/* Settings under which the guard cannot keep its promise, or breaks it for
 * nothing: a sentence in err that says what to change. */
static int refusal(const tool_timing_in *in, const tool_timing_out *out, char *err,
                   size_t cap)
{
    int64_t ttl = in->ttl_ms, rtt = in->rtt_ms > 0 ? in->rtt_ms : 0;
    if (out->margin_ms >= ttl) {
        snprintf(err, cap, "a margin of %lldms leaves nothing of a %llds TTL",
                 (long long)out->margin_ms, (long long)(ttl / 1000));
        return -1;
    }
    if (out->gap_ms <= 0) {
        snprintf(err, cap,
                 "a clock %.2f%% slow moves the leader's deadline past the earliest "
                 "expiry of its lease: the guard could not stop the command before "
                 "another may lead. The margin (%lldms of a %llds TTL) covers up to "
                 "%.2f%%: use a larger --margin",
                 in->drift * 100, (long long)out->margin_ms, (long long)(ttl / 1000),
                 out->drift_max * 100);
        return -1;
    }
    if (out->believe_ms <= out->renew_every_ms + rtt) {
        snprintf(err, cap,
                 "the belief (TTL - margin = %lldms) would end before the next renewal "
                 "(every TTL/3 = %lldms) is answered: use a smaller --margin",
                 (long long)out->believe_ms, (long long)out->renew_every_ms);
        return -1;
    }
    if (out->grace_ms >= out->believe_ms - out->renew_every_ms - rtt) {
        snprintf(err, cap,
                 "--grace %lldms: the guard would send SIGTERM to the command between "
                 "two renewals that succeed (the deadline is %lldms after a renewal, the "
                 "next one is answered %lldms after it): use --grace below %lldms or a "
                 "longer --ttl",
                 (long long)out->grace_ms, (long long)out->believe_ms,
                 (long long)(out->renew_every_ms + rtt),
                 (long long)(out->believe_ms - out->renew_every_ms - rtt));
        return -1;
    }
    return 0;
}

int tool_timing_budget(const tool_timing_in *in, tool_timing_out *out, char *err,
                       size_t cap)
{
    *out = (tool_timing_out){0};
    if (in->ttl_ms < 1000) {
        snprintf(err, cap, "--ttl must be at least 1s (etcd counts whole seconds)");
        return -1;
    }
    figures(in, out);
    return refusal(in, out, err, cap);
}

/* A duration as the tool writes it: 15ms, 10.52s. */
static const char *dur(int64_t ms, char *buf, size_t cap)
{
    if (ms < 1000 && ms > -1000)
        snprintf(buf, cap, "%lldms", (long long)ms);
    else
        snprintf(buf, cap, "%.2fs", (double)ms / 1000);
    return buf;
}

void tool_timing_report(const tool_timing_in *in, const tool_timing_out *o, FILE *f)
{
    char a[32], b[32], c[32], d[32];
    fprintf(f, "settings: --ttl %s, margin %s, renewals every %s; --grace %s\n",
            dur(in->ttl_ms, a, sizeof a), dur(o->margin_ms, b, sizeof b),
            dur(o->renew_every_ms, c, sizeof c), dur(o->grace_ms, d, sizeof d));
    fprintf(
        f, "assumed:  etcd round trip %s, etcd election timeout %s, clock drift %.3g%%\n",
        dur(in->rtt_ms, a, sizeof a), dur(in->election_timeout_ms, b, sizeof b),
        in->drift * 100);
    fprintf(f, "\nWorst-case failover (until another candidate leads):\n");
    if (in->release)
        fprintf(f,
                "  crash (SIGKILL, segfault, OOM kill)  about %s (the release helper "
                "revokes the lease)\n",
                dur(o->crash_helper_ms, a, sizeof a));
    fprintf(f,
            "  crash without the release helper     %s (TTL, etcd's expiry scan, 2 round "
            "trips)\n",
            dur(o->expiry_ms, a, sizeof a));
    fprintf(f,
            "  freeze (SIGSTOP, VM paused)          %s (nobody can revoke: the lease "
            "expires)\n",
            dur(o->expiry_ms, a, sizeof a));
    fprintf(f,
            "  partition (leader cut from etcd)     %s after its last renewal; it stops "
            "believing it leads %s after that renewal's send\n",
            dur(o->expiry_ms, a, sizeof a), dur(o->believe_ms, b, sizeof b));
    fprintf(f,
            "  any of these with a new etcd leader  %s (etcd extends every lease by "
            "TTL + election timeout)\n",
            dur(o->raft_change_ms, a, sizeof a));
    fprintf(f, "\nSafety (never two leaders):\n");
    fprintf(f,
            "  the old leader's belief ends, and run's guard has killed its command, "
            "%s before etcd can expire the lease (margin, less the drift)\n",
            dur(o->gap_ms, a, sizeof a));
    fprintf(f, "  clock drift tolerated                %.2f%% slow (margin / TTL)\n",
            o->drift_max * 100);
    if (in->grace_on_loss)
        fprintf(f,
                "  --grace-on-loss: a key or lease deleted from outside leaves the "
                "command running up to %s while another may lead\n",
                dur(o->grace_ms, a, sizeof a));
    fprintf(f, "\nTolerated etcd outage (no quorum, network) without a failover:\n");
    fprintf(f, "  leadership kept                      %s\n",
            dur(o->outage_ms, a, sizeof a));
    fprintf(f, "  run's command not stopped            %s (less --grace)\n",
            dur(o->outage_cmd_ms > 0 ? o->outage_cmd_ms : 0, a, sizeof a));
}
