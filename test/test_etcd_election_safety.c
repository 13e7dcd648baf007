/* SPDX-License-Identifier: MIT */
/* "Never two acting leaders" (issue 9), library side, against a real etcd:
 * a session that dies on its own can keep its lease until its owner releases it;
 * any election may be freed from any callback; a campaign key never outlives
 * its campaign; the deadline clock is CLOCK_BOOTTIME; an observer never reports
 * an older value after a newer one; a belief that ended never comes back.
 *
 * Several tests make a session die by its validity deadline while etcd keeps
 * the lease: a margin larger than two thirds of the TTL puts the deadline
 * before the first renewal (TTL 30 s, margin 22 s: the session dies 8 s after
 * its grant, the lease lives on in etcd for 22 s more). That is the same code
 * path as a renewal that does not come back in time, without depending on how
 * fast a stalled member or process is noticed. */
#define _GNU_SOURCE /* unshare(CLONE_NEWTIME) */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "elect_util.h"
#include "transport_internal.h" /* elector__timer: the client's wake-up timer */
#include "tproxy.h"
#include "testlib.h"

static eh_cluster *start1(void)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

struct beliefs {
    int elected, lost, lost_reason;
};

static void belief_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct beliefs *b = ud;
    if (ev->type == ELECTOR_EV_ELECTED) b->elected++;
    if (ev->type == ELECTOR_EV_LOST) {
        b->lost++;
        b->lost_reason = ev->reason;
    }
}

struct sess_log {
    int lost;   /* SESSION_LOST events */
    int reason; /* of the last one */
};

static void sess_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s;
    struct sess_log *l = ud;
    if (ev->type == ELECTOR_EV_SESSION_LOST) {
        l->lost++;
        l->reason = ev->reason;
    }
}

static bool sess_lost(void *p)
{
    return ((struct sess_log *)p)->lost > 0;
}

static uint64_t keepalives_sent(elector_etcd *e)
{
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    return st.requests[ELECTOR_RPC_LEASE_KEEPALIVE];
}

/* One pass of the loop: wait up to ms for the client, then process. */
static void step(elector_etcd *e, int ms)
{
    struct pollfd pfd = {.fd = elector_etcd_fd(e), .events = POLLIN};
    int64_t t = elector_etcd_timeout(e);
    if (t >= 0 && t < ms) ms = (int)t;
    poll(&pfd, 1, ms);
    elector_etcd_process(e);
}

/* A session whose validity deadline passes `dies_after_s` seconds after its
 * grant, before any renewal, while etcd keeps its lease for ttl_s. */
static elector_session *doomed_session(elector_etcd *e, int ttl_s, int dies_after_s,
                                       bool manual_release, struct sess_log *log)
{
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = ttl_s;
    sc.margin_ms = (ttl_s - dies_after_s) * 1000LL;
    sc.manual_release = manual_release;
    elector_session *s = elector_session_new(e, &sc, sess_cb, log);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    return s;
}

static int64_t lease_ttl(elector_etcd *e, int64_t id)
{
    Etcdserverpb__LeaseTimeToLiveRequest r =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
    r.id = id;
    ProtobufCMessage *m = NULL;
    ASSERT_OK(
        elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_TIME_TO_LIVE, &r.base, NULL, &m));
    int64_t t = ((Etcdserverpb__LeaseTimeToLiveResponse *)m)->ttl;
    protobuf_c_message_free_unpacked(m, NULL);
    return t;
}

/* Number of keys under name/. */
static int64_t keys_of(elector_etcd *e, const char *name)
{
    char p[128], end[128];
    snprintf(p, sizeof(p), "%s/", name);
    size_t n = strlen(p);
    elector_prefix_end((const uint8_t *)p, n, (uint8_t *)end);
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key.data = (uint8_t *)p;
    r.key.len = n;
    r.range_end.data = (uint8_t *)end;
    r.range_end.len = n;
    r.count_only = 1;
    ProtobufCMessage *m = NULL;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &r.base, NULL, &m));
    int64_t k = ((Etcdserverpb__RangeResponse *)m)->count;
    protobuf_c_message_free_unpacked(m, NULL);
    return k;
}

/* ---- item 3: a dead session's lease, released by its owner ------------------------ */

struct lease_gone {
    elector_etcd *checker;
    int64_t lease;
};

static bool lease_is_gone(void *p)
{
    struct lease_gone *g = p;
    return lease_ttl(g->checker, g->lease) == -1;
}

/* A supervisor must reap its command before the lease goes (DESIGN 4): with
 * manual_release, a session that dies by its deadline reports LOST and
 * SESSION_LOST as usual but leaves its lease (and keys) to etcd until the owner
 * closes it; the close then revokes it although the session is dead. Without
 * the option the lease is revoked as soon as the session dies. */
TEST_WITH_TIMEOUT(manual_release_keeps_a_dead_sessions_lease_until_close, 60)
{
    eh_cluster *c = start1();
    elector_etcd *e = eu_client(eh_endpoints(c));
    elector_etcd *checker = eu_client(eh_endpoints(c));
    eu_register_client(e);
    struct sess_log auto_log = {0}, manual_log = {0};
    elector_session *sa = doomed_session(e, 30, 8, false, &auto_log);
    elector_session *sm = doomed_session(e, 30, 8, true, &manual_log);
    struct beliefs ba = {0}, bm = {0};
    elector_election *ea = elector_election_new(sa, "auto", belief_cb, &ba);
    elector_election *em = elector_election_new(sm, "manual", belief_cb, &bm);
    ASSERT_OK(elector_campaign_sync(ea, "a", 1, 3000));
    ASSERT_OK(elector_campaign_sync(em, "m", 1, 3000));
    int64_t la = elector_session_lease(sa), lm = elector_session_lease(sm);

    ASSERT(eu_pump_until(10000, sess_lost, &auto_log));
    ASSERT(eu_pump_until(2000, sess_lost, &manual_log));
    ASSERT_EQ(ELECTOR_ESESSION, manual_log.reason);
    ASSERT_EQ(1, bm.lost);
    ASSERT_EQ(ELECTOR_ESESSION, bm.lost_reason);
    ASSERT(!elector_is_leader(em));
    /* The dead session still names its lease. */
    ASSERT_EQ(lm, elector_session_lease(sm));

    /* Default: revoked at once (the lease had some 26 s left in etcd). */
    struct lease_gone g = {checker, la};
    ASSERT(eu_pump_until(3000, lease_is_gone, &g));
    ASSERT_EQ(0, keys_of(checker, "auto"));
    /* Manual: still there a while later, key included. */
    eu_pump(1000);
    int64_t ttl = lease_ttl(checker, lm);
    tl_log("manual_release: lease ttl %lld s after the session died", (long long)ttl);
    ASSERT_GT(ttl, 10);
    ASSERT_EQ(1, keys_of(checker, "manual"));

    /* The owner has finished: close revokes the dead session's lease. */
    elector_election_free(em);
    ASSERT_OK(elector_session_close_sync(sm, 3000));
    ASSERT_EQ(-1, lease_ttl(checker, lm));
    ASSERT_EQ(0, keys_of(checker, "manual"));
    elector_election_free(ea);
    ASSERT_OK(elector_session_close_sync(sa, 3000));
    eu_unregister_client(e);
    elector_etcd_free(e);
    elector_etcd_free(checker);
    eh_stop(c);
}

