/* SPDX-License-Identifier: MIT */
/* A loopback TCP forwarder for tests, in a child process, that can lose the
 * server's replies on command: the requests still reach etcd (and are
 * applied), the answers never reach the client. That is how a call "applied,
 * but answered with an error" is made on purpose.
 *
 * The listening socket is bound before tp_start() returns, so the endpoint is
 * usable at once. Every command is acknowledged by the child before the call
 * returns. The child dies with the test process (PDEATHSIG) and is in its
 * process group. */
#ifndef ELECTOR_TEST_TPROXY_H
#define ELECTOR_TEST_TPROXY_H

#include <sys/types.h>

typedef struct tp_proxy tp_proxy;

/* Forwards 127.0.0.1:<free port> to target ("127.0.0.1:PORT"). NULL on error. */
tp_proxy *tp_start(const char *target);

/* "127.0.0.1:PORT" of the listening side. */
const char *tp_endpoint(const tp_proxy *p);

/* From now on, discard what the server sends on every connection open now
 * (requests still reach the server). Connections accepted later pass both ways:
 * a client that reconnects gets answers again. Returns 0 or -1. */
int tp_drop_replies(tp_proxy *p);

/* Every connection passes both ways again. Returns 0 or -1. */
int tp_pass(tp_proxy *p);

/* Closes every connection now open (the client sees the connection end);
 * new ones are accepted as usual. Returns 0 or -1. */
int tp_reset(tp_proxy *p);

/* The forwarder's pid (a test may SIGSTOP it: nothing passes either way). */
pid_t tp_pid(const tp_proxy *p);

/* Kills and reaps the child, frees. NULL is ignored. */
void tp_stop(tp_proxy *p);

#endif
