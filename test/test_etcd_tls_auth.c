/* SPDX-License-Identifier: MIT */
/* The low-level client against real etcd with TLS (client certificates
 * required) and with password authentication: calls over https, untrusted
 * server certificates, a missing client certificate, root and a user limited
 * to a prefix, wrong credentials, and simple tokens that expire between
 * calls (--auth-token-ttl). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "elector/etcd.h"
#include "etcd_harness.h"
#include "testlib.h"

/* ---------------------------------------------------------------- helpers */

typedef struct ccfg {
    const char *cacert, *cert, *key, *user, *password;
    int64_t dial_ms, req_ms;
} ccfg;

static elector_etcd *client(const char *endpoints, ccfg o)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.cacert = o.cacert;
    cfg.cert = o.cert;
    cfg.key = o.key;
    cfg.user = o.user;
    cfg.password = o.password;
    cfg.dial_timeout_ms = o.dial_ms ? o.dial_ms : 2000;
    cfg.request_timeout_ms = o.req_ms ? o.req_ms : 5000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    if (elector_etcd_err(e)) tl_log("client: %s", elector_etcd_errstr(e));
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

static ProtobufCBinaryData str(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static void free_msg(void *m)
{
    if (m) protobuf_c_message_free_unpacked(m, NULL);
}

static bool never(void *a)
{
    (void)a;
    return false;
}

static bool pump_until(elector_etcd *e, int ms, bool (*pred)(void *), void *arg)
{
    double end = tl_now() + ms / 1e3;
    for (;;) {
        if (pred(arg)) return true;
        double left = end - tl_now();
        if (left <= 0) return pred(arg);
        ASSERT_OK(elector_etcd_run_once(e, (int64_t)(left * 1e3) + 1));
    }
}

/* A put, timed; returns its error (the handle's errstr has the detail). */
static int put_t(elector_etcd *e, const char *k, const char *v, double *secs)
{
    Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
    r.key = str(k);
    r.value = str(v);
    double t0 = tl_now();
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &r.base, NULL, NULL);
    if (secs) *secs = tl_now() - t0;
    return rc;
}

static int put(elector_etcd *e, const char *k, const char *v)
{
    int rc = put_t(e, k, v, NULL);
    if (rc) tl_log("put %s: %s: %s", k, elector_err_name(rc), elector_etcd_errstr(e));
    return rc;
}

/* Value of k into buf ("" if absent); returns the call's error. */
static int get(elector_etcd *e, const char *k, char *buf, size_t cap)
{
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = str(k);
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &r.base, NULL, &m);
    buf[0] = 0;
    if (!rc) {
        Etcdserverpb__RangeResponse *rr = (void *)m;
        if (rr->n_kvs)
            snprintf(buf, cap, "%.*s", (int)rr->kvs[0]->value.len,
                     (const char *)rr->kvs[0]->value.data);
    }
    free_msg(m);
    return rc;
}

/* ---- watch */

typedef struct wstate {
    elector_etcd *e;
    elector_watch *w;
    bool created, ended;
    int err, events;
    char errstr[512];
} wstate;

static void wcb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r, void *ud)
{
    (void)w;
    wstate *s = ud;
    if (err) {
        s->ended = true;
        s->err = err;
        snprintf(s->errstr, sizeof(s->errstr), "%s", elector_etcd_errstr(s->e));
        return;
    }
    if (r->created) s->created = true;
    s->events += (int)r->n_events;
}

static bool w_created(void *a)
{
    wstate *s = a;
    return s->created || s->ended;
}

static bool w_event(void *a)
{
    wstate *s = a;
    return s->events > 0 || s->ended;
}

static void watch_start(elector_etcd *e, const char *key, wstate *s)
{
    memset(s, 0, sizeof(*s));
    s->e = e;
    Etcdserverpb__WatchCreateRequest r = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    r.key = str(key);
    s->w = elector_etcd_watch(e, &r, wcb, s);
    ASSERT_NOT_NULL(s->w);
    ASSERT(pump_until(e, 5000, w_created, s));
}

/* ---- keepalive */

