/* SPDX-License-Identifier: MIT */
/* bench_util.h — helpers shared by the side-by-side benchmark programs
 * (proc_bench.c, herd.c, many.c): summaries, /proc readers, and a scraper for
 * etcd's Prometheus /metrics (grpc_server_msg_received_total per method).
 * Statistics and the per-call report are in bench_stats.h, which the
 * client-overhead programs (bench_range.c, bare_range.c) share.
 *
 * Header-only (static inline), because bench/CMakeLists.txt builds every .c file of
 * bench/ into its own program.
 */
#ifndef ELECTOR_BENCH_UTIL_H
#define ELECTOR_BENCH_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "elector/etcd.h"
#include "bench_stats.h"

static inline void bu_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static inline void *bu_xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) bu_die("out of memory");
    return p;
}

/* CLOCK_MONOTONIC, the clock of events' mono_ns (elector_now_ns() is the
 * deadline clock, CLOCK_BOOTTIME: the two differ by the host's suspended time). */
static inline int64_t bu_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "<fp>n=.. <fp>min_ms=.. <fp>p50_ms=.. ..." (fp: a field-name prefix, may be
 * ""), in milliseconds; sorts v. */
static inline void bu_summary_ms(FILE *f, const char *lead, const char *fp, int64_t *v,
                                 size_t n)
{
    qsort(v, n, sizeof(*v), bu_cmp_i64);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i];
    fprintf(
        f,
        "%s%sn=%zu %smin_ms=%.3f %sp50_ms=%.3f %sp90_ms=%.3f %sp99_ms=%.3f %smax_ms=%.3f "
        "%smean_ms=%.3f",
        lead, fp, n, fp, n ? bu_ms(v[0]) : 0.0, fp, bu_ms(bu_pct(v, n, 0.5)), fp,
        bu_ms(bu_pct(v, n, 0.9)), fp, bu_ms(bu_pct(v, n, 0.99)), fp,
        n ? bu_ms(v[n - 1]) : 0.0, fp, n ? sum / (double)n / 1e6 : 0.0);
}

/* One sample per line, in milliseconds: what the CDF plots read. */
static inline void bu_write_samples(const char *path, const int64_t *v, size_t n)
{
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (!f) bu_die("cannot write %s: %s", path, strerror(errno));
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.3f\n", bu_ms(v[i]));
    fclose(f);
}

/* ---- /proc ---- */

/* CPU time of a process (all its threads) in nanoseconds from
 * /proc/PID/task/TID/schedstat (exact, unlike the tick-based /proc/PID/stat). */
static inline int64_t bu_proc_cpu_ns(pid_t pid)
{
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    int64_t sum = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p2[160];
        snprintf(p2, sizeof(p2), "/proc/%d/task/%.20s/schedstat", (int)pid, de->d_name);
        FILE *f = fopen(p2, "r");
        if (!f) continue;
        long long ns = 0;
        if (fscanf(f, "%lld", &ns) == 1) sum += ns;
        fclose(f);
    }
    closedir(d);
    return sum;
}

/* Resident memory of a process by mapping: "name=kB,..." for the mappings
 * with the most resident memory (file name, [heap], [stack], anon), summed by
 * name, largest first. */
static inline void bu_rss_by_mapping(pid_t pid, char *out, size_t outsz, int top)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    enum { MAXN = 128 };
    char names[MAXN][64];
    long kb[MAXN];
    int n = 0, cur = -1;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        unsigned long a, b;
        char perms[8];
        int off = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s%n", &a, &b, perms, &off) == 3) {
            const char *nm = line + off;
            while (*nm == ' ')
                nm++;
            char name[64];
            const char *base = strrchr(nm, '/');
            snprintf(name, sizeof(name), "%s", *nm ? (base ? base + 1 : nm) : "anon");
            name[strcspn(name, "\n")] = 0;
            if (!name[0]) snprintf(name, sizeof(name), "anon");
            cur = -1;
            for (int i = 0; i < n; i++)
                if (!strcmp(names[i], name)) cur = i;
            if (cur < 0 && n < MAXN) {
                cur = n++;
                snprintf(names[cur], sizeof(names[0]), "%s", name);
                kb[cur] = 0;
            }
        } else if (!strncmp(line, "Rss:", 4) && cur >= 0) {
            kb[cur] += strtol(line + 4, NULL, 10);
        }
    }
    fclose(f);
    size_t len = 0;
    for (int k = 0; k < top && k < n; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (kb[i] >= 0 && (best < 0 || kb[i] > kb[best])) best = i;
        if (best < 0 || kb[best] <= 0) break;
        int w = snprintf(out + len, outsz - len, "%s%s=%ld", len ? "," : "", names[best],
                         kb[best]);
        if (w < 0 || (size_t)w >= outsz - len) break;
        len += (size_t)w;
        kb[best] = -1;
    }
}

