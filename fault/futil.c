/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the fault-suite programs; see futil.h. */
#include "futil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t fu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void fu_line(int fd, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof buf - 2) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(fd, buf + off, (size_t)n - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return;
        }
        off += (size_t)w;
    }
}

int fu_open_log(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

char *fu_read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf == NULL) break;
        if (n + 1 >= cap) {
            char *b = realloc(buf, cap * 2);
            if (b == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (buf == NULL) return NULL;
    buf[n] = '\0';
    if (len != NULL) *len = n;
    return buf;
}

void fu_msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

long fu_rss_kb(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) return -1;
    buf[r] = '\0';
    long size, resident;
    if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return -1;
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}
