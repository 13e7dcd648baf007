/* SPDX-License-Identifier: MIT */
/* An application instance that takes part in a leader election, in the spirit of
 * "leader election using etcd": every instance has an id, campaigns with it, and
 * reacts when leadership changes. The leader does the singleton work (here: it
 * prints a tick with its fencing token); the others only watch who leads.
 *
 *   instance [--no-release-on-exit] ID [ENDPOINTS] [ELECTION]
 *   e.g.  ./instance node-1 127.0.0.1:2379 my-service
 *
 * Ctrl-C resigns (the next instance takes over in milliseconds) and exits. It
 * embeds the library in its own poll() loop, as an application with other file
 * descriptors would.
 *
 * A crash hands over in milliseconds too: the session asks for the release
 * helper (release_on_exit), a small process that revokes the lease as soon as
 * this one is gone (kill -9, a segfault, the OOM killer), instead of leaving
 * the next instance to wait for the TTL (10 s). That is right here because the
 * leader's work (the ticks) dies with the process; a program that leaves work
 * running in child processes should run it under `elector run` instead.
 * --no-release-on-exit turns it off. */
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elector/election.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void on_election(elector_election *el, const elector_event *ev, void *ud)
{
    const char *id = ud;
    (void)el;
    switch (ev->type) {
    case ELECTOR_EV_WAITING:
        printf("[%s] waiting behind %.*s\n", id, (int)ev->key_len, (const char *)ev->key);
        break;
    case ELECTOR_EV_ELECTED:
        printf("[%s] I am the leader now (token %lld)\n", id, (long long)ev->token);
        break;
    case ELECTOR_EV_LOST:
        printf("[%s] leadership lost: %s\n", id, ev->detail);
        stop = 1; /* a real service would stop its singleton work and campaign again */
        break;
    case ELECTOR_EV_FAILED:
        printf("[%s] campaign failed: %s\n", id, ev->detail);
        stop = 1;
        break;
    default:
        break;
    }
    fflush(stdout);
}

static void on_leader(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    const char *id = ud;
    if (ev->type == ELECTOR_EV_NO_LEADER)
        printf("[%s] observed: no leader\n", id);
    else
        printf("[%s] observed: leader is %.*s\n", id, (int)ev->value_len,
               (const char *)ev->value);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    bool release = true;
    if (argc > 1 && !strcmp(argv[1], "--no-release-on-exit")) {
        release = false;
        argv++;
        argc--;
    }
    if (argc < 2 || argc > 4 || argv[1][0] == '-') {
        fprintf(stderr,
                "usage: instance [--no-release-on-exit] ID [ENDPOINTS] [ELECTION]\n");
        return 2;
    }
    const char *id = argv[1];
    /* snippet: embedded */
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = argc > 2 ? argv[2] : "127.0.0.1:2379";
    const char *name = argc > 3 ? argv[3] : "example-service";

    elector_etcd *etcd = elector_etcd_new(&cfg);
    if (!etcd || elector_etcd_err(etcd)) {
        fprintf(stderr, "%s\n", etcd ? elector_etcd_errstr(etcd) : "out of memory");
        elector_etcd_free(etcd);
        return 1;
    }
    /* snippet: release */
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.release_on_exit = release; /* revoke the lease at once if we crash */
    elector_session *s = elector_session_new(etcd, &sc, NULL, NULL);
    /* end snippet: release */
    int rc = s ? elector_session_wait(s, 10000) : ELECTOR_ENOMEM;
    if (rc) {
        fprintf(stderr, "cannot start a session: %s\n", elector_etcd_errstr(etcd));
        elector_session_close(s);
        elector_etcd_free(etcd);
        return 1;
    }
    if (release && elector_session_helper(s) < 0)
        fprintf(stderr,
                "[%s] no release helper (%s): after a crash the next instance "
                "waits for the TTL\n",
                id, elector_strerror(elector_session_helper(s)));
    elector_election *el = elector_election_new(s, name, on_election, (void *)id);
    elector_observer *o = elector_observe(etcd, name, on_leader, (void *)id);
    elector_campaign(el, id, strlen(id));

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int64_t next_tick = 0;
    while (!stop) {
        /* The application's own loop: elector is one more fd with a timeout. */
        struct pollfd pfd = {.fd = elector_etcd_fd(etcd), .events = POLLIN};
        int64_t t = elector_etcd_timeout(etcd);
        poll(&pfd, 1, t < 0 || t > 1000 ? 1000 : (int)t);
        elector_etcd_process(etcd);
        if (elector_is_leader(el) && elector_now_ns() >= next_tick) {
            printf("[%s] tick: doing the leader's work with token %lld\n", id,
                   (long long)elector_election_token(el));
            fflush(stdout);
            next_tick = elector_now_ns() + 1000000000LL;
        }
    }
    elector_observer_free(o);
    if (elector_is_leader(el)) elector_resign(el);
    elector_election_free(el);
    elector_session_close_sync(s, 2000); /* revoke: nothing lingers */
    elector_etcd_free(etcd);
    /* end snippet: embedded */
    return 0;
}
