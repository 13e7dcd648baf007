/* SPDX-License-Identifier: MIT */
/* Membership follows the cluster. With auto_sync_interval_ms set, the client
 * asks the member it is connected to for Cluster.MemberList every interval and
 * replaces its endpoint list by the client URLs of the members (learners and
 * members not started yet left out), like the Go client's AutoSyncInterval.
 * Members replaced one by one (add the new, remove the old) are followed as
 * long as one known member answers between two replacements.
 *
 * Learners (etcd 3.4+ `member add --learner`) refuse most RPCs with "rpc not
 * supported for learner": such a refusal was not executed, so a unary call
 * goes out again, and the connection moves to the next endpoint (counted as a
 * failed endpoint of the round, so a list of learners only backs off). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"

struct elector__autosync {
    elector__timer sync_timer; /* next MemberList */
    bool in_flight;
};

/* ---------------------------------------------------------------- endpoints */

static bool same_ep(const elector__endpoint *a, const elector__endpoint *b)
{
    return a->tls == b->tls && strcmp(a->authority, b->authority) == 0;
}

static int ep_copy(elector__endpoint *dst, const elector__endpoint *src)
{
    dst->host = elector__strdup(src->host);
    dst->port = elector__strdup(src->port);
    dst->authority = elector__strdup(src->authority);
    dst->tls = src->tls;
    return dst->host && dst->port && dst->authority ? 0 : ELECTOR_ENOMEM;
}

/* What auto-sync skipped for its scheme: the cleartext URLs of a TLS client,
 * named in one notice (again only when the set changes, not at every sync). */
typedef struct skipped {
    int unusable;    /* not parsed, or https without TLS set up */
    int cleartext;   /* http:// while the client is TLS only */
    char names[512]; /* the cleartext ones, comma separated (cut if long) */
    size_t names_len;
} skipped;

static void note_cleartext(skipped *sk, const elector__endpoint *ep)
{
    sk->cleartext++;
    if (sk->names_len >= sizeof(sk->names)) return;
    int w = snprintf(sk->names + sk->names_len, sizeof(sk->names) - sk->names_len,
                     "%shttp://%s", sk->names_len ? ", " : "", ep->authority);
    sk->names_len += w > 0 ? (size_t)w : 0;
}

/* The usable endpoints among urls[0..n-1], parsed into eps (room for n), each
 * once; returns how many, and counts in *sk those that cannot be used;
 * ELECTOR_ENOMEM if one could not be parsed for want of memory (not skipped:
 * the list would lose a member). */
static int usable_eps(const elector_etcd *e, const char *const *urls, int n,
                      elector__endpoint *eps, skipped *sk)
{
    bool tls_default = e->s_cacert || e->s_cert || e->cfg.require_tls;
    int m = 0;
    for (int i = 0; i < n; i++) {
        elector__endpoint *one = NULL;
        char err[300];
        int rc =
            !urls[i] || strchr(urls[i], ',')
                ? ELECTOR_EINVAL
                : elector__endpoints_parse(urls[i], tls_default, &one, err, sizeof(err));
        if (rc == ELECTOR_ENOMEM) return rc;
        if (rc != 1) {
            sk->unusable++;
            continue;
        }
        bool dup = false;
        for (int k = 0; k < m; k++)
            dup |= same_ep(&eps[k], one);
        /* A client set up for TLS never moves to cleartext: its password and
         * token would go out unencrypted. One set up without TLS has no TLS
         * context (elector__etcd_new() makes one only for a TLS list): it
         * cannot use an https:// member. */
        bool wrong_scheme = one->tls != e->tls_only;
        if (!dup && wrong_scheme && one->tls) sk->unusable++;
        if (!dup && wrong_scheme && !one->tls) note_cleartext(sk, one);
        if (dup || wrong_scheme) {
            elector__endpoints_free(one, 1);
            continue;
        }
        eps[m++] = *one;
        free(one); /* its strings moved to eps[m - 1] */
    }
    return m;
}

/* One notice for the cleartext URLs skipped, when they differ from the last
 * ones told (FNV-1a of their names; 0: none told). */
static void tell_cleartext(elector_etcd *e, const skipped *sk)
{
    uint64_t h = 0;
    if (sk->cleartext) {
        h = 1469598103934665603ull;
        for (size_t i = 0; i < sk->names_len; i++)
            h = (h ^ (unsigned char)sk->names[i]) * 1099511628211ull;
    }
    if (h == e->cleartext_told) return;
    e->cleartext_told = h;
    if (sk->cleartext)
        elector__notice(e, 0,
                        "endpoint auto-sync: %d cleartext client URL%s skipped (%s): the "
                        "client uses TLS and takes https:// URLs only",
                        sk->cleartext, sk->cleartext > 1 ? "s" : "", sk->names);
}

/* The notice of a sync that changed the list: the endpoints now in use. */
static void tell_synced(elector_etcd *e, const skipped *sk)
{
    char list[1024];
    size_t off = 0;
    list[0] = 0;
    for (int i = 0; i < e->nep && off < sizeof(list); i++)
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s%s", i ? "," : "",
                                e->eps[i].tls ? "https://" : "", e->eps[i].authority);
    elector__notice(e, 0, "endpoints synced from the cluster's member list: %s%s", list,
                    sk->unusable ? " (some client URLs skipped: unusable)" : "");
}