/* ---- item 4: any election may be freed from any callback -------------------------- */

struct two {
    elector_election *el[2];
    int events[2];
    int lost;
};

static void free_both_cb(elector_election *el, const elector_event *ev, void *ud)
{
    struct two *t = ud;
    int i = el == t->el[0] ? 0 : 1;
    t->events[i]++;
    if (ev->type != ELECTOR_EV_LOST && ev->type != ELECTOR_EV_FAILED) return;
    t->lost++;
    /* election.h allows freeing any election from a callback. */
    for (int k = 0; k < 2; k++) {
        elector_election_free(t->el[k]);
        t->el[k] = NULL;
    }
}

TEST_WITH_TIMEOUT(lost_callback_may_free_every_election_of_the_session, 60)
{
    eh_cluster *c = start1();
    elector_etcd *e = eu_client(eh_endpoints(c));
    eu_register_client(e);
    struct sess_log sl = {0};
    elector_session *s = doomed_session(e, 30, 8, false, &sl);
    struct two t = {0};
    t.el[0] = elector_election_new(s, "first", free_both_cb, &t);
    t.el[1] = elector_election_new(s, "second", free_both_cb, &t);
    ASSERT_NOT_NULL(t.el[0]);
    ASSERT_NOT_NULL(t.el[1]);
    ASSERT_OK(elector_campaign_sync(t.el[0], "1", 1, 3000));
    ASSERT_OK(elector_campaign_sync(t.el[1], "2", 1, 3000));
    ASSERT(elector_is_leader(t.el[0]) && elector_is_leader(t.el[1]));
    /* The session dies by its deadline; the first LOST frees both elections,
     * the one being notified and the one the walk would visit next. */
    ASSERT(eu_pump_until(10000, sess_lost, &sl));
    ASSERT_EQ(ELECTOR_ESESSION, sl.reason);
    ASSERT_EQ(1, t.lost);
    ASSERT_NULL(t.el[0]);
    eu_pump(100);
    ASSERT_EQ(1, sl.lost);
    elector_session_close_sync(s, 2000);
    eu_unregister_client(e);
    elector_etcd_free(e);
    eh_stop(c);
}

struct closer {
    elector_session *s;
    int lost;
};

static void close_on_lost_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct closer *k = ud;
    if (ev->type != ELECTOR_EV_LOST) return;
    k->lost++;
    elector_session_close(k->s); /* the session being closed: a no-op */
}

TEST(closing_the_session_again_from_the_lost_its_close_caused_is_safe)
{
    eh_cluster *c = start1();
    elector_etcd *e = eu_client(eh_endpoints(c));
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct closer k = {.s = s};
    elector_election *el[2];
    el[0] = elector_election_new(s, "c1", close_on_lost_cb, &k);
    el[1] = elector_election_new(s, "c2", close_on_lost_cb, &k);
    ASSERT_OK(elector_campaign_sync(el[0], "1", 1, 3000));
    ASSERT_OK(elector_campaign_sync(el[1], "2", 1, 3000));
    ASSERT_OK(elector_session_close_sync(s, 3000));
    ASSERT_EQ(2, k.lost);
    elector_leader_info li;
    ASSERT_EQ(1, elector_leader_sync(e, "c1", 3000, &li));
    ASSERT_EQ(1, elector_leader_sync(e, "c2", 3000, &li));
    elector_election_free(el[0]);
    elector_election_free(el[1]);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---- item 5: a campaign key never outlives its campaign --------------------------- */

struct el_log {
    int n;
    elector_event_type type[16];
    int reason[16];
    int64_t mono[16]; /* ev->mono_ns */
};

static void log_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct el_log *l = ud;
    if (l->n < 16) {
        l->type[l->n] = ev->type;
        l->reason[l->n] = ev->reason;
        l->mono[l->n] = ev->mono_ns;
        l->n++;
    }
}

static int count_type(const struct el_log *l, elector_event_type t)
{
    int k = 0;
    for (int i = 0; i < l->n; i++)
        k += l->type[i] == t;
    return k;
}

static bool has_failed(void *p)
{
    return count_type(p, ELECTOR_EV_FAILED) > 0;
}

static bool disconnected(void *p)
{
    elector_etcd_stats st;
    elector_etcd_get_stats(p, &st);
    return st.disconnects > 0;
}

struct names {
    elector_etcd *checker;
    const char *name[2];
    int64_t want; /* keys each */
};

static bool keys_are(void *p)
{
    struct names *k = p;
    for (int i = 0; i < 2; i++)
        if (k->name[i] && keys_of(k->checker, k->name[i]) != k->want) return false;
    return true;
}

/* The campaign Txn is applied, but its answer is lost (the proxy drops what
 * etcd sends, then the connection ends): the campaign does not know its create
 * revision and waits to retry. A resign, or a free, then must still remove
 * the key: it is ours by name (prefix + our lease), and it would make every
 * other candidate wait for our whole session. */
