/* SPDX-License-Identifier: MIT */
/* The scenarios of the fault suite: what one round of each does. Every round
 * marks "fault" (what was done), "heal" (from when a leader is due again within
 * the bound: the fault itself when the rest of the system can take over at once,
 * the restore when etcd was down) and "endround" in runner.log; the checker
 * works from those marks and the logs. See docs/FAULTS.md. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "futil.h"

#include "runner.h"

/* Margin after killing members before "no quorum" is asserted: a Txn committed
 * just before may still be answered (and its candidate still be scheduled). */
#define QUIET_SLACK_MS 300

static int bound(void)
{
    return (int)R.bound_ms;
}

static int ttl_ms(void)
{
    return R.ttl_s * 1000;
}

/* Ends a round once a leader is there (or the bound has long passed), after a
 * short settle so that a flapping leadership would be seen inside the round. */
static int finish(fr_world *w, int exclude, int exclude2)
{
    int l = fr_wait_leader(w, exclude, exclude2, bound() + 3000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    if (l < 0)
        fr_say("   no new leader within %d ms", bound() + 3000);
    else
        fr_say("   leader now cand %d (token %" PRId64 ")", l, w->c[l].token);
    return 0;
}

static int need_leader(fr_world *w)
{
    int l = fr_wait_leader(w, -1, -1, bound() + 3000);
    if (l < 0) fr_log(w, "note no leader to start round %d from", w->round);
    return l;
}

/* etcd's election timeout (the harness runs etcd with its defaults: heartbeat
 * 100 ms, election 1000 ms). */
#define ETCD_ELECTION_MS 1000

/* After a fault inside etcd that keeps a quorum alive: "heal" is the moment the
 * remaining members have elected a Raft leader. Before that no lease can expire
 * and nobody can be elected; from then on etcd runs leases again.
 *
 * The bound of such a round is not TTL + 2 s after the heal (docs/FAULTS.md,
 * "Bounds"; the soak's finding):
 *  - when the new Raft leader applies the first entry of its term, its lessor
 *    Promote()s: every lease gets now + election timeout + its whole TTL (etcd
 *    3.4 keeps no remaining TTL without --experimental-enable-lease-checkpoint),
 *    so a dead session's lease lives TTL + 1 s after the heal;
 *  - a frozen Raft leader (resume_at != 0) holds renewals its clients sent before
 *    their deadlines — in its socket buffers, and on the followers, whose
 *    keepalive streams wait on renewals forwarded to it. When it resumes, it
 *    answers them (as a stale primary) and the followers forward the rest to the
 *    new leader: leases whose holders gave up are renewed for another TTL from the
 *    resume. The revoke a dying session sent lands on the stale leader as a
 *    proposal of its old term and is lost ("failed to revoke lease ... request
 *    timed out" 7 s later).
 * Hence: max(TTL + election timeout, resume - heal + TTL) + 2 s, the 2 s being
 * the base bound's slack for the lessor's 500 ms scan, the revoke's commit, the
 * handover and a shared 2-core machine. */
static void heal_at_raft_leader(fr_world *w, const char *what, int64_t resume_at)
{
    int64_t end = fr_now() + 15000000000LL;
    while (eh_leader(R.cl) < 0 && fr_now() < end)
        fr_sleep(w, 20);
    int64_t ms = R.ttl_s * 1000 + ETCD_ELECTION_MS;
    int64_t after_resume =
        resume_at ? (resume_at - fr_now()) / 1000000 + R.ttl_s * 1000 : 0;
    if (after_resume > ms) ms = after_resume;
    fr_mark_heal_bound(w, what, ms + (R.bound_ms - R.ttl_s * 1000));
}

/* ---------------------------------------------------------------- processes */

static int r_kill(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    fr_mark_fault(w, "SIGKILL leader cand %d (token %" PRId64 ")", l, w->c[l].token);
    fr_kill(w, l);
    fr_mark_heal(w, "leader dead");
    finish(w, l, -1);
    fr_replace(w, l);
    return 0;
}

static int r_term(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    fr_mark_fault(w, "SIGTERM leader cand %d (token %" PRId64 "): resign", l,
                  w->c[l].token);
    fr_mark_heal(w, "resigning");
    fr_term(w, l, 5000);
    finish(w, l, -1);
    fr_replace(w, l);
    return 0;
}

static int r_stop(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w, "SIGSTOP leader cand %d (token %" PRId64 ") for %d ms, then SIGCONT",
                  l, w->c[l].token, ttl_ms() + 1000);
    fr_signal(w, l, SIGSTOP);
    fr_mark_heal(w, "leader frozen");
    int n = fr_wait_leader(w, l, -1, bound() + 3000);
    fr_sleep_until(w, t + (int64_t)(ttl_ms() + 1000) * 1000000);
    fr_signal(w, l, SIGCONT);
    /* the resumed one must report the loss at once (its log is read here) */
    int64_t end = fr_now() + 2000000000LL;
    while (w->c[l].leading && fr_now() < end)
        fr_sleep(w, 5);
    if (w->c[l].leading)
        fr_log(w, "note cand %d still believes it leads 2 s after SIGCONT", l);
    fr_sleep(w, 300);
    fr_mark_end(w);
    fr_say("   leader now cand %d; resumed cand %d %s", n, l,
           w->c[l].leading ? "STILL BELIEVES IT LEADS" : "reported the loss");
    return 0;
}

static int r_waiter(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int64_t end = fr_now() + 5000000000LL;
    int next;
    while ((next = fr_next_in_line(w, l)) < 0 && fr_now() < end)
        fr_sleep(w, 10);
    if (next < 0) {
        fr_log(w, "note nobody waits right behind cand %d", l);
        return -1;
    }
    int64_t t = fr_now();
    fr_signal(w, next, SIGSTOP);
    fr_sleep(w, 300);
    fr_mark_fault(w, "SIGSTOP next-in-line cand %d for %d ms, SIGTERM leader cand %d",
                  next, ttl_ms() + 1000, l);
    fr_mark_heal(w, "leader resigning, next in line frozen");
    fr_term(w, l, 5000);
    /* the frozen waiter's key blocks until its lease expires; then another leads */
    int n = fr_wait_leader(w, next, l, bound() + 3000);
    fr_sleep_until(w, t + (int64_t)(ttl_ms() + 1000) * 1000000);
    fr_signal(w, next, SIGCONT);
    fr_sleep(w, 1000); /* it must fail its old campaign and start a new one, not lead */
    fr_mark_end(w);
    fr_say("   leader now cand %d; resumed waiter cand %d %s", n, next,
           w->c[next].leading ? "LEADS" : "does not lead");
    fr_replace(w, l);
    return 0;
}

/* The leader (started with --stall-*) freezes its own loop after checking
 * elector_is_leader() and queueing its guarded Txn, before its resource write:
 * an application's GC pause at the worst moment. The write arrives with the old
 * token after a successor has written: the resource must refuse it, and etcd
 * must refuse the guarded put. */
static int r_stall(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int64_t end = fr_now() + 5000000000LL;
    while (!w->c[l].stall_at && w->c[l].pid && fr_now() < end)
        fr_sleep(w, 5);
    if (!w->c[l].stall_at) {
        fr_log(w, "note cand %d did not stall", l);
        return -1;
    }
    fr_mark_fault(w,
                  "leader cand %d (token %" PRId64 ") stalls 3.5 s between its check and "
                  "its writes",
                  l, w->c[l].token);
    fr_mark_heal(w, "others can take over");
    int n = fr_wait_leader(w, l, -1, bound() + 3000);
    end = fr_now() + 8000000000LL;
    while (!w->c[l].stall_done && w->c[l].pid && fr_now() < end)
        fr_sleep(w, 5);
    fr_sleep(w, 300);
    fr_mark_end(w);
    fr_say("   leader now cand %d; the stalled write of cand %d was %s", n, l,
           w->c[l].stall_done ? "sent (see the resource log)" : "NOT SEEN");
    return 0;
}

/* ---------------------------------------------------------------- network */

static int r_partition(fr_world *w, int r)
{
    (void)r;
    int a = w->netns_idx;
    if (a < 0 || !w->c[a].pid) return -1;
    if (!fr_ensure_leader(w, a)) {
        fr_log(w, "note cannot make the netns candidate lead");
        return -1;
    }
    int64_t t = fr_now();
    fr_mark_fault(
        w, "veth down for %d ms: leader cand %d (token %" PRId64 ") cut off from etcd",
        ttl_ms() + 2000, a, w->c[a].token);
    fr_link(false);
    fr_mark_heal(w, "others can take over");
    int n = fr_wait_leader(w, a, -1, bound() + 3000);
    fr_sleep_until(w, t + (int64_t)(ttl_ms() + 2000) * 1000000);
    bool still = w->c[a].leading;
    fr_link(true);
    fr_log(w, "note veth up");
    fr_sleep(w, 300);
    fr_mark_end(w);
    fr_say("   leader now cand %d; cut-off cand %d %s", n, a,
           still ? "STILL BELIEVED IT LED at link up" : "had stepped down");
    return 0;
}

