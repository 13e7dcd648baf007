/* SPDX-License-Identifier: MIT */
/* Unit tests (no server) for endpoint list parsing (src/transport/endpoint.c), for the
 * way elector_etcd_new() reports bad endpoints and TLS files, and for the endpoint
 * list's replacement by auto-sync (src/transport/autosync.c). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "transport_private.h"
#include "testlib.h"

#include <etcdserverpb/rpc.pb-c.h>

static void check_ep(const elector__endpoint *ep, const char *host, const char *port,
                     const char *authority, bool tls)
{
    ASSERT_STREQ(host, ep->host);
    ASSERT_STREQ(port, ep->port);
    ASSERT_STREQ(authority, ep->authority);
    ASSERT_EQ(tls, ep->tls);
}

TEST(endpoints_single_host_port)
{
    elector__endpoint *eps = NULL;
    char err[256] = "";
    int n = elector__endpoints_parse("127.0.0.1:2379", false, &eps, err, sizeof(err));
    ASSERT_EQ(1, n);
    ASSERT_NOT_NULL(eps);
    check_ep(&eps[0], "127.0.0.1", "2379", "127.0.0.1:2379", false);
    elector__endpoints_free(eps, n);
}

TEST(endpoints_schemes_set_tls)
{
    elector__endpoint *eps = NULL;
    char err[256] = "";
    int n =
        elector__endpoints_parse("http://h:1,https://h:2", false, &eps, err, sizeof(err));
    ASSERT_EQ(2, n);
    check_ep(&eps[0], "h", "1", "h:1", false);
    check_ep(&eps[1], "h", "2", "h:2", true);
    elector__endpoints_free(eps, n);

    /* Same with TLS as the default: explicit schemes still win. */
    n = elector__endpoints_parse("http://h:1,https://h:2", true, &eps, err, sizeof(err));
    ASSERT_EQ(2, n);
    ASSERT_EQ(false, eps[0].tls);
    ASSERT_EQ(true, eps[1].tls);
    elector__endpoints_free(eps, n);
}

TEST(endpoints_tls_default_applies_to_schemeless_only)
{
    elector__endpoint *eps = NULL;
    char err[256] = "";
    int n = elector__endpoints_parse("a:1,http://b:2,https://c:3", true, &eps, err,
                                     sizeof(err));
    ASSERT_EQ(3, n);
    check_ep(&eps[0], "a", "1", "a:1", true);
    check_ep(&eps[1], "b", "2", "b:2", false);
    check_ep(&eps[2], "c", "3", "c:3", true);
    elector__endpoints_free(eps, n);

    n = elector__endpoints_parse("a:1,http://b:2,https://c:3", false, &eps, err,
                                 sizeof(err));
    ASSERT_EQ(3, n);
    ASSERT_EQ(false, eps[0].tls);
    ASSERT_EQ(false, eps[1].tls);
    ASSERT_EQ(true, eps[2].tls);
    elector__endpoints_free(eps, n);
}

TEST(endpoints_spaces_around_commas)
{
    elector__endpoint *eps = NULL;
    char err[256] = "";
    int n = elector__endpoints_parse("  a:1 ,b:2,   http://c:3  ", false, &eps, err,
                                     sizeof(err));
    ASSERT_EQ(3, n);
    check_ep(&eps[0], "a", "1", "a:1", false);
    check_ep(&eps[1], "b", "2", "b:2", false);
    check_ep(&eps[2], "c", "3", "c:3", false);
    elector__endpoints_free(eps, n);
}

TEST(endpoints_ipv6_brackets)
{
    elector__endpoint *eps = NULL;
    char err[256] = "";
    int n = elector__endpoints_parse("[::1]:2379", false, &eps, err, sizeof(err));
    ASSERT_EQ(1, n);
    check_ep(&eps[0], "::1", "2379", "[::1]:2379", false);
    elector__endpoints_free(eps, n);

    n = elector__endpoints_parse("https://[fe80::1:2]:443, [::]:1", false, &eps, err,
                                 sizeof(err));
    ASSERT_EQ(2, n);
    check_ep(&eps[0], "fe80::1:2", "443", "[fe80::1:2]:443", true);
    check_ep(&eps[1], "::", "1", "[::]:1", false);
    elector__endpoints_free(eps, n);
}

