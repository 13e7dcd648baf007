/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the fault-suite programs (no library dependency). */
#ifndef ELECTOR_FAULT_FUTIL_H
#define ELECTOR_FAULT_FUTIL_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds: the one clock of every log of a run. */
int64_t fu_now_ns(void);

/* Formats one line and appends it to fd with a single write(2), so that a
 * SIGKILL never leaves a half-written or buffered line behind. A '\n' is added. */
void fu_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Opens path for appending (O_CLOEXEC), creating it 0644; -1 on error. */
int fu_open_log(const char *path);

/* Reads a whole file into a malloc'd NUL-terminated buffer; NULL on error.
 * *len (if non-NULL) gets its length. */
char *fu_read_file(const char *path, size_t *len);

/* Sleeps ms milliseconds, restarting after EINTR. */
void fu_msleep(int ms);

/* Resident set size of this process in kB (from /proc/self/statm), -1 on error. */
long fu_rss_kb(void);

/* The addresses of this process's network namespace (getifaddrs), one line
 * "IFNAME ADDRESS" each, IPv4 and IPv6; malloc'd, NULL on error. */
char *fu_addr_snapshot(void);

/* The lines of now that before lacks and whose address is outside 127.0.0.0/8
 * and ::1 (the fault runner's rule for the root namespace: docs/FAULTS.md),
 * copied to out (cap bytes, "; " between them); their count. */
int fu_addr_gained(const char *before, const char *now, char *out, size_t cap);

#endif
