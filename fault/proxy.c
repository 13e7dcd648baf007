/* SPDX-License-Identifier: MIT */
/* fault-proxy: a plain TCP forwarder, optionally adding latency.
 *
 *   fault-proxy [--delay-ms MS] [--listen-netns PATH] LISTEN_IP:PORT=TARGET_IP:PORT ...
 *
 * Two uses in the fault suite:
 *  - a candidate inside a network namespace reaches the etcd members (which the
 *    test harness binds to 127.0.0.1 only) through a veth pair to a second
 *    namespace of the run, the forwarder's: with --listen-netns the listening
 *    sockets are made in the namespace at PATH (/run/netns/NAME: setns before
 *    socket(), then back), while the connections to the targets are made in the
 *    namespace the proxy was started in (the root one: the members' loopback).
 *    A socket keeps the namespace it was made in, so one process serves both.
 *    Taking the veth down cuts the candidate off;
 *  - with --delay-ms, candidates see a slow network (each direction delayed), so
 *    that a waiter's watch regularly starts from a revision compacted meanwhile.
 *
 * One poll() loop, blocking connect to the (loopback) target, at most 64 chunks
 * of 16 KiB queued per direction, each held until its due time. Exits on
 * SIGTERM/SIGINT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "futil.h"

#define MAX_LISTEN 8
#define MAX_PAIRS 128
#define CHUNK 16384
#define QLEN 64

typedef struct chunk {
    int64_t due;
    size_t len, off;
    char data[CHUNK];
} chunk;

typedef struct dir {
    chunk *q[QLEN]; /* ring */
    int head, n;
    int eof;
    int64_t eof_due;
    int shut;
} dir;

typedef struct pair {
    int fd[2]; /* 0 client, 1 target */
    dir d[2];  /* d[0]: client -> target, d[1]: target -> client */
} pair;

static volatile sig_atomic_t g_stop;
static int64_t g_delay_ns;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host) return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)atoi(colon + 1));
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static void pair_close(pair *p)
{
    for (int s = 0; s < 2; s++) {
        if (p->fd[s] >= 0) close(p->fd[s]);
        p->fd[s] = -1;
        dir *d = &p->d[s];
        for (int k = 0; k < d->n; k++)
            free(d->q[(d->head + k) % QLEN]);
        d->n = 0;
    }
}

/* Reads from side s into its direction's queue. Returns -1 if the pair died. */
static int pump_in(pair *p, int s, int64_t now)
{
    dir *d = &p->d[s];
    if (d->eof || d->n == QLEN) return 0;
    chunk *c = malloc(sizeof *c);
    if (!c) return -1;
    ssize_t r = read(p->fd[s], c->data, CHUNK);
    if (r > 0) {
        c->len = (size_t)r;
        c->off = 0;
        c->due = now + g_delay_ns;
        d->q[(d->head + d->n) % QLEN] = c;
        d->n++;
        return 0;
    }
    free(c);
    if (r == 0) {
        d->eof = 1;
        d->eof_due = now + g_delay_ns;
        return 0;
    }
    return errno == EAGAIN || errno == EINTR ? 0 : -1;
}

