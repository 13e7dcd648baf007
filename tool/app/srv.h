/* SPDX-License-Identifier: MIT */
/* --discovery-srv: the members from DNS SRV records, as etcdctl finds them:
 * _etcd-client-ssl._tcp.DOMAIN (https) and _etcd-client._tcp.DOMAIN (http),
 * with -NAME after "client-ssl"/"client" for --discovery-srv-name. */
#ifndef ELECTOR_TOOL_SRV_H
#define ELECTOR_TOOL_SRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tool_srv {
    uint16_t priority, weight, port;
    char target[256]; /* without the final dot */
} tool_srv;

/* Parses a DNS reply (RFC 1035 message, as res_query returns it) and takes its
 * SRV answers, at most cap, sorted by priority, then weight (higher first).
 * Returns how many, or -1 with why in err for a malformed message. */
int tool_srv_parse(const unsigned char *msg, size_t len, tool_srv *out, int cap,
                   char *err, size_t err_cap);

/* The endpoint list ("https://host:port,http://host:port", malloc'd) from the
 * SRV records of domain; NULL with why in err when there is none or DNS fails.
 * secure_only: the _etcd-client-ssl records only; the http ones found are
 * named in skipped ("" when none), so that the caller can say so. */
char *tool_srv_endpoints(const char *domain, const char *name, bool secure_only,
                         char *skipped, size_t skipped_cap, char *err, size_t err_cap);

#endif
