/* SPDX-License-Identifier: MIT */
/* See tproxy.h. One poll() loop in a forked child: the listening socket, the
 * command pipe, and up to MAX_PAIRS connection pairs. Blocking writes: the
 * tests move a few kilobytes, far below the loopback socket buffers. */
#define _GNU_SOURCE /* accept4 */
#include "tproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PAIRS 32

struct tp_proxy {
    pid_t pid;
    int cmd, ack; /* write commands, read acknowledgements */
    char endpoint[32];
};

struct pair {
    int cli, srv;
    bool drop; /* discard server -> client */
};

static int connect_target(const struct sockaddr_in *to)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void pair_close(struct pair *pr)
{
    if (pr->cli >= 0) close(pr->cli);
    if (pr->srv >= 0) close(pr->srv);
    pr->cli = pr->srv = -1;
}

static _Noreturn void child_loop(int lfd, int cmd, int ack, const struct sockaddr_in *to)
{
    struct pair prs[MAX_PAIRS];
    for (int i = 0; i < MAX_PAIRS; i++)
        prs[i].cli = prs[i].srv = -1;
    for (;;) {
        struct pollfd pfd[2 + 2 * MAX_PAIRS];
        int who[2 + 2 * MAX_PAIRS];
        int n = 0;
        pfd[n] = (struct pollfd){.fd = cmd, .events = POLLIN};
        who[n++] = -1;
        pfd[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
        who[n++] = -2;
        for (int i = 0; i < MAX_PAIRS; i++) {
            if (prs[i].cli < 0) continue;
            pfd[n] = (struct pollfd){.fd = prs[i].cli, .events = POLLIN};
            who[n++] = 2 * i;
            pfd[n] = (struct pollfd){.fd = prs[i].srv, .events = POLLIN};
            who[n++] = 2 * i + 1;
        }
        if (poll(pfd, (nfds_t)n, -1) < 0) {
            if (errno == EINTR) continue;
            _exit(2);
        }
        for (int k = 0; k < n; k++) {
            if (!pfd[k].revents) continue;
            if (who[k] == -1) {
                char c;
                if (read(cmd, &c, 1) != 1) _exit(0); /* the test is gone */
                for (int i = 0; i < MAX_PAIRS; i++) {
                    if (c == 'r')
                        pair_close(&prs[i]);
                    else
                        prs[i].drop = c == 'd';
                }
                if (write(ack, &c, 1) != 1) _exit(0);
                break; /* the pairs may have changed: poll again */
            }
            if (who[k] == -2) {
                int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0) continue;
                int i = 0;
                while (i < MAX_PAIRS && prs[i].cli >= 0)
                    i++;
                int s = i < MAX_PAIRS ? connect_target(to) : -1;
                if (s < 0) {
                    close(c);
                    continue;
                }
                int one = 1;
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                prs[i].cli = c;
                prs[i].srv = s;
                prs[i].drop = false;
                continue;
            }
            struct pair *pr = &prs[who[k] / 2];
            bool from_cli = who[k] % 2 == 0;
            int in = from_cli ? pr->cli : pr->srv;
            if (in < 0) continue;
            char buf[16384];
            ssize_t r = read(in, buf, sizeof(buf));
            if (r <= 0) {
                pair_close(pr);
                continue;
            }
            if (!from_cli && pr->drop) continue;
            if (write_all(from_cli ? pr->srv : pr->cli, buf, (size_t)r)) pair_close(pr);
        }
    }
}

tp_proxy *tp_start(const char *target)
{
    struct sockaddr_in to = {.sin_family = AF_INET};
    const char *colon = strrchr(target, ':');
    if (!colon) return NULL;
    char host[64];
    snprintf(host, sizeof(host), "%.*s", (int)(colon - target), target);
    to.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &to.sin_addr) != 1) return NULL;

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in me = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(me);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
        listen(lfd, 64) < 0 || getsockname(lfd, (struct sockaddr *)&me, &sl) < 0) {
        if (lfd >= 0) close(lfd);
        return NULL;
    }
    int cmdp[2], ackp[2];
    if (pipe(cmdp)) {
        close(lfd);
        return NULL;
    }
    if (pipe(ackp)) {
        close(lfd);
        close(cmdp[0]);
        close(cmdp[1]);
        return NULL;
    }
    tp_proxy *p = calloc(1, sizeof(*p));
    pid_t pid = p ? fork() : -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(cmdp[1]);
        close(ackp[0]);
        signal(SIGPIPE, SIG_IGN);
        child_loop(lfd, cmdp[0], ackp[1], &to);
    }
    close(lfd);
    close(cmdp[0]);
    close(ackp[1]);
    if (pid < 0) {
        close(cmdp[1]);
        close(ackp[0]);
        free(p);
        return NULL;
    }
    p->pid = pid;
    p->cmd = cmdp[1];
    p->ack = ackp[0];
    snprintf(p->endpoint, sizeof(p->endpoint), "127.0.0.1:%d", ntohs(me.sin_port));
    return p;
}

const char *tp_endpoint(const tp_proxy *p)
{
    return p->endpoint;
}

static int command(tp_proxy *p, char c)
{
    char a;
    if (write(p->cmd, &c, 1) != 1) return -1;
    if (read(p->ack, &a, 1) != 1 || a != c) return -1;
    return 0;
}

int tp_drop_replies(tp_proxy *p)
{
    return command(p, 'd');
}

int tp_pass(tp_proxy *p)
{
    return command(p, 'p');
}

int tp_reset(tp_proxy *p)
{
    return command(p, 'r');
}

pid_t tp_pid(const tp_proxy *p)
{
    return p->pid;
}

void tp_stop(tp_proxy *p)
{
    if (!p) return;
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    close(p->cmd);
    close(p->ack);
    free(p);
}