/* Writes what is due of direction s to the other side. -1 if the pair died. */
static int pump_out(pair *p, int s, int64_t now)
{
    dir *d = &p->d[s];
    int fd = p->fd[1 - s];
    while (d->n > 0) {
        chunk *c = d->q[d->head];
        if (c->due > now) return 0;
        ssize_t w = write(fd, c->data + c->off, c->len - c->off);
        if (w < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->off += (size_t)w;
        if (c->off < c->len) return 0;
        free(c);
        d->head = (d->head + 1) % QLEN;
        d->n--;
    }
    if (d->eof && !d->shut && now >= d->eof_due) {
        shutdown(fd, SHUT_WR);
        d->shut = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int ai = 1;
    if (ai + 1 < argc && !strcmp(argv[ai], "--delay-ms")) {
        g_delay_ns = atoll(argv[ai + 1]) * 1000000;
        ai += 2;
    }
    const char *listen_ns = NULL;
    if (ai + 1 < argc && !strcmp(argv[ai], "--listen-netns")) {
        listen_ns = argv[ai + 1];
        ai += 2;
    }
    if (ai >= argc) {
        fprintf(stderr,
                "usage: %s [--delay-ms MS] [--listen-netns PATH] "
                "LISTEN_IP:PORT=TARGET_IP:PORT ...\n",
                argv[0]);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* the listeners in the namespace at listen_ns; this one kept to come back */
    int home = -1;
    if (listen_ns) {
        home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        int ns = open(listen_ns, O_RDONLY | O_CLOEXEC);
        if (home < 0 || ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
            fprintf(stderr, "fault-proxy: enter %s: %s\n", listen_ns, strerror(errno));
            return 1;
        }
        close(ns);
    }
    int nl = 0, lfd[MAX_LISTEN];
    struct sockaddr_in target[MAX_LISTEN];
    for (int i = ai; i < argc && nl < MAX_LISTEN; i++) {
        char *eq = strchr(argv[i], '=');
        struct sockaddr_in la;
        if (!eq) return 2;
        *eq = '\0';
        if (parse_addr(argv[i], &la) || parse_addr(eq + 1, &target[nl])) {
            fprintf(stderr, "fault-proxy: bad address %s\n", argv[i]);
            return 2;
        }
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (fd < 0 || bind(fd, (struct sockaddr *)&la, sizeof la) || listen(fd, 64)) {
            fprintf(stderr, "fault-proxy: listen %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        lfd[nl++] = fd;
    }
    /* the targets' sockets are made here, after the way back */
    if (home >= 0 && setns(home, CLONE_NEWNET) != 0) {
        fprintf(stderr, "fault-proxy: back from %s: %s\n", listen_ns, strerror(errno));
        return 1;
    }
    if (home >= 0) close(home);
    static pair pairs[MAX_PAIRS];
    int np = 0;
    static struct pollfd pf[MAX_LISTEN + 2 * MAX_PAIRS];
    while (!g_stop) {
        int64_t now = fu_now_ns(), next = now + 500000000;
        int n = 0;
        for (int i = 0; i < nl; i++)
            pf[n++] = (struct pollfd){.fd = lfd[i], .events = POLLIN};
        for (int p = 0; p < np; p++)
            for (int s = 0; s < 2; s++) {
                short ev = 0;
                dir *in = &pairs[p].d[s], *out = &pairs[p].d[1 - s];
                if (!in->eof && in->n < QLEN) ev |= POLLIN; /* read from side s */
                if (out->n > 0) {                           /* write to side s */
                    if (out->q[out->head]->due <= now)
                        ev |= POLLOUT;
                    else if (out->q[out->head]->due < next)
                        next = out->q[out->head]->due;
                }
                if (out->eof && !out->shut && out->n == 0 && out->eof_due < next)
                    next = out->eof_due;
                pf[n++] = (struct pollfd){.fd = pairs[p].fd[s], .events = ev};
            }
        int tmo = (int)((next - now) / 1000000) + 1;
        if (poll(pf, (nfds_t)n, tmo) < 0 && errno != EINTR) break;
        now = fu_now_ns();
        int old_np = np;
        for (int i = 0; i < nl; i++) {
            if (!(pf[i].revents & POLLIN)) continue;
            int c = accept4(lfd[i], NULL, NULL, SOCK_CLOEXEC);
            if (c < 0) continue;
            int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (np == MAX_PAIRS || t < 0 ||
                connect(t, (struct sockaddr *)&target[i], sizeof target[i]) != 0) {
                close(c);
                if (t >= 0) close(t);
                continue;
            }
            int one = 1;
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            setsockopt(t, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            fcntl(c, F_SETFL, O_NONBLOCK);
            fcntl(t, F_SETFL, O_NONBLOCK);
            memset(&pairs[np], 0, sizeof pairs[np]);
            pairs[np].fd[0] = c;
            pairs[np].fd[1] = t;
            np++;
        }
        /* pollfd entries exist for the pairs that were there before accepting */
        for (int p = 0; p < old_np; p++) {
            pair *pr = &pairs[p];
            int dead = 0;
            for (int s = 0; s < 2 && !dead; s++) {
                short re = pf[nl + 2 * p + s].revents;
                if (re & (POLLIN | POLLHUP | POLLERR)) dead = pump_in(pr, s, now) != 0;
            }
            for (int s = 0; s < 2 && !dead; s++)
                dead = pump_out(pr, s, now) != 0;
            if (dead || (pr->d[0].shut && pr->d[1].shut)) pair_close(pr);
        }
        int k = 0;
        for (int p = 0; p < np; p++)
            if (pairs[p].fd[0] >= 0) {
                if (k != p) pairs[k] = pairs[p];
                k++;
            }
        np = k;
    }
    for (int p = 0; p < np; p++)
        pair_close(&pairs[p]);
    return 0;
}
