/* SPDX-License-Identifier: MIT */
/* sd_notify's datagram protocol (see notify.h). */
#define _GNU_SOURCE
#include "ops/notify.h"
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct tool_notify {
    int fd;
    struct sockaddr_un addr;
    socklen_t addr_len;
    int64_t watchdog_ms; /* ping interval, 0: off */
    int64_t next_ping_ms;
};

/* A decimal number that fills s, or -1. */
static long long parse_num(const char *s)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return errno || *end || v < 0 ? -1 : v;
}

tool_notify *tool_notify_open(char *err, size_t cap)
{
    *err = 0;
    const char *path = getenv("NOTIFY_SOCKET");
    long long usec = parse_num(getenv("WATCHDOG_USEC"));
    long long wpid = parse_num(getenv("WATCHDOG_PID"));
    bool pid_given = getenv("WATCHDOG_PID") != NULL;
    tool_notify *n = NULL;
    if (!path || !*path) goto unset;
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(n->addr.sun_path) ||
        len < 2) {
        snprintf(err, cap,
                 "$NOTIFY_SOCKET '%.200s' is not an absolute path or an abstract "
                 "name (@NAME) that fits a unix socket address",
                 path);
        goto unset;
    }
    n = calloc(1, sizeof(*n));
    if (!n) {
        snprintf(err, cap, "out of memory");
        goto unset;
    }
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, path, len);
    if (path[0] == '@') n->addr.sun_path[0] = 0; /* abstract: no trailing NUL */
    n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                              (path[0] == '@' ? 0 : 1));
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (n->fd < 0) {
        snprintf(err, cap, "$NOTIFY_SOCKET: cannot create a socket: %s", strerror(errno));
        free(n);
        n = NULL;
        goto unset;
    }
    if (usec > 0 && (!pid_given || wpid == (long long)getpid())) {
        n->watchdog_ms = usec / 2000;
        if (n->watchdog_ms < 1) n->watchdog_ms = 1;
    }
unset:
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    return n;
}

void tool_notify_free(tool_notify *n)
{
    if (!n) return;
    close(n->fd);
    free(n);
}

int tool_notify_send(tool_notify *n, const char *msg)
{
    if (!n) return 0;
    ssize_t w = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL,
                       (const struct sockaddr *)&n->addr, n->addr_len);
    return w < 0 ? -1 : 0;
}

int64_t tool_notify_watchdog_ms(const tool_notify *n)
{
    return n ? n->watchdog_ms : 0;
}

int64_t tool_notify_timeout(const tool_notify *n, int64_t now_ms)
{
    if (!n || !n->watchdog_ms) return -1;
    return n->next_ping_ms > now_ms ? n->next_ping_ms - now_ms : 0;
}

void tool_notify_tick(tool_notify *n, int64_t now_ms)
{
    if (!n || !n->watchdog_ms || now_ms < n->next_ping_ms) return;
    tool_notify_send(n, "WATCHDOG=1");
    n->next_ping_ms = now_ms + n->watchdog_ms;
}