TEST_WITH_TIMEOUT(campaign_key_goes_on_resign_or_free_when_its_answer_was_lost, 90)
{
    eh_cluster *c = start1();
    tp_proxy *px = tp_start(eh_endpoint(c, 0));
    ASSERT_NOT_NULL(px);
    /* No PING while answers are lost (it would end the connection early), and
     * calls wait long enough for the test to end it. */
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = tp_endpoint(px);
    cfg.request_timeout_ms = 20000;
    cfg.keepalive_time_ms = 30000;
    cfg.keepalive_idle_ms = 30000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_etcd *checker = eu_client(eh_endpoints(c));
    eu_register_client(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 30; /* outlives the test: only a delete removes the keys */
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct el_log lr = {0}, lf = {0};
    elector_election *er = elector_election_new(s, "lost-r", log_cb, &lr);
    elector_election *ef = elector_election_new(s, "lost-f", log_cb, &lf);

    ASSERT_OK(tp_drop_replies(px));
    ASSERT_OK(elector_campaign(er, "r", 1));
    ASSERT_OK(elector_campaign(ef, "f", 1));
    struct names k = {checker, {"lost-r", "lost-f"}, 1};
    ASSERT(eu_pump_until(5000, keys_are, &k)); /* applied by etcd */
    ASSERT_EQ(0, elector_election_token(er));  /* ... unknown to us */
    /* The answer: the connection ends (EUNAVAILABLE); the campaigns pause
     * before a retry. The pump returns right after the elector_etcd_process()
     * that saw it, so no retry timer has run yet: resign and free happen in
     * the pause, whatever the machine's load. */
    ASSERT_OK(tp_reset(px));
    ASSERT(eu_pump_until(5000, disconnected, e));
    ASSERT_EQ(0, elector_election_token(er));
    ASSERT_EQ(0, elector_election_token(ef));
    ASSERT_OK(elector_resign(er));
    elector_election_free(ef);

    /* Both keys go, over the next connection. */
    k.want = 0;
    ASSERT(eu_pump_until(8000, keys_are, &k));
    ASSERT(eu_pump_until(10000, has_failed, &lr));
    ASSERT_EQ(1, count_type(&lr, ELECTOR_EV_FAILED));
    ASSERT_EQ(ELECTOR_ECANCELED, lr.reason[lr.n - 1]);
    ASSERT_EQ(0, count_type(&lr, ELECTOR_EV_ELECTED));
    ASSERT_EQ(0, lf.n);
    elector_election_free(er);
    ASSERT_OK(elector_session_close_sync(s, 3000));
    eu_unregister_client(e);
    elector_etcd_free(e);
    elector_etcd_free(checker);
    tp_stop(px);
    eh_stop(c);
}

static elector_etcd *user_client(eh_cluster *c, const char *user, const char *password)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.user = user;
    cfg.password = password;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 3000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

/* A candidate allowed to write its own key (every hex name under "perm/") but
 * not to read the whole prefix: the campaign Txn succeeds, the check that
 * follows is refused (EPERM), which retrying cannot cure. The campaign fails
 * and must not leave its key behind. */
TEST_WITH_TIMEOUT(campaign_that_fails_on_eperm_removes_its_key, 60)
{
    eh_opts o = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    ASSERT_OK(eh_etcdctl(c, NULL, "role", "add", "perm-role", NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "role", "grant-permission", "perm-role", "readwrite",
                         "perm/0", "perm/g", NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "add", "perm-user:perm-pw-1", NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "grant-role", "perm-user", "perm-role", NULL));
    elector_etcd *e = user_client(c, "perm-user", "perm-pw-1");
    elector_etcd *root = user_client(c, "root", EH_ROOT_PASSWORD);
    eu_register_client(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 30;
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct el_log l = {0};
    elector_election *el = elector_election_new(s, "perm", log_cb, &l);
    ASSERT_EQ(ELECTOR_EPERM, elector_campaign_sync(el, "v", 1, 5000));
    ASSERT_EQ(ELECTOR_EV_FAILED, l.type[l.n - 1]);
    struct names k = {root, {"perm", NULL}, 0};
    bool gone = eu_pump_until(5000, keys_are, &k);
    if (!gone) tl_log("perm/ still holds %lld key(s)", (long long)keys_of(root, "perm"));
    ASSERT(gone);
    elector_election_free(el);
    ASSERT_OK(elector_session_close_sync(s, 3000));
    eu_unregister_client(e);
    elector_etcd_free(e);
    elector_etcd_free(root);
    eh_stop(c);
}

static bool both_lost(void *p)
{
    struct el_log *l = p;
    return count_type(&l[0], ELECTOR_EV_LOST) && count_type(&l[1], ELECTOR_EV_LOST);
}

/* Leaders whose permission to read their election's prefix is taken away
 * while they lead (auth on): after their watch breaks (the connection reset
 * by a proxy), the re-check is refused for good (EPERM), which retrying
 * cannot cure. Each is LOST with EPERM. The default session's leader deletes
 * its key (it may still write it), so the next candidate need not wait for
 * the lease; a manual_release session's leader keeps it, its owner releases. */
TEST_WITH_TIMEOUT(leader_whose_recheck_is_refused_for_good_is_lost, 60)
{
    eh_opts o = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    ASSERT_OK(eh_etcdctl(c, NULL, "role", "add", "lead-role", NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "role", "grant-permission", "lead-role",
                         "--prefix=true", "readwrite", "lead-", NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "add", "lead-user:lead-pw-1", NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "grant-role", "lead-user", "lead-role", NULL));
    tp_proxy *px = tp_start(eh_endpoint(c, 0));
    ASSERT_NOT_NULL(px);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = tp_endpoint(px);
    cfg.user = "lead-user";
    cfg.password = "lead-pw-1";
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 3000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_etcd *root = user_client(c, "root", EH_ROOT_PASSWORD);
    eu_register_client(e);
    elector_session *s[2];
    elector_election *el[2];
    struct el_log l[2] = {{0}};
    const char *names[2] = {"lead-a", "lead-m"};
    for (int i = 0; i < 2; i++) {
        elector_session_config sc;
        elector_session_config_init(&sc);
        sc.ttl_s = 30; /* outlives the test: only a delete removes the key */
        sc.manual_release = i == 1;
        s[i] = elector_session_new(e, &sc, NULL, NULL);
        ASSERT_NOT_NULL(s[i]);
        ASSERT_OK(elector_session_wait(s[i], 5000));
        el[i] = elector_election_new(s[i], names[i], log_cb, &l[i]);
        ASSERT_NOT_NULL(el[i]);
        ASSERT_OK(elector_campaign_sync(el[i], "v", 1, 5000));
    }
    /* Each may now write its own key (hex names under NAME/) but not read the
     * prefix. */
    ASSERT_OK(eh_etcdctl(c, NULL, "role", "revoke-permission", "lead-role",
                         "--prefix=true", "lead-", NULL));
    for (int i = 0; i < 2; i++) {
        char from[32], to[32];
        snprintf(from, sizeof(from), "%s/0", names[i]);
        snprintf(to, sizeof(to), "%s/g", names[i]);
        ASSERT_OK(eh_etcdctl(c, NULL, "role", "grant-permission", "lead-role",
                             "readwrite", from, to, NULL));
    }
    ASSERT(elector_is_leader(el[0]) && elector_is_leader(el[1]));
    int64_t t0 = tl_now_ns(); /* CLOCK_MONOTONIC, as mono_ns */
    ASSERT_OK(tp_reset(px));
    bool lost = eu_pump_until(10000, both_lost, l);
    for (int i = 0; i < 2; i++)
        tl_log("%s: %d events, last type %d reason %s", names[i], l[i].n,
               l[i].n ? (int)l[i].type[l[i].n - 1] : 0,
               l[i].n ? elector_err_name(l[i].reason[l[i].n - 1]) : "-");
    ASSERT(lost);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(ELECTOR_EV_LOST, l[i].type[l[i].n - 1]);
        ASSERT_EQ(ELECTOR_EPERM, l[i].reason[l[i].n - 1]);
        /* The LOST's time is when the refusal came, not another's. */
        ASSERT_GT(l[i].mono[l[i].n - 1], t0);
        ASSERT_LE(l[i].mono[l[i].n - 1], tl_now_ns());
        ASSERT(!elector_is_leader(el[i]));
    }
    struct names gone = {root, {"lead-a", NULL}, 0};
    ASSERT(eu_pump_until(5000, keys_are, &gone));
    eu_pump(300);
    ASSERT_EQ(1, keys_of(root, "lead-m")); /* the owner releases */
    for (int i = 0; i < 2; i++) {
        elector_election_free(el[i]);
        ASSERT_OK(elector_session_close_sync(s[i], 3000));
    }
    ASSERT_EQ(0, keys_of(root, "lead-m"));
    eu_unregister_client(e);
    elector_etcd_free(e);
    elector_etcd_free(root);
    tp_stop(px);
    eh_stop(c);
}

/* One key per name and session: a second election object with the same name on
 * the same session would share it (and its deletes). It may not campaign while
 * the first one campaigns, leads or still deletes the key. A resign followed at
 * once by a new campaign of the same object waits for the delete, then leads
 * again with a new key. */
struct count_wait {
    struct el_log *l;
    elector_event_type type;
    int n;
};

static bool has_count(void *p)
{
    struct count_wait *w = p;
    return count_type(w->l, w->type) >= w->n;
}

TEST(one_campaign_per_name_and_session_and_recampaign_after_resign)
{
    eh_cluster *c = start1();
    elector_etcd *e = eu_client(eh_endpoints(c));
    eu_register_client(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct el_log la = {0}, lb = {0};
    elector_election *a = elector_election_new(s, "same", log_cb, &la);
    elector_election *b = elector_election_new(s, "same", log_cb, &lb);
    ASSERT_OK(elector_campaign_sync(a, "a", 1, 3000));
    ASSERT_EQ(ELECTOR_EBUSY, elector_campaign(b, "b", 1));
    int64_t t1 = elector_election_token(a);

    ASSERT_OK(elector_resign(a));
    ASSERT_OK(elector_campaign(a, "a2", 2)); /* at once: waits for the delete */
    ASSERT_EQ(ELECTOR_EBUSY, elector_campaign(b, "b", 1));
    struct count_wait w = {&la, ELECTOR_EV_ELECTED, 2};
    ASSERT(eu_pump_until(5000, has_count, &w));
    ASSERT_EQ(0, count_type(&la, ELECTOR_EV_FAILED));
    ASSERT(elector_is_leader(a));
    ASSERT_GT(elector_election_token(a), t1); /* a new key */
    elector_leader_info li;
    ASSERT_OK(elector_leader_sync(e, "same", 3000, &li));
    ASSERT_EQ(elector_election_token(a), li.token);
    ASSERT_EQ(2, (long long)li.value_len);
    elector_leader_free(&li);

    ASSERT_OK(elector_resign(a));
    w.type = ELECTOR_EV_RESIGNED;
    w.n = 1;
    ASSERT(eu_pump_until(5000, has_count, &w));
    ASSERT_OK(elector_campaign_sync(b, "b", 1, 3000)); /* now b may */
    ASSERT_EQ(0, lb.n - count_type(&lb, ELECTOR_EV_ELECTED));
    elector_election_free(a);
    elector_election_free(b);
    ASSERT_OK(elector_session_close_sync(s, 3000));
    eu_unregister_client(e);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---- item 13: deadlines on CLOCK_BOOTTIME ----------------------------------------- */

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define SUSPENDED_S 100000 /* how far CLOCK_BOOTTIME runs ahead in the namespace */

struct stamps {
    int n;
    elector_event_type type[16];
    int64_t mono[16];
};

static void stamp_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct stamps *t = ud;
    if (t->n < 16) {
        t->type[t->n] = ev->type;
        t->mono[t->n++] = ev->mono_ns;
    }
}

static void stamp_obs_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    stamp_cb(NULL, ev, ud);
    (void)o;
}

static void stamp_sess_cb(elector_session *s, const elector_event *ev, void *ud)
{
    stamp_cb(NULL, ev, ud);
    (void)s;
}

/* An instant on CLOCK_MONOTONIC, taken within the last few seconds. */
#define ASSERT_RECENT_MONO(t)                                                            \
    do {                                                                                 \
        int64_t m_ = clock_ns(CLOCK_MONOTONIC);                                          \
        ASSERT_LE((t), m_);                                                              \
        ASSERT_GT((t), m_ - 10 * 1000000000LL);                                          \
    } while (0)

static bool stamped(void *p)
{
    struct stamps *t = p;
    return t->n > 0;
}

static void count_fire(elector__timer *t, void *ud)
{
    (void)t;
    (*(int *)ud)++;
}

/* Runs in a time namespace where CLOCK_BOOTTIME = CLOCK_MONOTONIC + 100000 s. */
static void boottime_child(const char *endpoints)
{
    int64_t boot = clock_ns(CLOCK_BOOTTIME), mono = clock_ns(CLOCK_MONOTONIC);
    ASSERT_GT(boot - mono, (SUSPENDED_S - 10) * 1000000000LL);
    /* The deadline clock is CLOCK_BOOTTIME. */
    int64_t now = elector_now_ns();
    ASSERT_LE(clock_ns(CLOCK_BOOTTIME) - now, 1000000000LL);
    ASSERT_GE(now, boot);

    elector_etcd *e = eu_client(endpoints);
    /* The client's wake-up timer runs on CLOCK_BOOTTIME too: a timer due in
     * 150 ms makes the fd readable then (on CLOCK_MONOTONIC, that absolute time
     * would come 100000 s later). */
    int fired = 0;
    elector__timer tm = {0};
    elector__timer_arm(e, &tm, elector__now_ms() + 150, count_fire, &fired);
    struct pollfd pfd = {.fd = elector_etcd_fd(e), .events = POLLIN};
    ASSERT_EQ(1, poll(&pfd, 1, 3000));
    ASSERT_OK(elector_etcd_process(e));
    ASSERT_EQ(1, fired);

    eu_register_client(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 10;
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct stamps t = {0};
    elector_election *el = elector_election_new(s, "clock", stamp_cb, &t);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
    ASSERT(elector_is_leader(el));
    /* The session deadline is on the deadline clock, some 9 s ahead. */
    int64_t d = elector_session_deadline_ns(s);
    int64_t left = d - clock_ns(CLOCK_BOOTTIME);
    ASSERT_GT(left, 5 * 1000000000LL);
    ASSERT_LE(left, 10 * 1000000000LL);
    /* Events keep CLOCK_MONOTONIC, which other processes compare. */
    ASSERT_EQ(ELECTOR_EV_ELECTED, t.type[0]);
    ASSERT_RECENT_MONO(t.mono[0]);
    ASSERT_OK(elector_resign(el));
    for (double end = tl_now() + 3; t.n < 2 && tl_now() < end;)
        eu_pump(20);
    ASSERT_EQ(ELECTOR_EV_RESIGNED, t.type[1]);
    ASSERT_RECENT_MONO(t.mono[1]);

    struct stamps ot = {0};
    elector_observer *o = elector_observe(e, "clock", stamp_obs_cb, &ot);
    ASSERT(eu_pump_until(3000, stamped, &ot));
    ASSERT_EQ(ELECTOR_EV_NO_LEADER, ot.type[0]);
    ASSERT_RECENT_MONO(ot.mono[0]);
    elector_observer_free(o);
    elector_election_free(el);
    ASSERT_OK(elector_session_close_sync(s, 3000));

    /* A LOST capped at the deadline is dated on CLOCK_MONOTONIC too, and so is
     * SESSION_LOST: a session that dies by its deadline 5 s after its grant. */
    struct stamps st = {0}, lt = {0};
    sc.ttl_s = 30;
    sc.margin_ms = 25000;
    s = elector_session_new(e, &sc, stamp_sess_cb, &st);
    ASSERT_OK(elector_session_wait(s, 5000));
    el = elector_election_new(s, "clock", stamp_cb, &lt);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 4000));
    int64_t deadline = elector_session_deadline_ns(s);
    int64_t deadline_mono =
        deadline - (clock_ns(CLOCK_BOOTTIME) - clock_ns(CLOCK_MONOTONIC));
    ASSERT(eu_pump_until(10000, stamped, &st));
    ASSERT_EQ(ELECTOR_EV_SESSION_LOST, st.type[0]);
    ASSERT_RECENT_MONO(st.mono[0]);
    ASSERT_EQ(ELECTOR_EV_LOST, lt.type[1]);
    ASSERT_RECENT_MONO(lt.mono[1]);
    ASSERT_LE(lt.mono[1], deadline_mono + 1000000); /* no later than the deadline */
    elector_election_free(el);
    elector_session_close_sync(s, 3000);
    eu_unregister_client(e);
    elector_etcd_free(e);
}

