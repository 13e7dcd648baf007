/* SPDX-License-Identifier: MIT */
/* Unit tests (no server) for the small helpers: backoff, prefix_end, error texts,
 * the byte buffer, the rpc table, the clocks and the client's wake-up timer. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <elector/election.h>
#include "transport_private.h"
#include "elect_util.h"
#include "testlib.h"

/* ------------------------------------------------------------------ backoff */

TEST(backoff_zero_failures_is_zero)
{
    ASSERT_EQ(0, elector__backoff_ms(0, 50, 2000, 0));
    ASSERT_EQ(0, elector__backoff_ms(0, 50, 2000, UINT32_MAX));
    ASSERT_EQ(0, elector__backoff_ms(-3, 50, 2000, UINT32_MAX));
}

TEST(backoff_grows_exponentially_then_caps)
{
    /* rnd UINT32_MAX: the full delay. */
    const int64_t want[] = {50, 100, 200, 400, 800, 1600, 2000, 2000, 2000};
    for (int f = 1; f <= 9; f++)
        ASSERT_EQ(want[f - 1], elector__backoff_ms(f, 50, 2000, UINT32_MAX));
    ASSERT_EQ(2000, elector__backoff_ms(1000, 50, 2000, UINT32_MAX));
    ASSERT_EQ(2000, elector__backoff_ms(INT32_MAX, 50, 2000, UINT32_MAX));
    /* Non-decreasing for any fixed rnd. */
    const uint32_t rnds[] = {0, 1, 12345, UINT32_MAX / 2, UINT32_MAX - 1, UINT32_MAX};
    for (size_t r = 0; r < sizeof(rnds) / sizeof(rnds[0]); r++) {
        int64_t prev = 0;
        for (int f = 1; f < 40; f++) {
            int64_t d = elector__backoff_ms(f, 50, 2000, rnds[r]);
            ASSERT_GE(d, prev);
            ASSERT_LE(d, 2000);
            prev = d;
        }
    }
}

TEST(backoff_min_equal_max)
{
    for (int f = 1; f < 10; f++) {
        ASSERT_EQ(300, elector__backoff_ms(f, 300, 300, UINT32_MAX));
        ASSERT_EQ(150, elector__backoff_ms(f, 300, 300, 0));
    }
}

TEST(backoff_jitter_range)
{
    for (int f = 1; f <= 8; f++) {
        int64_t d = 50;
        for (int i = 1; i < f; i++)
            d *= 2;
        if (d > 2000) d = 2000;
        ASSERT_EQ(d / 2, elector__backoff_ms(f, 50, 2000, 0));
        ASSERT_EQ(d, elector__backoff_ms(f, 50, 2000, UINT32_MAX));
        int64_t mid = elector__backoff_ms(f, 50, 2000, UINT32_MAX / 2);
        ASSERT_GE(mid, d / 2);
        ASSERT_LE(mid, d);
    }
    /* Odd delays: [d/2, d] still holds at both ends. */
    ASSERT_EQ(3, elector__backoff_ms(1, 7, 100, 0));
    ASSERT_EQ(7, elector__backoff_ms(1, 7, 100, UINT32_MAX));
    /* Many random draws stay in range. */
    uint32_t x = 2463534242u;
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        int64_t v = elector__backoff_ms(3, 50, 2000, x);
        ASSERT_GE(v, 100);
        ASSERT_LE(v, 200);
    }
}

/* backoff_max_ms is a plain int64 in the public config. Once the delay passes
 * 2^32 ms (~50 days) the jitter product (d - d/2) * rnd no longer fits in 64 bits. */
TEST(backoff_jitter_no_overflow_above_2pow32_ms)
{
    const int64_t big = (int64_t)1 << 42; /* ~140 years in ms */
    int64_t d = 50;
    for (int i = 1; i < 36; i++)
        d *= 2; /* 50 * 2^35 < 2^42 */
    ASSERT_EQ(d / 2, elector__backoff_ms(36, 50, big, 0));
    ASSERT_EQ(d, elector__backoff_ms(36, 50, big, UINT32_MAX));
    ASSERT_EQ(big, elector__backoff_ms(40, 50, big, UINT32_MAX));
}

/* A cap of INT64_MAX ("no cap") must not overflow the doubling either. */
TEST(backoff_int64_max_cap_no_overflow)
{
    for (int f = 1; f <= 200; f++) {
        int64_t v = elector__backoff_ms(f, 50, INT64_MAX, 0);
        if (v <= 0) tl_log("failures %d, max INT64_MAX, rnd 0: %lld", f, (long long)v);
        ASSERT_GT(v, 0);
    }
    ASSERT_GE(elector__backoff_ms(200, 50, INT64_MAX, 0), INT64_MAX / 4);
}

/* --------------------------------------------------------------- prefix_end */

TEST(prefix_end_increments_last_byte)
{
    uint8_t out[8];
    ASSERT_EQ(2, elector_prefix_end((const uint8_t *)"a/", 2, out));
    ASSERT(memcmp(out, "a0", 2) == 0);
    ASSERT_EQ(3, elector_prefix_end((const uint8_t *)"ab\0", 3, out));
    ASSERT(memcmp(out, "ab\1", 3) == 0);
    const uint8_t fe[] = {'x', 0xfe};
    ASSERT_EQ(2, elector_prefix_end(fe, 2, out));
    ASSERT_EQ('x', out[0]);
    ASSERT_EQ(0xff, out[1]);
}

TEST(prefix_end_drops_trailing_ff)
{
    uint8_t out[8];
    const uint8_t p1[] = {'a', 0xff};
    ASSERT_EQ(1, elector_prefix_end(p1, sizeof(p1), out));
    ASSERT_EQ('b', out[0]);
    const uint8_t p2[] = {'a', 'b', 0xff, 0xff, 0xff};
    ASSERT_EQ(2, elector_prefix_end(p2, sizeof(p2), out));
    ASSERT_EQ('a', out[0]);
    ASSERT_EQ('c', out[1]);
    const uint8_t p3[] = {0x00, 0xff};
    ASSERT_EQ(1, elector_prefix_end(p3, sizeof(p3), out));
    ASSERT_EQ(0x01, out[0]);
}