TEST(endpoints_trailing_slash_and_port_limits)
{
    elector__endpoint *eps = NULL;
    char err[256] = "";
    int n = elector__endpoints_parse("http://h:2379/,h:65535,h:1", false, &eps, err,
                                     sizeof(err));
    ASSERT_EQ(3, n);
    check_ep(&eps[0], "h", "2379", "h:2379", false);
    check_ep(&eps[1], "h", "65535", "h:65535", false);
    check_ep(&eps[2], "h", "1", "h:1", false);
    elector__endpoints_free(eps, n);
}

TEST(endpoints_many)
{
    char list[4096];
    size_t o = 0;
    for (int i = 0; i < 100; i++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%shost%d:%d", i ? "," : "", i,
                              1000 + i);
    elector__endpoint *eps = NULL;
    char err[256] = "";
    int n = elector__endpoints_parse(list, false, &eps, err, sizeof(err));
    ASSERT_EQ(100, n);
    for (int i = 0; i < 100; i++) {
        char host[32], port[16];
        snprintf(host, sizeof(host), "host%d", i);
        snprintf(port, sizeof(port), "%d", 1000 + i);
        ASSERT_STREQ(host, eps[i].host);
        ASSERT_STREQ(port, eps[i].port);
    }
    elector__endpoints_free(eps, n);
}

/* Expects EINVAL, *out NULL, and err containing `names` (the bad entry). */
static void expect_bad(const char *list, const char *names)
{
    elector__endpoint *eps = (elector__endpoint *)&eps; /* must be reset to NULL */
    char err[256];
    memset(err, 0, sizeof(err));
    int n = elector__endpoints_parse(list, false, &eps, err, sizeof(err));
    if (n != ELECTOR_EINVAL) tl_log("list \"%s\" gave %d", list, n);
    ASSERT_EQ(ELECTOR_EINVAL, n);
    ASSERT_NULL(eps);
    ASSERT(err[0] != 0);
    if (!strstr(err, names)) tl_log("list \"%s\": message \"%s\"", list, err);
    ASSERT_CONTAINS(err, names);
}

TEST(endpoints_bad_entries_einval_naming_them)
{
    expect_bad("", "no endpoints");
    expect_bad("host", "'host'");
    expect_bad("host:", "'host:'");
    expect_bad(":2379", "':2379'");
    expect_bad("host:0", "'host:0'");
    expect_bad("host:65536", "'host:65536'");
    expect_bad("host:-1", "'host:-1'");
    expect_bad("host:12ab", "'host:12ab'");
    expect_bad("host:99999999999999999999", "'host:99999999999999999999'");
    expect_bad("ftp://h:1", "'ftp://h:1'");
    expect_bad("ftp://h:1", "scheme");
    expect_bad("h:1:2", "'h:1:2'");
    expect_bad("::1:2379", "'::1:2379'");
    expect_bad("[::1]", "'[::1]'");
    expect_bad("[::1]:", "'[::1]:'");
    expect_bad("[::1:2379", "'[::1:2379'");
    expect_bad("[]:2379", "'[]:2379'");
    expect_bad("http://h:1/path", "'http://h:1/path'");
    expect_bad("http://", "'http://'");
    /* A bad entry among good ones is named, not its neighbours. */
    expect_bad("good:1, bad:x ,other:2", "'bad:x'");
}

TEST(endpoints_empty_entry_einval)
{
    expect_bad("a:1,,b:2", "empty");
    expect_bad("a:1,", "empty");
    expect_bad(",a:1", "empty");
    expect_bad("   ", "empty");
    expect_bad("a:1, ,b:2", "empty");
}

TEST(endpoints_overlong_entry_einval)
{
    char list[700];
    memset(list, 'h', 600);
    memcpy(list + 600, ":2379", 6);
    elector__endpoint *eps = NULL;
    char err[256] = "";
    ASSERT_EQ(ELECTOR_EINVAL,
              elector__endpoints_parse(list, false, &eps, err, sizeof(err)));
    ASSERT_NULL(eps);
    ASSERT(err[0] != 0);
}