/* A suspended host stops CLOCK_MONOTONIC, not etcd's clock: deadlines must be on
 * CLOCK_BOOTTIME. A time namespace makes the two clocks differ as a long
 * suspend would; the library runs in a child created in it. */
TEST_WITH_TIMEOUT(deadlines_follow_clock_boottime_and_events_clock_monotonic, 60)
{
    eh_cluster *c = start1(); /* etcd outside the namespace */
    int rc = unshare(CLONE_NEWTIME);
    if (rc) tl_log("unshare(CLONE_NEWTIME): %s", strerror(errno));
    ASSERT_OK(rc);
    int fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    char off[64];
    int n = snprintf(off, sizeof(off), "boottime %d 0\n", SUSPENDED_S);
    ASSERT_EQ(n, write(fd, off, (size_t)n));
    close(fd);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        boottime_child(eh_endpoints(c));
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(0, WEXITSTATUS(status));
    eh_stop(c);
}

/* ---- item 14: observe never goes back --------------------------------------------- */

struct obs_log {
    int n;
    elector_event_type type[64];
    char value[64][16];
    int64_t token[64];
};

static void obs_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    struct obs_log *l = ud;
    if (l->n >= 64) return;
    l->type[l->n] = ev->type;
    l->token[l->n] = ev->token;
    snprintf(l->value[l->n], sizeof(l->value[0]), "%.*s", (int)ev->value_len,
             (const char *)ev->value);
    l->n++;
}

