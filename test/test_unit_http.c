/* SPDX-License-Identifier: MIT */
/* The tool's HTTP endpoint: JSON and Prometheus renderers, address parsing, and
 * the libmicrohttpd server driven by a poll() loop in this process while curl
 * (a child process) talks to it. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>
#include "ops/http.h"
#include "text/json.h"
#include "testlib.h"

/* ---------------------------------------------------------------- helpers */

static char *json_of(const void *s, size_t n)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    ASSERT_OK(tool_json_str(&buf, &len, &cap, s, n));
    ASSERT_NOT_NULL(buf);
    ASSERT_EQ(strlen(buf), len); /* NUL-terminated (no raw NUL inside) */
    return buf;
}

#define ASSERT_JSON(expected, s, n)                                                      \
    do {                                                                                 \
        char *j_ = json_of((s), (n));                                                    \
        ASSERT_STREQ((expected), j_);                                                    \
        free(j_);                                                                        \
    } while (0)

/* The fake tool state the server reports. */
static struct {
    tool_view v;
    elector_session_stats ka;
    elector_etcd_stats st;
    int calls;
} fake;

static void fake_view(void *ud, tool_view *v)
{
    (void)ud;
    fake.calls++;
    *v = fake.v;
}

static void fake_init(const char *name)
{
    memset(&fake, 0, sizeof(fake));
    fake.v.name = name;
    fake.v.etcd = &fake.st;
    for (int r = 0; r < ELECTOR_RPC_COUNT_; r++) {
        fake.st.requests[r] = 100 + (uint64_t)r;
        fake.st.errors[r] = (uint64_t)r;
    }
    fake.st.connects = 3;
    fake.st.disconnects = 2;
}

static const uint8_t bin_key[] = {'e', '/', 0x00, 0xff, '"', '\n'};
static const uint8_t bin_val[] = {'v', 0xc3, 0xa9, 0x80};

static void fake_leader(bool ours)
{
    fake.v.has_leader = true;
    fake.v.is_leader = ours;
    fake.v.session_healthy = true;
    fake.v.key = bin_key;
    fake.v.key_len = sizeof(bin_key);
    fake.v.value = bin_val;
    fake.v.value_len = sizeof(bin_val);
    fake.v.token = 42;
    fake.v.lease = 0x694d8e1a2b3c4d5e;
    fake.v.since_unix_ms = 1700000000123; /* 2023-11-14T22:13:20.123Z */
    fake.v.since_kind = TOOL_SINCE_ELECTED;
    fake.v.leadership_changes = 5;
    fake.v.leader_changes = 7;
    fake.v.version = "1.2.3";
    fake.v.lease_remaining_s = 4.25;
    const uint64_t b[ELECTOR_RTT_BUCKETS] = {1, 2, 0, 3, 0, 0, 0, 0, 0, 0, 1, 4};
    memcpy(fake.ka.rtt_buckets, b, sizeof(b));
    fake.ka.rtt_count = 11;
    fake.ka.rtt_sum_ns = 12345678901;
    fake.ka.renewals = 11;
    fake.v.ka = &fake.ka;
}

typedef struct resp {
    int code;
    char *body;  /* malloc'd */
    char *ctype; /* points into body's allocation */
} resp;

/* Runs curl with args (NULL-terminated) against the server, pumping the
 * server from this process exactly as the tool does: poll its fd with its
 * timeout, process when the fd is readable or the timeout expired. Returns
 * curl's exit status; *out gets its stdout. */
