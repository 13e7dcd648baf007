/* SPDX-License-Identifier: MIT */
/* Endpoint list parsing: "host:port", "http://host:port", "https://host:port",
 * "[v6]:port". A bad entry is refused with a message that names it, before any
 * connection is tried. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include "transport_private.h"

/* Splits "host:port" or "[v6]:port" in place (p is changed) into its host and
 * its port, a number from 1 to 65535 in digits only; false if p is neither. */
static bool split_host_port(char *p, char **host, char **port)
{
    char *colon;
    *host = p;
    if (*p == '[') {
        char *close = strchr(p, ']');
        if (!close || close[1] != ':') return false;
        *close = 0;
        *host = p + 1;
        colon = close + 1;
    } else {
        colon = strrchr(p, ':');
        if (!colon || strchr(p, ':') != colon) return false;
        *colon = 0;
    }
    *port = colon + 1;
    long v = 0;
    for (const char *d = *port; *d && v <= 65535; d++) {
        if (*d < '0' || *d > '9') return false; /* no sign, no blanks */
        v = v * 10 + (*d - '0');
    }
    return **host && **port && v >= 1 && v <= 65535;
}

static int parse_one(const char *s, size_t n, bool tls_default, elector__endpoint *ep,
                     char *err, size_t cap)
{
    char item[512];
    if (n == 0 || n >= sizeof(item)) {
        snprintf(err, cap, "empty or overlong endpoint in the endpoint list");
        return ELECTOR_EINVAL;
    }
    memcpy(item, s, n);
    item[n] = 0;
    char *p = item;
    ep->tls = tls_default;
    if (strncmp(p, "http://", 7) == 0) {
        ep->tls = false;
        p += 7;
    } else if (strncmp(p, "https://", 8) == 0) {
        ep->tls = true;
        p += 8;
    } else if (strstr(p, "://")) {
        snprintf(err, cap, "endpoint '%s': unsupported scheme (use http:// or https://)",
                 item);
        return ELECTOR_EINVAL;
    }
    size_t plen = strlen(p);
    if (plen > 0 && p[plen - 1] == '/') p[--plen] = 0; /* tolerate "http://h:p/" */
    char *host, *port;
    if (!split_host_port(p, &host, &port)) {
        snprintf(err, cap,
                 "endpoint '%.*s': expected host:port, http://host:port or "
                 "https://host:port with a port from 1 to 65535",
                 (int)n, s);
        return ELECTOR_EINVAL;
    }
    ep->host = elector__strdup(host);
    ep->port = elector__strdup(port);
    ep->authority = malloc(strlen(host) + strlen(port) + 4);
    if (!ep->host || !ep->port || !ep->authority) {
        snprintf(err, cap, "out of memory");
        return ELECTOR_ENOMEM;
    }
    sprintf(ep->authority, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
    return 0;
}

int elector__endpoints_parse(const char *list, bool tls_default, elector__endpoint **out,
                             char *err, size_t cap)
{
    *out = NULL;
    if (!list || !*list) {
        snprintf(err, cap, "no endpoints given");
        return ELECTOR_EINVAL;
    }
    int n = 1;
    for (const char *c = list; *c; c++)
        n += *c == ',';
    elector__endpoint *eps = calloc((size_t)n, sizeof(*eps));
    if (!eps) {
        snprintf(err, cap, "out of memory");
        return ELECTOR_ENOMEM;
    }
    const char *s = list;
    for (int i = 0; i < n; i++) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        while (len && (*s == ' '))
            s++, len--;
        while (len && s[len - 1] == ' ')
            len--;
        int rc = parse_one(s, len, tls_default, &eps[i], err, cap);
        if (rc) {
            elector__endpoints_free(eps, n);
            return rc;
        }
        s = comma ? comma + 1 : s + len;
    }
    *out = eps;
    return n;
}

void elector__endpoints_free(elector__endpoint *eps, int n)
{
    for (int i = 0; eps && i < n; i++) {
        free(eps[i].host);
        free(eps[i].port);
        free(eps[i].authority);
    }
    free(eps);
}

bool elector__endpoint_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    return strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0;
}
