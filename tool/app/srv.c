/* SPDX-License-Identifier: MIT */
/* DNS SRV discovery of the members (tool/app/srv.h): res_query from libresolv
 * asks; the reply is parsed here, so a canned reply can be unit tested. */
#define _GNU_SOURCE
#include "app/srv.h"
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_priority(const void *a, const void *b)
{
    const tool_srv *x = a, *y = b;
    if (x->priority != y->priority) return x->priority < y->priority ? -1 : 1;
    if (x->weight != y->weight) return x->weight > y->weight ? -1 : 1;
    return 0;
}

int tool_srv_parse(const unsigned char *msg, size_t len, tool_srv *out, int cap,
                   char *err, size_t err_cap)
{
    ns_msg h;
    if (len > 65535 || ns_initparse(msg, (int)len, &h) != 0) {
        snprintf(err, err_cap, "malformed DNS reply");
        return -1;
    }
    int n = 0, an = ns_msg_count(h, ns_s_an);
    for (int i = 0; i < an; i++) {
        ns_rr rr;
        if (ns_parserr(&h, ns_s_an, i, &rr) != 0) {
            snprintf(err, err_cap, "malformed DNS reply (answer %d)", i + 1);
            return -1;
        }
        if (ns_rr_type(rr) != ns_t_srv || ns_rr_class(rr) != ns_c_in) continue;
        const unsigned char *rd = ns_rr_rdata(rr);
        if (ns_rr_rdlen(rr) < 7) {
            snprintf(err, err_cap, "malformed SRV record (answer %d)", i + 1);
            return -1;
        }
        if (n >= cap) break;
        tool_srv *s = &out[n];
        s->priority = (uint16_t)(rd[0] << 8 | rd[1]);
        s->weight = (uint16_t)(rd[2] << 8 | rd[3]);
        s->port = (uint16_t)(rd[4] << 8 | rd[5]);
        int k = dn_expand(ns_msg_base(h), ns_msg_end(h), rd + 6, s->target,
                          (int)sizeof(s->target));
        if (k < 0 || rd + 6 + k > rd + ns_rr_rdlen(rr)) {
            snprintf(err, err_cap, "malformed SRV target (answer %d)", i + 1);
            return -1;
        }
        size_t tl = strlen(s->target);
        if (tl && s->target[tl - 1] == '.') s->target[tl - 1] = 0;
        /* "." is "no such service here" (RFC 2782); port 0 cannot be dialled. */
        if (!s->target[0] || s->port == 0) continue;
        n++;
    }
    qsort(out, (size_t)n, sizeof(*out), by_priority);
    return n;
}

static int lookup(const char *qname, tool_srv *out, int cap, char *err, size_t err_cap)
{
    unsigned char buf[8192];
    int len = res_query(qname, ns_c_in, ns_t_srv, buf, sizeof(buf));
    if (len < 0) {
        snprintf(err, err_cap, "%.260s: %.30s", qname, hstrerror(h_errno));
        return 0; /* none here; the other name may have some */
    }
    int n = tool_srv_parse(buf, (size_t)len, out, cap, err, err_cap);
    if (n < 0) {
        char why[100];
        snprintf(why, sizeof(why), "%.60s", err);
        snprintf(err, err_cap, "%.190s: %s", qname, why);
    }
    return n;
}

/* A list of endpoints that grows; oom once memory ran out (what it holds
 * then stays as it was). */
typedef struct growing {
    char *s;
    size_t len, cap;
    bool oom;
} growing;

static void add(growing *g, const char *sep, const char *scheme, const tool_srv *r)
{
    char one[300];
    int w = snprintf(one, sizeof(one), "%s%s://%s:%u", g->len ? sep : "", scheme,
                     r->target, r->port);
    if (g->len + (size_t)w + 1 > g->cap) {
        size_t cap = g->cap * 2 + (size_t)w + 1;
        char *bigger = realloc(g->s, cap);
        if (!bigger) {
            g->oom = true;
            return;
        }
        g->s = bigger;
        g->cap = cap;
    }
    memcpy(g->s + g->len, one, (size_t)w + 1);
    g->len += (size_t)w;
}

char *tool_srv_endpoints(const char *domain, const char *name, bool secure_only,
                         char *skipped, size_t skipped_cap, char *err, size_t err_cap)
{
    enum { CAP = 64 };
    static const struct {
        const char *svc, *scheme;
    } kinds[] = {{"_etcd-client-ssl", "https"}, {"_etcd-client", "http"}};
    tool_srv *recs = calloc(CAP, sizeof(*recs));
    growing list = {0}, skip = {0}; /* skip: the http ones, with secure_only */
    char errs[2][300] = {"", ""};
    int n = 0;
    for (int k = 0; k < 2 && recs && n >= 0; k++) {
        char qname[512];
        snprintf(qname, sizeof(qname), "%s%s%s._tcp.%s", kinds[k].svc,
                 name && *name ? "-" : "", name && *name ? name : "", domain);
        n = lookup(qname, recs, CAP, errs[k], sizeof(errs[k]));
        if (n < 0) snprintf(err, err_cap, "%s", errs[k]);
        bool skipping = k == 1 && secure_only;
        for (int i = 0; i < n; i++)
            add(skipping ? &skip : &list, skipping ? ", " : ",", kinds[k].scheme,
                &recs[i]);
    }
    free(recs);
    snprintf(skipped, skipped_cap, "%s", skip.s ? skip.s : "");
    free(skip.s);
    if (!recs || list.oom || skip.oom)
        snprintf(err, err_cap, "out of memory");
    else if (n >= 0 && !list.len && skip.len)
        snprintf(err, err_cap,
                 "no https (_etcd-client-ssl) SRV records for the members of %s (%s), "
                 "and the cleartext ones are not used",
                 domain, errs[0]);
    else if (n >= 0 && !list.len)
        snprintf(err, err_cap, "no SRV records for the members of %s (%s%s%s)", domain,
                 errs[0], errs[1][0] ? "; " : "", errs[1]);
    else if (n >= 0)
        return list.s;
    free(list.s);
    return NULL;
}