static int run_curl(tool_http *h, const char *const *args, char **out)
{
    const char *argv[32] = {"curl", "-s", "--max-time", "10"};
    int n = 4;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int fd = -1;
    pid_t pid = tl_spawn(argv, &fd);
    ASSERT(pid > 0);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ASSERT_NOT_NULL(buf);
    double deadline = tl_now() + 15;
    for (;;) {
        ASSERT(tl_now() < deadline);
        int64_t t = tool_http_timeout(h);
        ASSERT(t >= -1);
        int wait_ms = t < 0 || t > 1000 ? 1000 : (int)t; /* 1000: check the deadline */
        struct pollfd p[2] = {{.fd = tool_http_fd(h), .events = POLLIN},
                              {.fd = fd, .events = POLLIN}};
        int rc = poll(p, 2, wait_ms);
        ASSERT(rc >= 0 || errno == EINTR);
        if (rc == 0 && t >= 0 && t <= wait_ms) tool_http_process(h); /* its timer */
        if (rc > 0 && (p[0].revents & POLLIN)) tool_http_process(h);
        if (rc > 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (cap - len < 1024) {
                cap *= 2;
                buf = realloc(buf, cap);
                ASSERT_NOT_NULL(buf);
            }
            ssize_t r = read(fd, buf + len, cap - len - 1);
            ASSERT(r >= 0 || errno == EINTR);
            if (r == 0) break;
            if (r > 0) len += (size_t)r;
        }
    }
    buf[len] = 0;
    close(fd);
    int st = tl_reap(pid, 0, 5);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *url_of(tool_http *h, const char *path)
{
    static char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", tool_http_port(h), path);
    return url;
}

/* method NULL: GET. */
static resp fetch(tool_http *h, const char *method, const char *path)
{
    resp r = {0};
    const char *args[8] = {"-o", "-", "-w", "\n%{content_type}\n%{http_code}"};
    int n = 4;
    if (method) {
        args[n++] = "-X";
        args[n++] = method;
    }
    args[n++] = url_of(h, path);
    args[n] = NULL;
    ASSERT_EQ(0, run_curl(h, args, &r.body));
    char *nl2 = strrchr(r.body, '\n');
    ASSERT_NOT_NULL(nl2);
    r.code = atoi(nl2 + 1);
    *nl2 = 0;
    char *nl1 = strrchr(r.body, '\n');
    ASSERT_NOT_NULL(nl1);
    *nl1 = 0;
    r.ctype = nl1 + 1;
    tl_log("%s %s -> %d %s", method ? method : "GET", path, r.code, r.ctype);
    return r;
}

static tool_http *start_local(void)
{
    char err[256] = "";
    tool_http *h = tool_http_start("127.0.0.1:0", fake_view, NULL, err, sizeof(err));
    if (!h) tl_log("start: %s", err);
    ASSERT_NOT_NULL(h);
    ASSERT_GT(tool_http_port(h), 0);
    ASSERT_GE(tool_http_fd(h), 0);
    return h;
}

static int have_promtool(void)
{
    return tl_run(NULL, (const char *[]){"sh", "-c", "command -v promtool >/dev/null",
                                         NULL}) == 0;
}

/* promtool check metrics on text; 1 if it passed, 0 if skipped; fails the test
 * on a complaint. */
static int promtool_check(const char *text)
{
    if (!have_promtool()) {
        tl_log("promtool not installed: Prometheus format check skipped");
        return 0;
    }
    char *dir = tl_tmpdir("prom");
    ASSERT_NOT_NULL(dir);
    char path[512], cmd[700];
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(strlen(text), fwrite(text, 1, strlen(text), f));
    ASSERT_OK(fclose(f));
    snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s'", path);
    char *o = NULL;
    tl_run_opts ro = {.merge_stderr = 1};
    int rc = tl_run_ex(&o, (const char *[]){"sh", "-c", cmd, NULL}, &ro);
    tl_log("promtool check metrics: exit %d%s%s", rc, o && *o ? ": " : "", o ? o : "");
    ASSERT_EQ(0, rc);
    free(o);
    free(dir);
    return 1;
}

/* Checks the keepalive histogram in text: bucket bounds increasing, counts
 * cumulative (non-decreasing), +Inf last and equal to _count. Returns the
 * +Inf count. */
static uint64_t check_histogram(const char *text)
{
    static const char *pfx = "elector_keepalive_rtt_seconds_bucket{le=\"";
    double prev_le = -1;
    uint64_t prev = 0, inf = 0;
    int buckets = 0, saw_inf = 0;
    for (const char *p = strstr(text, pfx); p; p = strstr(p + 1, pfx)) {
        ASSERT(!saw_inf); /* +Inf is the last bucket */
        const char *le = p + strlen(pfx);
        const char *q = strchr(le, '"');
        ASSERT_NOT_NULL(q);
        unsigned long long c = strtoull(q + 3, NULL, 10); /* after "} " */
        ASSERT(q[1] == '}' && q[2] == ' ');
        if (strncmp(le, "+Inf\"", 5) == 0) {
            saw_inf = 1;
            inf = c;
        } else {
            char *end;
            double x = strtod(le, &end);
            ASSERT(end == q);
            ASSERT_GT(x, prev_le);
            prev_le = x;
        }
        ASSERT_GE(c, prev);
        prev = c;
        buckets++;
    }
    ASSERT(saw_inf);
    ASSERT_EQ(ELECTOR_RTT_BUCKETS, buckets);
    const char *cnt = strstr(text, "\nelector_keepalive_rtt_seconds_count ");
    ASSERT_NOT_NULL(cnt);
    ASSERT_EQ(inf,
              strtoull(cnt + strlen("\nelector_keepalive_rtt_seconds_count "), NULL, 10));
    ASSERT_NOT_NULL(strstr(text, "\nelector_keepalive_rtt_seconds_sum "));
    return inf;
}

/* ---------------------------------------------------------------- tool_json_str */

TEST(json_str_escapes_quotes_backslash_and_controls)
{
    ASSERT_JSON("\"\"", "", 0);
    ASSERT_JSON("\"\"", NULL, 0);
    ASSERT_JSON("\"plain text/with:punct~\"", "plain text/with:punct~", 22);
    ASSERT_JSON("\"a\\\"b\\\\c\"", "a\"b\\c", 5);
    ASSERT_JSON("\"\\b\\f\\n\\r\\t\"", "\b\f\n\r\t", 5);
    ASSERT_JSON("\"\\u0000\\u0001\\u001f \\u001b[0m\"", "\0\x01\x1f \x1b[0m", 8);
    ASSERT_JSON("\"\x7f\"", "\x7f", 1); /* DEL needs no escape in JSON */
}

TEST(json_str_keeps_valid_utf8)
{
    const char *s =
        "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf "
        "\xc2\x80 \xe0\xa0\x80 \xf0\x90\x80\x80";
    char want[128];
    snprintf(want, sizeof(want), "\"%s\"", s);
    ASSERT_JSON(want, s, strlen(s));
}

TEST(json_str_escapes_each_invalid_byte)
{
    /* lone continuation, bytes that never occur, a truncated sequence */
    ASSERT_JSON("\"\\u0080\\u00bf\\u00c0\\u00c1\\u00f5\\u00ff\"",
                "\x80\xbf\xc0\xc1\xf5\xff", 6);
    ASSERT_JSON("\"a\\u00c3\"", "a\xc3", 2);
    ASSERT_JSON("\"\\u00e2\\u0082x\"", "\xe2\x82x", 3);
    /* overlong encodings of '/' and U+0800 */
    ASSERT_JSON("\"\\u00c0\\u00af\"", "\xc0\xaf", 2);
    ASSERT_JSON("\"\\u00e0\\u0080\\u00af\"", "\xe0\x80\xaf", 3);
    ASSERT_JSON("\"\\u00f0\\u0080\\u0080\\u00af\"", "\xf0\x80\x80\xaf", 4);
    /* a UTF-16 surrogate, and a code point above U+10FFFF */
    ASSERT_JSON("\"\\u00ed\\u00a0\\u0080\"", "\xed\xa0\x80", 3);
    ASSERT_JSON("\"\\u00f4\\u0090\\u0080\\u0080\"", "\xf4\x90\x80\x80", 4);
    /* an invalid byte does not swallow the valid character after it */
    ASSERT_JSON("\"\\u00e9\xc3\xa9\"", "\xe9\xc3\xa9", 3);
}

TEST(json_str_appends_to_a_buffer)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    ASSERT_OK(tool_json_str(&buf, &len, &cap, (const uint8_t *)"k", 1));
    for (int i = 0; i < 1000; i++) /* grows past several reallocations */
        ASSERT_OK(tool_json_str(&buf, &len, &cap, (const uint8_t *)"\x01\"", 2));
    ASSERT_EQ(3 + 1000 * 10, len);
    ASSERT_LT(len, cap);
    ASSERT_EQ(0, strncmp(buf, "\"k\"\"\\u0001\\\"\"\"\\u0001", 20));
    ASSERT_EQ(len, strlen(buf));
    free(buf);
}