TEST(endpoints_error_message_truncated_to_cap)
{
    elector__endpoint *eps = NULL;
    char err[8];
    memset(err, 'Z', sizeof(err));
    ASSERT_EQ(ELECTOR_EINVAL, elector__endpoints_parse("host:0", false, &eps, err, 8));
    ASSERT_EQ(0, err[7]);
}

/* The port must be the decimal number itself: strtol also accepts a sign and
 * leading blanks, which would put "+80" or " 80" into the port and into the
 * :authority header. */
TEST(endpoints_port_digits_only)
{
    expect_bad("host:+80", "'host:+80'");
    expect_bad("host: 80", "'host: 80'");
}

TEST(endpoints_free_null_is_noop)
{
    elector__endpoints_free(NULL, 0);
    elector__endpoints_free(NULL, 5);
}

/* ------------------------------------------------- elector_etcd_new errors */

static int cb_calls;
static void never_cb(elector_etcd *e, int err, const ProtobufCMessage *resp, void *ud)
{
    (void)e;
    (void)err;
    (void)resp;
    (void)ud;
    cb_calls++;
}

TEST(etcd_new_bad_endpoints_reports_einval)
{
    const char *bad[] = {"host:0", "a:1,b", "ftp://x:1", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = bad[i];
        elector_etcd *e = elector_etcd_new(&cfg);
        ASSERT_NOT_NULL(e);
        ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
        const char *name = i == 1 ? "'b'" : i == 3 ? "no endpoints" : bad[i];
        ASSERT_CONTAINS(elector_etcd_errstr(e), name);

        /* A call fails at once with that error and never calls back. */
        Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
        req.key.data = (uint8_t *)"k";
        req.key.len = 1;
        cb_calls = 0;
        double t0 = tl_now();
        ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_call(e, ELECTOR_RPC_RANGE, &req.base, NULL,
                                                    never_cb, NULL));
        ProtobufCMessage *resp = (ProtobufCMessage *)&resp;
        ASSERT_EQ(ELECTOR_EINVAL,
                  elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &req.base, NULL, &resp));
        ASSERT_NULL(resp);
        ASSERT_LT(tl_now() - t0, 0.5);
        ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
        ASSERT_CONTAINS(elector_etcd_errstr(e), name);
        ASSERT_EQ(0, cb_calls);
        elector_etcd_free(e);
    }
}

TEST(etcd_new_missing_cacert_reports_einval)
{
    char *dir = tl_tmpdir("cacert");
    ASSERT_NOT_NULL(dir);
    char path[4200];
    snprintf(path, sizeof(path), "%s/no-such-ca.pem", dir);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1"; /* schemeless: TLS because a CA is set */
    cfg.cacert = path;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    ASSERT_CONTAINS(elector_etcd_errstr(e), path);

    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    cb_calls = 0;
    double t0 = tl_now();
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_call(e, ELECTOR_RPC_RANGE, &req.base, NULL, never_cb, NULL));
    ASSERT_LT(tl_now() - t0, 0.5);
    ASSERT_EQ(0, cb_calls);
    elector_etcd_free(e);
    free(dir);
}

TEST(etcd_new_missing_client_cert_reports_einval)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "https://127.0.0.1:1";
    cfg.cert = "/nonexistent/elector-client.pem";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    ASSERT_CONTAINS(elector_etcd_errstr(e), "/nonexistent/elector-client.pem");
    elector_etcd_free(e);
}

TEST(etcd_new_good_config_has_no_error)
{
    elector_etcd *e = elector_etcd_new(NULL);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    ASSERT_STREQ("", elector_etcd_errstr(e));
    elector_etcd_free(e);

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "http://127.0.0.1:1, [::1]:2";
    e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    elector_etcd_free(e);
    elector_etcd_free(NULL);
}

