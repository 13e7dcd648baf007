/* SPDX-License-Identifier: MIT */
/* run and lock with a command: the supervised command (tool/supervise/ owns
 * its tree), its environment, why it ended, and campaigning again (--restart). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "app/app.h"

/* Runs in the guard, once the command's tree is gone, when elector died or the
 * deadline passed: revoke the lease on a connection of the guard's own so the
 * next candidate leads at once instead of after the TTL. If etcd cannot be
 * reached, the TTL ends the lease. */
static void release_lease(void *ud)
{
    struct app *a = ud;
    tool_log(LOG_INFO, "guard: %s and its descendants are gone; revoking lease %llx",
             a->o->argv[0], (unsigned long long)a->sup.child_lease);
    elector_etcd *e = app_make_client(a->o, &a->creds);
    int rc = !e ? ELECTOR_ENOMEM : elector_etcd_err(e);
    /* The library's revoke path (the release helper's too): transient failures
     * are retried for the dial timeout, or until the deadline if later. */
    int64_t until = elector_now_ns() + app_dial_ms(a->o) * 1000000;
    if (a->sup.child_deadline > until) until = a->sup.child_deadline;
    if (!rc) rc = elector_etcd_lease_revoke_sync(e, a->sup.child_lease, until);
    if (rc)
        tool_log(LOG_WARN,
                 "guard: lease %llx could not be revoked (%s); it ends by its TTL",
                 (unsigned long long)a->sup.child_lease, elector_strerror(rc));
    else /* the fault suite looks for "guard: ... released" */
        tool_log(LOG_INFO, "guard: lease %llx released: the next candidate may lead now",
                 (unsigned long long)a->sup.child_lease);
    elector_etcd_free(e);
}

/* What the command's environment gains (NULL-ended in env[6] at most): run:
 * ELECTOR_*; lock: also etcdctl lock's ETCD_LOCK_KEY and ETCD_LOCK_REV (the
 * key's create revision: the revision at which the lock was taken when nobody
 * held it, and a fencing token like ELECTOR_TOKEN). false if out of memory
 * (what was made freed). */
static bool child_env(char *env[7], const tool_opts *o, const elector_event *ev)
{
    int n = 0;
    bool ok =
        asprintf(&env[n++], "ELECTOR_NAME=%s", o->name) >= 0 &&
        asprintf(&env[n++], "ELECTOR_KEY=%.*s", (int)ev->key_len,
                 (const char *)ev->key) >= 0 &&
        asprintf(&env[n++], "ELECTOR_TOKEN=%lld", (long long)ev->token) >= 0 &&
        asprintf(&env[n++], "ELECTOR_LEASE=%llx", (unsigned long long)ev->lease) >= 0;
    if (ok && o->cmd == CMD_LOCK)
        ok = asprintf(&env[n++], "ETCD_LOCK_KEY=%.*s", (int)ev->key_len,
                      (const char *)ev->key) >= 0 &&
             asprintf(&env[n++], "ETCD_LOCK_REV=%lld", (long long)ev->token) >= 0;
    for (int i = 0; !ok && i < n; i++) {
        free(env[i]);
        env[i] = NULL;
    }
    env[ok ? n : 0] = NULL;
    return ok;
}

void app_start_child(struct app *a, const elector_event *ev)
{
    char *env[7] = {0};
    char err[256] = "out of memory";
    tool_child *c = NULL;
    if (child_env(env, a->o, ev)) {
        a->sup.child_deadline = elector_session_deadline_ns(a->s);
        a->sup.child_lease = ev->lease;
        tool_child_spec sp = {.argv = a->o->argv,
                              .env_add = env,
                              .deadline_ns = a->sup.child_deadline,
                              .grace_ns = a->o->grace_ms * 1000000,
                              .release = release_lease,
                              .ud = a,
                              .pid_ns = a->o->pid_ns,
                              /* elector watches the guard: a ping every TTL/6,
                               * an answer within TTL/3, so that a guard that
                               * stopped answering is found, and the tree
                               * killed, within TTL/2: before the lease
                               * (renewed every TTL/3) can expire. */
                              .ping_ns = app_ttl_ms(a->o) * 1000000 / 6,
                              .answer_ns = app_ttl_ms(a->o) * 1000000 / 3};
        c = tool_child_start(&sp, err, sizeof(err));
        for (int i = 0; env[i]; i++)
            free(env[i]);
    }
    if (!c) {
        /* A command that cannot start: resign (the key goes), exit 1. */
        tool_log(LOG_ERROR, "cannot start %s: %s", a->o->argv[0], err);
        a->exit_code = EXIT_ERROR;
        elector_resign(a->el);
        a->stopping = true;
        return;
    }
    a->sup.child = c;
    a->sup.child_start_ms = app_now_ms();
    a->sup.child_noted = false;
    tool_log(LOG_INFO, "started %s (token %lld)", a->o->argv[0], (long long)ev->token);
}