/* ---------------------------------------------------------------- renderers */

TEST(leader_json_with_binary_key_and_value)
{
    fake_init("svc");
    fake_leader(true);
    char *j = tool_leader_json(&fake.v);
    ASSERT_STREQ(
        "{\"name\":\"svc\",\"leader\":true,\"key\":\"e/\\u0000\\u00ff\\\"\\n\","
        "\"value\":\"v\xc3\xa9\\u0080\",\"token\":42,\"lease\":\"694d8e1a2b3c4d5e\","
        "\"since\":\"2023-11-14T22:13:20.123Z\",\"since_unix_ms\":1700000000123,"
        "\"since_kind\":\"elected\",\"is_leader\":true,\"has_leader\":true}",
        j);
    free(j);
    fake.v.is_leader = false;
    fake.v.since_unix_ms = 1700000000007;
    fake.v.lease = -1; /* printed as the 64-bit pattern etcd shows */
    j = tool_leader_json(&fake.v);
    ASSERT_CONTAINS(j, "\"lease\":\"ffffffffffffffff\"");
    ASSERT_CONTAINS(j, "\"since\":\"2023-11-14T22:13:20.007Z\"");
    ASSERT_CONTAINS(j, "\"is_leader\":false,\"has_leader\":true}");
    free(j);
}