TEST(etcd_call_wrong_message_type_einval_no_callback)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1"; /* never contacted */
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    cb_calls = 0;

    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__RangeRequest range = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__WatchRequest watch = ETCDSERVERPB__WATCH_REQUEST__INIT;
    /* Put message to Range. */
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_call(e, ELECTOR_RPC_RANGE, &put.base, NULL, never_cb, NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    /* NULL request, NULL callback, stream rpc, out-of-range rpc. */
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_call(e, ELECTOR_RPC_RANGE, NULL, NULL, never_cb, NULL));
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_call(e, ELECTOR_RPC_RANGE, &range.base, NULL, NULL, NULL));
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_call(e, ELECTOR_RPC_WATCH, &watch.base, NULL, never_cb, NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_call(e, ELECTOR_RPC_COUNT_, &range.base, NULL,
                                                never_cb, NULL));
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_call(e, (elector_rpc)-1, &range.base, NULL, never_cb, NULL));
    ProtobufCMessage *resp = (ProtobufCMessage *)&resp;
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &range.base, NULL, &resp));
    ASSERT_NULL(resp);

    /* Nothing was queued: processing runs no callback. */
    for (int i = 0; i < 3; i++)
        ASSERT_OK(elector_etcd_run_once(e, 0));
    ASSERT_EQ(0, cb_calls);
    elector_etcd_free(e);
    ASSERT_EQ(0, cb_calls);
}

/* ---------------------------------------------------------------- auto-sync */

typedef struct notes {
    int n;
    char first[1200]; /* the first notice since n was last 0 */
    char last[1200];
} notes;

static void note_cb(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e, (void)err;
    notes *s = ud;
    if (s->n++ == 0) snprintf(s->first, sizeof(s->first), "%s", msg);
    snprintf(s->last, sizeof(s->last), "%s", msg);
}

static uint64_t syncs(const elector_etcd *e)
{
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    return st.endpoint_syncs;
}

static elector_etcd *client_of(const char *endpoints, int64_t autosync_ms)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.auto_sync_interval_ms = autosync_ms;
    cfg.dial_timeout_ms = 3000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