static uint64_t ranges_sent(elector_etcd *e)
{
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    return st.requests[ELECTOR_RPC_RANGE];
}

static void count_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    ASSERT_OK(err);
    (*(int *)ud)++;
}

static bool count_reached(void *p)
{
    return ((int *)p)[0] >= ((int *)p)[1];
}

/* Revisions past etcd's limit for one watch catch-up response (1000): a watch
 * that starts this far back is replayed in two responses, some 100 ms apart. */
static void write_revisions(elector_etcd *w, const char *key, int n)
{
    int count[2] = {0, n};
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key.data = (uint8_t *)key;
    put.key.len = strlen(key);
    put.value.data = (uint8_t *)"pad";
    put.value.len = 3;
    for (int i = 0; i < n; i++)
        ASSERT_OK(
            elector_etcd_call(w, ELECTOR_RPC_PUT, &put.base, NULL, count_done, count));
    eu_register_client(w);
    ASSERT(eu_pump_until(30000, count_reached, count));
    eu_unregister_client(w);
}

static void proclaim_wait(eu_cand *b, const char *v)
{
    int from = b->n;
    ASSERT_OK(elector_proclaim(b->el, v, strlen(v)));
    int i = eu_wait_event(b, from, ELECTOR_EV_PROCLAIMED, 3000);
    ASSERT_GE(i, 0);
    ASSERT_EQ(0, b->reasons[i]);
}

/* An observer's watch that lags behind its reads must not report what the read
 * already showed as news. Built deterministically: the observer's first read
 * is answered while its loop does not run; meanwhile the leader resigns, more
 * than 1000 revisions are written under the prefix, and the new leader
 * proclaims b2 then b3. When the observer runs, its watch starts at the first
 * read's revision + 1 and etcd replays it in two responses: the first holds the
 * old leader's DELETE (a fresh read then reports b3), the second, ~100 ms
 * later, holds the PUTs of b2 and b3, older than that read. Reporting them
 * would show b2 after b3. */
