/* SPDX-License-Identifier: MIT */
/* etcd alarms (issue 20): a member whose database reached its quota
 * (--quota-backend-bytes) raises NOSPACE and refuses lease grants, puts and
 * txns. elector reports its own error code with the operator's remedy, a
 * leader's keepalives keep working, and a candidate keeps retrying (saying
 * why) until the alarm is cleared, then campaigns as usual. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "elector/etcd.h"
#include "etcd_harness.h"
#include "testlib.h"
#include "tool_util.h"

#define QUOTA "--quota-backend-bytes=1048576" /* 1 MiB */

static elector_etcd *client(const char *endpoints)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 5000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

static int put_big(elector_etcd *e, int i)
{
    static uint8_t val[100 * 1024];
    memset(val, 'x' + i % 3, sizeof(val));
    char k[32];
    snprintf(k, sizeof(k), "fill/%d", i);
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = (ProtobufCBinaryData){strlen(k), (uint8_t *)k};
    p.value = (ProtobufCBinaryData){sizeof(val), val};
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &p.base, NULL, &m);
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* Puts 100 KiB values until etcd refuses one; returns that error. */
static int fill(elector_etcd *e)
{
    int rc = 0, i;
    for (i = 0; i < 200 && rc == 0; i++)
        rc = put_big(e, i);
    tl_log("quota reached after %d puts of 100 KiB: %s: %s", i, elector_err_name(rc),
           elector_etcd_errstr(e));
    return rc;
}

static int64_t grant(elector_etcd *e, int *rc)
{
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.ttl = 10;
    ProtobufCMessage *m = NULL;
    *rc = elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_GRANT, &g.base, NULL, &m);
    int64_t id = m ? ((Etcdserverpb__LeaseGrantResponse *)m)->id : 0;
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    return id;
}

typedef struct {
    bool done;
    int err;
    int64_t ttl;
} ka;

static void ka_cb(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)e, (void)lease;
    ka *k = ud;
    k->done = true;
    k->err = err;
    k->ttl = ttl;
}

static bool ka_done(void *ud)
{
    return ((ka *)ud)->done;
}

static bool pump_until(elector_etcd *e, int ms, bool (*cond)(void *), void *ud)
{
    double end = tl_now() + ms / 1e3;
    while (!cond(ud)) {
        if (tl_now() > end) return false;
        elector_etcd_run_once(e, 50);
    }
    return true;
}

/* Compact, defragment, disarm: the remedy the error message names. */
static void clear_alarm(eh_cluster *c)
{
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, NULL, "del", "--prefix", "fill/", NULL));
    ASSERT_OK(eh_etcdctl(c, &out, "endpoint", "status", "-w", "fields", NULL));
    char *p = strstr(out, "\"Revision\" : ");
    ASSERT_NOT_NULL(p);
    char rev[32];
    snprintf(rev, sizeof(rev), "%lld", atoll(p + 13));
    free(out);
    ASSERT_OK(eh_etcdctl(c, NULL, "compact", rev, NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "defrag", NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "alarm", "disarm", NULL));
}

TEST_WITH_TIMEOUT(nospace_alarm_has_its_own_error_and_keepalives_still_work, 90)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1, .extra_args = QUOTA});
    ASSERT_NOT_NULL(c);
    elector_etcd *e = client(eh_endpoints(c));
    int rc;
    int64_t lease = grant(e, &rc);
    ASSERT_OK(rc);
    ASSERT_EQ(ELECTOR_ENOSPACE, fill(e));
    ASSERT_CONTAINS(elector_etcd_errstr(e), "database space exceeded");
    ASSERT_CONTAINS(elector_strerror(ELECTOR_ENOSPACE), "compact and defragment");
    ASSERT_STREQ("ENOSPACE", elector_err_name(ELECTOR_ENOSPACE));
    /* New leases are refused... */
    grant(e, &rc);
    tl_log("lease grant under the alarm: %s", elector_err_name(rc));
    ASSERT_EQ(ELECTOR_ENOSPACE, rc);
    /* ...but a leader's lease is kept alive. */
    ka k = {0};
    ASSERT_OK(elector_etcd_keepalive(e, lease, 3000, ka_cb, &k));
    ASSERT(pump_until(e, 5000, ka_done, &k));
    tl_log("keepalive under the alarm: %s, ttl %lld", elector_err_name(k.err),
           (long long)k.ttl);
    ASSERT_OK(k.err);
    ASSERT_GT(k.ttl, 0);
    clear_alarm(c);
    grant(e, &rc);
    ASSERT_OK(rc);
    elector_etcd_free(e);
    eh_stop(c);
}

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    bind(s, (struct sockaddr *)&a, sizeof(a));
    getsockname(s, (struct sockaddr *)&a, &l);
    close(s);
    return ntohs(a.sin_port);
}