TEST(endpoints_replace_takes_usable_urls_once_and_says_what_was_skipped)
{
    elector_etcd *e = client_of("127.0.0.1:1,127.0.0.1:2", 0);
    notes nt = {0};
    elector_etcd_set_notice(e, note_cb, &nt);
    char why[300] = "";
    /* No URL, two in one, not a URL, https without TLS set up, a duplicate
     * (with and without its scheme): two usable. */
    const char *urls[] = {NULL,          "http://127.0.0.1:5,http://127.0.0.1:6",
                          "127.0.0.1:x", "https://127.0.0.1:7",
                          "127.0.0.1:3", "http://127.0.0.1:3",
                          "127.0.0.1:4"};
    ASSERT_OK(elector__endpoints_replace(e, urls, 7, why, sizeof(why)));
    ASSERT_EQ(2, e->nep);
    elector_endpoint_info info;
    ASSERT_OK(elector_etcd_endpoint_info(e, 0, &info));
    ASSERT_STREQ("127.0.0.1:3", info.authority);
    ASSERT_OK(elector_etcd_endpoint_info(e, 1, &info));
    ASSERT_STREQ("127.0.0.1:4", info.authority);
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_endpoint_info(e, 2, &info));
    ASSERT_EQ(1, (long long)syncs(e));
    ASSERT_EQ(1, nt.n);
    ASSERT_CONTAINS(nt.last,
                    "cluster's member list: 127.0.0.1:3,127.0.0.1:4 (some client "
                    "URLs skipped: unusable)");

    /* The same list (one given twice): nothing changes, nothing said. */
    const char *same[] = {"127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:4"};
    ASSERT_OK(elector__endpoints_replace(e, same, 3, why, sizeof(why)));
    ASSERT_EQ(1, (long long)syncs(e));
    ASSERT_EQ(1, nt.n);

    /* Nothing usable: refused, the list kept. */
    const char *bad[] = {"https://127.0.0.1:7", "::"};
    ASSERT_EQ(ELECTOR_EINVAL, elector__endpoints_replace(e, bad, 2, why, sizeof(why)));
    ASSERT_STREQ("no usable client URL among the 2 given", why);
    ASSERT_EQ(2, e->nep);
    ASSERT_EQ(1, (long long)syncs(e));

    /* Another order of the same two is a change; nothing skipped. */
    const char *swapped[] = {"127.0.0.1:4", "127.0.0.1:3"};
    ASSERT_OK(elector__endpoints_replace(e, swapped, 2, why, sizeof(why)));
    ASSERT_EQ(2, (long long)syncs(e));
    ASSERT_CONTAINS(nt.last, "member list: 127.0.0.1:4,127.0.0.1:3");
    ASSERT(!strstr(nt.last, "skipped"));
    elector_etcd_free(e);

    /* A client with TLS takes the https members only: a cleartext one would
     * carry its password and token unencrypted (before: taken). The skipped
     * ones are named once, and again only when they change. */
    e = client_of("https://127.0.0.1:1", 0);
    nt.n = 0;
    elector_etcd_set_notice(e, note_cb, &nt);
    const char *mixed[] = {"https://127.0.0.1:7", "127.0.0.1:8", "http://127.0.0.1:9"};
    ASSERT_OK(elector__endpoints_replace(e, mixed, 3, why, sizeof(why)));
    ASSERT_EQ(2, nt.n);
    ASSERT_CONTAINS(nt.first, "endpoint auto-sync: 2 cleartext client URLs skipped "
                              "(http://127.0.0.1:8, http://127.0.0.1:9): the client uses "
                              "TLS and takes https:// URLs only");
    ASSERT_CONTAINS(nt.last, "member list: https://127.0.0.1:7");
    ASSERT(!strstr(nt.last, "127.0.0.1:8"));
    ASSERT_EQ(1, e->nep);
    ASSERT_OK(elector_etcd_endpoint_info(e, 0, &info));
    ASSERT(info.tls);
    ASSERT_OK(elector__endpoints_replace(e, mixed, 3, why, sizeof(why)));
    ASSERT_EQ(2, nt.n); /* the same: nothing said */
    /* Only cleartext ones: the list is kept. */
    const char *plain[] = {"http://127.0.0.1:8"};
    ASSERT_EQ(ELECTOR_EINVAL, elector__endpoints_replace(e, plain, 1, why, sizeof(why)));
    ASSERT_STREQ("no usable client URL among the 1 given (TLS only: the cleartext ones "
                 "skipped)",
                 why);
    ASSERT_EQ(3, nt.n);
    ASSERT_CONTAINS(nt.last, "1 cleartext client URL skipped (http://127.0.0.1:8)");
    ASSERT_EQ(1, e->nep);
    ASSERT_OK(elector_etcd_endpoint_info(e, 0, &info));
    ASSERT_STREQ("127.0.0.1:7", info.authority);
    ASSERT(info.tls);
    elector_etcd_free(e);
}

/* require_tls (--insecure-transport=false): an endpoint without a scheme is
 * TLS, an http:// one is refused by name, auto-sync takes https only. */
TEST(require_tls_refuses_cleartext_endpoints)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.require_tls = true;
    cfg.insecure_skip_verify = true;
    cfg.endpoints = "127.0.0.1:1,https://127.0.0.1:2";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    elector_endpoint_info info;
    ASSERT_OK(elector_etcd_endpoint_info(e, 0, &info));
    ASSERT(info.tls);
    char why[300];
    const char *urls[] = {"http://127.0.0.1:8", "127.0.0.1:9"};
    ASSERT_OK(elector__endpoints_replace(e, urls, 2, why, sizeof(why)));
    ASSERT_EQ(1, e->nep);
    ASSERT_OK(elector_etcd_endpoint_info(e, 0, &info));
    ASSERT_STREQ("127.0.0.1:9", info.authority);
    ASSERT(info.tls);
    elector_etcd_free(e);

    cfg.endpoints = "https://127.0.0.1:2,http://127.0.0.1:3";
    e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    ASSERT_STREQ("endpoint http://127.0.0.1:3 is cleartext, and TLS is required "
                 "(require_tls, --insecure-transport=false): use https://",
                 elector_etcd_errstr(e));
    elector_etcd_free(e);
}

/* A listening socket on a free loopback port that nobody accepts on (the
 * kernel completes connections into its backlog); non-blocking. */
static int listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(fd, 16));
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &l));
    *port = ntohs(a.sin_port);
    return fd;
}

