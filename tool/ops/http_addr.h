/* SPDX-License-Identifier: MIT */
/* The --http endpoint's address (http_addr.c), shared by http.c, which
 * listens on it. */
#ifndef ELECTOR_TOOL_HTTP_ADDR_H
#define ELECTOR_TOOL_HTTP_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* A message into err (cap bytes); nothing when err is NULL. */
void tool_http_seterr(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "HOST:PORT", ":PORT", "PORT" or "[V6]:PORT" into ss and *port; 0 or -1 with
 * err. */
int tool_http_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *sslen,
                         int *port, char *err, size_t cap);

/* "[::1]:8080" or "127.0.0.1:8080" for sa into out. */
void tool_http_show_addr(const struct sockaddr *sa, socklen_t len, int port, char *out,
                         size_t cap);

#endif