TEST(prefix_end_all_ff_is_single_zero)
{
    uint8_t out[8];
    memset(out, 0xaa, sizeof(out));
    const uint8_t p1[] = {0xff};
    ASSERT_EQ(1, elector_prefix_end(p1, 1, out));
    ASSERT_EQ(0, out[0]);
    const uint8_t p3[] = {0xff, 0xff, 0xff};
    ASSERT_EQ(1, elector_prefix_end(p3, 3, out));
    ASSERT_EQ(0, out[0]);
}

TEST(prefix_end_input_unchanged)
{
    const uint8_t in[] = {'p', '/', 0xff};
    uint8_t copy[3];
    memcpy(copy, in, 3);
    uint8_t out[3];
    elector_prefix_end(in, 3, out);
    ASSERT(memcmp(in, copy, 3) == 0);
}

/* ------------------------------------------------------------- error texts */

TEST(strerror_every_code_has_text_and_name)
{
    static const struct {
        int code;
        const char *name;
        const char *text;
    } all[] = {
#define ROW_(name, value, text) {value, #name, text},
        ELECTOR_ERRNO_MAP(ROW_)
#undef ROW_
    };
    size_t n = sizeof(all) / sizeof(all[0]);
    ASSERT_GE(n, 21);
    for (size_t i = 0; i < n; i++) {
        ASSERT_LT(all[i].code, 0);
        const char *t = elector_strerror(all[i].code);
        ASSERT_STREQ(all[i].text, t);
        ASSERT(strcmp(t, "unknown error") != 0);
        ASSERT(t[0] != 0);
        ASSERT_STREQ(all[i].name, elector_err_name(all[i].code));
        for (size_t j = 0; j < i; j++) {
            ASSERT_NE(all[i].code, all[j].code);
            ASSERT(strcmp(t, elector_strerror(all[j].code)) != 0);
            ASSERT(strcmp(all[i].name, elector_err_name(all[j].code)) != 0);
        }
    }
    /* Spot checks against the enum. */
    ASSERT_STREQ("EINVAL", elector_err_name(ELECTOR_EINVAL));
    ASSERT_STREQ("ETIMEDOUT", elector_err_name(ELECTOR_ETIMEDOUT));
    ASSERT_STREQ("deadline exceeded", elector_strerror(ELECTOR_ETIMEDOUT));
    ASSERT_STREQ("EBUSY", elector_err_name(ELECTOR_EBUSY));
}

TEST(strerror_success_and_unknown)
{
    ASSERT_STREQ("success", elector_strerror(0));
    ASSERT_STREQ("OK", elector_err_name(ELECTOR_OK));
    const int unknown[] = {1, 42, -27, -1000, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        ASSERT_STREQ("unknown error", elector_strerror(unknown[i]));
        ASSERT_STREQ("UNKNOWN", elector_err_name(unknown[i]));
    }
}

/* The names the tool and the bindings print for events (elector_event_name). */
TEST(event_names_for_every_event_and_unknown_otherwise)
{
    ASSERT_STREQ("waiting", elector_event_name(ELECTOR_EV_WAITING));
    ASSERT_STREQ("elected", elector_event_name(ELECTOR_EV_ELECTED));
    ASSERT_STREQ("proclaimed", elector_event_name(ELECTOR_EV_PROCLAIMED));
    ASSERT_STREQ("lost", elector_event_name(ELECTOR_EV_LOST));
    ASSERT_STREQ("resigned", elector_event_name(ELECTOR_EV_RESIGNED));
    ASSERT_STREQ("failed", elector_event_name(ELECTOR_EV_FAILED));
    ASSERT_STREQ("leader", elector_event_name(ELECTOR_EV_LEADER));
    ASSERT_STREQ("no_leader", elector_event_name(ELECTOR_EV_NO_LEADER));
    ASSERT_STREQ("session_lost", elector_event_name(ELECTOR_EV_SESSION_LOST));
    /* one past the last, far past it, and negative: never read out of the table */
    ASSERT_STREQ("unknown",
                 elector_event_name((elector_event_type)(ELECTOR_EV_SESSION_LOST + 1)));
    ASSERT_STREQ("unknown", elector_event_name((elector_event_type)1000));
    ASSERT_STREQ("unknown", elector_event_name((elector_event_type)-1));
}

/* An election needs a session and a name: without one of them, NULL (and no
 * session is read: the session is not there to be read). */
TEST(election_new_without_a_session_or_a_name_is_null)
{
    ASSERT(elector_election_new(NULL, "job", NULL, NULL) == NULL);
    ASSERT(elector_election_new(NULL, NULL, NULL, NULL) == NULL);
    ASSERT(elector_election_new(NULL, "", NULL, NULL) == NULL);
}

/* The calls on an election refuse NULL with their error, never reading it
 * (found by scripts/mutate.sh: leader.c, `!el || ...` into `!el && ...` in
 * elector_resign, survived). */