/* ---------------------------------------------------------------- etcd */

static void pick_two_others(int keep, int *x, int *y)
{
    int o[3], n = 0;
    for (int i = 0; i < 3; i++)
        if (i != keep) o[n++] = i;
    *x = o[0];
    *y = o[1];
}

static int r_minority(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int keep = fr_member_of(w->c[l].endpoint);
    if (keep < 0) keep = fr_rand_int(3);
    int x, y;
    pick_two_others(keep, &x, &y);
    fr_mark_fault(
        w, "SIGKILL members m%d m%d; leader cand %d stays connected to m%d (minority)", x,
        y, l, keep);
    eh_member_kill(R.cl, x);
    eh_member_kill(R.cl, y);
    fr_sleep(w, QUIET_SLACK_MS);
    fr_quiet(w, true);
    fr_sleep(w, ttl_ms() + 2000);
    bool still = w->c[l].leading;
    fr_quiet(w, false);
    int rc = fr_restore_members(w);
    fr_mark_heal(w, "quorum back");
    finish(w, -1, -1);
    fr_say("   cand %d %s at the end of the outage; restore %s", l,
           still ? "STILL BELIEVED IT LED" : "had stepped down", rc ? "FAILED" : "ok");
    return rc;
}

/* The member the leader talks to freezes while the other two keep quorum: the
 * client must notice the silent connection and renew through another member
 * before its deadline, or step down (spuriously) by it. */
static int r_endpoint_pause(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int m = fr_member_of(w->c[l].endpoint);
    if (m < 0) return -1;
    int raft = eh_leader(R.cl);
    int64_t t = fr_now();
    fr_mark_fault(w, "SIGSTOP m%d%s, the endpoint of leader cand %d, for %d ms", m,
                  m == raft ? " (also the Raft leader)" : "", l, ttl_ms() + 2000);
    eh_member_pause(R.cl, m);
    if (m == raft)
        heal_at_raft_leader(w, "a new Raft leader",
                            t + (int64_t)(ttl_ms() + 2000) * 1000000);
    else
        fr_mark_heal(w, "two members keep quorum");
    fr_sleep_until(w, t + (int64_t)(ttl_ms() + 2000) * 1000000);
    bool kept = w->c[l].leading && w->c[l].pid;
    eh_member_resume(R.cl, m);
    int rc = fr_restore_members(w);
    finish(w, -1, -1);
    fr_say("   leader cand %d %s", l, kept ? "kept its leadership" : "stepped down");
    return rc;
}

/* Moves etcd's Raft leadership to member m (etcdctl move-leader, sent to the
 * current leader). 0 when m leads afterwards. */
static int move_raft_leader(int m)
{
    int cur = eh_wait_leader(R.cl, 10);
    if (cur < 0) return -1;
    if (cur == m) return 0;
    char *out = NULL;
    eh_ctl_opts o = {.endpoints = eh_endpoint(R.cl, m), .timeout_s = 5};
    if (eh_etcdctl_opts(R.cl, &o, &out, "endpoint", "status", "-w", "json", NULL) != 0) {
        free(out);
        return -1;
    }
    const char *p = out ? strstr(out, "\"member_id\":") : NULL;
    unsigned long long id = p ? strtoull(p + 12, NULL, 10) : 0;
    free(out);
    if (!id) return -1;
    char hex[32];
    snprintf(hex, sizeof hex, "%llx", id);
    eh_ctl_opts lo = {.endpoints = eh_endpoint(R.cl, cur), .timeout_s = 10};
    if (eh_etcdctl_opts(R.cl, &lo, NULL, "move-leader", hex, NULL) != 0) return -1;
    for (int i = 0; i < 50; i++) {
        if (eh_leader(R.cl) == m) return 0;
        fu_msleep(100);
    }
    return -1;
}

/* The soak's one finding (docs/FAULTS.md): the paused member is both etcd's Raft
 * leader and the leader candidate's endpoint. Raft leadership is moved to that
 * member first (etcdctl move-leader), then it is SIGSTOPped for TTL + 2 s. The
 * leader candidate cannot renew (its connection is silent) and steps down by its
 * deadline; its lease is still on the books, and the new Raft leader extends every
 * lease when it takes over (lessor Promote: the full TTL + the election timeout
 * from that moment), so the successor waits for that, not for the old deadline.
 * Its bound is therefore not TTL + 2 s after the heal: see raft_pause_bound(). */
static int r_endpoint_raft_pause(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int m = fr_member_of(w->c[l].endpoint);
    if (m < 0) return -1;
    if (move_raft_leader(m) != 0) {
        fr_log(w, "note could not move etcd's Raft leadership to m%d", m);
        return -1;
    }
    fr_sleep(w, 1500); /* leases renewed under the new Raft leader; no fault yet */
    if (fr_leader(w) != l || fr_member_of(w->c[l].endpoint) != m ||
        eh_leader(R.cl) != m) {
        fr_log(w, "note the setup moved (leader cand %d, endpoint, Raft leader)", l);
        return -1;
    }
    int64_t t = fr_now();
    fr_mark_fault(
        w,
        "SIGSTOP m%d (also the Raft leader), the endpoint of leader cand %d, for "
        "%d ms",
        m, l, ttl_ms() + 2000);
    eh_member_pause(R.cl, m);
    heal_at_raft_leader(w, "a new Raft leader", t + (int64_t)(ttl_ms() + 2000) * 1000000);
    fr_sleep_until(w, t + (int64_t)(ttl_ms() + 2000) * 1000000);
    bool kept = w->c[l].leading && w->c[l].pid;
    eh_member_resume(R.cl, m);
    int rc = fr_restore_members(w);
    finish(w, -1, -1);
    fr_say("   leader cand %d %s", l, kept ? "kept its leadership" : "stepped down");
    return rc;
}

static int r_quorum(fr_world *w, int r)
{
    int x = fr_rand_int(3), y = (x + 1 + fr_rand_int(2)) % 3;
    bool pause = r % 2 == 0;
    int l = need_leader(w);
    fr_mark_fault(w, "%s members m%d m%d for %d ms (quorum lost)",
                  pause ? "SIGSTOP" : "SIGKILL", x, y, ttl_ms() + 2000);
    if (pause) {
        eh_member_pause(R.cl, x);
        eh_member_pause(R.cl, y);
    } else {
        eh_member_kill(R.cl, x);
        eh_member_kill(R.cl, y);
    }
    fr_sleep(w, QUIET_SLACK_MS);
    fr_quiet(w, true);
    fr_sleep(w, ttl_ms() + 2000);
    bool still = l >= 0 && w->c[l].leading;
    fr_quiet(w, false);
    int rc = fr_restore_members(w);
    fr_mark_heal(w, "quorum back");
    finish(w, -1, -1);
    fr_say("   leader cand %d %s at the end of the outage", l,
           still ? "STILL BELIEVED IT LED" : "had stepped down");
    return rc;
}

static int r_raft_kill(fr_world *w, int r)
{
    (void)r;
    int m = eh_wait_leader(R.cl, 10);
    if (m < 0) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w, "SIGKILL etcd Raft leader m%d, restart after 2.5 s", m);
    eh_member_kill(R.cl, m);
    heal_at_raft_leader(w, "a new Raft leader", 0); /* killed: nothing held for later */
    fr_sleep_until(w, t + 2500000000LL);
    int rc = eh_member_restart(R.cl, m);
    if (rc == 0) rc = fr_restore_members(w);
    finish(w, -1, -1);
    return rc;
}

static int r_raft_pause(fr_world *w, int r)
{
    (void)r;
    int m = eh_wait_leader(R.cl, 10);
    if (m < 0) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w, "SIGSTOP etcd Raft leader m%d for 3 s, then SIGCONT", m);
    eh_member_pause(R.cl, m);
    heal_at_raft_leader(w, "a new Raft leader", t + 3000000000LL);
    fr_sleep_until(w, t + 3000000000LL);
    eh_member_resume(R.cl, m);
    int rc = fr_restore_members(w);
    finish(w, -1, -1);
    return rc;
}

