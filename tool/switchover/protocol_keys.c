/* SPDX-License-Identifier: MIT */
/* Switchover's keys and what an etcd user needs for them (see switchover.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include "switchover/switchover.h"

char *sw_cat(const char *a, const char *b)
{
    char *s;
    return asprintf(&s, "%s%s", a, b) < 0 ? NULL : s;
}

char *sw_request_key(const char *name)
{
    return sw_cat("__elector/switchover/", name);
}

char *sw_member_prefix(const char *name)
{
    char *s;
    return asprintf(&s, "__elector/candidates/%s/", name) < 0 ? NULL : s;
}

/* What an etcd user needs for switchover, for messages about EPERM: the
 * candidates' and the requester's needs are the same two grants. */
void sw_perm_hint(char *buf, size_t cap, const char *user, const char *n)
{
    snprintf(buf, cap,
             "the etcd user '%s' needs readwrite on the prefix __elector/candidates/%s/ "
             "and on the key __elector/switchover/%s (etcdctl role grant-permission "
             "ROLE readwrite --prefix=true __elector/candidates/%s/; etcdctl role "
             "grant-permission ROLE readwrite __elector/switchover/%s)",
             user ? user : "", n, n, n, n);
}