static inline int64_t bu_self_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* ---- etcd /metrics: grpc_server_msg_received_total ---- */

#define BU_MAX_METHODS 96
typedef struct bu_msgs {
    int n;
    char method[BU_MAX_METHODS][40];
    double count[BU_MAX_METHODS];
} bu_msgs;

static inline void bu_msgs_add(bu_msgs *m, const char *method, double v)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->method[i], method)) {
            m->count[i] += v;
            return;
        }
    if (m->n == BU_MAX_METHODS)
        bu_die("more than %d gRPC methods in /metrics", BU_MAX_METHODS);
    snprintf(m->method[m->n], sizeof(m->method[0]), "%s", method);
    m->count[m->n++] = v;
}

static inline double bu_msgs_get(const bu_msgs *m, const char *method)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->method[i], method)) return m->count[i];
    return 0;
}

/* Sum of all methods but LeaseKeepAlive (its traffic depends on time, not on
 * leadership changes). */
static inline double bu_msgs_total_no_ka(const bu_msgs *m)
{
    double s = 0;
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->method[i], "LeaseKeepAlive")) s += m->count[i];
    return s;
}

/* GET http://hostport/metrics with HTTP/1.0 and add every
 * grpc_server_msg_received_total{...grpc_method="X"...} V to m. */
/* GET /metrics of one member: a malloc'd, NUL-terminated body (with the HTTP
 * head), or NULL. */
static inline char *bu_fetch_metrics(const char *hostport)
{
    char host[256];
    snprintf(host, sizeof(host), "%s", hostport);
    if (!strncmp(host, "http://", 7)) memmove(host, host + 7, strlen(host + 7) + 1);
    char *colon = strrchr(host, ':');
    if (!colon) return NULL;
    *colon = 0;
    const char *port = colon + 1;
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &ai) || !ai) return NULL;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return NULL;
    }
    freeaddrinfo(ai);
    char req[512];
    int rl = snprintf(req, sizeof(req), "GET /metrics HTTP/1.0\r\nHost: %s:%s\r\n\r\n",
                      host, port);
    if (write(fd, req, (size_t)rl) != rl) {
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 18, len = 0;
    char *buf = malloc(cap);
    if (!buf) bu_die("out of memory");
    for (;;) {
        if (len + 4096 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) bu_die("out of memory");
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = 0;
    return buf;
}

/* The sum of a gauge or counter without labels (e.g.
 * "etcd_debugging_mvcc_slow_watcher_total") over a comma-separated list of
 * members; -1 if a member could not be read. */
static inline double bu_gauge(const char *list, const char *metric)
{
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", list);
    double sum = 0;
    size_t ml = strlen(metric);
    for (char *tok = strtok(tmp, ","); tok; tok = strtok(NULL, ",")) {
        char *buf = bu_fetch_metrics(tok);
        if (!buf) return -1;
        for (char *line = buf; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            if (!strncmp(line, metric, ml) && line[ml] == ' ')
                sum += strtod(line + ml + 1, NULL);
            line = nl ? nl + 1 : NULL;
        }
        free(buf);
    }
    return sum;
}

static inline int bu_scrape_one(const char *hostport, bu_msgs *m)
{
    char *buf = bu_fetch_metrics(hostport);
    if (!buf) return -1;
    static const char name[] = "grpc_server_msg_received_total{";
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!strncmp(line, name, sizeof(name) - 1)) {
            char *meth = strstr(line, "grpc_method=\"");
            char *close_b = strchr(line, '}');
            if (meth && close_b) {
                meth += 13;
                char *q = strchr(meth, '"');
                if (q) {
                    *q = 0;
                    bu_msgs_add(m, meth, strtod(close_b + 1, NULL));
                }
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
    return 0;
}

/* Sums over a comma-separated list of members' client URLs. */
static inline void bu_scrape(const char *list, bu_msgs *m)
{
    memset(m, 0, sizeof(*m));
    char *copy = strdup(list), *save = NULL;
    if (!copy) bu_die("out of memory");
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (bu_scrape_one(t, m)) bu_die("cannot scrape http://%s/metrics", t);
    free(copy);
}

/* after - before, per method (methods of `after`). */
static inline void bu_msgs_diff(const bu_msgs *after, const bu_msgs *before, bu_msgs *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < after->n; i++)
        bu_msgs_add(out, after->method[i],
                    after->count[i] - bu_msgs_get(before, after->method[i]));
}

/* Client-side requests of one or more clients, without keepalives. */
static inline uint64_t bu_client_reqs(elector_etcd *const *c, int n, bool with_ka)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++) {
        elector_etcd_stats st;
        elector_etcd_get_stats(c[i], &st);
        for (int r = 0; r < ELECTOR_RPC_COUNT_; r++)
            if (with_ka || r != ELECTOR_RPC_LEASE_KEEPALIVE) s += st.requests[r];
    }
    return s;
}

#endif
