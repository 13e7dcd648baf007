/* SPDX-License-Identifier: MIT */
/* Renderers for the HTTP endpoint: GET /leader's JSON, GET /metrics' Prometheus
 * text exposition (format 0.0.4). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ops/http.h"
#include "ops/process_metrics.h"
#include "text/escape.h"
#include "text/json.h"

/* ---------------------------------------------------------------- buffer */

typedef struct mbuf {
    char *p;
    size_t len, cap;
    int oom; /* an append failed: the result is discarded */
} mbuf;

static void put(mbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (tool_buf_reserve(&b->p, b->len, &b->cap, n) != 0) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void puts_(mbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void putf(mbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp)) { /* our formats are short */
        b->oom = 1;
        return;
    }
    put(b, tmp, (size_t)n);
}

/* The buffer as a malloc'd string ("" if empty), or NULL if anything failed. */
static char *finish(mbuf *b)
{
    if (!b->oom && !b->p) put(b, "", 0);
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

static void jstr(mbuf *b, const void *s, size_t n)
{
    if (b->oom) return;
    if (tool_json_str(&b->p, &b->len, &b->cap, s, n) != 0) b->oom = 1;
}

char *tool_leader_json(const tool_view *v)
{
    mbuf b = {0};
    const char *name = v->name ? v->name : "";
    puts_(&b, "{\"name\":");
    jstr(&b, name, strlen(name));
    if (!v->has_leader) {
        puts_(&b, ",\"leader\":false,\"has_leader\":false}");
        return finish(&b);
    }
    puts_(&b, ",\"leader\":true,\"key\":");
    jstr(&b, v->key, v->key_len);
    puts_(&b, ",\"value\":");
    jstr(&b, v->value, v->value_len);
    putf(&b, ",\"token\":%" PRId64 ",\"lease\":\"%" PRIx64 "\"", v->token,
         (uint64_t)v->lease);
    if (v->since_unix_ms > 0) {
        time_t t = (time_t)(v->since_unix_ms / 1000);
        struct tm tm;
        char ts[64];
        if (gmtime_r(&t, &tm) && strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm) > 0)
            putf(&b, ",\"since\":\"%s.%03dZ\"", ts, (int)(v->since_unix_ms % 1000));
    }
    static const char *const kinds[] = {NULL, "elected", "change", "first_seen"};
    if (v->since_unix_ms > 0 && v->since_kind > 0 && v->since_kind <= 3)
        putf(&b, ",\"since_unix_ms\":%" PRId64 ",\"since_kind\":\"%s\"", v->since_unix_ms,
             kinds[v->since_kind]);
    /* "has_leader" says what "leader" says (a leader is known), in a name that
     * cannot be read as "this process leads" (that is "is_leader"); "leader"
     * stays, deprecated, as fields are only ever added (docs/DESIGN.md). */
    putf(&b, ",\"is_leader\":%s,\"has_leader\":true}", v->is_leader ? "true" : "false");
    return finish(&b);
}

/* ---------------------------------------------------------------- Prometheus */

/* A label value: \\, \" and \n escaped; bytes that are not UTF-8 (which the
 * format requires) become U+FFFD. */
static void label_value(mbuf *b, const char *s)
{
    const uint8_t *u = (const uint8_t *)(s ? s : "");
    size_t n = strlen((const char *)u);
    for (size_t i = 0; i < n;) {
        const char *esc = u[i] == '\\'   ? "\\\\"
                          : u[i] == '"'  ? "\\\""
                          : u[i] == '\n' ? "\\n"
                                         : NULL;
        size_t k = esc ? 1 : tool_utf8_seq(u + i, n - i, NULL);
        if (esc)
            puts_(b, esc);
        else if (k == 0)
            puts_(b, "\xef\xbf\xbd"); /* U+FFFD */
        else
            put(b, (const char *)u + i, k);
        i += k ? k : 1;
    }
}

