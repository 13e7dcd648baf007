/* SPDX-License-Identifier: MIT */
/* A leader that embeds libelector, for test_etcd_release: it campaigns on a
 * session with release_on_exit (unless RO_NO_RELEASE is set), prints
 * "elected HELPER_PID LEASE_HEX" once it leads, then obeys one letter per line
 * on stdin:
 *   s  crash with SIGSEGV (no core file)      x  _exit(3)
 *   f  fork a child that lives on (prints "child PID")
 *   c  close the session normally (prints "closed RC")
 *   q  exit(0)
 * Usage: release_owner ENDPOINTS NAME; RO_USER and RO_PASSWORD (environment)
 * give credentials (RO_PASSWORD_FILE a password file), RO_AUTOSYNC_MS the
 * auto-sync interval, RO_CACERT, RO_CERT and RO_KEY the TLS files, RO_TTL the TTL
 * in seconds (default 10), RO_LOW_FD (set) leaves fd 0 free when the session
 * starts its helper, RO_NOFILE (set) no descriptor left for it. The client's
 * notices go to stdout as "notice: TEXT". */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include "elector/election.h"

static void print_notice(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e, (void)err, (void)ud;
    printf("notice: %s\n", msg);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: release_owner ENDPOINTS NAME\n");
        return 2;
    }
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = argv[1];
    cfg.user = getenv("RO_USER");
    cfg.password = getenv("RO_PASSWORD");
    cfg.cacert = getenv("RO_CACERT");
    cfg.cert = getenv("RO_CERT");
    cfg.key = getenv("RO_KEY");
    cfg.password_file = getenv("RO_PASSWORD_FILE");
    if (getenv("RO_AUTOSYNC_MS"))
        cfg.auto_sync_interval_ms = atoi(getenv("RO_AUTOSYNC_MS"));
    elector_etcd *e = elector_etcd_new(&cfg);
    if (!e || elector_etcd_err(e)) return 2;
    elector_etcd_set_notice(e, print_notice, NULL);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = getenv("RO_TTL") ? atoi(getenv("RO_TTL")) : 10;
    sc.release_on_exit = !getenv("RO_NO_RELEASE");
    if (getenv("RO_LOW_FD") || getenv("RO_NOFILE")) {
        /* Connected first (a session, closed): the descriptors below are then
         * free or not when the helper starts, whatever the client needs. */
        elector_session *warm = elector_session_new(e, NULL, NULL, NULL);
        if (!warm || elector_session_wait(warm, 10000) ||
            elector_session_close_sync(warm, 5000))
            return 2;
    }
    /* RO_LOW_FD: fd 0 free when the helper is started (its socket then gets
     * fd 0, which the library must move out of the way of the spawn's dup2s);
     * the orders are read from a copy of stdin. */
    int in = 0;
    FILE *inf = stdin;
    if (getenv("RO_LOW_FD")) {
        in = dup(0);
        inf = in >= 0 ? fdopen(in, "r") : NULL;
        if (!inf) return 2;
        close(0);
    }
    if (getenv("RO_NOFILE")) {
        /* No descriptor left: the helper's socketpair fails. */
        int f = dup(1);
        close(f);
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = (rlim_t)f;
        if (setrlimit(RLIMIT_NOFILE, &rl)) return 2;
    }
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    if (!s || elector_session_wait(s, 10000)) return 2;
    elector_election *el = elector_election_new(s, argv[2], NULL, NULL);
    int rc = el ? elector_campaign_sync(el, "owner", 5, 30000) : -1;
    if (rc) {
        fprintf(stderr, "release_owner: campaign: %s\n", elector_strerror(rc));
        return 2;
    }
    printf("elected %d %llx\n", elector_session_helper(s),
           (unsigned long long)elector_session_lease(s));
    fflush(stdout);
    for (;;) {
        struct pollfd p[2] = {{.fd = in, .events = POLLIN},
                              {.fd = elector_etcd_fd(e), .events = POLLIN}};
        int64_t t = elector_etcd_timeout(e);
        poll(p, 2, (int)(t < 0 || t > 1000 ? 1000 : t));
        elector_etcd_process(e);
        if (!p[0].revents) continue;
        char line[64];
        if (!fgets(line, sizeof(line), inf)) return 0;
        if (line[0] == 's') {
            struct rlimit rl = {0, 0};
            setrlimit(RLIMIT_CORE, &rl);
            /* The deliberate crash: a store to a page that forbids it (a real
             * fault, which the sanitizers' null checks do not pre-empt), with
             * the default action (ASan's handler would exit instead). */
            signal(SIGSEGV, SIG_DFL);
            volatile int *page =
                mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (page == MAP_FAILED) abort();
            *page = 1;
        } else if (line[0] == 'x') {
            _exit(3);
        } else if (line[0] == 'f') {
            pid_t c = fork();
            if (c == 0) {
                for (;;)
                    pause();
            }
            printf("child %d\n", (int)c);
        } else if (line[0] == 'c') {
            elector_election_free(el);
            el = NULL;
            int r = elector_session_close_sync(s, 5000);
            printf("closed %d %d\n", r, 0);
        } else if (line[0] == 'q') {
            elector_etcd_free(e);
            return 0;
        }
        fflush(stdout);
    }
}