static void never_answered(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)err, (void)m;
    (*(int *)ud)++;
}

TEST(endpoints_replace_keeps_the_endpoint_in_use_at_the_end)
{
    int port;
    int lfd = listener(&port);
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    elector_etcd *e = client_of(ep, 0);
    /* A call makes the client connect (the peer never speaks HTTP/2: the
     * connection stays waiting for its SETTINGS). */
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    int ended = 0;
    ASSERT_OK(
        elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, NULL, never_answered, &ended));
    for (int i = 0; i < 20 && e->cstate != C_SETTINGS; i++)
        elector_etcd_run_once(e, 10);
    ASSERT_EQ(C_SETTINGS, e->cstate);
    char why[300];
    const char *other[] = {"127.0.0.1:9"};
    ASSERT_OK(elector__endpoints_replace(e, other, 1, why, sizeof(why)));
    ASSERT_EQ(2, e->nep);
    ASSERT_EQ(1, e->ep); /* the connection's endpoint, kept after the new ones */
    elector_endpoint_info info;
    ASSERT_OK(elector_etcd_endpoint_info(e, 1, &info));
    ASSERT_STREQ(ep, info.authority);
    ASSERT_EQ(C_SETTINGS, e->cstate);
    ASSERT_EQ(0, ended);
    elector_etcd_free(e);
    ASSERT_EQ(1, ended); /* ECANCELED */

    /* Without a connection the old endpoint is simply gone. */
    e = client_of(ep, 0);
    ASSERT_OK(elector__endpoints_replace(e, other, 1, why, sizeof(why)));
    ASSERT_EQ(1, e->nep);
    ASSERT_EQ(0, e->ep);
    elector_etcd_free(e);
    close(lfd);
}

/* Auto-sync asks over a connection that is up; it never makes one. */
TEST(autosync_without_a_connection_does_not_connect)
{
    int port;
    int lfd = listener(&port);
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    elector_etcd *e = client_of(ep, 20);
    double end = tl_now() + 0.3;
    while (tl_now() < end)
        ASSERT_OK(elector_etcd_run_once(e, 50));
    ASSERT_EQ(-1, accept(lfd, NULL, NULL)); /* nobody dialled */
    ASSERT_EQ(0, (long long)syncs(e));
    ASSERT(e->autosync != NULL);
    /* A call does connect (the listener works), and with the connection not
     * up (no SETTINGS) auto-sync still sends nothing of its own. */
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    int ended = 0;
    ASSERT_OK(
        elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, NULL, never_answered, &ended));
    int c = -1;
    end = tl_now() + 2.0;
    while (c < 0 && tl_now() < end) {
        elector_etcd_run_once(e, 20);
        c = accept(lfd, NULL, NULL);
    }
    ASSERT(c >= 0);
    end = tl_now() + 0.2;
    while (tl_now() < end)
        elector_etcd_run_once(e, 20);
    ASSERT_EQ(1, e->n_queued + e->n_active_unary); /* the Range alone */
    elector_etcd_free(e);
    close(c);
    close(lfd);
}

/* Where credentials may go in the clear: loopback addresses and names. */
TEST(endpoint_info_tells_loopback_endpoints)
{
    elector_etcd *e = client_of("[::1]:1,[::ffff:127.0.0.2]:1,[::ffff:10.0.0.1]:1,"
                                "[2001:db8::1]:1,LOCALHOST:1,localhost.:1,127.9.9.9:1,"
                                "10.0.0.1:1,example.com:1",
                                0);
    static const bool want[] = {true, true, false, false, true, true, true, false, false};
    for (int i = 0; i < 9; i++) {
        elector_endpoint_info info;
        ASSERT_OK(elector_etcd_endpoint_info(e, i, &info));
        if (info.loopback != want[i]) tl_log("endpoint %d: %s", i, info.authority);
        ASSERT_EQ(want[i], info.loopback);
    }
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_endpoint_info(e, -1, &(elector_endpoint_info){0}));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_endpoint_info(e, 0, NULL));
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_etcd_endpoint_info(NULL, 0, &(elector_endpoint_info){0}));
    elector_etcd_free(e);
}

/* ------------------------------------------------- edges (issue 23) */