TEST(election_calls_on_null_are_refused)
{
    ASSERT_EQ(ELECTOR_EINVAL, elector_resign(NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_campaign(NULL, "v", 1));
    ASSERT_EQ(ELECTOR_ENOTLEADER, elector_proclaim(NULL, "v", 1));
    ASSERT(!elector_is_leader(NULL));
    elector_election_free(NULL);
}

/* ---------------------------------------------------------------- buffer */

TEST(buf_append_consume_basic)
{
    elector__buf b = {0};
    ASSERT_EQ(0, elector__buf_avail(&b));
    ASSERT_OK(elector__buf_append(&b, NULL, 0)); /* nothing to do */
    ASSERT_OK(elector__buf_append(&b, "hello ", 6));
    ASSERT_OK(elector__buf_append(&b, "world", 5));
    ASSERT_EQ(11, elector__buf_avail(&b));
    ASSERT(memcmp(elector__buf_head(&b), "hello world", 11) == 0);
    elector__buf_consume(&b, 6);
    ASSERT_EQ(5, elector__buf_avail(&b));
    ASSERT(memcmp(elector__buf_head(&b), "world", 5) == 0);
    elector__buf_consume(&b, 5);
    ASSERT_EQ(0, elector__buf_avail(&b));
    ASSERT_EQ(0, b.off); /* emptied: back to the start */
    ASSERT_EQ(0, b.len);
    elector__buf_free(&b);
    ASSERT_NULL(b.data);
    ASSERT_EQ(0, b.cap);
    elector__buf_free(&b); /* twice is fine */
}

TEST(buf_reserve_huge_is_enomem)
{
    elector__buf b = {0};
    ASSERT_OK(elector__buf_append(&b, "abc", 3));
    ASSERT_EQ(ELECTOR_ENOMEM, elector__buf_reserve(&b, SIZE_MAX));
    ASSERT_EQ(ELECTOR_ENOMEM, elector__buf_reserve(&b, SIZE_MAX - 2));
    /* Unchanged and still usable. */
    ASSERT_EQ(3, elector__buf_avail(&b));
    ASSERT(memcmp(elector__buf_head(&b), "abc", 3) == 0);
    ASSERT_OK(elector__buf_append(&b, "d", 1));
    ASSERT(memcmp(elector__buf_head(&b), "abcd", 4) == 0);
    elector__buf_free(&b);
}

TEST(buf_reserve_gives_room)
{
    elector__buf b = {0};
    ASSERT_OK(elector__buf_append(&b, "0123456789", 10));
    elector__buf_consume(&b, 4);
    ASSERT_OK(elector__buf_reserve(&b, 1000));
    ASSERT_GE(b.cap - b.len, 1000);
    ASSERT_EQ(6, elector__buf_avail(&b));
    ASSERT(memcmp(elector__buf_head(&b), "456789", 6) == 0);
    elector__buf_free(&b);
}

/* Appends and consumes pseudo-random amounts for many rounds, comparing with a
 * plain model of the byte stream; compaction and growth must never lose or
 * reorder a byte. */
TEST(buf_compaction_keeps_contents)
{
    elector__buf b = {0};
    size_t cap = 1 << 16;
    uint8_t *model = malloc(cap);
    uint8_t *chunk = malloc(4096);
    ASSERT_NOT_NULL(model);
    ASSERT_NOT_NULL(chunk);
    size_t mlen = 0;   /* bytes in the model */
    uint64_t next = 0; /* next byte value generator */
    uint32_t x = 88172645u;
    int compactions = 0;
    for (int round = 0; round < 20000; round++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        size_t add = x % 700;
        if (round % 1000 == 999) add = 4000; /* occasional big append: growth */
        if (mlen + add > cap) add = cap - mlen;
        for (size_t i = 0; i < add; i++)
            chunk[i] = (uint8_t)(next++ * 2654435761u >> 24);
        size_t off_before = b.off;
        ASSERT_OK(elector__buf_append(&b, chunk, add));
        if (off_before > 0 && b.off == 0) compactions++;
        memcpy(model + mlen, chunk, add);
        mlen += add;

        ASSERT_EQ(mlen, elector__buf_avail(&b));
        ASSERT_LE(b.off, b.len);
        ASSERT_LE(b.len, b.cap);
        ASSERT(mlen == 0 || memcmp(elector__buf_head(&b), model, mlen) == 0);

        size_t take = (x >> 11) % 800;
        if (take > mlen) take = mlen;
        elector__buf_consume(&b, take);
        memmove(model, model + take, mlen - take);
        mlen -= take;
        ASSERT_EQ(mlen, elector__buf_avail(&b));
        ASSERT(mlen == 0 || memcmp(elector__buf_head(&b), model, mlen) == 0);
    }
    ASSERT_GT(compactions, 0);
    /* The buffer did not grow without bound: it stays within a small multiple
     * of the most it ever had to hold. */
    ASSERT_LE(b.cap, (size_t)4 * cap);
    elector__buf_free(&b);
    free(model);
    free(chunk);
}

TEST(buf_consume_everything_resets)
{
    elector__buf b = {0};
    for (int i = 0; i < 1000; i++) {
        ASSERT_OK(elector__buf_append(&b, "abcdefgh", 8));
        elector__buf_consume(&b, 3);
        elector__buf_consume(&b, 5);
        ASSERT_EQ(0, b.off);
        ASSERT_EQ(0, b.len);
    }
    ASSERT_EQ(256, b.cap); /* never grew */
    elector__buf_free(&b);
}

/* --------------------------------------------------------------- rpc table */

TEST(rpc_table_paths_and_types)
{
    ASSERT_STREQ("/etcdserverpb.KV/Range", elector_rpc_path(ELECTOR_RPC_RANGE));
    ASSERT_STREQ("/etcdserverpb.KV/Put", elector_rpc_path(ELECTOR_RPC_PUT));
    ASSERT_STREQ("/etcdserverpb.Lease/LeaseKeepAlive",
                 elector_rpc_path(ELECTOR_RPC_LEASE_KEEPALIVE));
    ASSERT_STREQ("/etcdserverpb.Watch/Watch", elector_rpc_path(ELECTOR_RPC_WATCH));
    ASSERT_STREQ("/etcdserverpb.Cluster/MemberList",
                 elector_rpc_path(ELECTOR_RPC_MEMBER_LIST));
    ASSERT_NULL(elector_rpc_path(ELECTOR_RPC_COUNT_));
    ASSERT_NULL(elector_rpc_path((elector_rpc)-1));
    ASSERT_NULL(elector__rpc(ELECTOR_RPC_COUNT_));
    for (int r = 0; r < ELECTOR_RPC_COUNT_; r++) {
        const elector__rpc_desc *d = elector__rpc((elector_rpc)r);
        ASSERT_NOT_NULL(d);
        ASSERT_NOT_NULL(d->path);
        ASSERT_NOT_NULL(d->req);
        ASSERT_NOT_NULL(d->resp);
        ASSERT(d->path[0] == '/');
        ASSERT_EQ(r == ELECTOR_RPC_WATCH || r == ELECTOR_RPC_LEASE_KEEPALIVE, d->stream);
        /* The method name starts the request and response type names
         * ("Compact" -> CompactionRequest). */
        const char *method = strrchr(d->path, '/') + 1;
        ASSERT(strncmp(d->req->short_name, method, strlen(method)) == 0);
        ASSERT(strncmp(d->resp->short_name, method, strlen(method)) == 0);
        ASSERT_CONTAINS(d->req->short_name, "Request");
        ASSERT_CONTAINS(d->resp->short_name, "Response");
    }
    ASSERT(elector__rpc(ELECTOR_RPC_RANGE)->req ==
           &etcdserverpb__range_request__descriptor);
    ASSERT(elector__rpc(ELECTOR_RPC_RANGE)->resp ==
           &etcdserverpb__range_response__descriptor);
    ASSERT(elector__rpc(ELECTOR_RPC_WATCH)->req ==
           &etcdserverpb__watch_request__descriptor);
}

TEST(strdup_and_clock)
{
    ASSERT_NULL(elector__strdup(NULL));
    char *s = elector__strdup("abc");
    ASSERT_STREQ("abc", s);
    free(s);
    s = elector__strdup("");
    ASSERT_STREQ("", s);
    free(s);
    int64_t a = elector_now_ns();
    int64_t b = elector_now_ns();
    ASSERT_GE(b, a);
    ASSERT_GT(a, 0);
    int64_t m = elector__now_ms();
    ASSERT_GE(m, a / 1000000);
}

/* ------------------------------------------------------------- wake-up timer */

static void count_fire(elector__timer *t, void *ud)
{
    (void)t;
    (*(int *)ud)++;
}

/* The client's fd becomes readable when a timer is due, by itself: a timerfd on
 * the deadline clock (CLOCK_BOOTTIME) sits in the epoll set, so a loop wakes on
 * time even after the host was suspended (poll timeouts would not). */
TEST(client_fd_becomes_readable_when_a_timer_is_due)
{
    elector_etcd *e = elector_etcd_new(NULL); /* connects only when a call needs it */
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    struct pollfd p = {.fd = elector_etcd_fd(e), .events = POLLIN};
    ASSERT_EQ(-1, elector_etcd_timeout(e));
    ASSERT_EQ(0, poll(&p, 1, 0));

    int fired = 0;
    elector__timer t = {0};
    int64_t t0 = elector__now_ms();
    elector__timer_arm(e, &t, t0 + 150, count_fire, &fired);
    ASSERT_EQ(0, poll(&p, 1, 50));   /* not yet */
    ASSERT_EQ(1, poll(&p, 1, 5000)); /* no timeout given: the fd alone */
    int64_t woke = elector__now_ms();
    ASSERT_GE(woke, t0 + 150);
    ASSERT_LT(woke, t0 + 150 + 2000);
    ASSERT_OK(elector_etcd_process(e));
    ASSERT_EQ(1, fired);
    ASSERT_EQ(0, poll(&p, 1, 0)); /* nothing due any more */

    /* elector_etcd_timeout() agrees and (re)arms the same wake-up. */
    elector__timer_arm(e, &t, elector__now_ms() + 100, count_fire, &fired);
    int64_t ms = elector_etcd_timeout(e);
    ASSERT_GE(ms, 0);
    ASSERT_LE(ms, 100);
    ASSERT_EQ(1, poll(&p, 1, 5000));
    ASSERT_OK(elector_etcd_process(e));
    ASSERT_EQ(2, fired);

    /* A disarmed timer never fires. The timerfd is not moved later (that cost two
     * syscalls per call), so it may leave one spurious wake-up behind: the pass
     * that takes it finds nothing due and leaves the fd quiet. */
    elector__timer_arm(e, &t, elector__now_ms() + 100, count_fire, &fired);
    elector__timer_disarm(e, &t);
    ASSERT_EQ(-1, elector_etcd_timeout(e));
    if (poll(&p, 1, 300) == 1) ASSERT_OK(elector_etcd_process(e));
    ASSERT_EQ(2, fired);
    ASSERT_EQ(-1, elector_etcd_timeout(e));
    ASSERT_EQ(0, poll(&p, 1, 300));

    /* Work due now (a call queued outside the loop is the usual case) makes the
     * fd readable at once, through the eventfd, and only once. */
    int64_t now = elector__now_ms();
    elector__timer_arm(e, &t, now - 1, count_fire, &fired); /* already late */
    ASSERT_EQ(1, poll(&p, 1, 0));
    ASSERT_OK(elector_etcd_process(e));
    ASSERT_EQ(3, fired);
    ASSERT_EQ(0, poll(&p, 1, 0));
    elector_etcd_free(e);
}

/* The timers are a heap: whatever the order of arming, disarming and
 * re-arming, due timers fire by due time, and timers due at the same time in
 * the order they were (last) armed. */
#define NTIMERS 300
struct order {
    int fired[NTIMERS];
    int n;
};
static struct order *g_order;

static void record_fire(elector__timer *t, void *ud)
{
    (void)t;
    g_order->fired[g_order->n++] = (int)(intptr_t)ud;
}

TEST(timers_fire_by_due_time_then_arming_order)
{
    elector_etcd *e = elector_etcd_new(NULL);
    ASSERT_NOT_NULL(e);
    static elector__timer t[NTIMERS];
    static int64_t due[NTIMERS];
    static uint64_t stamp[NTIMERS];
    static bool armed[NTIMERS];
    struct order o = {.n = 0};
    g_order = &o;
    uint64_t clock = 0;
    unsigned seed = 12345;
    int64_t base = elector__now_ms() - 1000; /* all in the past: due now */
    for (int step = 0; step < 4000; step++) {
        int i = (int)(rand_r(&seed) % NTIMERS);
        if (rand_r(&seed) % 4 == 0) {
            elector__timer_disarm(e, &t[i]);
            armed[i] = false;
        } else {
            due[i] = base + (int64_t)(rand_r(&seed) % 50); /* many ties */
            stamp[i] = clock++;
            armed[i] = true;
            elector__timer_arm(e, &t[i], due[i], record_fire, (void *)(intptr_t)i);
        }
    }
    int want = 0;
    for (int i = 0; i < NTIMERS; i++)
        want += armed[i];
    ASSERT_OK(elector_etcd_process(e));
    ASSERT_EQ(want, o.n);
    for (int k = 1; k < o.n; k++) {
        int a = o.fired[k - 1], b = o.fired[k];
        ASSERT(due[a] < due[b] || (due[a] == due[b] && stamp[a] < stamp[b]));
    }
    for (int k = 0; k < o.n; k++)
        ASSERT(armed[o.fired[k]] && !t[o.fired[k]].armed);
    ASSERT_EQ(-1, elector_etcd_timeout(e));
    elector_etcd_free(e);
}

TEST(deadline_clock_is_boottime)
{
    struct timespec b, m;
    clock_gettime(CLOCK_BOOTTIME, &b);
    int64_t now = elector_now_ns();
    clock_gettime(CLOCK_MONOTONIC, &m);
    int64_t boot = (int64_t)b.tv_sec * 1000000000 + b.tv_nsec;
    ASSERT_GE(now, boot);
    ASSERT_LT(now - boot, 1000000000LL);
    int64_t mono = elector__mono_ns();
    ASSERT_GE(mono, (int64_t)m.tv_sec * 1000000000 + m.tv_nsec);
    /* mono_of maps a deadline-clock instant onto CLOCK_MONOTONIC. */
    int64_t d = elector__mono_of(elector_now_ns() + 5000000000LL) - elector__mono_ns();
    ASSERT_GT(d, 4000000000LL);
    ASSERT_LE(d, 5000000000LL);
}

static void never_called(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)e, (void)err, (void)lease, (void)ttl;
    ++*(int *)ud;
}