static int r_restart(fr_world *w, int r)
{
    int down_ms = r % 2 ? 1000 : ttl_ms() + 1000;
    fr_mark_fault(w, "SIGKILL all 3 members, restart after %d ms", down_ms);
    for (int i = 0; i < eh_members(R.cl); i++)
        eh_member_kill(R.cl, i);
    fr_quiet(w, true); /* nothing can commit: every member is dead */
    fr_sleep(w, down_ms);
    fr_quiet(w, false);
    int rc = fr_restore_members(w);
    fr_mark_heal(w, "cluster back");
    finish(w, -1, -1);
    return rc;
}

/* ---------------------------------------------------------------- compaction */

/* Every 10 ms: a new revision (a put elsewhere) and a compaction up to it. A
 * waiter's watch starts one revision after its check's reply; with 80 ms round
 * trips that revision is compacted by the time the watch is created. */
static int n_compactions, n_compact_fail;
static int64_t last_compacted;

static void compact_tick(fr_world *w)
{
    int64_t rev = fr_noise();
    if (rev > 0 && fr_compact(rev) == 0) {
        n_compactions++;
        last_compacted = rev;
    } else {
        n_compact_fail++;
    }
    w->tick_next = fr_now() + 10000000;
}

static int r_compact(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    /* compaction must not outrun the history recorder (it may be restarting
     * after an earlier fault); an active, synced watch is not affected */
    fr_sync_recorder(w);
    w->tick = compact_tick;
    w->tick_next = 0;
    n_compactions = n_compact_fail = 0;
    fr_sleep(w, 300);
    fr_mark_fault(w, "compaction every 10 ms; SIGTERM leader cand %d so waiters re-watch",
                  l);
    fr_mark_heal(w, "resigning");
    fr_term(w, l, 5000);
    int n = fr_wait_leader(w, l, -1, bound() + 3000);
    /* and once more right away, so a waiter re-watches a compacted revision */
    if (n >= 0) {
        fr_sleep(w, 100);
        fr_log(w, "note SIGTERM leader cand %d too", n);
        fr_term(w, n, 5000);
        fr_replace(w, n);
    }
    finish(w, l, n);
    w->tick = NULL;
    fr_log(w, "note %d compactions (last at revision %" PRId64 "), %d failed",
           n_compactions, last_compacted, n_compact_fail);
    fr_say("   %d compactions (up to revision %" PRId64 "), %d failed", n_compactions,
           last_compacted, n_compact_fail);
    fr_replace(w, l);
    return 0;
}

/* ---------------------------------------------------------------- many candidates */

static int r_churn(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int what = fr_rand_int(100);
    int v = -1;
    if (what < 30) {
        fr_mark_fault(w, "churn: SIGKILL leader cand %d", l);
        fr_kill(w, l);
        fr_mark_heal(w, "leader dead");
        finish(w, l, -1);
    } else if (what < 50) {
        fr_mark_fault(w, "churn: SIGTERM leader cand %d", l);
        fr_mark_heal(w, "resigning");
        fr_term(w, l, 5000);
        finish(w, l, -1);
    } else {
        /* three waiters at once: killed, terminated, frozen */
        int k = fr_random_waiter(w), t = -1, s = -1;
        if (k >= 0) fr_kill(w, k);
        t = fr_random_waiter(w);
        if (t >= 0) fr_term(w, t, 5000);
        s = fr_random_waiter(w);
        fr_mark_fault(w,
                      "churn: waiters: SIGKILL cand %d, SIGTERM cand %d, SIGSTOP cand %d "
                      "for %d ms",
                      k, t, s, ttl_ms() + 500);
        if (s >= 0) fr_signal(w, s, SIGSTOP);
        fr_mark_heal(w, "leader unaffected");
        fr_sleep(w, ttl_ms() + 500);
        if (s >= 0) fr_signal(w, s, SIGCONT);
        fr_sleep(w, 500);
        fr_mark_end(w);
        v = (k >= 0) + (t >= 0);
    }
    /* keep 50 candidates */
    int respawn = v >= 0 ? v : 1;
    for (int i = 0; i < respawn; i++)
        fr_spawn(w, false);
    return 0;
}

/* ---------------------------------------------------------------- elector run */

/* What a scenario expects of the tool beyond safety and liveness (an exit
 * status, a lease released by the guard): "expect R ok|fail TEXT" in runner.log,
 * counted by the checker; a failed one fails the run. */
