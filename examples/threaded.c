/* SPDX-License-Identifier: MIT */
/* The README's threaded example, whole: a program without an event loop of its
 * own makes its client with own_thread (elector/etcd.h): its loop runs on a
 * thread of its own, and every call may come from any thread. It campaigns, does the
 * leader's work once a second with guarded writes (a key beside the election's prefix,
 * never under it), resigns on Ctrl-C or SIGTERM, and asks for the release helper: a crash
 * (kill -9) hands over in milliseconds instead of after the TTL.
 *
 *   threaded [ID [ENDPOINTS [ELECTION]]]   e.g. ./threaded node-1 127.0.0.1:2379
 * my-service
 *
 * Signals: SIGINT and SIGTERM are blocked in every thread (the client's
 * threads inherit the mask) and taken by the main thread with sigtimedwait(),
 * which is also its one-second pacing. */
#define _POSIX_C_SOURCE 200809L
#include <elector/election.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static void on_event(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    const char *id = ud;
    if (ev->type == ELECTOR_EV_ELECTED)
        printf("[%s] elected (token %lld)\n", id, (long long)ev->token);
    else if (ev->type == ELECTOR_EV_WAITING)
        printf("[%s] waiting behind %.*s%s%s\n", id, (int)ev->key_len,
               (const char *)ev->key, *ev->detail ? ": " : "", ev->detail);
    else if (ev->type == ELECTOR_EV_LOST || ev->type == ELECTOR_EV_FAILED)
        printf("[%s] %s: %s\n", id, elector_event_name(ev->type), ev->detail);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *id = argc > 1 ? argv[1] : "node-1";
    const char *name = argc > 3 ? argv[3] : "my-service";
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL); /* before the client's threads */

    /* snippet: threaded */
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = argc > 2 ? argv[2] : "127.0.0.1:2379";
    cfg.own_thread = true; /* the loop, on a thread of its own */
    elector_etcd *etcd = elector_etcd_new(&cfg);
    int rc = etcd ? elector_etcd_err(etcd) : ELECTOR_ENOMEM;
    if (rc) {
        fprintf(stderr, "%s\n", etcd ? elector_etcd_errstr(etcd) : elector_strerror(rc));
        elector_etcd_free(etcd);
        return 1;
    }
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.release_on_exit = true; /* kill -9: the next candidate leads in ms */
    elector_session *s = elector_session_new(etcd, &sc, NULL, NULL);
    if (!s || (rc = elector_session_wait(s, 5000))) {
        fprintf(stderr, "no session: %s\n", elector_strerror(s ? rc : ELECTOR_ENOMEM));
        elector_etcd_free(etcd);
        return 1;
    }
    elector_election *el = elector_election_new(s, name, on_event, (void *)id);
    elector_campaign(el, id, strlen(id)); /* events come to on_event */
    char state[64], key[300];
    snprintf(key, sizeof(key), "%s-state", name); /* beside NAME/, not under it */
    struct timespec second = {1, 0};
    for (long n = 0; sigtimedwait(&stop_signals, NULL, &second) < 0; n++) {
        if (!elector_is_leader(el)) continue; /* deadline check, no I/O */
        snprintf(state, sizeof(state), "%s %ld", id, n);
        if (elector_guarded_put_sync(el, key, strlen(key), state, strlen(state), 3000) ==
            0)
            printf("[%s] leader's work: %s = %s\n", id, key, state);
        fflush(stdout);
    }
    elector_resign_sync(el, 3000); /* Ctrl-C: the next one leads at once */
    elector_etcd_free(etcd);       /* closes the session, joins the threads */
    /* end snippet: threaded */
    return 0;
}