static char *metrics(const char *addr)
{
    char url[128], *body = NULL;
    snprintf(url, sizeof(url), "http://%s/metrics", addr);
    ASSERT_EQ(0, tl_run(&body, (const char *[]){"curl", "-s", url, NULL}));
    return body;
}

/* A leader elected before the alarm keeps leading through it (its keepalives
 * still work) for several TTLs; a candidate that starts under the alarm
 * retries with backoff, says why, shows it in /metrics, and once an operator
 * cleared the alarm it waits behind the leader and takes over when it resigns. */
TEST_WITH_TIMEOUT(candidate_retries_while_the_database_is_full_and_says_why, 120)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1, .extra_args = QUOTA});
    ASSERT_NOT_NULL(c);
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("alarm"), errl[600], errp[600], key[256], addr[64];
    snprintf(errl, sizeof(errl), "%s/leader.err", dir);
    snprintf(errp, sizeof(errp), "%s/cand.err", dir);
    eu_child l, a;
    int in[2]; /* the leader's stdin: a line proclaimed under the alarm */
    ASSERT_OK(pipe(in));
    tool_bg_opts lo = {.err_path = errl, .in_fd = in[0]};
    tool_bg_ex(&l, &lo,
               (const char *[]){"--endpoints", eps, "--ttl", "2s", "campaign", "alarmed",
                                "L", "--proclaim-stdin", NULL});
    close(in[0]);
    ASSERT_OK(eu_child_expect(&l, "alarmed/", key, sizeof(key), 10000));

    elector_etcd *e = client(eps);
    ASSERT_EQ(ELECTOR_ENOSPACE, fill(e));
    elector_etcd_free(e);

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
    tool_bg_opts bo = {.err_path = errp, .in_fd = -1};
    tool_bg_ex(&a, &bo,
               (const char *[]){"--endpoints", eps, "--http", addr, "campaign", "alarmed",
                                "B", NULL});
    /* It says why and keeps trying: a second refusal comes after the backoff. */
    ASSERT(wait_contains(errp, "database is full", 20));
    ASSERT(wait_contains(errp, "campaigning again in 2000 ms", 20));
    ASSERT(pid_alive(a.pid));
    /* A proclaim refused by the alarm is said with the remedy; the leader stays. */
    ASSERT_EQ(3, (int)write(in[1], "L2\n", 3));
    ASSERT(wait_contains(errl,
                         "error elector: proclaim failed: /etcdserverpb.KV/Txn: "
                         "etcdserver: mvcc: database space exceeded",
                         10));
    ASSERT(wait_contains(errl,
                         "; etcd's quota (--quota-backend-bytes) is reached: `etcdctl "
                         "compact`, `etcdctl defrag`, then `etcdctl alarm disarm`\n",
                         1));
    char *m = metrics(addr);
    ASSERT_CONTAINS(m, "elector_etcd_alarm 1\n");
    ASSERT_NULL(strstr(m, "elector_etcd_alarm_refusals_total 0\n"));
    free(m);
    /* The leader is still there after 3 TTLs under the alarm. */
    tl_msleep(6000);
    ASSERT(pid_alive(l.pid));
    char *lerr = check_file(errl);
    ASSERT_NULL(strstr(lerr, "lost"));
    free(lerr);

    clear_alarm(c);
    ASSERT(wait_contains(errp, "waiting behind", 30));
    m = metrics(addr);
    ASSERT_CONTAINS(m, "elector_etcd_alarm 0\n");
    free(m);
    kill(l.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&l, 10));
    close(in[1]);
    ASSERT(wait_contains(errp, "elected", 30));
    char *err = check_file(errp);
    tl_log("candidate's log:\n%s", err);
    free(err);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    free(dir);
    eh_stop(c);
}
