/* SPDX-License-Identifier: MIT */
/* A program built from an installed libelector alone (scripts/check-install.sh):
 * with `pkg-config --cflags --libs elector` and with find_package(elector). It
 * campaigns in election NAME on etcd at ENDPOINT, checks it is elected and that
 * etcd names it leader, resigns, and checks that the RESIGNED event came and that
 * nobody leads any more. Prints the library's version first. With
 * $ELECTOR_RELEASE_HELPER set, the session has the release helper, which must
 * run while it lives and be gone after the close.
 *
 *   consumer ENDPOINT NAME
 *
 * Exit status 0 when all of that held. */
#define _POSIX_C_SOURCE 200809L /* kill() */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elector/election.h>

static int resigned;

static void on_event(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    (void)ud;
    printf("event %s\n", elector_event_name(ev->type));
    if (ev->type == ELECTOR_EV_RESIGNED) resigned = 1;
}

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "consumer: %s failed (line %d)\n", #c, __LINE__);            \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: consumer ENDPOINT NAME\n");
        return 2;
    }
    /* The headers and the library agree on the version. */
    printf("elector %s (headers %s)\n", elector_version(), ELECTOR_VERSION_STRING);
    CHECK(strcmp(elector_version(), ELECTOR_VERSION_STRING) == 0);
    CHECK(elector_version_number() == ELECTOR_VERSION_NUMBER);

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = argv[1];
    elector_etcd *etcd = elector_etcd_new(&cfg);
    CHECK(etcd && elector_etcd_err(etcd) == 0);

    elector_session_config scfg;
    elector_session_config_init(&scfg);
    scfg.ttl_s = 5;
    /* With $ELECTOR_RELEASE_HELPER (check-install.sh: the installed one), the
     * release helper too: it starts with the lease and goes with the close. */
    scfg.release_on_exit = getenv("ELECTOR_RELEASE_HELPER") != NULL;
    elector_session *s = elector_session_new(etcd, &scfg, NULL, NULL);
    CHECK(s);
    CHECK(elector_session_wait(s, 10000) == 0);
    int helper = elector_session_helper(s);
    if (scfg.release_on_exit) {
        printf("release helper: pid %d\n", helper);
        CHECK(helper > 0 && kill(helper, 0) == 0);
    }

    elector_election *el = elector_election_new(s, argv[2], on_event, NULL);
    CHECK(el);
    CHECK(elector_campaign_sync(el, "me", 2, 10000) == 0);
    CHECK(elector_is_leader(el));
    printf("elected, token %lld\n", (long long)elector_election_token(el));

    elector_leader_info info;
    CHECK(elector_leader_sync(etcd, argv[2], 5000, &info) == 0);
    CHECK(info.token == elector_election_token(el));
    CHECK(info.value_len == 2 && memcmp(info.value, "me", 2) == 0);
    elector_leader_free(&info);

    CHECK(elector_resign(el) == 0);
    CHECK(!elector_is_leader(el));
    int64_t end = elector_now_ns() + 10000000000LL;
    while (!resigned && elector_now_ns() < end)
        elector_etcd_run_once(etcd, 100);
    CHECK(resigned);
    CHECK(elector_leader_sync(etcd, argv[2], 5000, &info) == 1);
    printf("resigned\n");

    elector_election_free(el);
    CHECK(elector_session_close_sync(s, 5000) == 0);
    if (helper > 0) CHECK(kill(helper, 0) != 0); /* exited and reaped */
    elector_etcd_free(etcd);
    return 0;
}
