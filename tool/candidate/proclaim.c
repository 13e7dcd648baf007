/* SPDX-License-Identifier: MIT */
/* campaign --proclaim-stdin: each line read from stdin becomes the value. Only
 * the latest line matters: a line that arrives while another is being
 * proclaimed, or before we are elected, replaces the one waiting; once elected
 * (and after each proclaim) the waiting line is proclaimed. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include "app/app.h"

/* Far above etcd's default request limit (1.5 MiB), so etcd, not we, decides
 * what is too large; only a longer line is refused here. */
#define STDIN_MAX (8u << 20)

/* Proclaims the waiting line if we lead and no proclaim is in flight. */
void app_proclaim_pending(struct app *a)
{
    if (!a->has_next || !a->el || !elector_is_leader(a->el)) return;
    int rc = elector_proclaim(a->el, a->next, a->next_len);
    if (rc == ELECTOR_EBUSY) return; /* again on PROCLAIMED */
    if (rc)
        tool_log(LOG_WARN, "line from stdin not proclaimed: %s", elector_strerror(rc));
    else
        tool_log(LOG_DEBUG, "proclaiming a line of %zu bytes", a->next_len);
    free(a->next);
    a->next = NULL;
    a->has_next = false;
}

static void take_line(struct app *a, const char *data, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (!copy) {
        tool_log(LOG_ERROR, "out of memory: line from stdin not proclaimed");
        return;
    }
    memcpy(copy, data, len);
    if (a->has_next)
        tool_log(LOG_DEBUG, "a line of %zu bytes replaces one not yet proclaimed", len);
    free(a->next);
    a->next = copy;
    a->next_len = len;
    a->has_next = true;
    if (!a->el || !elector_is_leader(a->el))
        tool_log(LOG_DEBUG, "a line of %zu bytes waits until we are elected", len);
}

static void read_stdin(struct app *a)
{
    if (a->in_cap - a->in_len < 65536 && a->in_cap < STDIN_MAX) {
        size_t cap = a->in_cap ? a->in_cap * 2 : 65536;
        char *p = realloc(a->in_buf, cap);
        if (p) {
            a->in_buf = p;
            a->in_cap = cap;
        }
    }
    if (a->in_len == a->in_cap) {
        /* Out of memory: no room to read into (a read of 0 bytes would look
         * like the end of stdin). What is there is read and dropped, with
         * the buffered part of a line; the rest of a line cut here is skipped. */
        char tmp[4096];
        ssize_t n = read(0, tmp, sizeof(tmp));
        if (n <= 0) {
            a->in_eof = true;
            tool_log(LOG_DEBUG, "end of stdin");
            return;
        }
        tool_log(LOG_ERROR, "out of memory: line from stdin not proclaimed");
        a->in_len = 0;
        a->in_skip = tmp[n - 1] != '\n';
        return;
    }
    ssize_t n = read(0, a->in_buf + a->in_len, a->in_cap - a->in_len);
    if (n <= 0) {
        a->in_eof = true;
        tool_log(LOG_DEBUG, "end of stdin");
        return;
    }
    a->in_len += (size_t)n;
    char *nl;
    while ((nl = memchr(a->in_buf, '\n', a->in_len))) {
        size_t len = (size_t)(nl - a->in_buf);
        if (a->in_skip)
            a->in_skip = false; /* the tail of an overlong line */
        else
            take_line(a, a->in_buf, len);
        memmove(a->in_buf, nl + 1, a->in_len - len - 1);
        a->in_len -= len + 1;
    }
    if (a->in_len == a->in_cap && a->in_cap >= STDIN_MAX) {
        tool_log(LOG_ERROR, "a line on stdin is longer than %u MiB: not proclaimed",
                 STDIN_MAX >> 20);
        a->in_len = 0;
        a->in_skip = true;
    }
    app_proclaim_pending(a);
}

static int stdin_fd(void *ud, short *events)
{
    const struct app *a = ud;
    *events = POLLIN;
    return a->in_eof ? -1 : 0;
}

static void stdin_process(void *ud, short revents)
{
    if (revents) read_stdin(ud);
}

tool_watcher app_stdin_watcher(struct app *a)
{
    return (tool_watcher){a, stdin_fd, NULL, stdin_process};
}
