/* SPDX-License-Identifier: MIT */
/* bench_stats.h — statistics, /proc readers and the per-call report line,
 * shared by every benchmark program: the client-overhead pair (bench_range.c
 * through libelector, bare_range.c without it) and, through bench_util.h, the
 * others.
 *
 * Header-only (static inline), because bench/CMakeLists.txt builds every .c file of
 * bench/ into its own program. Uses nothing of libelector.
 */
#ifndef ELECTOR_BENCH_STATS_H
#define ELECTOR_BENCH_STATS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>

/* ---- statistics over int64 samples (nanoseconds) ---- */

static inline int bu_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile (p in 0..1) of a sorted array. */
static inline int64_t bu_pct(const int64_t *v, size_t n, double p)
{
    if (!n) return 0;
    size_t i = (size_t)(p * (double)n + 0.999999);
    if (i > 0) i--;
    if (i >= n) i = n - 1;
    return v[i];
}

static inline double bu_ms(int64_t ns)
{
    return (double)ns / 1e6;
}

/* ---- /proc ---- */

/* The number after "Field:" on the first line of a /proc file that starts
 * with it (values in kB where the file says so); -1 if absent. */
static inline long bu_proc_field(const char *path, const char *field)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, fl) && line[fl] == ':') {
            v = strtol(line + fl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* A "Field:  N kB" value of /proc/PID/status (pid 0: self); -1 if absent. */
static inline long bu_status_field(pid_t pid, const char *field)
{
    char path[64];
    if (pid)
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    else
        snprintf(path, sizeof(path), "/proc/self/status");
    return bu_proc_field(path, field);
}

/* Pss of /proc/PID/smaps_rollup in kB (shared pages divided among their users). */
static inline long bu_pss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
    return bu_proc_field(path, "Pss");
}

/* user + system CPU time of this process so far, in microseconds */
static inline int64_t bu_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* ---- the client-overhead report ---- */

/* One line for n calls of latencies lat (ns; sorted here), total_ns of wall
 * time and cpu_us of this process's CPU:
 *   bench=NAME calls=N us_mean=.. us_p50=.. us_p90=.. us_p99=.. us_max=..
 *   total_ms=.. cpu_us_per_call=.. rss_kb=.. threads=.. */
static inline void bu_report_calls(const char *name, int64_t *lat, int n,
                                   int64_t total_ns, int64_t cpu_us)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)lat[i];
    qsort(lat, (size_t)n, sizeof(lat[0]), bu_cmp_i64);
    printf(
        "bench=%s calls=%d us_mean=%.1f us_p50=%.1f us_p90=%.1f us_p99=%.1f us_max=%.1f "
        "total_ms=%.1f cpu_us_per_call=%.2f rss_kb=%ld threads=%ld\n",
        name, n, sum / n / 1000.0, (double)bu_pct(lat, (size_t)n, 0.50) / 1000.0,
        (double)bu_pct(lat, (size_t)n, 0.90) / 1000.0,
        (double)bu_pct(lat, (size_t)n, 0.99) / 1000.0, (double)lat[n - 1] / 1000.0,
        (double)total_ns / 1e6, (double)cpu_us / n, bu_status_field(0, "VmRSS"),
        bu_status_field(0, "Threads"));
    fflush(stdout);
}

#endif