TEST_WITH_TIMEOUT(observer_never_reports_an_older_value_after_a_newer_one, 90)
{
    eh_cluster *c = start1();
    eu_cand *a = eu_cand_new(eh_endpoints(c), "obs", 30);
    eu_cand *b = eu_cand_new(eh_endpoints(c), "obs", 30);
    ASSERT_OK(elector_campaign_sync(a->el, "a1", 2, 5000));
    ASSERT_OK(elector_campaign(b->el, "b1", 2));
    ASSERT_GE(eu_wait_event(b, 0, ELECTOR_EV_WAITING, 3000), 0);

    elector_etcd *oe = eu_client(eh_endpoints(c));
    struct obs_log log = {0};
    elector_observer *o = elector_observe(oe, "obs", obs_cb, &log);
    ASSERT_NOT_NULL(o);
    for (double end = tl_now() + 5; ranges_sent(oe) == 0 && tl_now() < end;)
        step(oe, 20);
    ASSERT_EQ(1, ranges_sent(oe)); /* read 1 sent; its answer will wait in the socket */
    struct pollfd pfd = {.fd = elector_etcd_fd(oe), .events = POLLIN};
    poll(&pfd, 1, 2000);
    tl_msleep(200); /* answered before the resign below, by a wide margin */

    ASSERT_OK(elector_resign(a->el));
    ASSERT_GE(eu_wait_event(b, 0, ELECTOR_EV_ELECTED, 3000), 0);
    elector_etcd *w = eu_client(eh_endpoints(c));
    write_revisions(w, "obs/~pad", 1100);
    proclaim_wait(b, "b2");
    proclaim_wait(b, "b3");

    eu_register_client(oe);
    eu_pump(1500);
    for (int i = 0; i < log.n; i++)
        tl_log("observed %s %s", elector_event_name(log.type[i]), log.value[i]);
    ASSERT_GE(log.n, 1);
    if (strcmp(log.value[0], "a1")) tl_log("read 1 was answered late: weak run");
    ASSERT_STREQ("b3", log.value[log.n - 1]);
    /* Once b3 was reported, nothing older follows. */
    int first_b3 = -1;
    for (int i = 0; i < log.n && first_b3 < 0; i++)
        if (!strcmp(log.value[i], "b3")) first_b3 = i;
    ASSERT_EQ(log.n - 1, first_b3);
    elector_observer_free(o);
    eu_unregister_client(oe);
    elector_etcd_free(oe);
    elector_etcd_free(w);
    eu_cand_free(a);
    eu_cand_free(b);
    eh_stop(c);
}

/* What an election was told, with the detail. */
struct det_log {
    int n;
    elector_event_type type[16];
    int reason[16];
    char detail[16][96];
};

static void det_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct det_log *l = ud;
    if (l->n >= 16) return;
    l->type[l->n] = ev->type;
    l->reason[l->n] = ev->reason;
    snprintf(l->detail[l->n], sizeof(l->detail[0]), "%s", ev->detail ? ev->detail : "");
    l->n++;
}

static bool det_lost(void *p)
{
    struct det_log *l = p;
    return l->n && l->type[l->n - 1] == ELECTOR_EV_LOST;
}

static bool obs_has(void *p)
{
    struct obs_log *l = p;
    return l->n > 0 && l->type[l->n - 1] == ELECTOR_EV_NO_LEADER;
}

struct obs_value {
    struct obs_log *l;
    const char *v;
};

static bool obs_value_is(void *p)
{
    struct obs_value *w = p;
    return w->l->n > 0 && !strcmp(w->l->value[w->l->n - 1], w->v);
}

static void delete_key(elector_etcd *e, const elector_election *el)
{
    size_t n = 0;
    const uint8_t *k = elector_election_key(el, &n);
    ASSERT_NOT_NULL(k);
    Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key.data = (uint8_t *)k;
    d.key.len = n;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_DELETE_RANGE, &d.base, NULL, NULL));
}

/* Leaders and an observer whose connection breaks (a proxy resets it) look
 * again rather than trust or drop what they had: a leader checks its key (a
 * linearizable check more) and watches it anew, so a later delete of its key
 * is noticed (LOST "... was deleted"); the observer reads again and watches
 * anew, so a later proclaim is reported. A leader whose key was deleted while
 * it could not hear it (the proxy dropping etcd's answers) finds it gone at
 * that check: LOST ENOTLEADER "our key is gone". */
