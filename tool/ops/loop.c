/* SPDX-License-Identifier: MIT */
/* The table of watchers (loop.h): poll(2) over the fds they name. */
#include "ops/loop.h"
#include <poll.h>

int tool_loop_add(tool_loop *l, tool_watcher w)
{
    if (l->n >= TOOL_LOOP_MAX || !w.process) return -1;
    l->w[l->n++] = w;
    return 0;
}

int64_t tool_loop_timeout(const tool_loop *l)
{
    int64_t t = -1;
    for (int i = 0; i < l->n; i++) {
        const tool_watcher *w = &l->w[i];
        int64_t wt = w->timeout ? w->timeout(w->ud) : -1;
        if (wt >= 0 && (t < 0 || wt < t)) t = wt;
    }
    return t;
}

void tool_loop_pass(tool_loop *l)
{
    struct pollfd p[TOOL_LOOP_MAX];
    for (int i = 0; i < l->n; i++) {
        const tool_watcher *w = &l->w[i];
        short ev = 0;
        /* A negative fd is skipped by poll, and its revents stay 0. */
        p[i] = (struct pollfd){.fd = w->fd ? w->fd(w->ud, &ev) : -1};
        p[i].events = p[i].fd >= 0 ? ev : 0;
    }
    int64_t t = tool_loop_timeout(l);
    poll(p, (nfds_t)l->n, t < 0 || t > 1000 ? 1000 : (int)t);
    for (int i = 0; i < l->n; i++)
        l->w[i].process(l->w[i].ud, p[i].revents);
}

void tool_loop_run(tool_loop *l, const bool *done)
{
    while (!*done)
        tool_loop_pass(l);
}