int elector__endpoints_replace(elector_etcd *e, const char *const *urls, int n, char *why,
                               size_t cap)
{
    snprintf(why, cap, "out of memory");
    elector__endpoint *eps = calloc((size_t)n + 1, sizeof(*eps));
    if (!eps) return ELECTOR_ENOMEM;
    skipped sk = {0};
    int m = usable_eps(e, urls, n, eps, &sk);
    if (m >= 0) tell_cleartext(e, &sk);
    if (m <= 0) {
        elector__endpoints_free(eps, n); /* the entries not filled are zeroed */
        if (m < 0) return m;
        snprintf(why, cap, "no usable client URL among the %d given%s", n,
                 sk.cleartext ? " (TLS only: the cleartext ones skipped)" : "");
        return ELECTOR_EINVAL;
    }
    /* The endpoint in use (or to be tried next) keeps its place: the
     * connection stays; one no longer listed stays at the end until the
     * connection ends (the first sync after that drops it). */
    const elector__endpoint *cur = &e->eps[e->ep];
    int at = -1;
    for (int i = 0; i < m; i++)
        if (same_ep(&eps[i], cur)) at = i;
    if (at < 0 && e->cstate != C_IDLE) {
        if (ep_copy(&eps[m], cur)) {
            elector__endpoints_free(eps, m + 1);
            return ELECTOR_ENOMEM;
        }
        at = m++;
    }
    /* Compared with the endpoint kept: else a connection to an endpoint the
     * members spell otherwise (127.0.0.1 for localhost) made every sync a
     * change, with a notice each time. */
    bool changed = m != e->nep;
    for (int i = 0; !changed && i < m; i++)
        changed = !same_ep(&eps[i], &e->eps[i]);
    if (!changed) {
        elector__endpoints_free(eps, m);
        return 0;
    }
    elector__endpoints_free(e->eps, e->nep);
    e->eps = eps;
    e->nep = m;
    e->ep = at < 0 ? 0 : at;
    e->round_failures = 0;
    e->stats.endpoint_syncs++;
    e->settings_gen++;
    tell_synced(e, &sk);
    return 0;
}

/* ---------------------------------------------------------------- auto-sync */

static void sync_arm(elector_etcd *e);

static void members_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)ud;
    struct elector__autosync *a = e->autosync;
    if (!a) return;
    a->in_flight = false;
    if (e->life.closed) return;
    sync_arm(e);
    if (err) return; /* next time; the connection's own errors say why */
    const Etcdserverpb__MemberListResponse *r = (const void *)m;
    size_t total = 0;
    for (size_t i = 0; i < r->n_members; i++)
        if (!r->members[i]->islearner) total += r->members[i]->n_clienturls;
    if (total == 0 || total > 1000) return; /* nothing usable: keep the list */
    const char **urls = calloc(total, sizeof(*urls));
    if (!urls) return;
    int n = 0;
    for (size_t i = 0; i < r->n_members; i++) {
        const Etcdserverpb__Member *mb = r->members[i];
        if (mb->islearner) continue; /* refuses most RPCs */
        for (size_t k = 0; k < mb->n_clienturls; k++)
            urls[n++] = mb->clienturls[k];
    }
    char why[300];
    int rc = elector__endpoints_replace(e, urls, n, why, sizeof(why));
    if (rc) elector__notice(e, rc, "endpoint auto-sync: %s", why);
    free(urls);
}

static void sync_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_etcd *e = ud;
    struct elector__autosync *a = e->autosync;
    /* Only over a connection that is up: a sync must not make one, and with
     * none up the list cannot be refreshed anyway. */
    if (a->in_flight || e->cstate != C_READY || e->draining) {
        sync_arm(e);
        return;
    }
    Etcdserverpb__MemberListRequest req = ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
    a->in_flight = true;
    if (elector__call_start(e, ELECTOR_RPC_MEMBER_LIST, &req.base, NULL, members_done,
                            NULL, NULL)) {
        a->in_flight = false;
        sync_arm(e);
    }
}

static void sync_arm(elector_etcd *e)
{
    struct elector__autosync *a = e->autosync;
    elector__timer_arm(e, &a->sync_timer,
                       elector__now_ms() + e->cfg.auto_sync_interval_ms, sync_fired, e);
}

int elector__autosync_start(elector_etcd *e)
{
    if (e->cfg.auto_sync_interval_ms <= 0) return 0;
    e->autosync = calloc(1, sizeof(*e->autosync));
    if (!e->autosync) return elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
    sync_arm(e);
    return 0;
}

void elector__autosync_free(elector_etcd *e)
{
    struct elector__autosync *a = e->autosync;
    if (!a) return;
    elector__timer_disarm(e, &a->sync_timer);
    free(a);
    e->autosync = NULL;
}

/* ---------------------------------------------------------------- learners */

static void leave_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_etcd *e = ud;
    if (e->cstate != C_READY || e->stats.connects != e->leave_serial) return;
    /* Counted as an endpoint that failed to connect: a round of learners only
     * backs off instead of spinning. */
    e->cstate = C_SETTINGS;
    elector__conn_fail(e, ELECTOR_EUNAVAILABLE,
                       "the member is a learner (rpc not supported for learner): "
                       "trying the next endpoint");
}

void elector__learner_leave_arm(elector_etcd *e)
{
    /* The refused call is queued again: it must not go back to this connection
     * before the timer leaves it (it would then be failed as possibly
     * executed). Due at the pass's own time: it runs in this pass. */
    elector__timer_arm(e, &e->leave_timer, e->now_ms, leave_fired, e);
}
