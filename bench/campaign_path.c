// SPDX-License-Identifier: MIT
/* The campaign's path through the library, recorded by running it
 * (scripts/campaign-path.sh builds the library with -finstrument-functions
 * -fno-inline and maps what this program writes to files with addr2line).
 *
 *   campaign_path ENDPOINT OUT_ELECTED OUT_LOST OUT_PUT
 *
 * One client, one session (granted before the count starts), one election.
 * Segment 0, the yardstick: every function entered from elector_kv_put() on
 * the same client (connected) until its answer: what any one request crosses.
 * Segment 1: every function entered from elector_campaign() until the
 * ELECTED event. Then a second client deletes our key (not recorded), and
 * segment 2: every function entered from there until the LOST event. Each
 * OUT file gets one function address a line, in the order entered. Built
 * without instrumentation, the program runs too, and records nothing. */
#include <elector/election.h>
#include <elector/etcd.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "campaign-path"
#define MAX_ENTRIES (1u << 20)

#define NO_TRACE __attribute__((no_instrument_function))

static void *entries[MAX_ENTRIES];
static size_t n_entries;
static volatile int recording;

NO_TRACE void __cyg_profile_func_enter(void *fn, void *site);
NO_TRACE void __cyg_profile_func_exit(void *fn, void *site);

NO_TRACE void __cyg_profile_func_enter(void *fn, void *site)
{
    (void)site;
    if (recording && n_entries < MAX_ENTRIES) entries[n_entries++] = fn;
}

NO_TRACE void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)fn;
    (void)site;
}

static elector_event_type last_event;

NO_TRACE static void on_event(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    (void)ud;
    if (ev->type == ELECTOR_EV_ELECTED || ev->type == ELECTOR_EV_LOST ||
        ev->type == ELECTOR_EV_FAILED)
        recording = 0;
    last_event = ev->type;
}

NO_TRACE static int dump(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    for (size_t i = 0; i < n_entries; i++)
        fprintf(f, "%p\n", entries[i]);
    n_entries = 0;
    return fclose(f);
}

NO_TRACE static elector_etcd *client(const char *endpoint)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoint;
    elector_etcd *etcd = elector_etcd_new(&cfg);
    if (!etcd || elector_etcd_err(etcd)) {
        fprintf(stderr, "campaign_path: client: %s\n",
                etcd ? elector_etcd_errstr(etcd) : "no memory");
        exit(1);
    }
    return etcd;
}

static int put_done; /* 1 + the Put's error */

NO_TRACE static void on_put(elector_etcd *etcd, int err, const elector_kv *kvs, size_t n,
                            int64_t deleted, void *ud)
{
    (void)etcd, (void)kvs, (void)n, (void)deleted, (void)ud;
    recording = 0;
    put_done = 1 + err;
}

/* Runs the client's loop until the event `want` (or FAILED), for 10 s at most. */
NO_TRACE static int run_until(elector_etcd *etcd, elector_event_type want)
{
    int64_t end = elector_now_ns() + 10 * 1000000000LL;
    while (last_event != want && last_event != ELECTOR_EV_FAILED) {
        if (elector_now_ns() > end) return -1;
        elector_etcd_run_once(etcd, 100);
    }
    return last_event == want ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: campaign_path ENDPOINT OUT_ELECTED OUT_LOST OUT_PUT\n");
        return 2;
    }
    elector_etcd *etcd = client(argv[1]);
    elector_session_config scfg;
    elector_session_config_init(&scfg);
    scfg.ttl_s = 60; /* no renewal inside the run */
    elector_session *s = elector_session_new(etcd, &scfg, NULL, NULL);
    if (!s || elector_session_wait(s, 5000) != 0) {
        fprintf(stderr, "campaign_path: no session\n");
        return 1;
    }
    elector_election *el = elector_election_new(s, NAME, on_event, NULL);

    recording = 1;
    int rc =
        elector_kv_put(etcd, "campaign-path-put", 17, "v", 1, 0, 0, 5000, on_put, NULL);
    int64_t end = elector_now_ns() + 10 * 1000000000LL;
    while (rc == 0 && !put_done && elector_now_ns() < end)
        elector_etcd_run_once(etcd, 100);
    if (rc != 0 || put_done != 1 || dump(argv[4]) != 0) {
        fprintf(stderr, "campaign_path: put: %d/%d\n", rc, put_done - 1);
        return 1;
    }

    recording = 1;
    rc = elector_campaign(el, "v", 1);
    if (rc != 0 || run_until(etcd, ELECTOR_EV_ELECTED) != 0 || dump(argv[2]) != 0) {
        fprintf(stderr, "campaign_path: not elected (%d)\n", rc);
        return 1;
    }

    elector_etcd *other = client(argv[1]);
    int64_t deleted = 0;
    rc = elector_kv_delete_sync(other, NAME "/", strlen(NAME "/"), true, 5000, &deleted);
    elector_etcd_free(other);
    if (rc != 0 || deleted != 1) {
        fprintf(stderr, "campaign_path: delete: %d, %lld deleted\n", rc,
                (long long)deleted);
        return 1;
    }

    recording = 1;
    if (run_until(etcd, ELECTOR_EV_LOST) != 0 || dump(argv[3]) != 0) {
        fprintf(stderr, "campaign_path: not lost\n");
        return 1;
    }
    elector_election_free(el);
    elector_session_close(s);
    elector_etcd_free(etcd);
    return 0;
}