TEST(leader_json_says_what_since_is)
{
    fake_init("svc");
    fake_leader(false);
    static const char *const kinds[] = {"elected", "change", "first_seen"};
    for (int k = TOOL_SINCE_ELECTED; k <= TOOL_SINCE_FIRST_SEEN; k++) {
        fake.v.since_kind = k;
        char *j = tool_leader_json(&fake.v), want[80];
        snprintf(want, sizeof(want), ",\"since_kind\":\"%s\",", kinds[k - 1]);
        ASSERT_CONTAINS(j, want);
        ASSERT_CONTAINS(j, "\"since_unix_ms\":1700000000123,");
        free(j);
    }
}

TEST(leader_json_without_leader)
{
    fake_init("a\"b");
    char *j = tool_leader_json(&fake.v);
    ASSERT_STREQ("{\"name\":\"a\\\"b\",\"leader\":false,\"has_leader\":false}", j);
    free(j);
}

TEST(metrics_without_session_have_zero_histogram)
{
    fake_init("svc");
    char *m = tool_metrics_render(&fake.v);
    ASSERT_NOT_NULL(m);
    ASSERT_CONTAINS(
        m, "# TYPE elector_is_leader gauge\nelector_is_leader{name=\"svc\"} 0\n");
    ASSERT_CONTAINS(m, "# TYPE elector_keepalive_rtt_seconds histogram\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"0.0005\"} 0\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"1\"} 0\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"+Inf\"} 0\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_sum 0.000000000\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_count 0\n");
    ASSERT_EQ(0, check_histogram(m));
    ASSERT_CONTAINS(m, "elector_session_healthy 0\n");
    ASSERT_CONTAINS(m, "elector_lease_remaining_seconds 0\n");
    /* No leader known: zeros; no version: no build_info. */
    ASSERT_CONTAINS(m, "elector_leader_token{name=\"svc\"} 0\n");
    ASSERT_CONTAINS(m, "elector_leader_since_seconds{name=\"svc\"} 0.000\n");
    ASSERT_CONTAINS(m, "elector_leader_changes_total{name=\"svc\"} 0\n");
    ASSERT_NULL(strstr(m, "elector_build_info"));
    promtool_check(m);
    free(m);
}

TEST(metrics_families_and_values)
{
    fake_init("svc");
    fake_leader(true);
    char *m = tool_metrics_render(&fake.v);
    ASSERT_NOT_NULL(m);
    static const char *fam[][2] = {{"elector_is_leader", "gauge"},
                                   {"elector_leadership_changes_total", "counter"},
                                   {"elector_start_retries_total", "counter"},
                                   {"elector_lease_remaining_seconds", "gauge"},
                                   {"elector_session_healthy", "gauge"},
                                   {"elector_keepalive_rtt_seconds", "histogram"},
                                   {"elector_etcd_requests_total", "counter"},
                                   {"elector_etcd_errors_total", "counter"},
                                   {"elector_etcd_connects_total", "counter"},
                                   {"elector_etcd_disconnects_total", "counter"}};
    for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
        char want[160];
        snprintf(want, sizeof(want), "# HELP %s ", fam[i][0]);
        ASSERT_CONTAINS(m, want);
        snprintf(want, sizeof(want), "\n# TYPE %s %s\n", fam[i][0], fam[i][1]);
        ASSERT_CONTAINS(m, want);
    }
    ASSERT_CONTAINS(m, "elector_is_leader{name=\"svc\"} 1\n");
    ASSERT_CONTAINS(m, "elector_leadership_changes_total{name=\"svc\"} 5\n");
    ASSERT_CONTAINS(
        m,
        "\n# TYPE elector_build_info gauge\nelector_build_info{version=\"1.2.3\"} 1\n");
    ASSERT_CONTAINS(
        m,
        "\n# TYPE elector_leader_token gauge\nelector_leader_token{name=\"svc\"} 42\n");
    ASSERT_CONTAINS(m, "\n# TYPE elector_leader_since_seconds gauge\n"
                       "elector_leader_since_seconds{name=\"svc\"} 1700000000.123\n");
    ASSERT_CONTAINS(m, "\n# TYPE elector_leader_changes_total counter\n"
                       "elector_leader_changes_total{name=\"svc\"} 7\n");
    /* This process's figures, as the client libraries name them. */
    static const char *proc[][2] = {{"process_cpu_seconds_total", "counter"},
                                    {"process_start_time_seconds", "gauge"},
                                    {"process_resident_memory_bytes", "gauge"},
                                    {"process_virtual_memory_bytes", "gauge"},
                                    {"process_open_fds", "gauge"},
                                    {"process_max_fds", "gauge"}};
    for (size_t i = 0; i < sizeof(proc) / sizeof(proc[0]); i++) {
        char want[160];
        snprintf(want, sizeof(want), "\n# TYPE %s %s\n%s ", proc[i][0], proc[i][1],
                 proc[i][0]);
        ASSERT_CONTAINS(m, want);
    }
    ASSERT_CONTAINS(m, "elector_lease_remaining_seconds 4.25\n");
    ASSERT_CONTAINS(m, "elector_session_healthy 1\n");
    /* buckets 1,2,0,3,0..,1,4: cumulative */
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"0.0005\"} 1\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"0.001\"} 3\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"0.0025\"} 3\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"0.005\"} 6\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"0.5\"} 6\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"1\"} 7\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_bucket{le=\"+Inf\"} 11\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_sum 12.345678901\n");
    ASSERT_CONTAINS(m, "elector_keepalive_rtt_seconds_count 11\n");
    ASSERT_EQ(11, check_histogram(m));
    for (int r = 0; r < ELECTOR_RPC_COUNT_; r++) {
        char want[160];
        snprintf(want, sizeof(want), "elector_etcd_requests_total{method=\"%s\"} %d\n",
                 elector_rpc_name((elector_rpc)r), 100 + r);
        ASSERT_CONTAINS(m, want);
        snprintf(want, sizeof(want), "elector_etcd_errors_total{method=\"%s\"} %d\n",
                 elector_rpc_name((elector_rpc)r), r);
        ASSERT_CONTAINS(m, want);
    }
    ASSERT_CONTAINS(m, "elector_etcd_requests_total{method=\"Range\"} 100\n");
    ASSERT_CONTAINS(m, "elector_etcd_connects_total 3\n");
    ASSERT_CONTAINS(m, "elector_etcd_disconnects_total 2\n");
    ASSERT_EQ('\n', m[strlen(m) - 1]);
    promtool_check(m);
    free(m);
}

