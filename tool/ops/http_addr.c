/* SPDX-License-Identifier: MIT */
/* The --http endpoint's address: "HOST:PORT", ":PORT", "PORT" or "[V6]:PORT"
 * parsed and resolved, shown back; and the endpoint's error texts. http.c
 * serves on what this file parses. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include "ops/http.h"
#include "ops/http_addr.h"

void tool_http_seterr(char *err, size_t cap, const char *fmt, ...)
{
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- address */

/* "[::1]:8080" or "127.0.0.1:8080" for sa. */
void tool_http_show_addr(const struct sockaddr *sa, socklen_t len, int port, char *out,
                         size_t cap)
{
    char host[64]; /* an IPv6 address with a scope fits */
    if (getnameinfo(sa, len, host, sizeof(host), NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(host, sizeof(host), "?");
    if (sa->sa_family == AF_INET6)
        snprintf(out, cap, "[%s]:%d", host, port);
    else
        snprintf(out, cap, "%s:%d", host, port);
}

static int parse_port(const char *s, int *port)
{
    if (!*s || strlen(s) > 5) return -1;
    int p = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        p = p * 10 + (*s - '0');
    }
    if (p > 65535) return -1;
    *port = p;
    return 0;
}

/* Parses "HOST:PORT", ":PORT", "PORT" or "[V6]:PORT" into ss. HOST may be a
 * name; its first IPv4 address is preferred. */
#define HOST_MAX 256

/* HOST:PORT, [IPV6]:PORT, :PORT or PORT into host (HOST_MAX bytes; 127.0.0.1
 * when empty) and the port's text; numeric: an IPv6 literal. 0 or -1. */
static int split_addr(const char *addr, char *host, const char **port_s, int *numeric,
                      char *err, size_t cap)
{
    *numeric = 0;
    if (!addr || !*addr) {
        tool_http_seterr(err, cap,
                         "invalid HTTP address '': expected HOST:PORT, :PORT or PORT");
        return -1;
    }
    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - addr - 1) >= HOST_MAX ||
            rb == addr + 1) {
            tool_http_seterr(err, cap, "invalid HTTP address '%s': expected [IPV6]:PORT",
                             addr);
            return -1;
        }
        memcpy(host, addr + 1, (size_t)(rb - addr - 1));
        host[rb - addr - 1] = 0;
        *port_s = rb + 2;
        *numeric = 1;
    } else {
        const char *colon = strrchr(addr, ':');
        if (!colon) {
            host[0] = 0;
            *port_s = addr;
        } else {
            if ((size_t)(colon - addr) >= HOST_MAX) {
                tool_http_seterr(err, cap,
                                 "invalid HTTP address '%s': host name too long", addr);
                return -1;
            }
            memcpy(host, addr, (size_t)(colon - addr));
            host[colon - addr] = 0;
            *port_s = colon + 1;
            if (strchr(host, ':')) {
                tool_http_seterr(
                    err, cap,
                    "invalid HTTP address '%s': write IPv6 addresses as [ADDR]:PORT",
                    addr);
                return -1;
            }
        }
        if (!host[0]) snprintf(host, HOST_MAX, "127.0.0.1");
    }
    return 0;
}

/* host's first IPv4 address, else its first IPv6 one, with port, into ss. */
static int resolve_addr(const char *addr, const char *host, int numeric, int port,
                        struct sockaddr_storage *ss, socklen_t *sslen, char *err,
                        size_t cap)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_family = numeric ? AF_INET6 : AF_UNSPEC,
                             .ai_flags = numeric ? AI_NUMERICHOST : 0};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        tool_http_seterr(err, cap, "invalid HTTP address '%s': cannot resolve '%s': %s",
                         addr, host,
                         rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    const struct addrinfo *pick = NULL;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET && !pick) pick = ai;
    }
    for (const struct addrinfo *ai = res; ai && !pick; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET6) pick = ai;
    }
    if (!pick || pick->ai_addrlen > sizeof(*ss)) {
        freeaddrinfo(res);
        tool_http_seterr(err, cap,
                         "invalid HTTP address '%s': no IPv4 or IPv6 address for '%s'",
                         addr, host);
        return -1;
    }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *sslen = pick->ai_addrlen;
    freeaddrinfo(res);
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    return 0;
}

int tool_http_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *sslen,
                         int *portp, char *err, size_t cap)
{
    char host[HOST_MAX];
    const char *port_s;
    int numeric;
    if (split_addr(addr, host, &port_s, &numeric, err, cap)) return -1;
    int port;
    if (parse_port(port_s, &port) != 0) {
        tool_http_seterr(
            err, cap,
            "invalid HTTP address '%s': port '%s' is not a number from 0 to 65535", addr,
            port_s);
        return -1;
    }
    if (resolve_addr(addr, host, numeric, port, ss, sslen, err, cap)) return -1;
    *portp = port;
    return 0;
}

int tool_http_check_addr(const char *addr, char *err, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    int port;
    return tool_http_parse_addr(addr, &ss, &sslen, &port, err, cap);
}