typedef struct ka {
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

static bool ka_done(void *a)
{
    return ((ka *)a)->done;
}

/* ---------------------------------------------------------------- TLS */

static eh_cluster *start_tls(void)
{
    eh_opts o = {.members = 1, .tls = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

TEST(tls_with_client_certificate_works_for_calls_streams_and_large_values)
{
    eh_cluster *c = start_tls();
    ASSERT(strncmp(eh_endpoints(c), "https://", 8) == 0);
    elector_etcd *e =
        client(eh_endpoints(c),
               (ccfg){.cacert = eh_cacert(c), .cert = eh_cert(c), .key = eh_key(c)});
    ASSERT_OK(put(e, "tls", "yes"));
    char buf[64];
    ASSERT_OK(get(e, "tls", buf, sizeof(buf)));
    ASSERT_STREQ("yes", buf);
    char port[16];
    snprintf(port, sizeof(port), ":%d", eh_client_port(c, 0));
    ASSERT_CONTAINS(elector_etcd_current_endpoint(e), port);

    /* A watch over TLS sees a put. */
    wstate w;
    watch_start(e, "tls", &w);
    ASSERT(w.created);
    ASSERT_OK(put(e, "tls", "again"));
    ASSERT(pump_until(e, 3000, w_event, &w));
    ASSERT_EQ(1, w.events);

    /* 1 MiB values through TLS records and partial writes, several in flight. */
    size_t n = 1u << 20;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('a' + i % 23);
    big[n] = 0;
    for (int i = 0; i < 3; i++) {
        double secs;
        ASSERT_OK(put_t(e, "big", big + i, &secs));
        tl_log("1 MiB put over TLS: %.1f ms", secs * 1e3);
    }
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = str("big");
    ProtobufCMessage *m = NULL;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &r.base, NULL, &m));
    Etcdserverpb__RangeResponse *rr = (void *)m;
    ASSERT_EQ(1, (long long)rr->n_kvs);
    ASSERT_EQ((long long)(n - 2), (long long)rr->kvs[0]->value.len);
    ASSERT(memcmp(rr->kvs[0]->value.data, big + 2, n - 2) == 0);
    free_msg(m);
    free(big);
    elector_watch_cancel(w.w);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(tls_wrong_ca_fails_with_etls_naming_the_endpoint_within_the_dial_timeout)
{
    eh_cluster *c = start_tls();
    elector_etcd *e = client(eh_endpoints(c), (ccfg){.cacert = eh_wrong_cacert(c),
                                                     .cert = eh_cert(c),
                                                     .key = eh_key(c),
                                                     .dial_ms = 2000,
                                                     .req_ms = 8000});
    double secs;
    int rc = put_t(e, "k", "v", &secs);
    tl_log("wrong CA: %s after %.1f ms: %s", elector_err_name(rc), secs * 1e3,
           elector_etcd_errstr(e));
    ASSERT_EQ(ELECTOR_ETLS, rc);
    ASSERT_LT(secs, 2.0);
    ASSERT_CONTAINS(elector_etcd_errstr(e), eh_endpoint(c, 0));
    ASSERT_CONTAINS(elector_etcd_errstr(e), "not trusted");
    /* Again: still ETLS, not a timeout. */
    rc = put_t(e, "k", "v", &secs);
    ASSERT_EQ(ELECTOR_ETLS, rc);
    ASSERT_LT(secs, 2.0);
    elector_etcd_free(e);

    /* No CA given: the system store does not trust the cluster's CA either. */
    e = client(eh_endpoints(c), (ccfg){.dial_ms = 2000, .req_ms = 8000});
    rc = put_t(e, "k", "v", &secs);
    tl_log("system CA store: %s after %.1f ms: %s", elector_err_name(rc), secs * 1e3,
           elector_etcd_errstr(e));
    ASSERT_EQ(ELECTOR_ETLS, rc);
    ASSERT_CONTAINS(elector_etcd_errstr(e), "not trusted");
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(tls_without_client_certificate_is_refused_by_client_cert_auth)
{
    eh_cluster *c = start_tls();
    elector_etcd *e = client(
        eh_endpoints(c), (ccfg){.cacert = eh_cacert(c), .dial_ms = 2000, .req_ms = 8000});
    double secs;
    int rc = put_t(e, "k", "v", &secs);
    tl_log("no client certificate: %s after %.1f ms: %s", elector_err_name(rc),
           secs * 1e3, elector_etcd_errstr(e));
    ASSERT_NE(0, rc);
    ASSERT_LT(secs, 2.0);
    ASSERT_CONTAINS(elector_etcd_errstr(e), eh_endpoint(c, 0));
    /* The server's alert is a TLS failure of the setup, not an outage. */
    ASSERT_EQ(ELECTOR_ETLS, rc);
    ASSERT_CONTAINS(elector_etcd_errstr(e), "certificate");
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(tls_unreadable_files_are_reported_by_elector_etcd_new)
{
    eh_cluster *c = start_tls();
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.cacert = "/nonexistent/ca.pem";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    tl_log("missing CA file: %s: %s", elector_err_name(elector_etcd_err(e)),
           elector_etcd_errstr(e));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    ASSERT_CONTAINS(elector_etcd_errstr(e), "/nonexistent/ca.pem");
    /* A client in error refuses calls instead of hanging. */
    Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
    r.key = str("k");
    ASSERT_NE(0, elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &r.base, NULL, NULL));
    elector_etcd_free(e);

    cfg.cacert = eh_cacert(c);
    cfg.cert = eh_cert(c);
    cfg.key = eh_wrong_cacert(c); /* a certificate, not the matching key */
    e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    tl_log("bad key file: %s: %s", elector_err_name(elector_etcd_err(e)),
           elector_etcd_errstr(e));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- auth */

static eh_cluster *start_auth(const char *extra)
{
    eh_opts o = {.members = 1, .auth = 1, .extra_args = extra};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

static char *user_key(const char *suffix)
{
    static char buf[128];
    snprintf(buf, sizeof(buf), "%s%s", EH_USER_PREFIX, suffix);
    return buf;
}

TEST(auth_root_with_its_password_can_read_write_watch_and_lease)
{
    eh_cluster *c = start_auth(NULL);
    elector_etcd *e =
        client(eh_endpoints(c), (ccfg){.user = "root", .password = EH_ROOT_PASSWORD});
    ASSERT_OK(put(e, "/anywhere", "root"));
    char buf[64];
    ASSERT_OK(get(e, "/anywhere", buf, sizeof(buf)));
    ASSERT_STREQ("root", buf);
    wstate w;
    watch_start(e, "/anywhere", &w);
    ASSERT(w.created);
    ASSERT_OK(put(e, "/anywhere", "2"));
    ASSERT(pump_until(e, 3000, w_event, &w));
    ASSERT_EQ(0, w.err);
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.ttl = 10;
    ProtobufCMessage *m = NULL;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_GRANT, &g.base, NULL, &m));
    int64_t id = ((Etcdserverpb__LeaseGrantResponse *)m)->id;
    free_msg(m);
    ka k = {0};
    ASSERT_OK(elector_etcd_keepalive(e, id, 3000, ka_cb, &k));
    ASSERT(pump_until(e, 5000, ka_done, &k));
    ASSERT_OK(k.err);
    ASSERT_EQ(10, k.ttl);
    elector_watch_cancel(w.w);
    elector_etcd_free(e);

    /* What the client wrote, etcdctl (as root) reads. */
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "--print-value-only", "/anywhere", NULL));
    ASSERT_STREQ("2\n", out);
    free(out);
    eh_stop(c);
}

TEST(auth_user_may_write_its_prefix_and_gets_eperm_outside)
{
    eh_cluster *c = start_auth(NULL);
    elector_etcd *e =
        client(eh_endpoints(c), (ccfg){.user = EH_USER, .password = EH_USER_PASSWORD});
    ASSERT_OK(put(e, user_key("mine"), "1"));
    char buf[64];
    ASSERT_OK(get(e, user_key("mine"), buf, sizeof(buf)));
    ASSERT_STREQ("1", buf);

    int rc = put(e, "/elsewhere", "x");
    ASSERT_EQ(ELECTOR_EPERM, rc);
    ASSERT_CONTAINS(elector_etcd_errstr(e), "permission denied");
    ASSERT_EQ(ELECTOR_EPERM, get(e, "/elsewhere", buf, sizeof(buf)));
    /* A watch inside the prefix works; one outside is refused with EPERM
     * (etcd 3.4 answers it with watch_id -1, not the id asked for); a watch
     * created after the refusal works, and so does the earlier one. */
    wstate in1, out, in2;
    watch_start(e, user_key("mine"), &in1);
    ASSERT(in1.created);
    ASSERT_EQ(0, in1.err);
    memset(&out, 0, sizeof(out));
    out.e = e;
    Etcdserverpb__WatchCreateRequest wr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    wr.key = str("/elsewhere");
    out.w = elector_etcd_watch(e, &wr, wcb, &out);
    ASSERT_NOT_NULL(out.w);
    bool answered = pump_until(e, 3000, w_created, &out);
    tl_log("watch outside the prefix: %s: %s %s", answered ? "answered" : "NO ANSWER",
           elector_err_name(out.err), out.errstr);
    memset(&in2, 0, sizeof(in2));
    in2.e = e;
    wr.key = str(user_key("mine"));
    in2.w = elector_etcd_watch(e, &wr, wcb, &in2);
    ASSERT_NOT_NULL(in2.w);
    bool created2 = pump_until(e, 3000, w_created, &in2);
    tl_log("watch created after the refusal: %s %s", created2 ? "answered" : "NO ANSWER",
           elector_err_name(in2.err));
    ASSERT(answered);
    ASSERT(out.ended);
    ASSERT_EQ(ELECTOR_EPERM, out.err);
    ASSERT(created2);
    ASSERT(in2.created);
    ASSERT_EQ(0, in2.err);
    ASSERT_OK(put(e, user_key("mine"), "1b"));
    ASSERT(pump_until(e, 3000, w_event, &in1));
    ASSERT(pump_until(e, 3000, w_event, &in2));
    ASSERT_EQ(0, in1.err);
    ASSERT_EQ(1, in1.events);
    ASSERT_EQ(1, in2.events);
    elector_watch_cancel(in1.w);
    elector_watch_cancel(out.w);
    elector_watch_cancel(in2.w);
    /* EPERM does not spoil the session: the next call works. */
    ASSERT_OK(put(e, user_key("mine"), "2"));
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(auth_wrong_password_or_user_fails_fast_with_eauth)
{
    eh_cluster *c = start_auth(NULL);
    static const struct {
        const char *user, *password;
    } bad[] = {{"root", "not-the-password"}, {"nobody-such", "x"}};
    for (size_t i = 0; i < 2; i++) {
        elector_etcd *e = client(
            eh_endpoints(c),
            (ccfg){.user = bad[i].user, .password = bad[i].password, .req_ms = 8000});
        /* Several calls and a watch queued behind the authentication: all
         * hear the verdict at once, not at their deadline. */
        wstate w = {.e = e};
        Etcdserverpb__WatchCreateRequest wr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        wr.key = str("k");
        w.w = elector_etcd_watch(e, &wr, wcb, &w);
        ASSERT_NOT_NULL(w.w);
        double secs;
        int rc = put_t(e, "k", "v", &secs);
        tl_log("user %s: %s after %.1f ms: %s", bad[i].user, elector_err_name(rc),
               secs * 1e3, elector_etcd_errstr(e));
        ASSERT_EQ(ELECTOR_EAUTH, rc);
        ASSERT_LT(secs, 1.0);
        ASSERT_CONTAINS(elector_etcd_errstr(e), bad[i].user);
        ASSERT(pump_until(e, 1000, w_created, &w));
        tl_log("queued watch: %s: %s", elector_err_name(w.err), w.errstr);
        ASSERT(w.ended);
        ASSERT_EQ(ELECTOR_EAUTH, w.err);
        elector_watch_cancel(w.w);
        /* Asking again gives the same answer, again fast. */
        rc = put_t(e, "k", "v", &secs);
        ASSERT_EQ(ELECTOR_EAUTH, rc);
        ASSERT_LT(secs, 1.0);
        elector_etcd_free(e);
    }
    /* No credentials at all on an auth cluster. */
    elector_etcd *e = client(eh_endpoints(c), (ccfg){0});
    double secs;
    int rc = put_t(e, "k", "v", &secs);
    tl_log("no credentials: %s after %.1f ms: %s", elector_err_name(rc), secs * 1e3,
           elector_etcd_errstr(e));
    ASSERT(rc == ELECTOR_EAUTH || rc == ELECTOR_EPERM);
    ASSERT_LT(secs, 1.0);
    elector_etcd_free(e);
    eh_stop(c);
}

/* Simple tokens with --auth-token-ttl=2: etcd forgets a token about 2-3 s
 * after its last use. Waits of 3.2 s let it expire (server time: the client
 * is pumped meanwhile, there is no event to wait for). */
static void idle_past_token_ttl(elector_etcd *e)
{
    pump_until(e, 3200, never, NULL);
}

TEST_WITH_TIMEOUT(auth_expired_token_is_renewed_for_unary_calls_and_keepalives, 60)
{
    eh_cluster *c = start_auth("--auth-token-ttl=2");
    elector_etcd *e =
        client(eh_endpoints(c), (ccfg){.user = "root", .password = EH_ROOT_PASSWORD});
    ASSERT_OK(put(e, "tok", "0"));
    for (int i = 1; i <= 2; i++) {
        idle_past_token_ttl(e);
        char v[8];
        snprintf(v, sizeof(v), "%d", i);
        double secs;
        int rc = put_t(e, "tok", v, &secs);
        tl_log("put %d after 3.2 s idle: %s in %.1f ms %s", i, elector_err_name(rc),
               secs * 1e3, rc ? elector_etcd_errstr(e) : "");
        ASSERT_OK(rc);
        char buf[8];
        ASSERT_OK(get(e, "tok", buf, sizeof(buf)));
        ASSERT_STREQ(v, buf);
    }
    idle_past_token_ttl(e);
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.ttl = 10;
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_GRANT, &g.base, NULL, &m);
    tl_log("lease grant after 3.2 s idle: %s", elector_err_name(rc));
    ASSERT_OK(rc);
    int64_t id = ((Etcdserverpb__LeaseGrantResponse *)m)->id;
    free_msg(m);
    idle_past_token_ttl(e);
    ka k = {0};
    ASSERT_OK(elector_etcd_keepalive(e, id, 3000, ka_cb, &k));
    ASSERT(pump_until(e, 5000, ka_done, &k));
    tl_log("keepalive after 3.2 s idle: %s", elector_err_name(k.err));
    ASSERT_OK(k.err);
    elector_etcd_free(e);
    eh_stop(c);
}

/* etcd checks a watch create against the token its Watch stream was opened
 * with. A stream opened after the token expired, or opened before and still
 * in use, must not leave new watches refused (etcd: "invalid auth token",
 * answered with watch_id -1). */
TEST_WITH_TIMEOUT(auth_watch_opened_after_token_expiry_is_created, 30)
{
    eh_cluster *c = start_auth("--auth-token-ttl=2");
    elector_etcd *e =
        client(eh_endpoints(c), (ccfg){.user = "root", .password = EH_ROOT_PASSWORD});
    ASSERT_OK(put(e, "tok", "0"));
    idle_past_token_ttl(e);
    wstate w;
    watch_start(e, "tok", &w);
    tl_log("watch after 3.2 s idle: %s %s", w.created && !w.ended ? "created" : "refused",
           w.ended ? w.errstr : "");
    ASSERT_EQ(0, w.err);
    ASSERT(w.created);
    ASSERT_OK(put(e, "tok", "w"));
    ASSERT(pump_until(e, 3000, w_event, &w));
    ASSERT_EQ(0, w.err);
    elector_watch_cancel(w.w);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(auth_watch_added_to_a_stream_whose_token_expired_is_created, 30)
{
    eh_cluster *c = start_auth("--auth-token-ttl=2");
    elector_etcd *e =
        client(eh_endpoints(c), (ccfg){.user = "root", .password = EH_ROOT_PASSWORD});
    wstate a, b;
    watch_start(e, "tok-a", &a); /* the stream lives on with the first token */
    ASSERT(a.created);
    idle_past_token_ttl(e);
    ASSERT_OK(put(e, "tok-a", "1")); /* re-authenticates: a new token */
    ASSERT(pump_until(e, 3000, w_event, &a));
    watch_start(e, "tok-b", &b);
    tl_log("second watch on the old stream: %s %s",
           b.created && !b.ended ? "created" : "refused", b.ended ? b.errstr : "");
    ASSERT_EQ(0, b.err);
    ASSERT(b.created);
    ASSERT_OK(put(e, "tok-b", "1"));
    ASSERT(pump_until(e, 3000, w_event, &b));
    ASSERT_EQ(0, b.err);
    ASSERT_EQ(0, a.err); /* the first watch is unharmed */
    elector_watch_cancel(a.w);
    elector_watch_cancel(b.w);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- auto-sync keeps TLS */

/* A cleartext "member" on a loopback port: it accepts, answers as an HTTP/2
 * server would (an empty SETTINGS, so that a client goes on to send its
 * requests), and keeps what it is sent. */
typedef struct sniffer {
    int lfd, port;
    int conns[16], nconn;
    char got[65536];
    size_t ngot;
} sniffer;

static void sniffer_start(sniffer *s)
{
    memset(s, 0, sizeof(*s));
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ASSERT_OK(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(s->lfd, 16));
    ASSERT_OK(getsockname(s->lfd, (struct sockaddr *)&a, &l));
    s->port = ntohs(a.sin_port);
}

static void sniffer_poll(sniffer *s)
{
    static const unsigned char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    int fd;
    while (s->nconn < 16 && (fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
        s->conns[s->nconn++] = fd;
        ssize_t w = write(fd, settings, sizeof(settings));
        (void)w;
    }
    for (int i = 0; i < s->nconn; i++) {
        ssize_t n;
        while (s->ngot < sizeof(s->got) &&
               (n = read(s->conns[i], s->got + s->ngot, sizeof(s->got) - s->ngot)) > 0)
            s->ngot += (size_t)n;
    }
}

static void sniffer_stop(sniffer *s)
{
    for (int i = 0; i < s->nconn; i++)
        close(s->conns[i]);
    close(s->lfd);
}

typedef struct sync_watch {
    elector_etcd *e;
    sniffer *sn;
    int notices;
    char cleartext[600]; /* the notice that named the cleartext URLs */
    char synced[600];    /* the last "endpoints synced" notice */
    int synced_n;
} sync_watch;

static void sync_notice(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e, (void)err;
    sync_watch *w = ud;
    w->notices++;
    tl_log("notice: %s", msg);
    if (strstr(msg, "cleartext client URL"))
        snprintf(w->cleartext, sizeof(w->cleartext), "%s", msg);
    if (strstr(msg, "endpoints synced")) {
        w->synced_n++;
        snprintf(w->synced, sizeof(w->synced), "%s", msg);
    }
}

/* Runs the loop for ms, looking at the sniffer between passes. */
static void pump_sniffed(sync_watch *w, int ms)
{
    double end = tl_now() + ms / 1e3;
    while (tl_now() < end) {
        ASSERT_OK(elector_etcd_run_once(w->e, 20));
        sniffer_poll(w->sn);
    }
}

/* A client given only https endpoints, with a password, and auto-sync: the
 * member list also names a cleartext client URL (here a listener that acts as
 * an HTTP/2 server and records what it gets). Auto-sync skips it with one
 * notice that names it, and when the TLS member is gone the client retries
 * https only: nothing ever connects to the cleartext URL (before: the client
 * moved there and sent Authenticate, password and all, unencrypted). */
TEST_WITH_TIMEOUT(autosync_never_moves_a_tls_client_to_cleartext, 90)
{
    sniffer sn;
    sniffer_start(&sn);
    char more[64];
    snprintf(more, sizeof(more), "http://127.0.0.1:%d", sn.port);
    eh_opts o = {.members = 1, .tls = 1, .auth = 1, .advertise_more = more};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.cacert = eh_cacert(c);
    cfg.cert = eh_cert(c);
    cfg.key = eh_key(c);
    cfg.user = EH_USER;
    cfg.password = EH_USER_PASSWORD;
    cfg.dial_timeout_ms = 500;
    cfg.request_timeout_ms = 1500;
    cfg.auto_sync_interval_ms = 100;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    sync_watch w = {.e = e, .sn = &sn};
    elector_etcd_set_notice(e, sync_notice, &w);
    char v[64];
    ASSERT_OK(get(e, user_key("x"), v, sizeof(v)));
    pump_sniffed(&w, 800); /* several syncs */
    ASSERT_CONTAINS(w.cleartext, "1 cleartext client URL skipped (");
    ASSERT_CONTAINS(w.cleartext, more);
    ASSERT_EQ(0, w.synced_n); /* the list, the TLS member only, did not change */
    int said = w.notices;
    pump_sniffed(&w, 400);
    ASSERT_EQ(said, w.notices); /* told once, not at every sync */
    elector_endpoint_info info;
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_endpoint_info(e, 1, &info));

    /* The TLS member is gone: calls fail, the cleartext URL is never tried. */
    ASSERT_OK(eh_member_stop(c, 0));
    for (int i = 0; i < 3; i++) {
        int rc = get(e, user_key("x"), v, sizeof(v));
        tl_log("get with the member stopped: %s: %s", elector_err_name(rc),
               elector_etcd_errstr(e));
        ASSERT_NE(0, rc);
        pump_sniffed(&w, 200);
    }
    tl_log("the cleartext listener: %d connections, %zu bytes", sn.nconn, sn.ngot);
    ASSERT(!memmem(sn.got, sn.ngot, EH_USER_PASSWORD, strlen(EH_USER_PASSWORD)));
    ASSERT_EQ(0, sn.nconn);
    elector_etcd_free(e);
    sniffer_stop(&sn);
    eh_stop(c);
}
