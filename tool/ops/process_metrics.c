/* SPDX-License-Identifier: MIT */
/* process_* metrics from /proc/self (see process_metrics.h). */
#define _GNU_SOURCE
#include "ops/process_metrics.h"
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The system's boot time (unix seconds), from /proc/stat's btime; -1 if unknown. */
static long long boot_time(void)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f) return -1;
    char line[256];
    long long bt = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "btime %lld", &bt) == 1) break;
    fclose(f);
    return bt;
}

/* Entries of /proc/self/fd, less the one the listing itself holds. */
static int64_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int64_t n = 0;
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && atoi(e->d_name) != self) n++;
    closedir(d);
    return n;
}

int tool_process_stats_read(tool_process_stats *out)
{
    memset(out, 0, sizeof(*out));
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f) return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    /* pid (comm) state ...: comm may hold spaces and parentheses; the last ')'
     * ends it. Fields from 3 (state) on, as proc(5) numbers them. */
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    /* Fields 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss (pages). */
    unsigned long long fld[25] = {0};
    int field = 3;
    char *save = NULL;
    for (char *t = strtok_r(p + 1, " \n", &save); t && field <= 24;
         t = strtok_r(NULL, " \n", &save), field++)
        fld[field] = strtoull(t, NULL, 10);
    if (field <= 24) return -1;
    unsigned long long utime = fld[14], stime = fld[15], start = fld[22], vsize = fld[23];
    long long rss = (long long)fld[24];
    long tck = sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    if (tck <= 0) tck = 100;
    if (page <= 0) page = 4096;
    out->cpu_seconds = (double)(utime + stime) / (double)tck;
    long long bt = boot_time();
    out->start_time_s = bt >= 0 ? (double)bt + (double)start / (double)tck : 0;
    out->resident_bytes = rss * page;
    out->virtual_bytes = (int64_t)vsize;
    out->open_fds = open_fds();
    struct rlimit rl;
    out->max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                       ? (int64_t)rl.rlim_cur
                       : -1;
    return 0;
}

char *tool_process_metrics(void)
{
    tool_process_stats s;
    if (tool_process_stats_read(&s) != 0) return strdup("");
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (!m) return NULL;
    fprintf(m,
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in "
            "seconds.\n# TYPE process_cpu_seconds_total counter\n"
            "process_cpu_seconds_total %.9g\n",
            s.cpu_seconds);
    fprintf(m,
            "# HELP process_start_time_seconds Start time of the process since unix "
            "epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
            "process_start_time_seconds %.2f\n",
            s.start_time_s);
    fprintf(m,
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
            "# TYPE process_resident_memory_bytes gauge\n"
            "process_resident_memory_bytes %" PRId64 "\n",
            s.resident_bytes);
    fprintf(m,
            "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
            "# TYPE process_virtual_memory_bytes gauge\n"
            "process_virtual_memory_bytes %" PRId64 "\n",
            s.virtual_bytes);
    if (s.open_fds >= 0)
        fprintf(m,
                "# HELP process_open_fds Number of open file descriptors.\n"
                "# TYPE process_open_fds gauge\nprocess_open_fds %" PRId64 "\n",
                s.open_fds);
    if (s.max_fds >= 0)
        fprintf(m,
                "# HELP process_max_fds Maximum number of open file descriptors.\n"
                "# TYPE process_max_fds gauge\nprocess_max_fds %" PRId64 "\n",
                s.max_fds);
    if (fclose(m) != 0) {
        free(out);
        return NULL;
    }
    return out;
}
