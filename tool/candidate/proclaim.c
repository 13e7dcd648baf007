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
void app_proclaim_pending(struct app_stdin *in, elector_election *el)
{
    if (!in->has_next || !el || !elector_is_leader(el)) return;
    int rc = elector_proclaim(el, in->next, in->next_len);
    if (rc == ELECTOR_EBUSY) return; /* again on PROCLAIMED */
    if (rc)
        tool_log(LOG_WARN, "line from stdin not proclaimed: %s", elector_strerror(rc));
    else
        tool_log(LOG_DEBUG, "proclaiming a line of %zu bytes", in->next_len);
    free(in->next);
    in->next = NULL;
    in->has_next = false;
}

static void take_line(struct app_stdin *in, elector_election *el, const char *data,
                      size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (!copy) {
        tool_log(LOG_ERROR, "out of memory: line from stdin not proclaimed");
        return;
    }
    memcpy(copy, data, len);
    if (in->has_next)
        tool_log(LOG_DEBUG, "a line of %zu bytes replaces one not yet proclaimed", len);
    free(in->next);
    in->next = copy;
    in->next_len = len;
    in->has_next = true;
    if (!el || !elector_is_leader(el))
        tool_log(LOG_DEBUG, "a line of %zu bytes waits until we are elected", len);
}

static void read_stdin(struct app_stdin *in, elector_election *el)
{
    if (in->in_cap - in->in_len < 65536 && in->in_cap < STDIN_MAX) {
        size_t cap = in->in_cap ? in->in_cap * 2 : 65536;
        char *p = realloc(in->in_buf, cap);
        if (p) {
            in->in_buf = p;
            in->in_cap = cap;
        }
    }
    if (in->in_len == in->in_cap) {
        /* Out of memory: no room to read into (a read of 0 bytes would look
         * like the end of stdin). What is there is read and dropped, with
         * the buffered part of a line; the rest of a line cut here is skipped. */
        char tmp[4096];
        ssize_t n = read(0, tmp, sizeof(tmp));
        if (n <= 0) {
            in->in_eof = true;
            tool_log(LOG_DEBUG, "end of stdin");
            return;
        }
        tool_log(LOG_ERROR, "out of memory: line from stdin not proclaimed");
        in->in_len = 0;
        in->in_skip = tmp[n - 1] != '\n';
        return;
    }
    ssize_t n = read(0, in->in_buf + in->in_len, in->in_cap - in->in_len);
    if (n <= 0) {
        in->in_eof = true;
        tool_log(LOG_DEBUG, "end of stdin");
        return;
    }
    in->in_len += (size_t)n;
    char *nl;
    while ((nl = memchr(in->in_buf, '\n', in->in_len))) {
        size_t len = (size_t)(nl - in->in_buf);
        if (in->in_skip)
            in->in_skip = false; /* the tail of an overlong line */
        else
            take_line(in, el, in->in_buf, len);
        memmove(in->in_buf, nl + 1, in->in_len - len - 1);
        in->in_len -= len + 1;
    }
    if (in->in_len == in->in_cap && in->in_cap >= STDIN_MAX) {
        tool_log(LOG_ERROR, "a line on stdin is longer than %u MiB: not proclaimed",
                 STDIN_MAX >> 20);
        in->in_len = 0;
        in->in_skip = true;
    }
    app_proclaim_pending(in, el);
}

static int stdin_fd(void *ud, short *events)
{
    const struct app *a = ud;
    *events = POLLIN;
    return a->in.in_eof ? -1 : 0;
}

static void stdin_process(void *ud, short revents)
{
    struct app *a = ud;
    if (revents) read_stdin(&a->in, a->el);
}

tool_watcher app_stdin_watcher(struct app *a)
{
    return (tool_watcher){a, stdin_fd, NULL, stdin_process};
}