static void family(mbuf *b, const char *name, const char *type, const char *help)
{
    putf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value_double(mbuf *b, double x)
{
    if (isnan(x))
        puts_(b, "NaN");
    else if (isinf(x))
        puts_(b, x > 0 ? "+Inf" : "-Inf");
    else
        putf(b, "%.9g", x);
}

/* us microseconds as exact decimal seconds: 500 -> "0.0005", 1000000 -> "1". */
static void seconds_us(mbuf *b, int64_t us)
{
    char frac[8];
    snprintf(frac, sizeof(frac), "%06" PRId64, us % 1000000);
    size_t n = strlen(frac);
    while (n > 0 && frac[n - 1] == '0')
        frac[--n] = 0;
    if (n)
        putf(b, "%" PRId64 ".%s", us / 1000000, frac);
    else
        putf(b, "%" PRId64, us / 1000000);
}

static void rtt_histogram(mbuf *b, const elector_session_stats *ka)
{
    const char *const h = "elector_keepalive_rtt_seconds";
    family(b, h, "histogram", "Round-trip time of lease keepalives.");
    uint64_t cum = 0;
    for (int i = 0; i < ELECTOR_RTT_BUCKETS - 1; i++) {
        if (ka) cum += ka->rtt_buckets[i];
        putf(b, "%s_bucket{le=\"", h);
        seconds_us(b, elector_rtt_bounds_us[i]);
        putf(b, "\"} %" PRIu64 "\n", cum);
    }
    if (ka) cum += ka->rtt_buckets[ELECTOR_RTT_BUCKETS - 1];
    putf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", h, cum);
    int64_t sum = ka && ka->rtt_sum_ns > 0 ? ka->rtt_sum_ns : 0;
    putf(b, "%s_sum %" PRId64 ".%09" PRId64 "\n", h, sum / 1000000000, sum % 1000000000);
    /* +Inf and _count must agree; the buckets are what the histogram shows. */
    putf(b, "%s_count %" PRIu64 "\n", h, cum);
}

static void per_rpc(mbuf *b, const char *name, const char *help, const uint64_t *counts)
{
    family(b, name, "counter", help);
    for (int r = 0; r < ELECTOR_RPC_COUNT_; r++) {
        const char *m = elector_rpc_name((elector_rpc)r);
        if (!m) continue;
        putf(b, "%s{method=\"", name);
        label_value(b, m);
        putf(b, "\"} %" PRIu64 "\n", counts ? counts[r] : 0);
    }
}

/* For alerts: the build, the leader (as known here) and the process. */
static void alert_metrics(mbuf *b, const tool_view *v)
{
    if (v->version) {
        family(b, "elector_build_info", "gauge",
               "Always 1; the label says which elector this is.");
        puts_(b, "elector_build_info{version=\"");
        label_value(b, v->version);
        puts_(b, "\"} 1\n");
    }
    family(b, "elector_leader_token", "gauge",
           "The leader's fencing token (its key's create revision), 0 if no leader is "
           "known.");
    puts_(b, "elector_leader_token{name=\"");
    label_value(b, v->name);
    putf(b, "\"} %" PRId64 "\n", v->has_leader ? v->token : 0);
    family(b, "elector_leader_since_seconds", "gauge",
           "Unix time the leader became leader as known here (GET /leader's "
           "since_kind), 0 if no leader is known.");
    puts_(b, "elector_leader_since_seconds{name=\"");
    label_value(b, v->name);
    int64_t since = v->has_leader ? v->since_unix_ms : 0;
    putf(b, "\"} %" PRId64 ".%03" PRId64 "\n", since / 1000, since % 1000);
    family(b, "elector_leader_changes_total", "counter",
           "Times the election's leader changed to another key, as this process saw "
           "it (whoever led; elector_leadership_changes_total counts this process's "
           "own transitions).");
    puts_(b, "elector_leader_changes_total{name=\"");
    label_value(b, v->name);
    putf(b, "\"} %" PRIu64 "\n", v->leader_changes);
    char *p = tool_process_metrics();
    if (!p) {
        b->oom = 1;
        return;
    }
    puts_(b, p);
    free(p);
}

char *tool_healthz_body(const tool_view *v)
{
    mbuf b = {0};
    putf(&b, "%s\nhealth: %s", v->session_healthy ? "ok" : "unhealthy", v->health);
    if (v->health_failures) putf(&b, " (%d failures)", v->health_failures);
    puts_(&b, "\n");
    return finish(&b);
}

/* This process: leading, its transitions, start retries, the session, the
 * health check. */
static void self_metrics(mbuf *b, const tool_view *v)
{
    family(b, "elector_is_leader", "gauge",
           "1 while this process leads the election, else 0.");
    puts_(b, "elector_is_leader{name=\"");
    label_value(b, v->name);
    putf(b, "\"} %d\n", v->is_leader ? 1 : 0);

    /* Not elector_leader_changes_total: that one counts the election's leader
     * changing (any candidate), this one this process's own transitions. Both
     * carry name (this one without it until issue 25). */
    family(b, "elector_leadership_changes_total", "counter",
           "Times this process itself became or stopped being leader (its own "
           "transitions; elector_leader_changes_total counts the election's).");
    puts_(b, "elector_leadership_changes_total{name=\"");
    label_value(b, v->name);
    putf(b, "\"} %" PRIu64 "\n", v->leadership_changes);

    family(b, "elector_start_retries_total", "counter",
           "Failed attempts to reach etcd at start (etcd unreachable; elector "
           "retries with backoff unless --fail-fast).");
    putf(b, "elector_start_retries_total %" PRIu64 "\n", v->start_retries);

    family(b, "elector_lease_remaining_seconds", "gauge",
           "Time left until the session's validity deadline, 0 if none.");
    puts_(b, "elector_lease_remaining_seconds ");
    value_double(b, v->lease_remaining_s);
    puts_(b, "\n");

    family(b, "elector_session_healthy", "gauge",
           "1 while the session's lease is provably alive (observe: while connected).");
    putf(b, "elector_session_healthy %d\n", v->session_healthy ? 1 : 0);

    if (v->health) { /* --health-cmd */
        family(b, "elector_health_status", "gauge",
               "The health check's state (--health-cmd): 1 for the current one.");
        static const char *const states[] = {"starting", "healthy", "unhealthy"};
        for (size_t i = 0; i < 3; i++)
            putf(b, "elector_health_status{state=\"%s\"} %d\n", states[i],
                 !strcmp(v->health, states[i]));
        family(b, "elector_health_failures", "gauge",
               "Consecutive failed health checks counted (0 after a pass).");
        putf(b, "elector_health_failures %d\n", v->health_failures);
    }
}

/* etcd's alarms and restores, as campaigns met them. */
static void etcd_event_metrics(mbuf *b, const tool_view *v)
{
    family(b, "elector_etcd_alarm", "gauge",
           "1 while campaigns are refused by an etcd alarm (NOSPACE: the database is "
           "full), else 0.");
    putf(b, "elector_etcd_alarm %d\n", v->alarm_on ? 1 : 0);
    family(b, "elector_etcd_alarm_refusals_total", "counter",
           "Campaigns refused by an etcd alarm (NOSPACE, CORRUPT).");
    putf(b, "elector_etcd_alarm_refusals_total %" PRIu64 "\n", v->alarm_refusals);

    family(b, "elector_etcd_restores_total", "counter",
           "Sessions ended because etcd's revision went back or its cluster ID changed "
           "(restored from a snapshot?).");
    putf(b, "elector_etcd_restores_total %" PRIu64 "\n", v->restores);
}

char *tool_metrics_render(const tool_view *v)
{
    mbuf b = {0};
    self_metrics(&b, v);
    etcd_event_metrics(&b, v);

    rtt_histogram(&b, v->ka);

    const elector_etcd_stats *st = v->etcd;
    per_rpc(&b, "elector_etcd_requests_total",
            "etcd requests sent: unary calls and messages on streams.",
            st ? st->requests : NULL);
    per_rpc(&b, "elector_etcd_errors_total",
            "etcd calls and streams that ended with an error.", st ? st->errors : NULL);

    family(&b, "elector_etcd_connects_total", "counter",
           "Connections to etcd that reached HTTP/2 SETTINGS.");
    putf(&b, "elector_etcd_connects_total %" PRIu64 "\n", st ? st->connects : 0);
    family(&b, "elector_etcd_disconnects_total", "counter",
           "Established connections to etcd that were lost.");
    putf(&b, "elector_etcd_disconnects_total %" PRIu64 "\n", st ? st->disconnects : 0);
    alert_metrics(&b, v);
    return finish(&b);
}