TEST(metrics_escape_label_values)
{
    fake_init("we \"said\" C:\\dir\nnext \xc3\xa9 \xff!");
    char *m = tool_metrics_render(&fake.v);
    ASSERT_CONTAINS(m,
                    "elector_is_leader{name=\"we \\\"said\\\" C:\\\\dir\\nnext \xc3\xa9 "
                    "\xef\xbf\xbd!\"} 0\n");
    promtool_check(m);
    free(m);
}

/* ---------------------------------------------------------------- addresses */

TEST(start_rejects_malformed_addresses)
{
    static const char *bad[][2] = {
        {"nonsense:xx", "port 'xx'"},  {"", "invalid HTTP address"},
        {"127.0.0.1:", "port ''"},     {"127.0.0.1:70000", "port '70000'"},
        {"127.0.0.1:-1", "port '-1'"}, {"127.0.0.1:80x", "port '80x'"},
        {"abc", "port 'abc'"},         {"::1:8080", "[ADDR]:PORT"},
        {"[::1]8080", "[IPV6]:PORT"},  {"[::1", "[IPV6]:PORT"},
        {"[]:80", "[IPV6]:PORT"},      {"[127.0.0.1]:80", "cannot resolve '127.0.0.1'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256] = "";
        tool_http *h = tool_http_start(bad[i][0], fake_view, NULL, err, sizeof(err));
        tl_log("'%s': %s", bad[i][0], err);
        ASSERT_NULL(h);
        ASSERT_CONTAINS(err, bad[i][1]);
        char quoted[64];
        snprintf(quoted, sizeof(quoted), "'%s'", bad[i][0]);
        ASSERT_CONTAINS(err, quoted);
    }
}

TEST(start_rejects_a_host_name_too_long)
{
    char addr[400], err[512] = "";
    memset(addr, 'h', 300);
    snprintf(addr + 300, sizeof(addr) - 300, ":8080");
    ASSERT_NULL(tool_http_start(addr, fake_view, NULL, err, sizeof(err)));
    tl_log("%s", err);
    ASSERT_CONTAINS(err, "invalid HTTP address 'hhhh");
    ASSERT_CONTAINS(err, "h:8080': host name too long");
}

TEST(start_reports_a_port_in_use)
{
    fake_init("svc");
    tool_http *a = start_local();
    char addr[64], err[256] = "", want[128];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", tool_http_port(a));
    tool_http *b = tool_http_start(addr, fake_view, NULL, err, sizeof(err));
    tl_log("%s", err);
    ASSERT_NULL(b);
    snprintf(want, sizeof(want), "cannot listen on %s: ", addr);
    ASSERT_CONTAINS(err, want);
    ASSERT_CONTAINS(err, strerror(EADDRINUSE));
    /* ":PORT" and "PORT" mean 127.0.0.1 too */
    snprintf(addr, sizeof(addr), ":%d", tool_http_port(a));
    ASSERT_NULL(tool_http_start(addr, fake_view, NULL, err, sizeof(err)));
    ASSERT_CONTAINS(err, strerror(EADDRINUSE));
    snprintf(addr, sizeof(addr), "%d", tool_http_port(a));
    ASSERT_NULL(tool_http_start(addr, fake_view, NULL, err, sizeof(err)));
    ASSERT_CONTAINS(err, want);
    tool_http_stop(a);
    tool_http_stop(NULL);
}

TEST(start_reports_an_address_not_ours)
{
    char err[256] = "";
    /* TEST-NET-1: not an address of this host */
    ASSERT_NULL(tool_http_start("192.0.2.1:0", fake_view, NULL, err, sizeof(err)));
    tl_log("%s", err);
    ASSERT_CONTAINS(err, "cannot listen on 192.0.2.1:0: ");
    ASSERT_CONTAINS(err, strerror(EADDRNOTAVAIL));
}

TEST(start_accepts_every_address_form)
{
    static const char *ok[] = {"0", ":0", "127.0.0.1:0", "localhost:0", "0.0.0.0:0"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char err[256] = "";
        tool_http *h = tool_http_start(ok[i], fake_view, NULL, err, sizeof(err));
        if (!h) tl_log("'%s': %s", ok[i], err);
        ASSERT_NOT_NULL(h);
        tl_log("'%s' -> %s (port %d)", ok[i], tool_http_addr(h), tool_http_port(h));
        ASSERT_GT(tool_http_port(h), 0);
        ASSERT(strchr(tool_http_addr(h), ':'));
        ASSERT_EQ(tool_http_port(h), atoi(strrchr(tool_http_addr(h), ':') + 1));
        if (i < 3) ASSERT_EQ(0, strncmp(tool_http_addr(h), "127.0.0.1:", 10));
        ASSERT_EQ(-1, tool_http_timeout(h)); /* idle: no timer */
        tool_http_stop(h);
    }
    /* IPv6, where the host has it */
    int s6 = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int have6 = s6 >= 0 && bind(s6, (struct sockaddr *)&a6, sizeof(a6)) == 0;
    if (s6 >= 0) close(s6);
    if (!have6) {
        tl_log("no IPv6 loopback: [::1] skipped");
        return;
    }
    char err[256] = "";
    tool_http *h = tool_http_start("[::1]:0", fake_view, NULL, err, sizeof(err));
    if (!h) tl_log("[::1]:0: %s", err);
    ASSERT_NOT_NULL(h);
    tl_log("[::1]:0 -> %s", tool_http_addr(h));
    ASSERT_EQ(0, strncmp(tool_http_addr(h), "[::1]:", 6));
    char url[64], *out = NULL;
    snprintf(url, sizeof(url), "http://[::1]:%d/healthz", tool_http_port(h));
    fake_init("svc");
    fake.v.session_healthy = true;
    ASSERT_EQ(
        0, run_curl(h, (const char *[]){"-g", "-o", "-", "-w", "%{http_code}", url, NULL},
                    &out));
    ASSERT_STREQ("ok\n200", out);
    free(out);
    tool_http_stop(h);
}

/* ---------------------------------------------------------------- server */

TEST(http_leader_json)
{
    fake_init("svc");
    tool_http *h = start_local();
    resp r = fetch(h, NULL, "/leader");
    ASSERT_EQ(200, r.code);
    ASSERT_STREQ("application/json", r.ctype);
    ASSERT_STREQ("{\"name\":\"svc\",\"leader\":false,\"has_leader\":false}", r.body);
    free(r.body);

    fake_leader(false);
    r = fetch(h, NULL, "/leader");
    ASSERT_EQ(200, r.code);
    ASSERT_STREQ(
        "{\"name\":\"svc\",\"leader\":true,\"key\":\"e/\\u0000\\u00ff\\\"\\n\","
        "\"value\":\"v\xc3\xa9\\u0080\",\"token\":42,\"lease\":\"694d8e1a2b3c4d5e\","
        "\"since\":\"2023-11-14T22:13:20.123Z\",\"since_unix_ms\":1700000000123,"
        "\"since_kind\":\"elected\",\"is_leader\":false,\"has_leader\":true}",
        r.body);
    free(r.body);
    /* The view is taken per request. */
    int calls = fake.calls;
    fake.v.is_leader = true;
    r = fetch(h, NULL, "/leader");
    ASSERT_CONTAINS(r.body, "\"is_leader\":true,\"has_leader\":true}");
    ASSERT_EQ(calls + 1, fake.calls);
    free(r.body);
    tool_http_stop(h);
}

TEST(http_healthz_both_ways)
{
    fake_init("svc");
    tool_http *h = start_local();
    resp r = fetch(h, NULL, "/healthz");
    ASSERT_EQ(503, r.code);
    ASSERT_STREQ("unhealthy\n", r.body);
    free(r.body);
    r = fetch(h, NULL, "/healthz?leader=1");
    ASSERT_EQ(503, r.code);
    ASSERT_STREQ("not leader\n", r.body);
    free(r.body);

    fake.v.session_healthy = true;
    r = fetch(h, NULL, "/healthz");
    ASSERT_EQ(200, r.code);
    ASSERT_STREQ("ok\n", r.body);
    ASSERT_CONTAINS(r.ctype, "text/plain");
    free(r.body);
    r = fetch(h, NULL, "/healthz?leader=1");
    ASSERT_EQ(503, r.code);
    ASSERT_STREQ("not leader\n", r.body);
    free(r.body);

    fake.v.is_leader = true;
    r = fetch(h, NULL, "/healthz?leader=1");
    ASSERT_EQ(200, r.code);
    ASSERT_STREQ("ok\n", r.body);
    free(r.body);
    r = fetch(h, NULL, "/healthz?leader");
    ASSERT_EQ(200, r.code);
    free(r.body);

    fake.v.is_leader = false;
    r = fetch(h, NULL, "/healthz?leader=true");
    ASSERT_EQ(503, r.code);
    free(r.body);
    r = fetch(h, NULL, "/healthz?leader=0"); /* explicitly not asking */
    ASSERT_EQ(200, r.code);
    free(r.body);
    r = fetch(h, NULL, "/healthz?leader=false");
    ASSERT_EQ(200, r.code);
    ASSERT_STREQ("ok\n", r.body);
    free(r.body);

    /* --health-cmd: its state in the body; the status is still the session's. */
    fake.v.health = "unhealthy";
    fake.v.health_failures = 3;
    r = fetch(h, NULL, "/healthz");
    ASSERT_EQ(200, r.code);
    ASSERT_STREQ("ok\nhealth: unhealthy (3 failures)\n", r.body);
    free(r.body);
    fake.v.session_healthy = false;
    fake.v.health = "healthy";
    fake.v.health_failures = 0;
    r = fetch(h, NULL, "/healthz");
    ASSERT_EQ(503, r.code);
    ASSERT_STREQ("unhealthy\nhealth: healthy\n", r.body);
    free(r.body);
    fake.v.health = NULL;
    tool_http_stop(h);
}

TEST(http_unknown_path_and_method)
{
    fake_init("svc");
    tool_http *h = start_local();
    static const char *paths[] = {"/",         "/nope",      "/leader/",
                                  "/metricsx", "/healthz/x", "/LEADER"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        resp r = fetch(h, NULL, paths[i]);
        ASSERT_EQ(404, r.code);
        free(r.body);
    }
    static const char *methods[] = {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        resp r = fetch(h, methods[i], "/leader");
        ASSERT_EQ(405, r.code);
        free(r.body);
    }
    /* A POST with a body, then the server still works. */
    char *out = NULL;
    ASSERT_EQ(0,
              run_curl(h,
                       (const char *[]){"-o", "-", "-w", "%{http_code}", "-d",
                                        "some=form&data=1", url_of(h, "/healthz"), NULL},
                       &out));
    ASSERT_STREQ("method not allowed\n405", out);
    free(out);
    /* A GET with a body: the body is ignored, the GET answered. */
    ASSERT_EQ(0,
              run_curl(h,
                       (const char *[]){"-o", "-", "-w", "%{http_code}", "-X", "GET",
                                        "-d", "ignored=1", url_of(h, "/healthz"), NULL},
                       &out));
    ASSERT_STREQ("unhealthy\n503", out);
    free(out);
    /* The 405 names what is allowed. */
    ASSERT_EQ(
        0, run_curl(h, (const char *[]){"-i", "-X", "PUT", url_of(h, "/metrics"), NULL},
                    &out));
    ASSERT_CONTAINS(out, " 405 ");
    ASSERT_CONTAINS(out, "Allow: GET, HEAD");
    free(out);
    /* HEAD is GET without a body. */
    ASSERT_EQ(0, run_curl(h, (const char *[]){"-I", url_of(h, "/leader"), NULL}, &out));
    ASSERT_CONTAINS(out, " 200 ");
    ASSERT(!strstr(out, "\"name\""));
    free(out);
    tool_http_stop(h);
}

TEST(http_metrics)
{
    fake_init("we \"said\" C:\\dir\nnext");
    fake_leader(true);
    tool_http *h = start_local();
    resp r = fetch(h, NULL, "/metrics");
    ASSERT_EQ(200, r.code);
    ASSERT_STREQ("text/plain; version=0.0.4; charset=utf-8", r.ctype);
    ASSERT_CONTAINS(r.body,
                    "\nelector_is_leader{name=\"we \\\"said\\\" C:\\\\dir\\nnext\"} 1\n");
    ASSERT_CONTAINS(r.body, "elector_etcd_requests_total{method=\"Range\"} 100\n");
    ASSERT_EQ(11, check_histogram(r.body));
    promtool_check(r.body);
    free(r.body);

    fake.v.ka = NULL; /* no session: zeros */
    r = fetch(h, NULL, "/metrics");
    ASSERT_EQ(200, r.code);
    ASSERT_EQ(0, check_histogram(r.body));
    promtool_check(r.body);
    free(r.body);
    tool_http_stop(h);
}

TEST(http_several_requests_on_one_connection)
{
    fake_init("svc");
    fake.v.session_healthy = true;
    tool_http *h = start_local();
    char u1[128], u2[128], u3[128], *out = NULL;
    snprintf(u1, sizeof(u1), "%s", url_of(h, "/healthz"));
    snprintf(u2, sizeof(u2), "%s", url_of(h, "/leader"));
    snprintf(u3, sizeof(u3), "%s", url_of(h, "/metrics"));
    ASSERT_EQ(0, run_curl(h,
                          (const char *[]){"-w", "|%{http_code} %{num_connects}\n", u1,
                                           u2, u3, u1, NULL},
                          &out));
    tl_log("%s", out);
    ASSERT_CONTAINS(
        out,
        "ok\n|200 1\n{\"name\":\"svc\",\"leader\":false,\"has_leader\":false}|200 0\n");
    ASSERT_CONTAINS(out, "elector_etcd_disconnects_total 2\n");
    ASSERT_CONTAINS(out, "\n|200 0\nok\n|200 0\n"); /* /metrics, then /healthz */
    free(out);
    tool_http_stop(h);
}

TEST(http_many_clients_at_once)
{
    fake_init("svc");
    fake_leader(true);
    tool_http *h = start_local();
    /* curl's --parallel: several connections to the server at the same time. */
    const char *args[40];
    int n = 0;
    args[n++] = "-Z";
    args[n++] = "--no-progress-meter";
    args[n++] = "--parallel-max";
    args[n++] = "8";
    args[n++] = "-w";
    args[n++] = "code=%{http_code}\n";
    args[n++] = "-o";
    args[n++] = "/dev/null";
    char urls[16][128];
    for (int i = 0; i < 16; i++) {
        snprintf(urls[i], sizeof(urls[i]), "%s",
                 url_of(h, i % 2 ? "/metrics" : "/leader"));
        args[n++] = urls[i];
    }
    args[n] = NULL;
    char *out = NULL;
    ASSERT_EQ(0, run_curl(h, args, &out));
    int ok = 0;
    for (char *p = out; (p = strstr(p, "code=200\n")); p += 9)
        ok++;
    ASSERT_EQ(16, ok);
    free(out);
    tool_http_stop(h);
}

TEST(http_timer_while_a_connection_is_open)
{
    fake_init("svc");
    tool_http *h = start_local();
    ASSERT_EQ(-1, tool_http_timeout(h)); /* nothing to time */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)tool_http_port(h)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ASSERT_OK(connect(s, (struct sockaddr *)&a, sizeof(a)));
    /* The pending connection makes the fd readable; processing accepts it and
     * arms the idle timeout (5 s). */
    struct pollfd p = {.fd = tool_http_fd(h), .events = POLLIN};
    ASSERT_EQ(1, poll(&p, 1, 5000));
    tool_http_process(h);
    int64_t t = tool_http_timeout(h);
    tl_log("timeout with an idle connection: %lld ms", (long long)t);
    ASSERT_GT(t, 0);
    ASSERT_LE(t, 10000);
    /* The client goes away: the server notices and has no timer again. */
    close(s);
    double end = tl_now() + 5;
    while (tool_http_timeout(h) != -1) {
        ASSERT(tl_now() < end);
        p.revents = 0;
        poll(&p, 1, 100);
        tool_http_process(h);
    }
    tool_http_stop(h);
}