/* The lease calls refuse what they cannot use, at once and without a callback. */
TEST(lease_calls_refuse_missing_arguments)
{
    int calls = 0;
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_lease_revoke_sync(NULL, 1, 0));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_keepalive(NULL, 1, 0, never_called, &calls));
    /* A client whose creation failed (a CA file that does not exist): its error,
     * not a renewal that never ends. */
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.cacert = "/nonexistent/elector-ca.pem";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    int err = elector_etcd_err(e);
    ASSERT(err != 0);
    ASSERT_EQ(err, elector_etcd_keepalive(e, 1, 0, never_called, &calls));
    elector_etcd_free(e);
    ASSERT_EQ(0, calls);
}

/* ------------------------------------------------------------- the client's edges */

TEST(config_values_out_of_range_take_their_defaults)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.dial_timeout_ms = -1;
    cfg.request_timeout_ms = 0;
    cfg.keepalive_time_ms = -5;
    cfg.keepalive_idle_ms = 0;
    cfg.keepalive_timeout_ms = -1;
    cfg.backoff_min_ms = 0;
    cfg.backoff_max_ms = 10; /* below the minimum (50 once defaulted) */
    cfg.max_recv_msg_bytes = SIZE_MAX;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    ASSERT_EQ(5000, e->cfg.dial_timeout_ms);
    ASSERT_EQ(5000, e->cfg.request_timeout_ms);
    ASSERT_EQ(1000, e->cfg.keepalive_time_ms);
    ASSERT_EQ(10000, e->cfg.keepalive_idle_ms);
    ASSERT_EQ(2000, e->cfg.keepalive_timeout_ms);
    ASSERT_EQ(50, e->cfg.backoff_min_ms);
    ASSERT_EQ(2000, e->cfg.backoff_max_ms);
    ASSERT_EQ((long long)ELECTOR__GRPC_MAX_MSG, (long long)e->cfg.max_recv_msg_bytes);
    ASSERT_EQ((long long)ELECTOR__GRPC_MAX_MSG * ELECTOR__DECODE_FACTOR,
              (long long)e->cfg.max_decode_bytes);
    elector_etcd_free(e);
}