/* IPv6 addresses that are loopback or v4-mapped in all but one word are not. */
TEST(endpoint_loopback_needs_every_word_of_the_address)
{
    ASSERT(elector__endpoint_loopback("::1"));
    ASSERT(elector__endpoint_loopback("::ffff:127.1.2.3"));
    ASSERT(!elector__endpoint_loopback("0:0:0:1::1"));            /* word 1 */
    ASSERT(!elector__endpoint_loopback("::1:0:0:1"));             /* word 2 */
    ASSERT(!elector__endpoint_loopback("1::1"));                  /* word 0 */
    ASSERT(!elector__endpoint_loopback("::2"));                   /* word 3 */
    ASSERT(!elector__endpoint_loopback("0:0:1:0:0:ffff:7f00:1")); /* mapped, word 1 */
    ASSERT(!elector__endpoint_loopback("::fffe:7f00:1"));         /* not mapped */
    ASSERT(!elector__endpoint_loopback("::ffff:128.0.0.1"));
}

TEST(endpoints_parse_without_a_list)
{
    elector__endpoint *eps = (void *)1;
    char err[100];
    ASSERT_EQ(ELECTOR_EINVAL,
              elector__endpoints_parse(NULL, false, &eps, err, sizeof(err)));
    ASSERT_NULL(eps);
    ASSERT_STREQ("no endpoints given", err);
}

/* No client (elector_etcd_new could not even allocate one): its error is
 * ENOMEM, said. No endpoints configured: etcd's default, 127.0.0.1:2379. */
TEST(etcd_null_client_and_default_endpoint)
{
    ASSERT_EQ(ELECTOR_ENOMEM, elector_etcd_err(NULL));
    ASSERT_STREQ("out of memory", elector_etcd_errstr(NULL));
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = NULL;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    elector_endpoint_info info;
    ASSERT_OK(elector_etcd_endpoint_info(e, 0, &info));
    ASSERT_STREQ("127.0.0.1:2379", info.authority);
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_endpoint_info(e, 1, &info));
    /* A wait of more than 2^31 ms is cut to what epoll takes; woken at once. */
    elector_etcd_wakeup(e);
    double t0 = tl_now();
    ASSERT_OK(elector_etcd_run_once(e, INT64_C(1) << 40));
    ASSERT_LT(tl_now() - t0, 60.0);
    elector_etcd_free(e);
}

struct freeing {
    int calls, call_rc, frees;
    bool stream_null;
};

static void never_scb(elector_stream *s, int err, const ProtobufCMessage *m, void *ud)
{
    (void)s, (void)err, (void)m, (void)ud;
    cb_calls++;
}

static void free_again_cb(elector_etcd *e, int err, const ProtobufCMessage *resp,
                          void *ud)
{
    (void)resp;
    struct freeing *f = ud;
    f->calls++;
    ASSERT_EQ(ELECTOR_ECANCELED, err);
    /* While the client is being freed: no new call, no new stream, and a
     * second free is a no-op. */
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    f->call_rc = elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, NULL, never_cb, NULL);
    f->stream_null =
        elector_etcd_stream_open(e, ELECTOR_RPC_WATCH, NULL, never_scb, NULL) == NULL;
    elector_etcd_free(e);
    f->frees++;
}

TEST(etcd_free_from_a_callback_refuses_new_calls)
{
    ASSERT_EQ(ELECTOR_ECLOSED,
              elector_etcd_call(NULL, ELECTOR_RPC_RANGE, NULL, NULL, never_cb, NULL));
    ASSERT_NULL(elector_etcd_stream_open(NULL, ELECTOR_RPC_WATCH, NULL, NULL, NULL));
    elector_stream_close(NULL);
    int port;
    int lfd = listener(&port); /* accepts nothing: the calls wait */
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    elector_etcd *e = client_of(ep, 0);
    struct freeing f = {0};
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    ASSERT_OK(elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, NULL, free_again_cb, &f));
    int before = cb_calls;
    elector_etcd_free(e);
    ASSERT_EQ(1, f.calls);
    ASSERT_EQ(1, f.frees);
    ASSERT_EQ(ELECTOR_ECLOSED, f.call_rc);
    ASSERT(f.stream_null);
    ASSERT_EQ(before, cb_calls); /* the refused call never calls back */
    close(lfd);
}