void app_stop_child(struct app_sup *sup, int64_t grace_ms)
{
    if (!sup->child) return;
    int64_t soon = elector_now_ns() + grace_ms * 1000000;
    int64_t kill_at = sup->child_deadline < soon ? sup->child_deadline : soon;
    tool_child_stop(sup->child, kill_at);
}

/* Why the command ended, said once on stderr; the exit status follows from it. */
static void child_ended(struct app *a, int st, tool_child_cause why)
{
    const char *cmd = a->o->argv[0];
    const char *held = a->o->cmd == CMD_LOCK ? "lock" : "leadership";
    if (why == TOOL_CHILD_DEADLINE) {
        if (a->exit_code != EXIT_LOST)
            tool_log(LOG_ERROR,
                     "%s lost: the validity deadline passed before a renewal "
                     "reached elector; %s was stopped (status %d)",
                     held, cmd, st);
        a->exit_code = EXIT_LOST;
    } else if (why == TOOL_CHILD_GUARD_HUNG) {
        tool_log(LOG_ERROR,
                 "%s given up: the guard process did not answer (stopped or stuck); "
                 "elector killed %s, its descendants and the guard",
                 held, cmd);
        a->exit_code = EXIT_LOST;
    } else if (why == TOOL_CHILD_GUARD_DIED) {
        tool_log(LOG_ERROR,
                 "%s given up: the guard process died (status %d); %s and "
                 "its descendants were killed",
                 held, st, cmd);
        a->exit_code = EXIT_LOST;
    } else if (a->stop_sig && a->exit_code != EXIT_LOST &&
               (st == 128 + SIGTERM || st == 128 + SIGINT)) {
        /* Ended by the SIGINT/SIGTERM relayed to it: a stop that was asked for,
         * and the resignation that follows is a success (systemctl stop must not
         * mark the unit failed). A command that exits with a status of its own
         * on SIGTERM keeps it, and one that had to be killed --grace later
         * exits 137: it did not stop as asked. */
        tool_log(LOG_INFO, "%s stopped by %s as asked (status %d); exit 0", cmd,
                 strsignal(st - 128), st);
        a->exit_code = EXIT_OK;
    } else {
        if (a->exit_code == EXIT_LOST)
            tool_log(LOG_INFO, "%s stopped (status %d)", cmd, st);
        else
            tool_log(LOG_INFO, "%s exited with status %d", cmd, st);
        if (a->exit_code != EXIT_LOST) a->exit_code = st;
    }
}

bool app_check_child(struct app *a)
{
    if (!a->sup.child) return false;
    int64_t d = a->s ? elector_session_deadline_ns(a->s) : 0;
    if (d > a->sup.child_deadline && a->el && elector_is_leader(a->el)) {
        a->sup.child_deadline = d;
        tool_child_deadline(a->sup.child, d);
    }
    int st;
    tool_child_cause why;
    int done = tool_child_poll(a->sup.child, &st, &why);
    if (!a->sup.child_noted && *tool_child_containment(a->sup.child)) {
        tool_log(LOG_DEBUG, "the guard contains %s's tree by %s", a->o->argv[0],
                 tool_child_containment(a->sup.child));
        a->sup.child_noted = true;
    }
    if (!done) return false;
    tool_child_free(a->sup.child);
    a->sup.child = NULL;
    a->sup.child_status = st;
    child_ended(a, st, why);
    return true; /* gone: the caller hands it to decide.c, which decides */
}