/* Without descriptors for its epoll set, eventfd and timerfd, the client is
 * made in error (a clear message), and refuses calls. In a child: the limit
 * would stay. */
TEST(client_without_descriptors_is_made_in_error)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int hi = dup(0); /* the lowest free descriptor */
        close(hi);
        struct rlimit old, rl;
        if (getrlimit(RLIMIT_NOFILE, &old)) _exit(10);
        rl = old;
        rl.rlim_cur = (rlim_t)hi + 1; /* room for one */
        if (setrlimit(RLIMIT_NOFILE, &rl)) _exit(10);
        elector_etcd *e = elector_etcd_new(NULL);
        int rc = 0;
        Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
        if (!e)
            rc = 11;
        else if (elector_etcd_err(e) != ELECTOR_ENOMEM)
            rc = 12;
        else if (!strstr(elector_etcd_errstr(e), "cannot create epoll/eventfd/timerfd: "))
            rc = 13;
        else if (elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &q.base, NULL, NULL) !=
                 ELECTOR_ENOMEM)
            rc = 14;
        elector_etcd_free(e);
        int fd = dup(0); /* all were given back */
        if (!rc && fd != hi) rc = 15;
        setrlimit(RLIMIT_NOFILE, &old); /* (a coverage build writes its counters) */
        _exit(rc);
    }
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
}

typedef struct frees {
    elector_etcd *e;
    int calls, err;
} frees;

static void free_in_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m;
    frees *f = ud;
    f->calls++;
    f->err = err;
    elector_etcd_free(e);
    elector_etcd_free(e); /* again: ignored */
}

/* A callback that frees the client during elector_etcd_run_once: the pass
 * ends with ECLOSED and the memory goes then (ASan builds check it). */
TEST(client_freed_from_its_callback_ends_the_pass)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1"; /* refused at once */
    cfg.dial_timeout_ms = 2000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    frees f = {e, 0, 0};
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    ASSERT_OK(elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, NULL, free_in_cb, &f));
    int rc = 0;
    double end = tl_now() + 3;
    while (rc == 0 && tl_now() < end)
        rc = elector_etcd_run_once(e, 50);
    ASSERT_EQ(ELECTOR_ECLOSED, rc);
    ASSERT_EQ(1, f.calls);
    ASSERT_EQ(ELECTOR_ECONNECT, f.err);
}