static void ended_with(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    int *r = ud;
    r[0] = 1;
    r[1] = err;
}

/* A connect that never completes (the listener's accept queue is full: its
 * SYN is dropped), with the loop woken meanwhile for other reasons: those
 * passes leave the connect alone, and the dial timeout ends it. */
TEST(connect_never_completing_ends_at_the_dial_timeout)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ASSERT_OK(bind(lfd, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(lfd, 0));
    ASSERT_OK(getsockname(lfd, (struct sockaddr *)&a, &l));
    int filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_OK(connect(filler, (struct sockaddr *)&a, sizeof(a))); /* the queue, full */
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", ntohs(a.sin_port));
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = ep;
    cfg.dial_timeout_ms = 300;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    int res[2] = {0, 0};
    ASSERT_OK(elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, NULL, ended_with, res));
    double end = tl_now() + 5;
    int wakes = 0;
    while (!res[0] && tl_now() < end) {
        elector_etcd_wakeup(e); /* a pass without socket events */
        wakes++;
        elector_etcd_run_once(e, 20);
        tl_msleep(10);
    }
    tl_log("ended after %d wake-ups: %s: %s", wakes, elector_err_name(res[1]),
           elector_etcd_errstr(e));
    ASSERT_EQ(1, res[0]);
    ASSERT_EQ(ELECTOR_ECONNECT, res[1]);
    ASSERT_CONTAINS(elector_etcd_errstr(e), "no answer within the dial timeout (300 ms)");
    ASSERT_GE(wakes, 5);
    elector_etcd_free(e);
    close(filler);
    close(lfd);
}

/* A stream closed by its owner takes no more messages (ECLOSED) and a second
 * close is a no-op; its callback is never called. */
TEST(stream_closed_takes_no_more_messages)
{
    elector_etcd *e = client_of("127.0.0.1:1", 0);
    int before = cb_calls;
    elector_stream *s =
        elector_etcd_stream_open(e, ELECTOR_RPC_WATCH, NULL, never_scb, NULL);
    ASSERT_NOT_NULL(s);
    Etcdserverpb__WatchRequest w = ETCDSERVERPB__WATCH_REQUEST__INIT;
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    ASSERT_EQ(ELECTOR_EINVAL, elector_stream_send(s, &r.base)); /* not a WatchRequest */
    ASSERT_OK(elector_stream_send(s, &w.base));
    elector_stream_close(s);
    ASSERT_EQ(ELECTOR_ECLOSED, elector_stream_send(s, &w.base));
    elector_stream_close(s);
    elector_etcd_run_once(e, 0);
    ASSERT_EQ(before, cb_calls);
    elector_etcd_free(e);
}

/* A member list longer than the notice can show: all taken, the notice cut
 * (not overrun). */
TEST(endpoints_replace_with_a_list_longer_than_its_notice)
{
    elector_etcd *e = client_of("127.0.0.1:1", 0);
    notes nt = {0};
    elector_etcd_set_notice(e, note_cb, &nt);
    enum { N = 40 };
    char bufs[N][64];
    const char *urls[N];
    for (int i = 0; i < N; i++) {
        snprintf(bufs[i], sizeof(bufs[i]),
                 "http://member-%02d.with-a-long-name.example:2379", i);
        urls[i] = bufs[i];
    }
    char why[300] = "";
    ASSERT_OK(elector__endpoints_replace(e, urls, N, why, sizeof(why)));
    ASSERT_EQ(N, e->nep);
    elector_endpoint_info info;
    ASSERT_OK(elector_etcd_endpoint_info(e, N - 1, &info));
    ASSERT_STREQ("member-39.with-a-long-name.example:2379", info.authority);
    ASSERT_EQ(1, nt.n);
    ASSERT_CONTAINS(nt.last, "cluster's member list: member-00.with-a-long-name");
    ASSERT(!strstr(nt.last, "member-39")); /* cut: 40 x 42 bytes do not fit */
    elector_etcd_free(e);
}
