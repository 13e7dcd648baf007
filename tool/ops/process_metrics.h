/* SPDX-License-Identifier: MIT */
/* The standard process_* metrics of Prometheus' client libraries, read from
 * /proc (Linux): what alerts on memory, CPU, restarts and file descriptors use. */
#ifndef ELECTOR_TOOL_PROCESS_METRICS_H
#define ELECTOR_TOOL_PROCESS_METRICS_H

#include <stdint.h>

typedef struct tool_process_stats {
    double cpu_seconds;     /* user + system time */
    double start_time_s;    /* unix time the process started */
    int64_t resident_bytes; /* resident set size */
    int64_t virtual_bytes;  /* virtual memory size */
    int64_t open_fds;       /* open file descriptors */
    int64_t max_fds;        /* RLIMIT_NOFILE's soft limit */
} tool_process_stats;

/* Reads this process's figures; 0, or -1 when /proc/self cannot be read. */
int tool_process_stats_read(tool_process_stats *out);

/* The families process_cpu_seconds_total, process_start_time_seconds,
 * process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds and process_max_fds in the text format (HELP, TYPE, one
 * sample each), as a malloc'd string; "" when /proc cannot be read, NULL when
 * out of memory. */
char *tool_process_metrics(void);

#endif
