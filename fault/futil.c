/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the fault-suite programs; see futil.h. */
#define _GNU_SOURCE
#include "futil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

char *fu_addr_snapshot(void)
{
    struct ifaddrs *ifa;
    if (getifaddrs(&ifa) != 0) return NULL;
    size_t cap = 4096, n = 0;
    char *out = malloc(cap);
    for (struct ifaddrs *i = ifa; out && i; i = i->ifa_next) {
        if (!i->ifa_addr) continue;
        int fam = i->ifa_addr->sa_family;
        char a[INET6_ADDRSTRLEN] = "";
        if (fam == AF_INET)
            inet_ntop(fam, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, a,
                      sizeof a);
        else if (fam == AF_INET6)
            inet_ntop(fam, &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr, a,
                      sizeof a);
        else
            continue;
        size_t need = strlen(i->ifa_name) + strlen(a) + 3;
        if (n + need >= cap) {
            char *b = realloc(out, cap *= 2);
            if (!b) {
                free(out);
                out = NULL;
                break;
            }
            out = b;
        }
        n += (size_t)snprintf(out + n, cap - n, "%s %s\n", i->ifa_name, a);
    }
    freeifaddrs(ifa);
    if (out && n == 0) out[0] = '\0';
    return out;
}

static bool addr_is_loopback(const char *a)
{
    struct in_addr v4;
    struct in6_addr v6;
    if (inet_pton(AF_INET, a, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, a, &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
    return false; /* not an address: counted */
}

/* Whether the text holds line (len bytes, no newline) as a whole line. */
static bool has_line(const char *text, const char *line, size_t len)
{
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && !memcmp(p, line, len)) return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

int fu_addr_gained(const char *before, const char *now, char *out, size_t cap)
{
    int count = 0;
    size_t o = 0;
    if (cap) out[0] = '\0';
    for (const char *p = now; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *sp = memchr(p, ' ', n);
        char addr[INET6_ADDRSTRLEN + 1] = "";
        size_t an = sp ? n - (size_t)(sp + 1 - p) : 0;
        if (sp && an < sizeof addr) memcpy(addr, sp + 1, an);
        addr[an < sizeof addr ? an : 0] = '\0';
        if (n && !has_line(before, p, n) && !addr_is_loopback(addr)) {
            count++;
            if (cap > o + 1) {
                int w = snprintf(out + o, cap - o, "%s%.*s", o ? "; " : "", (int)n, p);
                if (w > 0) o = o + (size_t)w < cap ? o + (size_t)w : cap - 1;
            }
        }
        p = e ? e + 1 : NULL;
    }
    return count;
}