static void expect(fr_world *w, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void expect(fr_world *w, bool ok, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fr_log(w, "expect %d %s %s", w->round, ok ? "ok" : "fail", msg);
    if (!ok) fr_say("   UNEXPECTED: %s", msg);
}

static double ms_since(int64_t t0, int64_t t)
{
    return t ? (double)(t - t0) / 1e6 : -1;
}

/* A leader whose job tree is complete (main, worker, escapee all started). */
static int run_leader(fr_world *w)
{
    int l = need_leader(w);
    if (l < 0) return -1;
    /* (an escapee with --hold-mb touches its memory first: seconds on a busy host) */
    int64_t end = fr_now() + 10000000000LL;
    while (w->c[l].pid && !w->c[l].escapee_pid && fr_now() < end)
        fr_sleep(w, 5);
    if (!w->c[l].escapee_pid) {
        fr_log(w, "note cand %d's job tree did not start its escapee", l);
        return -1;
    }
    fr_sleep(w, 60); /* a few fenced writes of every process */
    return l;
}

/* Did the guard of cand i revoke the lease (its stderr: "guard: ... revoking
 * lease L", and no "could not be revoked" after it)? */
static bool guard_released(fr_world *w, int i)
{
    char *s = fu_read_file(w->c[i].err_path, NULL);
    bool yes = s && strstr(s, "guard: ") && strstr(s, " revoking lease ") &&
               !strstr(s, "could not be revoked");
    free(s);
    return yes;
}

/* True when pid is gone: no process, or a zombie (it cannot act). */
static bool pid_gone(pid_t pid)
{
    if (pid <= 0) return true;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return !p || p[1] == '\0' || p[2] == 'Z' || p[2] == 'X';
}

static bool exited_with(const fr_cand *c, int code)
{
    return c->reaped && WIFEXITED(c->status) && WEXITSTATUS(c->status) == code;
}

static void status_text(const fr_cand *c, char *buf, size_t cap)
{
    if (!c->reaped)
        snprintf(buf, cap, "still running");
    else if (WIFEXITED(c->status))
        snprintf(buf, cap, "exit %d", WEXITSTATUS(c->status));
    else if (WIFSIGNALED(c->status))
        snprintf(buf, cap, "signal %d", WTERMSIG(c->status));
    else
        snprintf(buf, cap, "status %d", c->status);
}

/* After a fault at t0 on cand l: the successor, and when its job started. */
static int successor(fr_world *w, int l, int64_t t0, const char *what)
{
    int n = fr_wait_leader(w, l, -1, bound() + 3000);
    if (n < 0) {
        fr_say("   no successor's job within %d ms", bound() + 3000);
        return -1;
    }
    fr_cand *o = &w->c[l], *s = &w->c[n];
    fr_log(
        w,
        "measure %d %s successor_job_ms %.3f successor_elected_ms %.3f old_tree_last_ms "
        "%.3f",
        w->round, what, ms_since(t0, s->job_start), ms_since(t0, s->elected_ns),
        ms_since(t0, o->job_last));
    return n;
}

/* The leader has a release helper (release_on_exit): SIGKILLed mid-writes, its
 * helper revokes the lease, the successor leads in milliseconds instead of after
 * the TTL. The checker asks what matters here: the dead leader's last writes and
 * the successor's never overlap in the fenced resource, nor in etcd. */
static int r_kill_release(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int64_t t = fr_now();
    fr_mark_fault(
        w, "SIGKILL leader cand %d (token %" PRId64 "), which has a release helper", l,
        w->c[l].token);
    fr_kill(w, l);
    fr_mark_heal(w, "leader dead: its release helper revokes the lease");
    int n = fr_wait_leader(w, l, -1, bound() + 3000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    if (n < 0) {
        fr_say("   no new leader within %d ms", bound() + 3000);
    } else {
        double ms = ms_since(t, w->c[n].elected_at); /* its log's mono time */
        fr_log(w, "measure %d kill-release successor_elected_ms %.3f", w->round, ms);
        fr_say("   handover: leader SIGKILLed -> cand %d elected in %.1f ms (TTL %d ms)",
               n, ms, ttl_ms());
        expect(
            w, ms >= 0 && ms < ttl_ms() / 2.0,
            "cand %d elected before the lease could have expired: the helper revoked it",
            n);
    }
    fr_replace(w, l);
    return 0;
}

/* SIGSTOP to elector's process group past the TTL. elector is alone in it (the
 * guard has a session of its own): the guard stops the job by the deadline, the
 * successor starts after the tree is gone, the resumed elector exits 3. */
static int r_run_group_stop(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w,
                  "SIGSTOP the process group of leader cand %d's elector (token %" PRId64
                  ") for %d ms, then SIGCONT",
                  l, w->c[l].token, ttl_ms() + 1000);
    fr_signal_group(w, l, SIGSTOP);
    fr_mark_heal(w, "elector frozen: the guard enforces the deadline");
    int n = successor(w, l, t, "group-stop");
    fr_sleep_until(w, t + (int64_t)(ttl_ms() + 1000) * 1000000);
    bool gone = pid_gone(w->c[l].job_pid) && pid_gone(w->c[l].escapee_pid);
    fr_signal_group(w, l, SIGCONT);
    fr_reap_wait(w, l, 5000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    char st[40];
    status_text(&w->c[l], st, sizeof st);
    expect(w, gone, "cand %d's job tree gone before SIGCONT", l);
    expect(w, exited_with(&w->c[l], 3), "resumed elector of cand %d exits 3 (%s)", l, st);
    fr_say(
        "   job SIGTERMed by the guard %.0f ms after SIGSTOP, tree's last act %.0f ms; "
        "successor cand %d's job at %.0f ms; resumed elector: %s",
        ms_since(t, w->c[l].job_term_at), ms_since(t, w->c[l].job_last), n,
        n >= 0 ? ms_since(t, w->c[n].job_start) : -1, st);
    fr_replace(w, l);
    return 0;
}

/* SIGKILL to elector's process group while the job has a descendant outside
 * its own group: the guard (own session) kills the tree and releases the lease. */
static int r_run_group_kill(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    pid_t esc = w->c[l].escapee_pid;
    int64_t t = fr_now();
    fr_mark_fault(w,
                  "SIGKILL the process group of leader cand %d's elector (token %" PRId64
                  "); its job's escapee %d is in another session",
                  l, w->c[l].token, (int)esc);
    fr_signal_group(w, l, SIGKILL);
    fr_mark_heal(w, "elector dead: the guard stops the tree and releases the lease");
    int n = successor(w, l, t, "group-kill");
    fr_sleep(w, 300);
    fr_mark_end(w);
    expect(w, pid_gone(esc) && pid_gone(w->c[l].job_pid),
           "cand %d's whole job tree is gone", l);
    expect(w, guard_released(w, l), "cand %d's guard released the lease", l);
    fr_say("   handover: SIGKILL -> successor cand %d's job started in %.1f ms (elected "
           "%.1f ms; "
           "old tree's last act %.1f ms)",
           n, n >= 0 ? ms_since(t, w->c[n].job_start) : -1,
           n >= 0 ? ms_since(t, w->c[n].elected_ns) : -1, ms_since(t, w->c[l].job_last));
    fr_replace(w, l);
    return 0;
}

/* SIGKILL to the guard alone: the command dies with it (PDEATHSIG), elector (a
 * subreaper) kills the rest of the tree, resigns, exits 3. */
static int r_run_guard_kill(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    pid_t g = w->c[l].guard_pid, esc = w->c[l].escapee_pid;
    if (g <= 1) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w, "SIGKILL the guard %d of leader cand %d (token %" PRId64 ") alone",
                  (int)g, l, w->c[l].token);
    kill(g, SIGKILL);
    fr_mark_heal(w, "guard dead: elector kills the tree and resigns");
    int n = successor(w, l, t, "guard-kill");
    fr_reap_wait(w, l, 5000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    char st[40];
    status_text(&w->c[l], st, sizeof st);
    expect(w, pid_gone(esc) && pid_gone(w->c[l].job_pid),
           "cand %d's whole job tree is gone", l);
    expect(w, exited_with(&w->c[l], 3), "elector of cand %d exits 3 (%s)", l, st);
    fr_say("   successor cand %d's job started %.1f ms after the guard's SIGKILL; "
           "elector: %s",
           n, n >= 0 ? ms_since(t, w->c[n].job_start) : -1, st);
    fr_replace(w, l);
    return 0;
}

/* The first child of pid (host pids), 0 if it has none. */
static pid_t first_child(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    char *s = fu_read_file(path, NULL);
    long c = s ? strtol(s, NULL, 10) : 0;
    free(s);
    return (pid_t)c;
}

/* The host pid of the process whose pid is nspid in the PID namespace of ref
 * (job lines written in a namespace carry its pids); 0 if there is none. */
static pid_t host_pid_in_ns_of(pid_t ref, pid_t nspid)
{
    char path[64], want[64], got[64];
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)ref);
    ssize_t n = readlink(path, want, sizeof want - 1);
    if (n <= 0) return 0;
    want[n] = '\0';
    DIR *d = opendir("/proc");
    if (!d) return 0;
    pid_t found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%ld/ns/pid", pid);
        n = readlink(path, got, sizeof got - 1);
        if (n <= 0) continue;
        got[n] = '\0';
        if (strcmp(got, want)) continue;
        snprintf(path, sizeof path, "/proc/%ld/status", pid);
        char *st = fu_read_file(path, NULL), *l = st ? strstr(st, "\nNSpid:") : NULL;
        if (l) {
            l[strcspn(l + 1, "\n") + 1] = '\0';
            char *last = strrchr(l, '\t');
            if (last && strtol(last + 1, NULL, 10) == nspid) found = (pid_t)pid;
        }
        free(st);
    }
    closedir(d);
    return found;
}

/* `kill -9 $(pidof elector)`: elector and its guard SIGKILLed together, with
 * --pid-namespace. Nobody is left to stop the tree or release the lease: the
 * namespace's init dies with the guard (PDEATHSIG) and the kernel kills every
 * process of the namespace, the escapee in its own session too; the lease ends
 * by its TTL. Without the flag the escapee outlives them both, and the
 * successor's job finds the job lock held: an overlap. */
static int r_run_both_kill(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    fr_cand *c = &w->c[l];
    pid_t g = first_child(c->pid), init = g > 0 ? first_child(g) : 0;
    pid_t job = init > 0 ? first_child(init) : 0;
    pid_t esc = init > 0 ? host_pid_in_ns_of(init, c->escapee_pid) : 0;
    if (g <= 0 || job <= 0 || esc <= 0) {
        fr_log(w, "note cand %d: guard %d, init %d, job %d, escapee %d not all found", l,
               (int)g, (int)init, (int)job, (int)esc);
        return -1;
    }
    int64_t t = fr_now();
    fr_mark_fault(w,
                  "SIGKILL elector %d and its guard %d together, leader cand %d (token "
                  "%" PRId64 "); job %d, escapee %d in a PID namespace",
                  (int)c->pid, (int)g, l, c->token, (int)job, (int)esc);
    kill(g, SIGSTOP); /* stopped first: neither acts on the other's death */
    kill(c->pid, SIGSTOP);
    kill(g, SIGKILL);
    fr_kill(w, l);
    fr_mark_heal(w, "elector and guard dead: the kernel ends the namespace, the lease "
                    "ends by its TTL");
    int64_t t_gone = 0;
    for (int64_t end = t + 2000000000LL; !t_gone && fr_now() < end; fr_sleep(w, 2))
        if (pid_gone(job) && pid_gone(esc)) t_gone = fr_now();
    int n = successor(w, l, t, "both-kill");
    fr_sleep(w, 300);
    fr_mark_end(w);
    expect(w, t_gone != 0, "cand %d's whole job tree is gone", l);
    fr_say("   tree gone %.1f ms after the SIGKILLs; successor cand %d's job started "
           "%.0f ms after them (TTL %d s)",
           t_gone ? ms_since(t, t_gone) : -1, n,
           n >= 0 ? ms_since(t, w->c[n].job_start) : -1, R.ttl_s);
    fr_replace(w, l);
    return 0;
}

/* SIGKILL to elector alone, the host alive: the guard stops the tree and
 * revokes the lease on its own connection. */
static int r_run_elector_kill(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    pid_t esc = w->c[l].escapee_pid;
    int64_t t = fr_now();
    fr_mark_fault(w, "SIGKILL elector of leader cand %d (token %" PRId64 ") alone", l,
                  w->c[l].token);
    fr_kill(w, l);
    fr_mark_heal(w, "elector dead: the guard stops the tree and releases the lease");
    int n = successor(w, l, t, "elector-kill");
    fr_sleep(w, 300);
    fr_mark_end(w);
    expect(w, pid_gone(esc) && pid_gone(w->c[l].job_pid),
           "cand %d's whole job tree is gone", l);
    expect(w, guard_released(w, l), "cand %d's guard released the lease", l);
    fr_say("   handover: elector SIGKILLed -> successor cand %d's job started in %.1f ms",
           n, n >= 0 ? ms_since(t, w->c[n].job_start) : -1);
    fr_replace(w, l);
    return 0;
}

