/* SPDX-License-Identifier: MIT */
/* fault-resource: the "fenced resource" of the fault suite.
 *
 *   fault-resource SOCKET LOG
 *
 * A tiny server on a unix SEQPACKET socket. Each message "W TOKEN SEQ ID" is a
 * write by candidate ID holding fencing token TOKEN. It is accepted when TOKEN is
 * at least the highest token accepted so far, else rejected (answer "A", or
 * "R MAX"). Every write is logged with the moment it arrived (CLOCK_MONOTONIC,
 * like every log of a run):
 *
 *   T A TOKEN SEQ ID          accepted
 *   T R TOKEN SEQ ID MAX      rejected: a newer token was seen (fencing at work)
 *   T summary accepted N rejected N max_token N stale_accepted N   (on SIGTERM)
 *
 * stale_accepted counts accepted writes whose token was below the highest one
 * already accepted (a self-check: the rule above makes it 0; fault-checker
 * recounts it from the log). Whether an accepted
 * write came from a process that was no longer leader at that instant is what
 * fault-checker decides from the arrival times and the candidates' logs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "futil.h"

#define MAX_CLIENTS 256

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SOCKET LOG\n", argv[0]);
        return 2;
    }
    int log = fu_open_log(argv[2]);
    if (log < 0) {
        perror(argv[2]);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(argv[1]) >= sizeof a.sun_path) {
        fprintf(stderr, "socket path too long\n");
        return 1;
    }
    strcpy(a.sun_path, argv[1]);
    unlink(argv[1]);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(lfd, 128) != 0) {
        perror("fault-resource: socket");
        return 1;
    }
    struct pollfd pf[MAX_CLIENTS + 1];
    int n = 1;
    pf[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
    int64_t max_token = 0, highest_accepted = 0;
    uint64_t accepted = 0, rejected = 0, stale_accepted = 0;
    while (!g_stop) {
        int r = poll(pf, (nfds_t)n, 500);
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        if (pf[0].revents & POLLIN) {
            int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0 && n < MAX_CLIENTS + 1)
                pf[n++] = (struct pollfd){.fd = c, .events = POLLIN};
            else if (c >= 0)
                close(c);
        }
        for (int i = 1; i < n; i++) {
            if (!pf[i].revents) continue;
            char msg[128];
            ssize_t got = recv(pf[i].fd, msg, sizeof msg - 1, 0);
            int64_t t = fu_now_ns();
            if (got <= 0) {
                close(pf[i].fd);
                pf[i--] = pf[--n];
                continue;
            }
            msg[got] = '\0';
            long long token = 0;
            unsigned long long seq = 0;
            int id = -1;
            if (sscanf(msg, "W %lld %llu %d", &token, &seq, &id) != 3) {
                send(pf[i].fd, "E", 1, MSG_NOSIGNAL);
                continue;
            }
            char rep[64];
            int rl;
            if (token >= max_token) {
                if (token < highest_accepted) stale_accepted++; /* self-check */
                if (token > highest_accepted) highest_accepted = token;
                max_token = token;
                accepted++;
                fu_line(log, "%" PRId64 " A %lld %llu %d", t, token, seq, id);
                rl = snprintf(rep, sizeof rep, "A");
            } else {
                rejected++;
                fu_line(log, "%" PRId64 " R %lld %llu %d %" PRId64, t, token, seq, id,
                        max_token);
                rl = snprintf(rep, sizeof rep, "R %" PRId64, max_token);
            }
            send(pf[i].fd, rep, (size_t)rl, MSG_NOSIGNAL);
        }
    }
    fu_line(log,
            "%" PRId64 " summary accepted %" PRIu64 " rejected %" PRIu64
            " max_token %" PRId64 " stale_accepted %" PRIu64,
            fu_now_ns(), accepted, rejected, max_token, stale_accepted);
    unlink(argv[1]);
    return 0;
}