typedef struct ended {
    int n, err;
    char msg[600];
    elector_etcd *e;
} ended;

static void note_end(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m;
    ended *x = ud;
    x->n++;
    x->err = err;
    snprintf(x->msg, sizeof(x->msg), "%s", elector_etcd_errstr(e));
}

/* A listening socket on a free loopback port that nobody accepts on. */
static int silent_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(fd, 16));
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &l));
    *port = ntohs(a.sin_port);
    return fd;
}

/* A call that never got a connection says why at its deadline: the last
 * connection error (the first endpoint refused; the second accepts TCP but
 * never speaks HTTP/2, and the call's deadline comes before the dial
 * timeout). */
TEST(call_without_a_connection_at_its_deadline_names_the_last_error)
{
    int port, closed;
    int lfd = silent_listener(&port);
    int cfd = silent_listener(&closed);
    close(cfd); /* a closed port now */
    char eps[128];
    snprintf(eps, sizeof(eps), "127.0.0.1:%d,127.0.0.1:%d", closed, port);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eps;
    cfg.dial_timeout_ms = 5000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    ended x = {0};
    elector_call_opts o = {.timeout_ms = 400};
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    ASSERT_OK(elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, &o, note_end, &x));
    double t0 = tl_now();
    while (!x.n && tl_now() < t0 + 4)
        elector_etcd_run_once(e, 50);
    tl_log("%s after %.2f s: %s", elector_err_name(x.err), tl_now() - t0, x.msg);
    ASSERT_EQ(1, x.n);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, x.err);
    ASSERT_CONTAINS(x.msg, "no connection before the deadline (last error: endpoint "
                           "127.0.0.1:");
    ASSERT_CONTAINS(x.msg, "connect: Connection refused");
    elector_etcd_free(e);
    close(lfd);
}

static void stream_cb(elector_stream *s, int err, const ProtobufCMessage *m, void *ud)
{
    (void)s, (void)err, (void)m;
    (*(int *)ud)++;
}

TEST(streams_refuse_bad_arguments_and_sends_after_their_end)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    int n = 0;
    ASSERT_NULL(elector_etcd_stream_open(e, ELECTOR_RPC_RANGE, NULL, stream_cb, &n));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    ASSERT_CONTAINS(elector_etcd_errstr(e), "bad arguments to elector_etcd_stream_open");
    ASSERT_NULL(elector_etcd_stream_open(e, ELECTOR_RPC_WATCH, NULL, NULL, &n));
    ASSERT_NULL(elector_etcd_stream_open(e, (elector_rpc)-1, NULL, stream_cb, &n));
    ASSERT_NULL(elector_etcd_stream_open(NULL, ELECTOR_RPC_WATCH, NULL, stream_cb, &n));
    elector_stream *s =
        elector_etcd_stream_open(e, ELECTOR_RPC_WATCH, NULL, stream_cb, &n);
    ASSERT_NOT_NULL(s);
    ASSERT(elector_stream_client(s) == e);
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    ASSERT_EQ(ELECTOR_EINVAL, elector_stream_send(s, &put.base)); /* not a WatchRequest */
    ASSERT_EQ(ELECTOR_EINVAL, elector_stream_send(s, NULL));
    Etcdserverpb__WatchRequest w = ETCDSERVERPB__WATCH_REQUEST__INIT;
    ASSERT_OK(elector_stream_send(s, &w.base));
    /* The connection is refused: the stream ends (once), and a send after
     * that is refused. */
    double end = tl_now() + 3;
    while (!n && tl_now() < end)
        elector_etcd_run_once(e, 50);
    ASSERT_EQ(1, n);
    ASSERT_EQ(ELECTOR_ECLOSED, elector_stream_send(s, &w.base));
    elector_stream_close(s);
    elector_stream_close(NULL);
    ASSERT_OK(elector_etcd_run_once(e, 0));
    ASSERT_EQ(1, n);
    elector_etcd_free(e);
}

/* A peer that speaks just enough HTTP/2 for the client to send: its SETTINGS
 * (streams may take 2 GiB) and a connection window as large; it reads nothing
 * for 0.3 s (the socket's buffers fill: the client's send would block), then
 * reads until want bytes came. Exits 0 then, 1 if they did not within 8 s. */
static pid_t slow_reader(int lfd, size_t want)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid) return pid;
    int c = accept(lfd, NULL, NULL);
    if (c < 0) _exit(2);
    static const uint8_t frames[] = {
        0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0,    0x4,  0x7f, 0xff, 0xff, 0xff, /* SETTINGS */
        0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0x7f, 0xff, 0,    0, /* WINDOW_UPDATE */
    };
    if (write(c, frames, sizeof(frames)) != (ssize_t)sizeof(frames)) _exit(3);
    usleep(300000);
    struct timeval tv = {8, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    static uint8_t buf[1 << 16];
    size_t got = 0;
    double end = tl_now() + 8;
    while (got < want && tl_now() < end) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        got += (size_t)n;
    }
    _exit(got >= want ? 0 : 1);
}

static void put_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)err, (void)m;
    (*(int *)ud)++;
}

/* A request larger than the socket takes at once: the client waits for the
 * socket to take more (EPOLLOUT), without spinning, and sends the rest as the
 * peer reads. Pings are off (keepalive time 60 s). */
