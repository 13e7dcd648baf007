/* SPDX-License-Identifier: MIT */
/* Timers: every deadline of the library (a call's, the dial timeout, the
 * reconnect backoff, the PING policy's, a keepalive's, a session's...) is an
 * elector__timer in one binary min-heap per client, so the engine's timeout is
 * the heap's root: O(1) to read, O(log n) to arm or disarm, no allocation. The
 * heap is intrusive (each timer holds its links) and addressed like an array: a
 * node's position is the path of the bits of its index, as in libuv's heap.
 *
 * The timerfd (CLOCK_BOOTTIME, absolute) is armed at the next due time, so the
 * client's fd becomes readable when something is due. poll() and epoll_wait()
 * timeouts run on CLOCK_MONOTONIC, which stops while the host is suspended: after
 * a resume they would wake up to a whole timeout late on the deadline clock. */
#include <sys/timerfd.h>
#include <unistd.h>
#include "transport_private.h"

static bool before(const elector__timer *a, const elector__timer *b)
{
    return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->seq < b->seq);
}

/* Swaps child c with its parent p in the tree. */
static void swap_up(elector__timers *h, elector__timer *p, elector__timer *c)
{
    elector__timer *sibling, *pl = p->left, *pr = p->right, *pp = p->parent;
    p->left = c->left;
    p->right = c->right;
    p->parent = c;
    c->parent = pp;
    if (pl == c) {
        c->left = p;
        c->right = sibling = pr;
    } else {
        c->right = p;
        c->left = sibling = pl;
    }
    if (sibling) sibling->parent = c;
    if (p->left) p->left->parent = p;
    if (p->right) p->right->parent = p;
    if (!pp)
        h->min = c;
    else if (pp->left == p)
        pp->left = c;
    else
        pp->right = c;
}

/* The slot of node number n (1-based, in level order): the root, then the path
 * given by n's bits below its leading one. */
static elector__timer **slot(elector__timers *h, unsigned n, elector__timer **parent)
{
    unsigned path = 0, k = 0;
    for (; n >= 2; k++, n /= 2)
        path = (path << 1) | (n & 1);
    elector__timer **pos = &h->min;
    *parent = NULL;
    for (; k > 0; k--, path >>= 1) {
        *parent = *pos;
        pos = path & 1 ? &(*pos)->right : &(*pos)->left;
    }
    return pos;
}

static void heap_insert(elector__timers *h, elector__timer *t)
{
    elector__timer *parent;
    elector__timer **pos = slot(h, h->n + 1, &parent);
    t->left = t->right = NULL;
    t->parent = parent;
    *pos = t;
    h->n++;
    while (t->parent && before(t, t->parent))
        swap_up(h, t->parent, t);
}

static void heap_remove(elector__timers *h, elector__timer *t)
{
    elector__timer *parent;
    elector__timer **pos = slot(h, h->n, &parent);
    elector__timer *last = *pos;
    *pos = NULL;
    h->n--;
    if (last == t) return;
    /* The last node takes t's place, then sinks or rises to where it belongs. */
    last->left = t->left;
    last->right = t->right;
    last->parent = t->parent;
    if (last->left) last->left->parent = last;
    if (last->right) last->right->parent = last;
    if (!t->parent)
        h->min = last;
    else if (t->parent->left == t)
        t->parent->left = last;
    else
        t->parent->right = last;
    for (;;) {
        elector__timer *m = last;
        if (last->left && before(last->left, m)) m = last->left;
        if (last->right && before(last->right, m)) m = last->right;
        if (m == last) break;
        swap_up(h, last, m);
    }
    while (last->parent && before(last, last->parent))
        swap_up(h, last->parent, last);
}

void elector__wake_at(elector_etcd *e, int64_t due_ms)
{
    if (e->tfd < 0 || due_ms >= e->wake_ms) return; /* never later: see the header */
    if (due_ms <= elector__now_ms()) {
        /* Due now (work pending, or a timer already late): the eventfd, once. */
        if (!e->ev_posted) {
            uint64_t one = 1;
            if (write(e->evfd, &one, sizeof(one)) < 0) { /* full: readable anyway */
            }
            e->ev_posted = true;
        }
        return;
    }
    struct itimerspec its = {{0, 0}, {0, 0}};
    its.it_value.tv_sec = due_ms / 1000;
    its.it_value.tv_nsec = (due_ms % 1000) * 1000000;
    if (timerfd_settime(e->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0) e->wake_ms = due_ms;
}

void elector__timer_disarm(elector_etcd *e, elector__timer *t)
{
    if (!t->armed) return;
    heap_remove(&e->timers, t);
    t->armed = false;
}

void elector__timer_set(elector_etcd *e, elector__timer *t, int64_t due_ms,
                        elector__timer_fn fn, void *ud)
{
    elector__timer_disarm(e, t);
    t->due_ms = due_ms;
    t->seq = e->timers.seq++;
    t->fn = fn;
    t->ud = ud;
    t->armed = true;
    heap_insert(&e->timers, t);
}

void elector__timer_arm(elector_etcd *e, elector__timer *t, int64_t due_ms,
                        elector__timer_fn fn, void *ud)
{
    elector__timer_set(e, t, due_ms, fn, ud);
    if (due_ms < e->wake_ms) /* loops that only poll the fd */
        elector__wake_at(e, due_ms);
}

int64_t elector__timers_next(const elector_etcd *e)
{
    return e->timers.min ? e->timers.min->due_ms : INT64_MAX;
}

/* Runs due timers one at a time: a timer callback may arm or disarm others. */
void elector__timers_run(elector_etcd *e)
{
    elector__timer *t;
    while (!e->life.closed && (t = e->timers.min) && t->due_ms <= e->now_ms) {
        elector__timer_disarm(e, t);
        t->fn(t, t->ud);
    }
}
