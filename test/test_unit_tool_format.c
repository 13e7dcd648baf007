/* SPDX-License-Identifier: MIT */
/* What the tool writes, at its edges (tool/text/, tool/ops/): writes that
 * fail (a full disk, a closed stream), events and leader documents with fields
 * left out, the Prometheus text with values that are not numbers, every
 * invisible control a terminal must not get raw, $NOTIFY_SOCKET and
 * $WATCHDOG_USEC that are malformed, HTTP addresses at their limits, and the
 * DNS SRV replies --discovery-srv reads. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ops/http.h"
#include "app/app.h"
#include "app/srv.h"
#include "ops/notify.h"
#include "switchover/switchover.h"
#include "text/escape.h"
#include "text/json.h"
#include "text/log.h"
#include "text/output.h"
#include "testlib.h"

/* ---------------------------------------------------------------- writes */

TEST(writes_to_a_full_disk_or_a_closed_stream_fail)
{
    FILE *full = fopen("/dev/full", "w");
    ASSERT_NOT_NULL(full);
    ASSERT_EQ(-1, tool_write_line(full, "a line"));
    clearerr(full);
    ASSERT_EQ(-1, tool_write_kv(full, false, false, (const uint8_t *)"k", 1,
                                (const uint8_t *)"v", 1));
    clearerr(full);
    ASSERT_EQ(-1, tool_write_kv(full, false, true, (const uint8_t *)"k", 1,
                                (const uint8_t *)"v", 1));
    clearerr(full);
    ASSERT_EQ(-1, tool_write_kv(full, true, false, (const uint8_t *)"k\x1b", 2,
                                (const uint8_t *)"", 0));
    fclose(full);
    /* A stream opened for reading takes nothing at all. */
    FILE *ro = fopen("/dev/null", "r");
    ASSERT_NOT_NULL(ro);
    ASSERT_EQ(-1, tool_write_line(ro, "x"));
    clearerr(ro);
    ASSERT_EQ(-1, tool_write_kv(ro, false, true, (const uint8_t *)"k", 1,
                                (const uint8_t *)"v", 1));
    fclose(ro);
    /* Unbuffered on a full disk: the line itself fails, not only the flush. */
    full = fopen("/dev/full", "w");
    ASSERT_NOT_NULL(full);
    setvbuf(full, NULL, _IONBF, 0);
    ASSERT_EQ(-1, tool_write_line(full, "x"));
    clearerr(full);
    ASSERT_EQ(-1, tool_write_kv(full, false, true, (const uint8_t *)"k", 1,
                                (const uint8_t *)"v", 1));
    fclose(full);
}

TEST(key_and_value_as_written)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ASSERT_NOT_NULL(f);
    /* hex: every byte; a terminal: escaped; else the bytes as they are; an empty
     * value is an empty line. */
    ASSERT_OK(
        tool_write_kv(f, false, true, (const uint8_t *)"a\n", 2, (const uint8_t *)"", 0));
    ASSERT_OK(tool_write_kv(f, true, false, (const uint8_t *)"a\n", 2,
                            (const uint8_t *)"\xe2\x80\xae", 3));
    ASSERT_OK(tool_write_kv(f, false, false, (const uint8_t *)"a\n", 2,
                            (const uint8_t *)"\xe2\x80\xae", 3));
    fclose(f);
    ASSERT_STREQ("\\x61\\x0a\n\n"
                 "a\\n\n\\u{202e}\n"
                 "a\n\n\xe2\x80\xae\n",
                 buf);
    free(buf);
}

/* ---------------------------------------------------------------- events */

TEST(event_fields_left_out_or_empty)
{
    tool_event_out e = {
        .event = "failed", .error = "ECONNECT", .mono_ns = 5, .unix_ms = 6};
    char *j = tool_event_json(&e);
    ASSERT_STREQ(
        "{\"event\":\"failed\",\"name\":\"\",\"error\":\"ECONNECT\",\"reason\":\"\","
        "\"mono_ns\":5,\"unix_ms\":6}",
        j);
    free(j);
    tool_event_out h = {.event = "unhealthy",
                        .name = "n",
                        .check = "exit \"2\"",
                        .failures = 3,
                        .token = 7,
                        .lease = 255};
    j = tool_event_json(&h);
    ASSERT_STREQ(
        "{\"event\":\"unhealthy\",\"name\":\"n\",\"lease\":\"ff\",\"token\":7,"
        "\"failures\":3,\"check\":\"exit \\\"2\\\"\",\"mono_ns\":0,\"unix_ms\":0}",
        j);
    free(j);
    /* A length no buffer can hold is refused before anything is read. */
    ASSERT_NULL(tool_base64("", SIZE_MAX));
    ASSERT_NULL(tool_base64("", SIZE_MAX / 4 * 3));
}

