/* SPDX-License-Identifier: MIT */
/* Authentication: with a user configured, each connection sends
 * Auth.Authenticate before anything else, and every request carries the token
 * it returns. The password and the token are credentials: wiped, not just
 * freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"

void elector__drop_token(elector_etcd *e)
{
    if (e->token) explicit_bzero(e->token, strlen(e->token));
    free(e->token);
    e->token = NULL;
}

bool elector__auth_needed(const elector_etcd *e)
{
    return e->s_user && !e->token;
}

/* etcd refuses a request whose token expired before executing it: it may go
 * out again, once, after authenticating again. */
bool elector__auth_may_resend(const call *c, int err)
{
    return err == ELECTOR_ETOKEN && c->etcd->s_user && !c->auth_retried && !c->is_auth;
}

static void auth_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)ud;
    e->authenticating = false;
    if (err == 0) {
        const Etcdserverpb__AuthenticateResponse *r = (const void *)m;
        elector__drop_token(e);
        e->token = elector__strdup(r->token ? r->token : "");
        /* The reply is freed after this callback: wipe its copy too. */
        if (r->token) explicit_bzero(r->token, strlen(r->token));
        return;
    }
    /* Wrong credentials will not heal by waiting: fail what waits on them now.
     * Other failures (connection lost) leave the queue for the next connection,
     * which authenticates again. */
    if (err != ELECTOR_EAUTH && err != ELECTOR_EPERM && err != ELECTOR_EGRPC) return;
    char msg[600];
    snprintf(msg, sizeof(msg), "authentication as '%s' failed: %s", e->s_user, e->errstr);
    elector__calls_fail_queued(e, ELECTOR_EAUTH, msg);
}

void elector__auth_start(elector_etcd *e)
{
    elector__password_refresh(e); /* tls_reload.c */
    Etcdserverpb__AuthenticateRequest req = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
    req.name = e->s_user;
    req.password = e->s_password;
    e->authenticating = true;
    call *c;
    if (elector__call_start(e, ELECTOR_RPC_AUTHENTICATE, &req.base, NULL, auth_done, NULL,
                            &c)) {
        e->authenticating = false;
        return;
    }
    c->is_auth = true;
}