TEST_WITH_TIMEOUT(leaders_and_observer_look_again_after_their_connection_breaks, 60)
{
    eh_cluster *c = start1();
    tp_proxy *px = tp_start(eh_endpoint(c, 0));
    ASSERT_NOT_NULL(px);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = tp_endpoint(px);
    cfg.keepalive_time_ms = 30000; /* no PING ends the connection while answers drop */
    cfg.keepalive_idle_ms = 30000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_etcd *chk = eu_client(eh_endpoints(c));
    eu_register_client(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 30;
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct det_log l1 = {0}, l2 = {0};
    elector_election *e1 = elector_election_new(s, "brk1", det_cb, &l1);
    elector_election *e2 = elector_election_new(s, "brk2", det_cb, &l2);
    ASSERT_OK(elector_campaign_sync(e1, "a", 1, 5000));
    ASSERT_OK(elector_campaign_sync(e2, "b", 1, 5000));
    struct obs_log ol = {0}, ol2 = {0};
    elector_observer *ob = elector_observe(e, "brk1", obs_cb, &ol);
    ASSERT_NOT_NULL(ob);
    struct obs_value want = {&ol, "a"};
    ASSERT(eu_pump_until(3000, obs_value_is, &want));
    /* From the field: an observer of brk2 through the same connection. */
    elector_observer *ob2 = elector_observe(e, "brk2", obs_cb, &ol2);
    ASSERT_NOT_NULL(ob2);
    struct obs_value want2 = {&ol2, "b"};
    ASSERT(eu_pump_until(3000, obs_value_is, &want2));
    elector_election_stats st;
    elector_election_get_stats(e1, &st);
    uint64_t checks = st.checks_linearizable;

    /* 1. The connection breaks: still leaders, one check more each. */
    ASSERT_OK(tp_reset(px));
    ASSERT(eu_pump_until(5000, disconnected, e));
    eu_pump(1000);
    elector_election_get_stats(e1, &st);
    tl_log("after the reset: %llu checks (were %llu), %llu retries, %d observer events",
           (unsigned long long)st.checks_linearizable, (unsigned long long)checks,
           (unsigned long long)st.retries, ol.n);
    ASSERT(elector_is_leader(e1) && elector_is_leader(e2));
    ASSERT_EQ(1, l1.n);
    ASSERT_EQ(1, l2.n);
    ASSERT_EQ(checks + 1, st.checks_linearizable);
    ASSERT_EQ(1, ol.n);
    ASSERT_EQ(1, ol2.n);
    /* The observer's new watch reports a proclaim. */
    ASSERT_OK(elector_proclaim(e1, "a2", 2));
    want.v = "a2";
    ASSERT(eu_pump_until(3000, obs_value_is, &want));

    /* 2. brk2's key deleted while etcd's answers are lost: its watch cannot
     * tell; the check after the next reset finds the key gone. */
    ASSERT_OK(tp_drop_replies(px));
    delete_key(chk, e2);
    eu_pump(200);
    ASSERT(elector_is_leader(e2));
    ASSERT_OK(tp_reset(px));
    ASSERT(eu_pump_until(5000, det_lost, &l2));
    tl_log("brk2: LOST %s (%s)", elector_err_name(l2.reason[l2.n - 1]),
           l2.detail[l2.n - 1]);
    ASSERT_EQ(ELECTOR_ENOTLEADER, l2.reason[l2.n - 1]);
    ASSERT_STREQ("our key is gone", l2.detail[l2.n - 1]);
    /* ... and brk2's observer, whose watch could not hear the delete either,
     * reads again after the reset and reports that nobody leads (it never
     * keeps reporting the deleted leader). */
    ASSERT(eu_pump_until(3000, obs_has, &ol2));
    tl_log("brk2's observer after the reset: %d events, last %s", ol2.n,
           elector_event_name(ol2.type[ol2.n - 1]));

    /* 3. brk1's renewed watch sees its key deleted; the observer sees nobody. */
    eu_pump(300);
    ASSERT(elector_is_leader(e1));
    delete_key(chk, e1);
    ASSERT(eu_pump_until(3000, det_lost, &l1));
    ASSERT_CONTAINS(l1.detail[l1.n - 1], "was deleted");
    ASSERT(eu_pump_until(3000, obs_has, &ol));

    elector_observer_free(ob);
    elector_observer_free(ob2);
    elector_election_free(e1);
    elector_election_free(e2);
    ASSERT_OK(elector_session_close_sync(s, 3000));
    eu_unregister_client(e);
    elector_etcd_free(e);
    elector_etcd_free(chk);
    tp_stop(px);
    eh_stop(c);
}

/* The WAITING callback may free its election or resign it, and an observer's
 * callback may free the observer: B (freed on WAITING) and C (resigned on
 * WAITING: FAILED ECANCELED once the delete is answered) leave no key behind
 * and hear nothing more; the observer freed on its first report hears nothing
 * more when the leader changes. A leads on. */
struct wcb {
    elector_election *el;
    int events, failed, reason;
    bool resign; /* else free */
};

static void waiting_cb(elector_election *el, const elector_event *ev, void *ud)
{
    struct wcb *w = ud;
    w->events++;
    if (ev->type == ELECTOR_EV_FAILED) {
        w->failed++;
        w->reason = ev->reason;
    }
    if (ev->type != ELECTOR_EV_WAITING) return;
    if (w->resign) {
        ASSERT_OK(elector_resign(el));
    } else {
        elector_election_free(el);
        w->el = NULL;
    }
}

static void obs_free_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)ev;
    ++*(int *)ud;
    elector_observer_free(o);
}

static bool wcb_failed(void *p)
{
    return ((struct wcb *)p)->failed > 0;
}

TEST_WITH_TIMEOUT(waiting_and_observer_callbacks_may_free_or_resign, 60)
{
    eh_cluster *c = start1();
    eu_cand *a = eu_cand_new(eh_endpoints(c), "wcb", 30);
    ASSERT_OK(elector_campaign_sync(a->el, "a", 1, 5000));
    elector_etcd *e = eu_client(eh_endpoints(c));
    eu_register_client(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 30;
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    elector_session *s2 = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s2);
    ASSERT_OK(elector_session_wait(s2, 5000));
    int obs = 0;
    elector_observer *ob = elector_observe(e, "wcb", obs_free_cb, &obs);
    ASSERT_NOT_NULL(ob);
    struct wcb b = {0}, cc = {.resign = true};
    b.el = elector_election_new(s, "wcb", waiting_cb, &b);
    cc.el = elector_election_new(s2, "wcb", waiting_cb, &cc);
    ASSERT_OK(elector_campaign(b.el, "b", 1));
    ASSERT_OK(elector_campaign(cc.el, "c", 1));
    ASSERT(eu_pump_until(5000, wcb_failed, &cc));
    struct names k = {e, {"wcb", NULL}, 1}; /* A's key only */
    ASSERT(eu_pump_until(5000, keys_are, &k));
    ASSERT_EQ(1, b.events);
    ASSERT_NULL(b.el);
    ASSERT_EQ(2, cc.events); /* WAITING, FAILED */
    ASSERT_EQ(ELECTOR_ECANCELED, cc.reason);
    ASSERT_EQ(1, obs);
    ASSERT(elector_is_leader(a->el));
    /* The leader goes: nobody else is told (B freed, C ended, observer freed). */
    ASSERT_OK(elector_resign(a->el));
    k.want = 0;
    ASSERT(eu_pump_until(5000, keys_are, &k));
    eu_pump(300);
    ASSERT_EQ(1, b.events);
    ASSERT_EQ(2, cc.events);
    ASSERT_EQ(1, obs);
    elector_election_free(cc.el);
    ASSERT_OK(elector_session_close_sync(s, 3000));
    ASSERT_OK(elector_session_close_sync(s2, 3000));
    eu_unregister_client(e);
    elector_etcd_free(e);
    eu_cand_free(a);
    eh_stop(c);
}

static uint64_t checks_of(const elector_election *el)
{
    elector_election_stats st;
    elector_election_get_stats(el, &st);
    return st.checks_linearizable + st.checks_serializable;
}

/* A waiting candidate whose turn is confirmed only after its session's
 * validity deadline (its process stalled between the predecessor's DELETE,
 * which sent the check, and the check's answer) does not lead on it: the
 * answer is processed before the timers, finds the session not provably
 * alive, and the campaign FAILS (ESESSION). No ELECTED, ever. */