TEST(large_request_to_a_slow_reader_is_sent_as_the_socket_takes_it)
{
    int port;
    int lfd = silent_listener(&port);
    size_t n = 16u << 20;
    pid_t peer = slow_reader(lfd, n);
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = ep;
    cfg.keepalive_time_ms = 60000;
    cfg.keepalive_idle_ms = 60000;
    cfg.request_timeout_ms = 20000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)"big";
    p.key.len = 3;
    p.value.data = calloc(1, n);
    p.value.len = n;
    int done = 0;
    ASSERT_OK(elector_etcd_call(e, ELECTOR_RPC_PUT, &p.base, NULL, put_done, &done));
    free(p.value.data);
    int st = 0, passes = 0;
    pid_t w = 0;
    double t0 = tl_now();
    while (w == 0 && tl_now() < t0 + 12) {
        elector_etcd_run_once(e, 100);
        passes++;
        w = waitpid(peer, &st, WNOHANG);
    }
    tl_log("16 MiB to a peer that reads after 0.3 s: %s after %.2f s, %d passes",
           w == peer && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "all read"
                                                              : "NOT all read",
           tl_now() - t0, passes);
    if (w == 0) {
        kill(peer, SIGKILL);
        waitpid(peer, &st, 0);
    }
    ASSERT_EQ(peer, w);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
    /* While the socket is full the loop sleeps until it takes more: a few
     * passes per read of the peer's, not a spin (without the wait for
     * EPOLLOUT it made over 10,000 passes in the 0.3 s). */
    ASSERT_LT(passes, 2000);
    elector_etcd_free(e);
    ASSERT_EQ(1, done); /* ended once (the peer left, or the free): never answered */
    close(lfd);
}

/* ------------------------------------------------------------- the driver's threads */

/* In a child inside a pids cgroup that lets max tasks exist: the client's
 * threads cannot all start. elector_etcd_new with own_thread gives a client in
 * error EUNAVAILABLE, and its free leaves nothing behind (the thread that did
 * start is stopped and joined). */
static int driver_without_threads(int max)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        char dir[512];
        if (tl_pids_cgroup(dir, sizeof(dir), max)) _exit(77);
        elector_etcd *d = (elector_etcd *)&d;
        int rc = eu_own_new(NULL, NULL, &d);
        _exit(rc == ELECTOR_EUNAVAILABLE && d == NULL ? 0 : 1);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {
    }
    tl_pids_cgroup_remove(pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(driver_whose_threads_cannot_start_says_eunavailable)
{
    int rc = driver_without_threads(1); /* not even the callback thread */
    if (rc == 77) tl_skip("no pids cgroup here");
    ASSERT_EQ(0, rc);
    ASSERT_EQ(0, driver_without_threads(2)); /* the callback thread, not the loop's */
    ASSERT_EQ(1, driver_without_threads(3)); /* room for both: made (the control) */
}

/* A peer that answers the HTTP/2 preface with something else (an HTTP/1.1
 * server on the port): the connection fails as a protocol error, said, and
 * the call hears it within the dial timeout, not at its deadline. */
TEST(peer_that_does_not_speak_http2_fails_the_connection_as_a_protocol_error)
{
    int port;
    int lfd = silent_listener(&port);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0) _exit(1);
        static const char resp[] =
            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        char buf[1024];
        if (read(c, buf, sizeof(buf)) <= 0) _exit(2);
        if (write(c, resp, sizeof(resp) - 1) < 0) _exit(3);
        usleep(2000000); /* open: the client must act on the bytes, not on a close */
        _exit(0);
    }
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = ep;
    cfg.dial_timeout_ms = 1500;
    cfg.request_timeout_ms = 10000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    ended x = {0};
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    ASSERT_OK(elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, NULL, note_end, &x));
    double t0 = tl_now();
    while (!x.n && tl_now() < t0 + 5)
        elector_etcd_run_once(e, 50);
    tl_log("%s after %.2f s: %s; last connection error: %s", elector_err_name(x.err),
           tl_now() - t0, x.msg, e->last_conn_msg);
    ASSERT_EQ(1, x.n);
    ASSERT_EQ(ELECTOR_EPROTO, e->last_conn_err);
    ASSERT_CONTAINS(e->last_conn_msg, "HTTP/2: ");
    ASSERT_CONTAINS(e->last_conn_msg, ep);
    ASSERT_LT(tl_now() - t0, 1.4); /* before the dial timeout */
    elector_etcd_free(e);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(lfd);
}

static void obs_never(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o, (void)ev;
    ++*(int *)ud;
}

static void watch_never(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                        void *ud)
{
    (void)w, (void)err, (void)r;
    ++*(int *)ud;
}

/* Observers, leader queries and watches refuse what they cannot use, at once
 * (NULL or ELECTOR_EINVAL, the client's error saying why), without a call to
 * etcd (none runs here: the endpoint is a closed port) or a callback. */
TEST(observe_leader_and_watch_refuse_missing_arguments)
{
    int calls = 0;
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    ASSERT_NULL(elector_observe(NULL, "n", obs_never, &calls));
    ASSERT_NULL(elector_observe(e, NULL, obs_never, &calls));
    ASSERT_NULL(elector_observe(e, "", obs_never, &calls));
    ASSERT_NULL(elector_observe(e, "n", NULL, &calls));
    elector_observer_free(NULL);

    elector_leader_info info;
    memset(&info, 0x5a, sizeof(info));
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader_sync(e, NULL, 100, &info));
    ASSERT_NULL(info.key); /* cleared: elector_leader_free() on it is safe */
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader_sync(e, "", 100, &info));
    elector_leader_free(&info);
    elector_leader_free(NULL);

    Etcdserverpb__WatchCreateRequest wc = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    wc.key.data = (uint8_t *)"k";
    wc.key.len = 1;
    ASSERT_NULL(elector_etcd_watch(NULL, &wc, watch_never, &calls));
    ASSERT_NULL(elector_etcd_watch(e, NULL, watch_never, &calls));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    ASSERT_CONTAINS(elector_etcd_errstr(e), "bad arguments");
    ASSERT_NULL(elector_etcd_watch(e, &wc, NULL, &calls));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_err(e));
    elector_watch_cancel(NULL);
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    ASSERT_EQ(0, (int)st.requests[ELECTOR_RPC_RANGE]);
    ASSERT_EQ(0, (int)st.requests[ELECTOR_RPC_WATCH]);
    elector_etcd_free(e);
    ASSERT_EQ(0, calls);
}

static void closed_never(int rc, void *ud)
{
    (void)rc;
    ++*(int *)ud;
}