/* Leadership ends by the deadline while elector lives: the leader's network
 * namespace is cut off, and its job ignores SIGTERM. The guard SIGKILLs the tree
 * at the deadline; the successor's job must start after that. */
static int r_run_deadline(fr_world *w, int r)
{
    (void)r;
    int a = w->netns_idx;
    if (a < 0 || !w->c[a].pid) return -1;
    if (!fr_ensure_leader(w, a)) {
        fr_log(w, "note cannot make the netns candidate lead");
        return -1;
    }
    if (run_leader(w) != a) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w,
                  "veth down for %d ms: leader cand %d (token %" PRId64 ") cut off from "
                  "etcd; its job ignores SIGTERM",
                  ttl_ms() + 2000, a, w->c[a].token);
    fr_link(false);
    fr_mark_heal(w, "others can take over");
    int n = successor(w, a, t, "deadline");
    fr_sleep_until(w, t + (int64_t)(ttl_ms() + 2000) * 1000000);
    bool gone = pid_gone(w->c[a].job_pid) && pid_gone(w->c[a].escapee_pid);
    fr_link(true);
    fr_log(w, "note veth up");
    fr_reap_wait(w, a, 5000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    char st[40];
    status_text(&w->c[a], st, sizeof st);
    expect(w, gone, "cand %d's job tree gone by the end of the partition", a);
    expect(w, exited_with(&w->c[a], 3), "cut-off elector of cand %d exits 3 (%s)", a, st);
    double last = ms_since(t, w->c[a].job_last);
    fr_say("   job SIGTERM (ignored) at %.0f ms, tree's last act %.0f ms (SIGKILL at the "
           "deadline); successor cand %d elected %.0f ms, its job %.0f ms (%.0f ms after "
           "the "
           "old tree's last act); cut-off elector: %s",
           ms_since(t, w->c[a].job_term_at), last, n,
           n >= 0 ? ms_since(t, w->c[n].elected_ns) : -1,
           n >= 0 ? ms_since(t, w->c[n].job_start) : -1,
           n >= 0 ? ms_since(t, w->c[n].job_start) - last : -1, st);
    fr_replace(w, a);
    return 0;
}

/* The lease released before the tree is reaped (in the default run). The
 * leader's elector alone is frozen (its guard is not) until just after its
 * deadline: it resumes with its connection to etcd intact and its session past
 * the deadline. The job ignores SIGTERM, and its escapee holds 1 GiB, so after the
 * guard's SIGKILL at the deadline the tree takes ~150 ms to be reaped. A session
 * that revokes its own lease when it dies (the library without the owner-revokes
 * `manual_release` change) lets the successor start within the handover (~30 ms)
 * while the old tree is still there: the job lock counts it as an overlap. With
 * the release left to the owner after the tree is reaped, it passes. */
static int r_run_deadline_revoke(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    fr_cand *c = &w->c[l];
    int grace = ttl_ms() / 4 < 2000 ? ttl_ms() / 4 : 2000; /* elector's default */
    int64_t t = fr_now();
    fr_mark_fault(w,
                  "SIGSTOP elector of leader cand %d (token %" PRId64
                  ") alone until just "
                  "after its deadline; its job ignores SIGTERM and dies slowly",
                  l, c->token);
    fr_signal(w, l, SIGSTOP);
    fr_mark_heal(w, "elector frozen: the guard enforces the deadline");
    /* the guard's SIGTERM comes at deadline - grace: the deadline follows */
    int64_t end = fr_now() + (int64_t)(ttl_ms() + 1000) * 1000000;
    while (!c->job_term_at && fr_now() < end)
        fr_sleep(w, 1);
    if (!c->job_term_at) {
        fr_signal(w, l, SIGCONT);
        fr_log(w, "note cand %d's job got no SIGTERM", l);
        return -1;
    }
    int64_t deadline = c->job_term_at + (int64_t)grace * 1000000;
    fr_sleep_until(w, deadline + 5000000);
    fr_signal(w, l, SIGCONT);
    int n = successor(w, l, t, "deadline-revoke");
    fr_reap_wait(w, l, 5000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    char st[40];
    status_text(c, st, sizeof st);
    expect(w, exited_with(c, 3), "resumed elector of cand %d exits 3 (%s)", l, st);
    fr_say("   deadline ~%.0f ms after SIGSTOP; elector resumed 5 ms after it; successor "
           "cand %d "
           "elected %.0f ms, its job %.0f ms; the old tree's last line %.0f ms",
           ms_since(t, deadline), n, n >= 0 ? ms_since(t, w->c[n].elected_ns) : -1,
           n >= 0 ? ms_since(t, w->c[n].job_start) : -1, ms_since(t, c->job_last));
    fr_replace(w, l);
    return 0;
}

/* ---------------------------------------------------------------- guard stopped */

/* elector and the guard watch each other (issue 26). The leader's guard
 * SIGSTOPped and the leader cut off (its veth down) for TTL + 2 s: nobody can
 * renew or resign, and the guard cannot enforce the deadline. elector's
 * heartbeat finds the guard silent within TTL/2 and kills the tree and the
 * guard itself, before the lease can expire. Before: the tree ran until the
 * guard was resumed (an overlap for as long as the stop). */
static int r_run_guard_stop_cut(fr_world *w, int r)
{
    (void)r;
    int a = w->netns_idx;
    if (a < 0 || !w->c[a].pid) return -1;
    if (!fr_ensure_leader(w, a)) {
        fr_log(w, "note cannot make the netns candidate lead");
        return -1;
    }
    if (run_leader(w) != a) return -1;
    pid_t g = w->c[a].guard_pid;
    if (g <= 1) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w,
                  "SIGSTOP the guard %d of leader cand %d (token %" PRId64
                  ") and cut the leader off (veth down) for %d ms",
                  (int)g, a, w->c[a].token, ttl_ms() + 2000);
    kill(g, SIGSTOP);
    fr_link(false);
    fr_mark_heal(w, "others can take over");
    int n = successor(w, a, t, "guard-stop-cut");
    fr_sleep_until(w, t + (int64_t)(ttl_ms() + 2000) * 1000000);
    bool gone = pid_gone(w->c[a].job_pid) && pid_gone(w->c[a].escapee_pid) && pid_gone(g);
    kill(g, SIGCONT);
    fr_link(true);
    fr_log(w, "note veth up, guard resumed");
    fr_reap_wait(w, a, 5000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    char st[40];
    status_text(&w->c[a], st, sizeof st);
    expect(w, gone, "cand %d's job tree and stopped guard gone before the heal", a);
    expect(w, exited_with(&w->c[a], 3), "cut-off elector of cand %d exits 3 (%s)", a, st);
    fr_say("   guard stopped + cut off: tree's last act %.0f ms; successor cand %d "
           "elected %.0f ms, its job %.0f ms; elector: %s",
           ms_since(t, w->c[a].job_last), n,
           n >= 0 ? ms_since(t, w->c[n].elected_ns) : -1,
           n >= 0 ? ms_since(t, w->c[n].job_start) : -1, st);
    fr_replace(w, a);
    return 0;
}

/* The leader's guard SIGSTOPped, then its elector SIGKILLed: no user-space
 * process of the leader is left to act. The guard has PR_SET_PDEATHSIG(SIGCONT):
 * the kernel resumes it when elector dies; it stops the tree and releases the
 * lease. Before: the tree ran until the guard was resumed by hand. */
static int r_run_guard_stop_kill(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    pid_t g = w->c[l].guard_pid, esc = w->c[l].escapee_pid;
    if (g <= 1) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w,
                  "SIGSTOP the guard %d of leader cand %d (token %" PRId64
                  "), then SIGKILL its elector",
                  (int)g, l, w->c[l].token);
    kill(g, SIGSTOP);
    fr_kill(w, l);
    fr_mark_heal(w, "elector dead: the kernel resumes the guard, which stops the tree");
    int n = successor(w, l, t, "guard-stop-kill");
    fr_sleep(w, 300);
    bool gone = pid_gone(esc) && pid_gone(w->c[l].job_pid);
    kill(g, SIGCONT); /* a guard the fix did not wake: let it go */
    fr_sleep(w, 300);
    fr_mark_end(w);
    expect(w, gone, "cand %d's whole job tree is gone without a SIGCONT", l);
    expect(w, guard_released(w, l), "cand %d's guard released the lease", l);
    fr_say("   guard stopped, elector SIGKILLed: tree's last act %.1f ms; successor cand "
           "%d's job started %.1f ms",
           ms_since(t, w->c[l].job_last), n,
           n >= 0 ? ms_since(t, w->c[n].job_start) : -1);
    fr_replace(w, l);
    return 0;
}