TEST_WITH_TIMEOUT(turn_confirmed_after_the_session_deadline_is_not_taken, 60)
{
    eh_cluster *c = start1();
    eu_cand *a = eu_cand_new(eh_endpoints(c), "late", 30);
    ASSERT_OK(elector_campaign_sync(a->el, "a", 1, 5000));
    elector_etcd *e = eu_client(eh_endpoints(c)); /* run by hand only */
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 3; /* deadline = renewal sent + 3 s - 0.3 s */
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct det_log l = {0};
    elector_election *el = elector_election_new(s, "late", det_cb, &l);
    ASSERT_OK(elector_campaign(el, "b", 1));
    for (double end = tl_now() + 5; l.n == 0 && tl_now() < end;)
        step(e, 20);
    ASSERT_EQ(1, l.n);
    ASSERT_EQ(ELECTOR_EV_WAITING, l.type[0]);
    uint64_t checks = checks_of(el);

    /* A resigns; B runs until the DELETE has sent its check, then stalls. */
    ASSERT_OK(elector_resign(a->el));
    for (double end = tl_now() + 5; checks_of(el) == checks && tl_now() < end;) {
        eu_pump(5);
        step(e, 5);
    }
    ASSERT_GT(checks_of(el), checks);
    int64_t dl = elector_session_deadline_ns(s);
    tl_msleep((int)((dl - elector_now_ns()) / 1000000) + 300);
    ASSERT(!elector_session_alive(s));
    for (double end = tl_now() + 3; l.n < 2 && tl_now() < end;)
        step(e, 20);
    tl_log("turn after the deadline: %d events, last %d %s (%s)", l.n,
           (int)l.type[l.n - 1], elector_err_name(l.reason[l.n - 1]), l.detail[l.n - 1]);
    ASSERT_EQ(2, l.n);
    ASSERT_EQ(ELECTOR_EV_FAILED, l.type[1]);
    ASSERT_EQ(ELECTOR_ESESSION, l.reason[1]);
    ASSERT_CONTAINS(l.detail[1], "not provably alive when our turn came");
    ASSERT(!elector_is_leader(el));
    elector_election_free(el);
    elector_session_close_sync(s, 2000);
    elector_etcd_free(e);
    eu_cand_free(a);
    eh_stop(c);
}

/* ---- item 15: a belief that ended never returns ----------------------------------- */

/* The process stops (here: does not run its loop) longer than its validity
 * deadline while the answer to its last keepalive waits in the socket. That
 * answer proves the lease alive a little longer, but the belief already ended
 * at the deadline (elector_is_leader() said false): it must not come back
 * without a new campaign. The session ends, LOST follows, no ELECTED. */
TEST_WITH_TIMEOUT(belief_that_ended_at_the_deadline_never_returns, 60)
{
    eh_cluster *c = start1();
    elector_etcd *e = eu_client(eh_endpoints(c));
    struct sess_log sl = {0};
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 6; /* renewals every 2 s; deadline = send + 6 s - 0.6 s */
    elector_session *s = elector_session_new(e, &sc, sess_cb, &sl);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    struct beliefs b = {0};
    elector_election *el = elector_election_new(s, "belief", belief_cb, &b);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 3000));

    /* Run the loop until a renewal goes out, then stop running it. */
    uint64_t n0 = keepalives_sent(e);
    double end = tl_now() + 5;
    while (keepalives_sent(e) == n0 && tl_now() < end)
        step(e, 20);
    ASSERT_GT(keepalives_sent(e), n0);
    int64_t t_send = elector_now_ns();
    int64_t old_deadline = elector_session_deadline_ns(s);
    int64_t new_deadline = t_send + (6000 - 600) * 1000000LL; /* if it were extended */
    ASSERT_LT(old_deadline, new_deadline - 1000000000LL);
    int64_t mid = old_deadline + (new_deadline - old_deadline) / 2;
    tl_msleep((int)((mid - elector_now_ns()) / 1000000));
    int64_t t_resume = elector_now_ns();
    ASSERT(!elector_is_leader(el)); /* the clock says: over */
    if (t_resume >= new_deadline)
        tl_log("slept past the extended deadline too: weak test run");

    /* Resume: the renewal's answer is processed first, then the timers. */
    end = tl_now() + 2;
    while (tl_now() < end && !sl.lost) {
        step(e, 20);
        ASSERT(!elector_is_leader(el));
    }
    ASSERT_EQ(1, b.lost);
    ASSERT_EQ(ELECTOR_ESESSION, b.lost_reason);
    ASSERT_EQ(1, sl.lost);
    ASSERT_EQ(ELECTOR_ESESSION, sl.reason);
    ASSERT_EQ(1, b.elected);
    ASSERT(!elector_session_alive(s));
    elector_election_free(el);
    elector_session_close_sync(s, 2000);
    elector_etcd_free(e);
    eh_stop(c);
}

/* A LeaseGrant whose answer is read after the validity deadline it would give
 * (the process stalled between sending it and reading the answer: a busy
 * machine, a stopped process) is not believed: the session confirms the lease
 * with a keepalive (or grants a new one if it is gone) before it reports ready,
 * and then stays alive. Before, it reported ready on the late answer and died
 * at once of its past deadline (ESESSION on the first campaign). */
TEST_WITH_TIMEOUT(grant_answered_after_its_deadline_is_confirmed_before_ready, 60)
{
    eh_cluster *c = start1();
    elector_etcd *e = eu_client(eh_endpoints(c));
    struct sess_log sl = {0};
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 2; /* deadline = send + 2 s - 0.2 s */
    elector_session *s = elector_session_new(e, &sc, sess_cb, &sl);
    ASSERT_NOT_NULL(s);
    tl_msleep(2500); /* the loop does not run: the answer is read late */
    ASSERT_OK(elector_session_wait(s, 10000));
    ASSERT(elector_session_alive(s));
    ASSERT_GT(elector_session_deadline_ns(s), elector_now_ns());
    ASSERT_GE(keepalives_sent(e), 1);
    struct beliefs b = {0};
    elector_election *el = elector_election_new(s, "late-grant", belief_cb, &b);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 3000));
    double end = tl_now() + 3; /* past the first lease's TTL: kept alive */
    while (tl_now() < end)
        step(e, 20);
    ASSERT_EQ(0, sl.lost);
    ASSERT_EQ(1, b.elected);
    ASSERT_EQ(0, b.lost);
    ASSERT(elector_is_leader(el));
    elector_election_free(el);
    ASSERT_OK(elector_session_close_sync(s, 3000));
    elector_etcd_free(e);
    eh_stop(c);
}