/* Sessions that never got their lease (the endpoint is a closed port): waiting
 * no time is a timeout; closing them has nothing to revoke (close_sync and
 * close_async return 0 and call nobody), also a session adopting a lease
 * (cfg.lease_id) whose keepalive is still out; no session without a client;
 * closing NULL does nothing. */
TEST(sessions_closed_before_their_grant_revoke_nothing)
{
    int calls = 0;
    ASSERT_NULL(elector_session_new(NULL, NULL, NULL, NULL));
    elector_session_close(NULL);
    ASSERT_EQ(0, elector_session_close_sync(NULL, 0));
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = -5; /* the default, 10 s */
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_session_wait(s, 0));
    ASSERT(!elector_session_alive(s));
    ASSERT_EQ(0, elector_session_lease(s));
    ASSERT_EQ(0, elector_session_close_sync(s, 100));
    s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(0, elector_session_close_async(s, 100, closed_never, &calls));
    sc.ttl_s = 10;
    sc.lease_id = 0x1234;
    s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_session_wait(s, 0));
    elector_session_close(s);
    elector_etcd_free(e);
    ASSERT_EQ(0, calls);
}

/* An endpoint whose host name does not resolve, and one whose connect() fails
 * at once: the call fails with ECONNECT and the reason. In a network namespace of its own
 * with no interface up, so that the resolver's query goes nowhere (no traffic leaves the
 * machine); skipped where no namespace may be made. */
TEST(endpoint_whose_name_does_not_resolve_fails_with_econnect)
{
    pid_t p = fork();
    ASSERT(p >= 0);
    if (p == 0) {
        if (unshare(CLONE_NEWNET)) _exit(TL_SKIP_STATUS);
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = "no-such-host.invalid:2379";
        cfg.dial_timeout_ms = 3000;
        elector_etcd *e = elector_etcd_new(&cfg);
        if (!e || elector_etcd_err(e)) _exit(2);
        Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
        rr.key.data = (uint8_t *)"k";
        rr.key.len = 1;
        elector_call_opts o = {.timeout_ms = 5000};
        double t0 = tl_now();
        int rc = elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &rr.base, &o, NULL);
        const char *why = elector_etcd_errstr(e);
        fprintf(stderr, "rc %s in %.3f s: %s\n", elector_err_name(rc), tl_now() - t0,
                why ? why : "");
        int ok = rc == ELECTOR_ECONNECT && why && strstr(why, "cannot resolve host");
        elector_etcd_free(e);
        /* A loopback address with the namespace's loopback down: connect()
         * itself fails (no route), not later. */
        cfg.endpoints = "127.0.0.1:2379";
        e = elector_etcd_new(&cfg);
        if (!e || elector_etcd_err(e)) _exit(2);
        rc = elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &rr.base, &o, NULL);
        why = elector_etcd_errstr(e);
        fprintf(stderr, "rc %s: %s\n", elector_err_name(rc), why ? why : "");
        ok = ok && rc == ELECTOR_ECONNECT && why && strstr(why, "connect: ");
        elector_etcd_free(e);
        /* No descriptor left for the socket (the client's own are made):
         * socket() fails (not under valgrind, which keeps its own limit). */
        const char *pre = getenv("LD_PRELOAD");
        if (!pre || !strstr(pre, "vgpreload")) {
            e = elector_etcd_new(&cfg);
            if (!e || elector_etcd_err(e)) _exit(2);
            int hi = dup(0);
            struct rlimit rl, was;
            getrlimit(RLIMIT_NOFILE, &was);
            rl = was;
            rl.rlim_cur = (rlim_t)hi; /* every descriptor below hi is taken */
            for (int fd = 0; fd < hi; fd++)
                if (fcntl(fd, F_GETFD) < 0) dup2(hi, fd);
            if (setrlimit(RLIMIT_NOFILE, &rl)) _exit(3);
            rc = elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &rr.base, &o, NULL);
            /* Put back: a coverage build writes its counters at _exit. */
            setrlimit(RLIMIT_NOFILE, &was);
            why = elector_etcd_errstr(e);
            fprintf(stderr, "rc %s: %s\n", elector_err_name(rc), why ? why : "");
            ok = ok && rc == ELECTOR_ECONNECT && why && strstr(why, "socket: ");
            elector_etcd_free(e);
        }
        _exit(ok ? 0 : 1);
    }
    int st;
    ASSERT_EQ(p, waitpid(p, &st, 0));
    ASSERT(WIFEXITED(st));
    if (WEXITSTATUS(st) == TL_SKIP_STATUS)
        tl_skip("no network namespace may be made here");
    ASSERT_EQ(0, WEXITSTATUS(st));
}

/* The range end of the empty prefix (every key) is "\0", also when the prefix
 * pointer is NULL (nothing is read from it). */
TEST(prefix_end_of_the_empty_prefix_is_a_zero_byte)
{
    uint8_t out[4] = {7, 7, 7, 7};
    ASSERT_EQ(1, (long long)elector_prefix_end(NULL, 0, out));
    ASSERT_EQ(0, out[0]);
    ASSERT_EQ(7, out[1]);
}

/* A session on a client whose creation failed (a CA file that does not exist)
 * is refused at once (NULL), whether it grants a lease or adopts one: no
 * session that waits for a grant or renewal that can never be sent. */
TEST(session_on_a_client_in_error_is_refused)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.cacert = "/nonexistent/elector-ca.pem";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT(elector_etcd_err(e) != 0);
    ASSERT_NULL(elector_session_new(e, NULL, NULL, NULL));
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.lease_id = 0x1234;
    ASSERT_NULL(elector_session_new(e, &sc, NULL, NULL));
    elector_etcd_free(e);
}

/* A keepalive without a callback is refused at once (EINVAL), on a client
 * that is fine: its result could go nowhere. */
TEST(keepalive_without_a_callback_is_refused)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_keepalive(e, 1, 0, NULL, NULL));
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    ASSERT_EQ(0, (long long)st.requests[ELECTOR_RPC_LEASE_KEEPALIVE]);
    elector_etcd_free(e);
}