/* ---------------------------------------------------------------- log, escape */

TEST(log_levels_past_debug_are_debug)
{
    char *l = tool_log_format(LOGFMT_TEXT, (enum tool_log)9, 0, "m");
    ASSERT_STREQ("1970-01-01T00:00:00.000Z debug elector: m", l);
    free(l);
    l = tool_log_format(LOGFMT_JSON, LOG_ERROR, 999, "");
    ASSERT_STREQ(
        "{\"time\":\"1970-01-01T00:00:00.999Z\",\"level\":\"error\",\"msg\":\"\"}", l);
    free(l);
    char ts[40];
    tool_rfc3339(INT64_MAX, ts, sizeof(ts));
    ASSERT_STREQ("292278994-08-17T07:12:55.807Z", ts);
}

TEST(every_invisible_control_is_escaped)
{
    static const struct {
        const char *in, *out;
    } c[] = {
        {"\xe2\x80\xa8", "\\u{2028}"},
        {"\xe2\x80\xa9", "\\u{2029}"},
        {"\xe2\x80\x8e", "\\u{200e}"},
        {"\xe2\x80\x8f", "\\u{200f}"},
        {"\xe2\x80\xaa", "\\u{202a}"},
        {"\xe2\x80\xae", "\\u{202e}"},
        {"\xe2\x81\xa6", "\\u{2066}"},
        {"\xe2\x81\xa9", "\\u{2069}"},
        /* their neighbours pass */
        {"\xe2\x80\x8d", "\xe2\x80\x8d"},
        {"\xe2\x80\x90", "\xe2\x80\x90"},
        {"\xe2\x80\xa7", "\xe2\x80\xa7"},
        {"\xe2\x80\xaf", "\xe2\x80\xaf"},
        {"\xe2\x81\xa5", "\xe2\x81\xa5"},
        {"\xe2\x81\xaa", "\xe2\x81\xaa"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char *s = tool_escape_dup(c[i].in, strlen(c[i].in));
        ASSERT_STREQ(c[i].out, s);
        free(s);
    }
}

TEST(json_buffers_refuse_sizes_that_overflow)
{
    char *buf = NULL;
    size_t cap = 0;
    ASSERT_EQ(-1, tool_buf_reserve(&buf, 10, &cap, SIZE_MAX - 5));
    ASSERT_NULL(buf);
    size_t len = 0;
    ASSERT_OK(tool_json_str(&buf, &len, &cap, (const uint8_t *)"x", 1));
    ASSERT_STREQ("\"x\"", buf);
    /* No bytes at all: an empty string. */
    ASSERT_OK(tool_json_str(&buf, &len, &cap, NULL, 5));
    ASSERT_STREQ("\"x\"\"\"", buf);
    free(buf);
}

/* ---------------------------------------------------------------- /leader, /metrics */

TEST(leader_json_without_a_name_or_a_known_since)
{
    elector_etcd_stats st = {0};
    tool_view v = {.has_leader = true,
                   .key = (const uint8_t *)"k",
                   .key_len = 1,
                   .value = (const uint8_t *)"",
                   .value_len = 0,
                   .token = 3,
                   .lease = 16,
                   .since_kind = TOOL_SINCE_ELECTED,
                   .etcd = &st};
    char *j = tool_leader_json(&v);
    ASSERT_STREQ(
        "{\"name\":\"\",\"leader\":true,\"key\":\"k\",\"value\":\"\",\"token\":3,"
        "\"lease\":\"10\",\"is_leader\":false,\"has_leader\":true}",
        j);
    free(j);
    /* A time but no kind, and a kind out of range: the time alone. */
    v.since_unix_ms = 1000;
    v.since_kind = 0;
    j = tool_leader_json(&v);
    ASSERT_CONTAINS(j, "\"since\":\"1970-01-01T00:00:01.000Z\",\"is_leader\"");
    free(j);
    v.since_kind = 4;
    j = tool_leader_json(&v);
    ASSERT(!strstr(j, "since_kind"));
    free(j);
}

TEST(metrics_with_values_that_are_not_numbers)
{
    tool_view v = {.name = NULL, .health = "starting"};
    v.lease_remaining_s = NAN;
    char *m = tool_metrics_render(&v); /* no etcd figures at all: zeros */
    ASSERT_NOT_NULL(m);
    ASSERT_CONTAINS(m, "\nelector_lease_remaining_seconds NaN\n");
    ASSERT_CONTAINS(m, "\nelector_is_leader{name=\"\"} 0\n");
    ASSERT_CONTAINS(m, "\nelector_etcd_requests_total{method=\"Range\"} 0\n");
    ASSERT_CONTAINS(m, "\nelector_etcd_connects_total 0\n");
    ASSERT_CONTAINS(m, "\nelector_etcd_disconnects_total 0\n");
    ASSERT_CONTAINS(m, "\nelector_health_status{state=\"starting\"} 1\n");
    ASSERT_CONTAINS(m, "\nelector_health_status{state=\"healthy\"} 0\n");
    ASSERT(!strstr(m, "elector_build_info"));
    free(m);
    v.lease_remaining_s = INFINITY;
    m = tool_metrics_render(&v);
    ASSERT_CONTAINS(m, "\nelector_lease_remaining_seconds +Inf\n");
    free(m);
    v.lease_remaining_s = -INFINITY;
    m = tool_metrics_render(&v);
    ASSERT_CONTAINS(m, "\nelector_lease_remaining_seconds -Inf\n");
    free(m);
    /* A label that is not UTF-8: U+FFFD for each bad byte. */
    v.name = "a\xff\xc3";
    v.lease_remaining_s = 0.5;
    m = tool_metrics_render(&v);
    ASSERT_CONTAINS(m, "\nelector_is_leader{name=\"a\xef\xbf\xbd\xef\xbf\xbd\"} 0\n");
    ASSERT_CONTAINS(m, "\nelector_lease_remaining_seconds 0.5\n");
    free(m);
}

/* ---------------------------------------------------------------- addresses */

TEST(http_addresses_at_their_limits)
{
    char err[600];
    ASSERT_EQ(-1, tool_http_check_addr(NULL, err, sizeof(err)));
    ASSERT_STREQ("invalid HTTP address '': expected HOST:PORT, :PORT or PORT", err);
    ASSERT_EQ(-1, tool_http_check_addr("127.0.0.1:123456", err, sizeof(err)));
    ASSERT_CONTAINS(err, "port '123456'");
    ASSERT_OK(tool_http_check_addr("127.0.0.1:65535", err, sizeof(err)));
    ASSERT_EQ(-1, tool_http_check_addr("127.0.0.1:65536", err, sizeof(err)));
    ASSERT_OK(tool_http_check_addr("00080", err, sizeof(err)));
    /* No room for a message: the result alone. */
    ASSERT_EQ(-1, tool_http_check_addr("x:y", NULL, 0));
    ASSERT_EQ(-1, tool_http_check_addr("x:y", err, 0));
    /* An IPv6 literal longer than a host name may be. */
    char addr[400] = "[";
    memset(addr + 1, '1', 300);
    strcpy(addr + 301, "]:80");
    ASSERT_EQ(-1, tool_http_check_addr(addr, err, sizeof(err)));
    ASSERT_CONTAINS(err, "expected [IPV6]:PORT");
    ASSERT_EQ(-1, tool_http_check_addr("[::1]", err, sizeof(err)));
    ASSERT_CONTAINS(err, "expected [IPV6]:PORT");
    ASSERT_EQ(-1, tool_http_check_addr("[::1]:x", err, sizeof(err)));
    ASSERT_CONTAINS(err, "port 'x'");
}

/* ---------------------------------------------------------------- systemd */

static tool_notify *open_with(const char *sock, const char *usec, const char *pid,
                              char *err)
{
    if (sock)
        setenv("NOTIFY_SOCKET", sock, 1);
    else
        unsetenv("NOTIFY_SOCKET");
    if (usec)
        setenv("WATCHDOG_USEC", usec, 1);
    else
        unsetenv("WATCHDOG_USEC");
    if (pid)
        setenv("WATCHDOG_PID", pid, 1);
    else
        unsetenv("WATCHDOG_PID");
    return tool_notify_open(err, 300);
}

TEST(notify_settings_that_are_malformed)
{
    char err[300];
    /* Unset or empty: no notifications, no error. */
    ASSERT_NULL(open_with(NULL, "1000000", NULL, err));
    ASSERT_STREQ("", err);
    ASSERT_NULL(open_with("", NULL, NULL, err));
    ASSERT_STREQ("", err);
    ASSERT_NULL(getenv("WATCHDOG_USEC")); /* unset for the command all the same */
    /* Relative, too short, too long. */
    static const char *bad[] = {"run/notify", "/", "@"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ASSERT_NULL(open_with(bad[i], NULL, NULL, err));
        ASSERT_CONTAINS(err, "is not an absolute path or an abstract name (@NAME)");
    }
    char longp[200] = "/";
    memset(longp + 1, 'p', 150);
    ASSERT_NULL(open_with(longp, NULL, NULL, err));
    ASSERT_CONTAINS(err, "that fits a unix socket address");
    /* A watchdog that is no number, negative, or for another process: none. */
    static const char *usecs[][2] = {{"", NULL},       {"abc", NULL},
                                     {"-5", NULL},     {"12x", NULL},
                                     {"0", NULL},      {"99999999999999999999", NULL},
                                     {"1000000", "1"}, {"1000000", "x"}};
    for (size_t i = 0; i < sizeof(usecs) / sizeof(usecs[0]); i++) {
        tool_notify *n = open_with("@elector-test-notify", usecs[i][0], usecs[i][1], err);
        ASSERT_NOT_NULL(n);
        ASSERT_EQ(0, tool_notify_watchdog_ms(n));
        ASSERT_EQ(-1, tool_notify_timeout(n, 0));
        tool_notify_tick(n, 1000000); /* nothing due, nothing sent */
        tool_notify_free(n);
    }
    /* Under 2 ms: a ping every millisecond, not a busy loop of 0. */
    char pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    tool_notify *n = open_with("@elector-test-notify", "1", pid, err);
    ASSERT_NOT_NULL(n);
    ASSERT_EQ(1, tool_notify_watchdog_ms(n));
    tool_notify_free(n);
    /* No notifier: every call is a no-op. */
    ASSERT_EQ(0, tool_notify_send(NULL, "READY=1"));
    ASSERT_EQ(0, tool_notify_watchdog_ms(NULL));
    ASSERT_EQ(-1, tool_notify_timeout(NULL, 0));
    tool_notify_tick(NULL, 0);
    tool_notify_free(NULL);
}

/* ---------------------------------------------------------------- DNS SRV replies */

typedef struct dns {
    unsigned char b[600];
    size_t n;
} dns;

static void p8(dns *d, unsigned v)
{
    d->b[d->n++] = (unsigned char)v;
}

static void p16(dns *d, unsigned v)
{
    p8(d, v >> 8);
    p8(d, v & 0xff);
}

/* A reply header and the question _etcd-client._tcp.ex (the name at offset
 * 12, "ex" at 30). */
static void reply(dns *d, unsigned answers)
{
    memset(d, 0, sizeof(*d));
    p16(d, 7);
    p16(d, 0x8180);
    p16(d, 1);
    p16(d, answers);
    p16(d, 0);
    p16(d, 0);
    static const char *labels[] = {"_etcd-client", "_tcp", "ex"};
    for (int i = 0; i < 3; i++) {
        p8(d, (unsigned)strlen(labels[i]));
        memcpy(d->b + d->n, labels[i], strlen(labels[i]));
        d->n += strlen(labels[i]);
    }
    p8(d, 0);
    p16(d, 33);
    p16(d, 1);
}

/* An answer of type and class with an SRV's fields and the target "t" + ".ex";
 * rdlen_delta shortens the record's stated length. */
static void answer(dns *d, unsigned type, unsigned cls, unsigned prio, unsigned weight,
                   unsigned port, int rdlen_delta)
{
    p16(d, 0xc00c);
    p16(d, type);
    p16(d, cls);
    p16(d, 0);
    p16(d, 60);
    p16(d, (unsigned)(6 + 4 + rdlen_delta));
    p16(d, prio);
    p16(d, weight);
    p16(d, port);
    if (rdlen_delta < 0) {
        d->n += (size_t)(4 + rdlen_delta); /* what the stated length covers */
        return;
    }
    p8(d, 1);
    p8(d, 't');
    p16(d, 0xc000 | 30);
}

TEST(srv_replies_with_other_records_ties_and_limits)
{
    dns d;
    tool_srv s[4];
    char err[200];
    /* An A record and an SRV of class CH are not the members; port 0 cannot be
     * dialled; ties keep both. */
    reply(&d, 7);
    answer(&d, 1, 1, 0, 0, 2379, 0);
    answer(&d, 33, 3, 0, 0, 2379, 0);
    answer(&d, 33, 1, 5, 5, 0, 0);
    answer(&d, 33, 1, 5, 5, 2380, 0);
    answer(&d, 33, 1, 5, 1, 2383, 0);
    answer(&d, 33, 1, 5, 5, 2381, 0);
    answer(&d, 33, 1, 5, 9, 2382, 0);
    int n = tool_srv_parse(d.b, d.n, s, 4, err, sizeof(err));
    ASSERT_EQ(4, n);
    ASSERT_STREQ("t.ex", s[0].target);
    ASSERT_EQ(2382, s[0].port); /* the same priority: the heaviest first */
    ASSERT_EQ(2380 + 2381, s[1].port + s[2].port);
    ASSERT_EQ(2383, s[3].port);
    /* More records than room: the first ones. */
    n = tool_srv_parse(d.b, d.n, s, 1, err, sizeof(err));
    ASSERT_EQ(1, n);
    ASSERT_EQ(2380, s[0].port);
    /* An SRV record too short for its fields. */
    reply(&d, 1);
    answer(&d, 33, 1, 1, 1, 2379, -4);
    err[0] = 0;
    ASSERT_EQ(-1, tool_srv_parse(d.b, d.n, s, 4, err, sizeof(err)));
    ASSERT_STREQ("malformed SRV record (answer 1)", err);
    /* More answers announced than there are. */
    reply(&d, 2);
    answer(&d, 33, 1, 1, 1, 2379, 0);
    ASSERT_EQ(-1, tool_srv_parse(d.b, d.n, s, 4, err, sizeof(err)));
    ASSERT_CONTAINS(err, "malformed DNS reply");
    /* A reply longer than DNS allows. */
    static unsigned char big[70000];
    memcpy(big, d.b, d.n);
    ASSERT_EQ(-1, tool_srv_parse(big, sizeof(big), s, 4, err, sizeof(err)));
    ASSERT_STREQ("malformed DNS reply", err);
}

/* ---------------------------------------------------------------- hints, events */

TEST(every_error_kind_gets_its_hint)
{
    tool_opts o = {0};
    struct app a = {.o = &o};
    const char *ep = "check --endpoints (or $ELECTOR_ENDPOINTS, $ETCDCTL_ENDPOINTS) and "
                     "that etcd is running";
    ASSERT_STREQ(ep, app_hint(&a, ELECTOR_ECONNECT));
    ASSERT_STREQ(ep, app_hint(&a, ELECTOR_EUNAVAILABLE));
    ASSERT_STREQ(ep, app_hint(&a, ELECTOR_ETIMEDOUT));
    ASSERT_STREQ("check --cacert, --cert and --key, and the endpoint's host name",
                 app_hint(&a, ELECTOR_ETLS));
    const char *give = "the cluster has authentication enabled: give --user (and the "
                       "password in $ELECTOR_PASSWORD, --password-file or --user "
                       "NAME:PASSWORD)";
    ASSERT_STREQ(give, app_hint(&a, ELECTOR_EAUTH));
    ASSERT_STREQ(give, app_hint(&a, ELECTOR_ETOKEN));
    ASSERT_STREQ(give, app_hint(&a, ELECTOR_EPERM));
    a.creds.user = "ann";
    ASSERT_STREQ("no password was given: set $ELECTOR_PASSWORD (or $ETCDCTL_PASSWORD) or "
                 "use --password-file",
                 app_hint(&a, ELECTOR_EAUTH));
    snprintf(a.creds.from, sizeof(a.creds.from), "--password-file /p");
    ASSERT_STREQ("check --user and the password (from --password-file /p)",
                 app_hint(&a, ELECTOR_ETOKEN));
    ASSERT_STREQ("the etcd user 'ann' needs read/write permission on the prefix NAME/",
                 app_hint(&a, ELECTOR_EPERM));
    o.name = "svc";
    ASSERT_STREQ("the etcd user 'ann' needs read/write permission on the prefix svc/",
                 app_hint(&a, ELECTOR_EPERM));
    ASSERT_STREQ("the value is larger than etcd accepts (--max-request-bytes, 1.5 MiB by "
                 "default)",
                 app_hint(&a, ELECTOR_ETOOLARGE));
    ASSERT_STREQ("the etcd cluster has lost its quorum", app_hint(&a, ELECTOR_ENOLEADER));
    ASSERT_CONTAINS(app_hint(&a, ELECTOR_ENOSPACE), "`etcdctl alarm disarm`");
    ASSERT_STREQ(
        "etcd was restored from a snapshot: restore with `etcdutl snapshot restore "
        "--bump-revision N --mark-compacted` so that fencing tokens keep "
        "increasing",
        app_hint(&a, ELECTOR_ERESTORED));
    ASSERT_STREQ("`etcdctl alarm list` shows the alarm; an operator must clear it",
                 app_hint(&a, ELECTOR_EALARM));
    ASSERT_STREQ("the endpoint does not answer as etcd does; check --endpoints",
                 app_hint(&a, ELECTOR_EPROTO));
    ASSERT_NULL(app_hint(&a, ELECTOR_EINVAL));
    ASSERT_NULL(app_hint(&a, ELECTOR_ENOTLEADER));
    /* switchover's grants name the user, or none. */
    char h[640];
    sw_perm_hint(h, sizeof(h), a.creds.user, a.o->name);
    ASSERT_CONTAINS(h,
                    "the etcd user 'ann' needs readwrite on the prefix "
                    "__elector/candidates/svc/ and on the key __elector/switchover/svc");
    a.creds.user = NULL;
    sw_perm_hint(h, sizeof(h), a.creds.user, a.o->name);
    ASSERT_CONTAINS(h, "the etcd user '' needs readwrite");
}

TEST(events_without_a_value_a_detail_or_an_election)
{
    tool_opts o = {.name = "svc"};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ASSERT_NOT_NULL(f);
    struct app a = {.o = &o, .out.events = f};
    /* WAITING before the election exists: the predecessor, no key of ours. */
    elector_event w = {.type = ELECTOR_EV_WAITING,
                       .key = (const uint8_t *)"svc/1",
                       .key_len = 5,
                       .token = 3,
                       .mono_ns = app_mono_ns()};
    ASSERT_OK(app_event(&a, &w));
    /* LOST without a value or a detail. */
    elector_event l = {.type = ELECTOR_EV_LOST,
                       .key = (const uint8_t *)"svc/2",
                       .key_len = 5,
                       .token = 4,
                       .reason = ELECTOR_ENOTLEADER,
                       .mono_ns = app_mono_ns()};
    ASSERT_OK(app_event(&a, &l));
    fclose(f);
    tl_log("%s", buf);
    ASSERT_CONTAINS(buf,
                    "{\"event\":\"waiting\",\"name\":\"svc\",\"predecessor\":\"svc/1\"");
    ASSERT_NULL(strstr(buf, "\"key\":\"svc/1\""));
    ASSERT_CONTAINS(buf,
                    "{\"event\":\"lost\",\"name\":\"svc\",\"key\":\"svc/2\","
                    "\"key_base64\":\"c3ZjLzI=\",\"token\":4,\"value\":\"\","
                    "\"value_base64\":\"\",\"error\":\"ENOTLEADER\",\"reason\":\"\",");
    free(buf);
    /* A write that fails is said (the caller ends on it). */
    FILE *full = fopen("/dev/full", "w");
    ASSERT_NOT_NULL(full);
    a.out.events = full;
    ASSERT_EQ(-1, app_event(&a, &l));
    fclose(full);
}