/* The leader's guard SIGSTOPped for 10 x TTL while etcd is healthy: elector
 * must step down (kill the tree and the guard, resign, exit 3) instead of
 * leading on with nothing to stop the tree. */
static int r_run_guard_stop_long(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    pid_t g = w->c[l].guard_pid, esc = w->c[l].escapee_pid;
    if (g <= 1) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w,
                  "SIGSTOP the guard %d of leader cand %d (token %" PRId64
                  ") for up to %d ms, etcd healthy",
                  (int)g, l, w->c[l].token, 10 * ttl_ms());
    kill(g, SIGSTOP);
    fr_mark_heal(w, "elector finds the guard silent: steps down, kills the tree");
    int n = successor(w, l, t, "guard-stop-long");
    fr_reap_wait(w, l, 10 * ttl_ms());
    int64_t t_exit = w->c[l].reaped ? fr_now() : 0;
    bool gone = pid_gone(esc) && pid_gone(w->c[l].job_pid) && pid_gone(g);
    kill(g, SIGCONT);
    fr_sleep(w, 300);
    fr_mark_end(w);
    char st[40];
    status_text(&w->c[l], st, sizeof st);
    expect(w, gone, "cand %d's job tree and guard gone within 10 x TTL", l);
    expect(w, exited_with(&w->c[l], 3), "elector of cand %d exits 3 (%s)", l, st);
    fr_say("   guard stopped: tree's last act %.0f ms, elector exited by %.0f ms (%s); "
           "successor cand %d's job %.0f ms",
           ms_since(t, w->c[l].job_last), t_exit ? ms_since(t, t_exit) : -1, st, n,
           n >= 0 ? ms_since(t, w->c[n].job_start) : -1);
    fr_replace(w, l);
    return 0;
}

/* `etcdctl lease revoke` of the leader's lease from outside; its job ignores
 * SIGTERM. The successor is elected within milliseconds: the tree must be
 * SIGKILLed at once (no grace; --grace-on-loss would give it). Old leader and
 * successor learn of the delete each from its own member's watch: which tree
 * acts first is a race (optional: not in the default set; docs/FAULTS.md). */
