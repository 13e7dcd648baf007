/* SPDX-License-Identifier: MIT */
/* Unit tests (no server) for endpoint list parsing (src/transport/endpoint.c) and for the
 * way elector_etcd_new() reports bad endpoints and TLS files. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