static int r_run_outside_revoke(fr_world *w, int r)
{
    (void)r;
    int l = run_leader(w);
    if (l < 0) return -1;
    int64_t t = fr_now();
    fr_mark_fault(w, "revoke the lease of leader cand %d (key %s, token %" PRId64 ")", l,
                  w->c[l].key, w->c[l].token);
    int rc = fr_revoke_key_lease(w->c[l].key);
    if (rc) fr_log(w, "note the revoke failed: %d", rc);
    fr_mark_heal(w, "the lease is gone: the successor may lead at once");
    int n = successor(w, l, t, "outside-revoke");
    fr_reap_wait(w, l, 5000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    char st[40];
    status_text(&w->c[l], st, sizeof st);
    expect(w, pid_gone(w->c[l].escapee_pid) && pid_gone(w->c[l].job_pid),
           "cand %d's whole job tree is gone", l);
    expect(w, exited_with(&w->c[l], 3), "elector of cand %d exits 3 (%s)", l, st);
    double last = ms_since(t, w->c[l].job_last);
    fr_say(
        "   outside revoke: old tree's last act %.1f ms; successor cand %d elected %.1f "
        "ms, its job %.1f ms (old tree's last act %.1f ms after the successor's start)",
        last, n, n >= 0 ? ms_since(t, w->c[n].elected_ns) : -1,
        n >= 0 ? ms_since(t, w->c[n].job_start) : -1,
        n >= 0 ? last - ms_since(t, w->c[n].job_start) : -1);
    fr_replace(w, l);
    return 0;
}

/* ---------------------------------------------------------------- table */

/* `elector switchover` to a random waiting candidate; in odd rounds the leader's
 * elector process group is SIGKILLed once it has begun to step down (its job is
 * being stopped): the guard stops the tree and releases the lease, and the
 * switchover still ends with the target leading. The checker judges overlap. */
static int r_run_switchover(fr_world *w, int r)
{
    int l = run_leader(w);
    if (l < 0) return -1;
    int t = fr_random_waiter(w);
    if (t < 0) return -1;
    char to[32], out[600], timeout[32];
    snprintf(to, sizeof to, "cand-%d", t);
    snprintf(out, sizeof out, "%s/switchover-%d.out", w->dir, r);
    snprintf(timeout, sizeof timeout, "%dms", bound() + 10000);
    bool kill_leader = r % 2 == 1;
    int64_t t0 = fr_now();
    fr_mark_fault(w, "switchover to cand %d (leader cand %d, token %" PRId64 ")%s", t, l,
                  w->c[l].token,
                  kill_leader ? "; the leader SIGKILLed while it steps down" : "");
    pid_t sw = fr_spawn_elector(w,
                                (const char *const[]){"switchover", w->election, "--to",
                                                      to, "--timeout", timeout, NULL},
                                out);
    if (sw < 0) return -1;
    bool killed = false;
    if (kill_leader) {
        int64_t end = fr_now() + (int64_t)(bound() + 5000) * 1000000;
        while (fr_now() < end && w->c[l].pid) {
            char *s = fu_read_file(w->c[l].err_path, NULL);
            bool stepping = s && strstr(s, "the target is next in line");
            free(s);
            if (stepping) break;
            fr_sleep(w, 2);
        }
        fr_signal_group(w, l, SIGKILL);
        killed = true;
    }
    fr_mark_heal(w, killed ? "leader dead: the guard stops the tree, releases the lease"
                           : "switchover under way");
    int st = fr_wait_pid(w, sw, bound() + 15000);
    int n = fr_wait_leader(w, killed ? l : -1, -1, bound() + 3000);
    fr_sleep(w, 300);
    fr_mark_end(w);
    expect(w, st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "switchover to cand %d exits 0 (status %d)", t, st);
    expect(w, n == t, "cand %d leads after the switchover (leader: cand %d)", t, n);
    fr_say("   switchover to cand %d: %.0f ms to its job%s", t,
           n == t ? ms_since(t0, w->c[t].job_start) : -1.0,
           killed ? " (old leader SIGKILLed midway)" : "");
    if (killed) {
        fr_reap_wait(w, l, 5000);
        fr_replace(w, l);
    }
    return 0;
}

/* `elector switchover` to a waiting candidate whose elector is stopped
 * (SIGSTOP): the others step back and the leader hands over, so the target's
 * key becomes first, but its process never takes over; its lease ends and the
 * next in line leads. The switchover must say so (exit 7), not exit 0 (issue
 * 26, case 6). The checker judges overlap. */
static int r_run_switchover_stopped(fr_world *w, int r)
{
    int l = run_leader(w);
    if (l < 0) return -1;
    int t = fr_random_waiter(w);
    if (t < 0) return -1;
    char to[32], out[600], timeout[32];
    snprintf(to, sizeof to, "cand-%d", t);
    snprintf(out, sizeof out, "%s/switchover-%d.out", w->dir, r);
    snprintf(timeout, sizeof timeout, "%dms", bound() + 10000);
    int64_t t0 = fr_now();
    fr_signal(w, t, SIGSTOP);
    fr_mark_fault(w,
                  "SIGSTOP cand %d's elector, then switchover to it (leader cand %d, "
                  "token %" PRId64 ")",
                  t, l, w->c[l].token);
    pid_t sw = fr_spawn_elector(w,
                                (const char *const[]){"switchover", w->election, "--to",
                                                      to, "--timeout", timeout, NULL},
                                out);
    if (sw < 0) {
        fr_signal(w, t, SIGCONT);
        return -1;
    }
    fr_mark_heal(w, "switchover under way; the target frozen");
    int st = fr_wait_pid(w, sw, bound() + 15000);
    int n = fr_wait_leader(w, t, -1, bound() + 3000);
    fr_signal(w, t, SIGCONT);
    fr_sleep(w, 1000); /* it must fail its old campaign and start a new one */
    fr_mark_end(w);
    expect(w, st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 7,
           "switchover to stopped cand %d exits 7 (status %d)", t, st);
    expect(w, n >= 0 && n != t, "another candidate leads (leader: cand %d)", n);
    expect(w, !w->c[t].leading, "resumed cand %d does not lead", t);
    fr_say("   switchover to stopped cand %d: exit %d after %.0f ms; leader now cand %d",
           t, st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, ms_since(t0, fr_now()), n);
    return 0;
}

/* "elected" events written by every candidate so far. */
static int elections(fr_world *w)
{
    int n = 0;
    for (int i = 0; i < w->nc; i++) {
        char *s = fu_read_file(w->c[i].err_path, NULL);
        for (char *p = s; p && (p = strstr(p, "\"event\":\"elected\"")); p++)
            n++;
        free(s);
    }
    return n;
}

/* Two `elector run` candidates whose health check flips every 100 ms, one
 * failure enough (issue 26, case 5: 60-78 leadership changes in 12 s before
 * the damping). With a 1 s hold-off that doubles, leadership changes at most
 * once per second; each change stops one job before the next starts (the
 * checker judges overlap). */
static int r_run_health_flap(fr_world *w, int r)
{
    (void)r;
    int before = elections(w);
    int64_t t0 = fr_now();
    fr_mark_fault(w, "12 s of a health check flipping every 100 ms");
    fr_sleep(w, 12000);
    int n = elections(w) - before;
    double s = ms_since(t0, fr_now()) / 1000;
    /* Both candidates may be held off at once: nobody leads meanwhile, which
     * is the damping's price, not a liveness failure. */
    fr_mark_heal(w, "end of the measure (the check keeps flipping)");
    fr_mark_end(w);
    expect(w, n <= (int)s + 1, "at most one election per 1 s hold-off (%d in %.1f s)", n,
           s);
    fr_say("   %d elections in %.1f s", n, s);
    return 0;
}

/* ---------------------------------------------------------------- day 2 */

/* A member replaced under a running leader (issue 20): `member add` of a fresh
 * member, then `member remove` of the one the leader is connected to. The
 * candidates auto-sync their endpoint lists from MemberList (--auto-sync-ms),
 * so after rounds that replace every member the run started with they still
 * reach the cluster. The goal is no failover at all: the leader's client moves
 * to another member well within its TTL. A failover is reported, not a
 * failure (safety and liveness are the checker's). */
static int r_member_replace(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int live = 0;
    for (int i = 0; i < eh_members(R.cl); i++)
        live += !eh_member_removed(R.cl, i);
    if (eh_members(R.cl) >= EH_MAX_MEMBERS || live < 3) {
        fr_say("   no member slot left (%d of %d taken)", eh_members(R.cl),
               EH_MAX_MEMBERS);
        return -1;
    }
    int old = fr_member_of(w->c[l].endpoint);
    if (old < 0 || eh_member_removed(R.cl, old)) {
        for (old = 0; old < eh_members(R.cl) && eh_member_removed(R.cl, old); old++) {
        }
    }
    int64_t token = w->c[l].token, t0 = fr_now();
    fr_mark_fault(
        w, "member add, then member remove m%d (the endpoint of leader cand %d)", old, l);
    int added = eh_member_add(R.cl);
    fr_pump(w);
    if (added < 0) {
        fr_say("   member add failed");
        fr_restore_members(w);
        finish(w, -1, -1);
        return -1;
    }
    int64_t t_add = fr_now();
    int rm = eh_member_remove(R.cl, old);
    int64_t t_rm = fr_now();
    fr_pump(w);
    if (eh_wait_leader(R.cl, 15) < 0) fr_log(w, "note no Raft leader after the removal");
    fr_mark_heal(w, "member replaced");
    /* The history recorder (etcdctl watch) knows only the endpoints it started
     * with: it restarts on the current ones from the last recorded revision. */
    fr_sync_recorder(w);
    if (w->recorder_pid > 0) kill(w->recorder_pid, SIGTERM);
    fr_sleep(w, ttl_ms() + 1000); /* a lease lost to the move would show by now */
    finish(w, -1, -1);
    bool kept = w->c[l].pid && w->c[l].leading && w->c[l].token == token;
    fr_log(w, "note member-replace m%d -> m%d: add %.0f ms, remove %.0f ms, leader %s",
           old, added, (double)(t_add - t0) / 1e6, (double)(t_rm - t_add) / 1e6,
           kept ? "kept" : "FAILOVER");
    fr_say("   m%d replaced by m%d (add %.1f s, remove %.1f s): leader cand %d %s", old,
           added, (double)(t_add - t0) / 1e9, (double)(t_rm - t_add) / 1e9, l,
           kept ? "kept its leadership (no failover)" : "lost it: a failover");
    return rm == 0 ? 0 : -1;
}

/* Certificate rotation (issue 20): the CA, the members' and the client's
 * certificates and key are rewritten in place (as cert-manager or a Vault
 * agent does) while a leader leads; then the members restart one by one
 * (SIGKILL, start) trusting only the new CA. Clients read the files again at
 * each new connection: the leader's client reconnects with the new files. No
 * two leaders; the leader stays (reported) or hands over cleanly. */
static int r_cert_rotate(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int64_t token = w->c[l].token, t0 = fr_now();
    fr_mark_fault(w, "TLS files rotated (new CA, client cert and key), members "
                     "restarted one by one trusting only the new CA");
    if (eh_tls_rotate(R.cl) != 0) {
        fr_say("   eh_tls_rotate failed");
        finish(w, -1, -1);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < eh_members(R.cl); i++) {
        if (eh_member_removed(R.cl, i)) continue;
        eh_member_kill(R.cl, i);
        if (eh_member_restart(R.cl, i) != 0 || eh_wait_healthy(R.cl, i, 20) != 0) rc = -1;
        fr_pump(w);
    }
    if (eh_wait_leader(R.cl, 15) < 0) rc = -1;
    int64_t t_done = fr_now();
    fr_mark_heal(w, "every member restarted with the new CA");
    /* The recorder (etcdctl) read the old CA at its start: restart it. */
    if (w->recorder_pid > 0) kill(w->recorder_pid, SIGTERM);
    fr_sleep(w, ttl_ms() + 1000);
    finish(w, -1, -1);
    bool kept = w->c[l].pid && w->c[l].leading && w->c[l].token == token;
    fr_log(w, "note cert-rotate: members restarted in %.0f ms, leader %s",
           (double)(t_done - t0) / 1e6, kept ? "kept" : "handed over");
    fr_say("   rolling restart with the new CA %.1f s: leader cand %d %s",
           (double)(t_done - t0) / 1e9, l,
           kept ? "kept its leadership" : "lost it (a handover)");
    return rc;
}

/* A full backend (issue 20): etcd runs with an 8 MiB quota; 100 KiB puts
 * outside the election fill it until etcd raises the NOSPACE alarm. Under the
 * alarm puts and Txns that write are refused (the leader's fenced writes get
 * ENOSPACE), keepalives still work: the leader keeps its lease and its
 * leadership for 2 TTLs. Then the operator's way back (delete, compact,
 * defrag, alarm disarm) and the round ends as usual. */
static int r_nospace(fr_world *w, int r)
{
    (void)r;
    int l = need_leader(w);
    if (l < 0) return -1;
    int64_t token = w->c[l].token;
    fr_mark_fault(w, "backend filled to its quota (NOSPACE alarm) for %d ms",
                  2 * ttl_ms());
    int puts = 0;
    int rc = fr_fill_until_nospace(200, &puts);
    fr_pump(w);
    if (rc != 0) {
        fr_say("   no NOSPACE after %d puts of 100 KiB (%d)", puts, rc);
        fr_clear_nospace();
        finish(w, -1, -1);
        return -1;
    }
    fr_mark_heal(w, "keepalives work under the alarm");
    fr_sleep(w, 2 * ttl_ms());
    bool kept = w->c[l].pid && w->c[l].leading && w->c[l].token == token;
    expect(w, kept, "leader cand %d kept its leadership under the NOSPACE alarm", l);
    if (fr_clear_nospace() != 0) {
        fr_say("   clearing the alarm failed");
        rc = -1;
    }
    finish(w, -1, -1);
    fr_say("   NOSPACE after %d puts of 100 KiB; leader cand %d %s", puts, l,
           kept ? "kept its leadership" : "lost it");
    return rc;
}

const fr_scenario fr_scenarios[] = {
    {.name = "kill",
     .ncand = 3,
     .round = r_kill,
     .what = "leader SIGKILLed: successor after the lease expires (TTL + <= 0.6 s)"},
    {.name = "kill-release",
     .ncand = 3,
     .round = r_kill_release,
     .cand_args = "--release-on-exit",
     .what = "leader with a release helper SIGKILLed: successor in milliseconds, fenced"},
    {.name = "term",
     .ncand = 3,
     .round = r_term,
     .what = "leader SIGTERMed: resigns, successor in milliseconds"},
    {.name = "stop",
     .ncand = 3,
     .round = r_stop,
     .what =
         "leader SIGSTOPped past its TTL, then SIGCONT: must report the loss at once"},
    {.name = "stall",
     .ncand = 3,
     .round = r_stall,
     .cand_args = "--stall-after 40 --stall-ms 3500 --request-ms 6000",
     .what = "leader stalls 3.5 s between its leadership check and its writes: fenced"},
    {.name = "partition",
     .ncand = 2,
     .netns = true,
     .round = r_partition,
     .what = "leader in a netns, veth taken down: steps down by its deadline"},
    {.name = "minority",
     .ncand = 3,
     .round = r_minority,
     .what =
         "2 of 3 members killed, the leader's endpoint survives: step down, no election"},
    {.name = "endpoint-pause",
     .ncand = 3,
     .round = r_endpoint_pause,
     .what =
         "the leader's etcd member SIGSTOPped for TTL + 2 s; the other two keep quorum"},
    {.name = "raft-kill",
     .ncand = 3,
     .round = r_raft_kill,
     .what = "etcd Raft leader SIGKILLed, restarted 2.5 s later"},
    {.name = "raft-pause",
     .ncand = 3,
     .round = r_raft_pause,
     .what = "etcd Raft leader SIGSTOPped for 3 s"},
    {.name = "endpoint-raft-pause",
     .ncand = 3,
     .rounds = 2,
     .round = r_endpoint_raft_pause,
     .what = "the leader's endpoint, made etcd's Raft leader, SIGSTOPped for TTL + 2 s"},
    {.name = "quorum",
     .ncand = 3,
     .round = r_quorum,
     .what = "2 random members killed or paused for TTL + 2 s, then restored"},
    {.name = "restart",
     .ncand = 3,
     .round = r_restart,
     .what = "whole cluster SIGKILLed and restarted (1 s or TTL + 1 s down)"},
    {.name = "waiter",
     .ncand = 3,
     .round = r_waiter,
     .what = "next-in-line waiter frozen past its TTL while the leader resigns"},
    {.name = "compact",
     .ncand = 4,
     .slow = true,
     .round = r_compact,
     .what = "compaction every 10 ms during handovers, 40 ms latency: watches start "
             "compacted"},
    {.name = "churn",
     .ncand = 50,
     .rounds = 10,
     .round = r_churn,
     .what = "50 candidates; leaders and waiters killed, terminated, frozen"},
    /* `elector run` candidates: what is judged is the command's tree */
    {.name = "run-group-stop",
     .ncand = 3,
     .run = true,
     .rounds = 2,
     .round = r_run_group_stop,
     .what = "run: elector's process group SIGSTOPped past the TTL: guard stops the job"},
    {.name = "run-group-kill",
     .ncand = 3,
     .run = true,
     .rounds = 2,
     .round = r_run_group_kill,
     .what =
         "run: elector's process group SIGKILLed, job has an escapee: tree gone, fast"},
    {.name = "run-guard-kill",
     .ncand = 3,
     .run = true,
     .rounds = 2,
     .round = r_run_guard_kill,
     .what =
         "run: the guard SIGKILLed alone: elector kills the tree, steps down, exits 3"},
    {.name = "run-both-kill",
     .ncand = 3,
     .run = true,
     .run_args = "--pid-namespace",
     .rounds = 2,
     .round = r_run_both_kill,
     .what = "run --pid-namespace: elector and its guard SIGKILLed together: the "
             "kernel ends the tree"},
    {.name = "run-elector-kill",
     .ncand = 3,
     .run = true,
     .rounds = 3,
     .round = r_run_elector_kill,
     .what =
         "run: elector SIGKILLed alone, host alive: guard reaps the tree and revokes"},
    {.name = "run-deadline",
     .ncand = 2,
     .netns = true,
     .run = true,
     .rounds = 2,
     .cand_args = "--ignore-term",
     .round = r_run_deadline,
     .what =
         "run: leader cut off (netns), job ignores SIGTERM: SIGKILLed at the deadline"},
    {.name = "run-switchover",
     .ncand = 4,
     .run = true,
     .rounds = 4,
     .round = r_run_switchover,
     .what = "run: switchover to a random waiter; every other round the leader is "
             "SIGKILLed while it steps down"},
    {.name = "run-switchover-stopped",
     .ncand = 4,
     .run = true,
     .rounds = 2,
     .round = r_run_switchover_stopped,
     .what = "run: switchover to a waiter whose elector is SIGSTOPped: exit 7, the next "
             "in line leads after its lease"},
    {.name = "run-health-flap",
     .ncand = 2,
     .run = true,
     .rounds = 1,
     /* no spaces in run_args: $IFS splits the check's words in the shell */
     .run_args = "--health-cmd exit$IFS$(($(date$IFS+%s%N)/100000000%2)) "
                 "--health-interval=70ms --health-retries=1 --health-holdoff=1s",
     .round = r_run_health_flap,
     .what = "run: a health check flipping every 100 ms on both candidates: at most one "
             "election per hold-off, no overlap"},
    {.name = "run-guard-stop-cut",
     .ncand = 2,
     .netns = true,
     .run = true,
     .rounds = 2,
     .cand_args = "--ignore-term",
     .round = r_run_guard_stop_cut,
     .what = "run: the leader's guard SIGSTOPped and the leader cut off (netns): "
             "elector kills the tree"},
    {.name = "run-guard-stop-kill",
     .ncand = 3,
     .run = true,
     .rounds = 2,
     .round = r_run_guard_stop_kill,
     .what =
         "run: the guard SIGSTOPped, elector SIGKILLed: the kernel resumes the guard"},
    {.name = "run-guard-stop-long",
     .ncand = 3,
     .run = true,
     .rounds = 2,
     .round = r_run_guard_stop_long,
     .what = "run: the guard SIGSTOPped for 10 x TTL, etcd healthy: elector steps down"},
    {.name = "run-outside-revoke",
     .ncand = 3,
     .run = true,
     .rounds = 2,
     .optional = true,
     .cand_args = "--ignore-term",
     .round = r_run_outside_revoke,
     .what = "run: the leader's lease revoked from outside, job ignores SIGTERM: "
             "killed at once, a race with the successor's start (docs/FAULTS.md; "
             "run on its own, --scenarios run-outside-revoke)"},
    {.name = "run-deadline-revoke",
     .ncand = 3,
     .run = true,
     .rounds = 2,
     .cand_args = "--ignore-term --hold-mb 1024",
     .round = r_run_deadline_revoke,
     .what = "run: elector resumes just past its deadline, tree slow to die: "
             "is the lease released before the tree is reaped?"},
    {.name = "member-replace",
     .ncand = 3,
     .cand_args = "--auto-sync-ms 500",
     .round = r_member_replace,
     .what = "member added, the leader's member removed (auto-sync): no two leaders, "
             "the leader stays (runs last: the proxies know only the first members)"},
    {.name = "cert-rotate",
     .ncand = 3,
     .tls = true,
     .optional = true,
     .round = r_cert_rotate,
     .what = "TLS files rotated, members restarted trusting only the new CA: no two "
             "leaders (a TLS cluster: run on its own, --scenarios cert-rotate)"},
    {.name = "nospace",
     .ncand = 3,
     .quota = true,
     .optional = true,
     .round = r_nospace,
     .what = "backend quota reached (NOSPACE alarm) for 2 TTLs, then cleared: the "
             "leader keeps leading (an 8 MiB quota: run on its own)"},
};
const int fr_nscenarios = (int)(sizeof fr_scenarios / sizeof fr_scenarios[0]);

int fr_round_mix(fr_world *w, int r)
{
    static int (*const fns[])(fr_world *, int) = {
        r_kill,
        r_term,
        r_stop,
        r_partition,
        r_minority,
        r_raft_kill,
        r_raft_pause,
        r_quorum,
        r_restart,
        r_waiter,
        r_compact,
        r_endpoint_pause,
        r_endpoint_raft_pause,
    };
    int n = (int)(sizeof fns / sizeof fns[0]);
    int k;
    do {
        k = fr_rand_int(n);
    } while (fns[k] == r_partition && !R.have_netns);
    /* rounds that kill candidates replace them, so the mix keeps its size */
    return fns[k](w, r);
}
