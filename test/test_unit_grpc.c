/* SPDX-License-Identifier: MIT */
/* Unit tests (no server) for gRPC framing, grpc-timeout, grpc-message decoding and
 * the grpc-status/etcd message mapping in src/transport/grpc.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport_private.h"
#include "testlib.h"

#include <etcdserverpb/rpc.pb-c.h>

/* A RangeRequest whose key holds zero bytes, so nothing stops at a NUL. */
static const uint8_t bin_key[] = {'k', 0, 'e', 0, 0, 'y', 0xff, 0x00, 0x80};
static const uint8_t bin_end[] = {'k', 0, 'f'};

static void make_range(Etcdserverpb__RangeRequest *r)
{
    Etcdserverpb__RangeRequest init = ETCDSERVERPB__RANGE_REQUEST__INIT;
    *r = init;
    r->key.data = (uint8_t *)bin_key;
    r->key.len = sizeof(bin_key);
    r->range_end.data = (uint8_t *)bin_end;
    r->range_end.len = sizeof(bin_end);
    r->limit = 7;
    r->revision = 123456789012LL;
    r->serializable = 1;
}

static void check_range(const uint8_t *payload, size_t len)
{
    Etcdserverpb__RangeRequest *got =
        etcdserverpb__range_request__unpack(NULL, len, payload);
    ASSERT_NOT_NULL(got);
    ASSERT_EQ(sizeof(bin_key), got->key.len);
    ASSERT(memcmp(got->key.data, bin_key, sizeof(bin_key)) == 0);
    ASSERT_EQ(sizeof(bin_end), got->range_end.len);
    ASSERT(memcmp(got->range_end.data, bin_end, sizeof(bin_end)) == 0);
    ASSERT_EQ(7, got->limit);
    ASSERT_EQ(123456789012LL, got->revision);
    ASSERT_EQ(1, got->serializable);
    etcdserverpb__range_request__free_unpacked(got, NULL);
}

/* Appends a raw 5-byte prefix (flag, big-endian length). */
static void put_prefix(elector__buf *b, uint8_t flag, uint32_t n)
{
    uint8_t p[5] = {flag, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
                    (uint8_t)n};
    ASSERT_OK(elector__buf_append(b, p, sizeof(p)));
}

/* ------------------------------------------------------------------ framing */

TEST(grpc_frame_roundtrip_binary_key)
{
    Etcdserverpb__RangeRequest req;
    make_range(&req);
    size_t packed = protobuf_c_message_get_packed_size(&req.base);
    elector__buf b = {0};
    ASSERT_OK(elector__grpc_frame(&b, &req.base));
    ASSERT_EQ(5 + packed, elector__buf_avail(&b));
    const uint8_t *h = elector__buf_head(&b);
    ASSERT_EQ(0, h[0]);
    ASSERT_EQ(packed, (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4]);

    const uint8_t *payload = NULL;
    size_t len = 0;
    ASSERT_EQ(1, elector__grpc_next(&b, &payload, &len));
    ASSERT_EQ(packed, len);
    ASSERT(payload == elector__buf_head(&b) + 5);
    check_range(payload, len);
    elector__buf_consume(&b, 5 + len);
    ASSERT_EQ(0, elector__buf_avail(&b));
    ASSERT_EQ(0, elector__grpc_next(&b, &payload, &len));
    elector__buf_free(&b);
}

TEST(grpc_frame_appends_after_existing_bytes)
{
    elector__buf b = {0};
    ASSERT_OK(elector__buf_append(&b, "junk!", 5));
    elector__buf_consume(&b, 2); /* off > 0: the frame must land after "nk!" */
    Etcdserverpb__RangeRequest req;
    make_range(&req);
    size_t packed = protobuf_c_message_get_packed_size(&req.base);
    ASSERT_OK(elector__grpc_frame(&b, &req.base));
    ASSERT_EQ(3 + 5 + packed, elector__buf_avail(&b));
    ASSERT(memcmp(elector__buf_head(&b), "nk!", 3) == 0);
    elector__buf_consume(&b, 3);
    const uint8_t *payload;
    size_t len;
    ASSERT_EQ(1, elector__grpc_next(&b, &payload, &len));
    ASSERT_EQ(packed, len);
    check_range(payload, len);
    elector__buf_free(&b);
}

TEST(grpc_next_waits_for_split_header)
{
    Etcdserverpb__RangeRequest req;
    make_range(&req);
    elector__buf whole = {0};
    ASSERT_OK(elector__grpc_frame(&whole, &req.base));
    size_t total = elector__buf_avail(&whole);
    const uint8_t *bytes = elector__buf_head(&whole);

    /* One byte at a time: nothing until the last byte, then the message. */
    elector__buf b = {0};
    const uint8_t *payload;
    size_t len;
    for (size_t i = 0; i < total; i++) {
        ASSERT_EQ(0, elector__grpc_next(&b, &payload, &len));
        ASSERT_OK(elector__buf_append(&b, bytes + i, 1));
    }
    ASSERT_EQ(1, elector__grpc_next(&b, &payload, &len));
    ASSERT_EQ(total - 5, len);
    check_range(payload, len);
    elector__buf_free(&b);

    /* Two chunks split at every offset, including inside the 5-byte prefix. */
    for (size_t k = 0; k <= total; k++) {
        elector__buf c = {0};
        ASSERT_OK(elector__buf_append(&c, bytes, k));
        ASSERT_EQ(k == total ? 1 : 0, elector__grpc_next(&c, &payload, &len));
        ASSERT_OK(elector__buf_append(&c, bytes + k, total - k));
        ASSERT_EQ(1, elector__grpc_next(&c, &payload, &len));
        ASSERT_EQ(total - 5, len);
        check_range(payload, len);
        elector__buf_free(&c);
    }
    elector__buf_free(&whole);
}

TEST(grpc_next_consumes_merged_frames_one_by_one)
{
    Etcdserverpb__RangeRequest r1;
    make_range(&r1);
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)"\0k";
    p.key.len = 2;
    p.value.data = (uint8_t *)"value";
    p.value.len = 5;
    p.lease = 42;
    Etcdserverpb__RangeRequest empty = ETCDSERVERPB__RANGE_REQUEST__INIT;

    for (int nframes = 2; nframes <= 3; nframes++) {
        elector__buf b = {0};
        ASSERT_OK(elector__grpc_frame(&b, &r1.base));
        ASSERT_OK(elector__grpc_frame(&b, &p.base));
        if (nframes == 3) ASSERT_OK(elector__grpc_frame(&b, &empty.base));

        const uint8_t *payload;
        size_t len;
        ASSERT_EQ(1, elector__grpc_next(&b, &payload, &len));
        ASSERT_EQ(protobuf_c_message_get_packed_size(&r1.base), len);
        check_range(payload, len);
        elector__buf_consume(&b, 5 + len);

        ASSERT_EQ(1, elector__grpc_next(&b, &payload, &len));
        ASSERT_EQ(protobuf_c_message_get_packed_size(&p.base), len);
        Etcdserverpb__PutRequest *got =
            etcdserverpb__put_request__unpack(NULL, len, payload);
        ASSERT_NOT_NULL(got);
        ASSERT_EQ(2, got->key.len);
        ASSERT(memcmp(got->key.data, "\0k", 2) == 0);
        ASSERT_EQ(5, got->value.len);
        ASSERT(memcmp(got->value.data, "value", 5) == 0);
        ASSERT_EQ(42, got->lease);
        etcdserverpb__put_request__free_unpacked(got, NULL);
        elector__buf_consume(&b, 5 + len);

        if (nframes == 3) {
            ASSERT_EQ(1, elector__grpc_next(&b, &payload, &len));
            ASSERT_EQ(0, len);
            elector__buf_consume(&b, 5 + len);
        }
        ASSERT_EQ(0, elector__buf_avail(&b));
        ASSERT_EQ(0, elector__grpc_next(&b, &payload, &len));
        elector__buf_free(&b);
    }
}

TEST(grpc_next_second_frame_partial_after_first)
{
    Etcdserverpb__RangeRequest r;
    make_range(&r);
    elector__buf b = {0};
    ASSERT_OK(elector__grpc_frame(&b, &r.base));
    ASSERT_OK(elector__grpc_frame(&b, &r.base));
    size_t one = elector__buf_avail(&b) / 2;
    b.len -= 3; /* drop the tail of the second frame */
    const uint8_t *payload;
    size_t len;
    ASSERT_EQ(1, elector__grpc_next(&b, &payload, &len));
    ASSERT_EQ(one - 5, len);
    elector__buf_consume(&b, 5 + len);
    ASSERT_EQ(0, elector__grpc_next(&b, &payload, &len));
    elector__buf_free(&b);
}

TEST(grpc_zero_length_message)
{
    Etcdserverpb__RangeRequest empty = ETCDSERVERPB__RANGE_REQUEST__INIT;
    ASSERT_EQ(0, protobuf_c_message_get_packed_size(&empty.base));
    elector__buf b = {0};
    ASSERT_OK(elector__grpc_frame(&b, &empty.base));
    ASSERT_EQ(5, elector__buf_avail(&b));
    static const uint8_t zeros[5] = {0};
    ASSERT(memcmp(elector__buf_head(&b), zeros, 5) == 0);

    /* Four bytes of the prefix are not yet a message. */
    elector__buf part = {0};
    ASSERT_OK(elector__buf_append(&part, zeros, 4));
    const uint8_t *payload = NULL;
    size_t len = 99;
    ASSERT_EQ(0, elector__grpc_next(&part, &payload, &len));
    elector__buf_free(&part);

    ASSERT_EQ(1, elector__grpc_next(&b, &payload, &len));
    ASSERT_EQ(0, len);
    Etcdserverpb__RangeRequest *got =
        etcdserverpb__range_request__unpack(NULL, len, payload);
    ASSERT_NOT_NULL(got);
    ASSERT_EQ(0, got->key.len);
    etcdserverpb__range_request__free_unpacked(got, NULL);
    elector__buf_free(&b);
}

TEST(grpc_next_compressed_flag_is_eproto)
{
    const uint8_t *payload;
    size_t len;
    for (int flag = 1; flag <= 255; flag += 127) {
        elector__buf b = {0};
        put_prefix(&b, (uint8_t)flag, 3);
        ASSERT_OK(elector__buf_append(&b, "abc", 3));
        ASSERT_EQ(ELECTOR_EPROTO, elector__grpc_next(&b, &payload, &len));
        elector__buf_free(&b);
    }
    /* Refused as soon as the prefix is there, before the payload arrives. */
    elector__buf b = {0};
    put_prefix(&b, 1, 1000);
    ASSERT_EQ(ELECTOR_EPROTO, elector__grpc_next(&b, &payload, &len));
    elector__buf_free(&b);
}

TEST(grpc_next_oversized_length_is_eproto)
{
    const uint8_t *payload;
    size_t len;
    elector__buf b = {0};
    put_prefix(&b, 0, ELECTOR__GRPC_MAX_MSG + 1);
    ASSERT_EQ(ELECTOR_EPROTO, elector__grpc_next(&b, &payload, &len));
    elector__buf_free(&b);

    put_prefix(&b, 0, UINT32_MAX);
    ASSERT_EQ(ELECTOR_EPROTO, elector__grpc_next(&b, &payload, &len));
    elector__buf_free(&b);

    /* Exactly the maximum is allowed: it just waits for the bytes. */
    put_prefix(&b, 0, ELECTOR__GRPC_MAX_MSG);
    ASSERT_OK(elector__buf_append(&b, "x", 1));
    ASSERT_EQ(0, elector__grpc_next(&b, &payload, &len));
    elector__buf_free(&b);
}

TEST(grpc_frame_one_mib_payload)
{
    size_t n = 1u << 20;
    uint8_t *val = malloc(n);
    ASSERT_NOT_NULL(val);
    for (size_t i = 0; i < n; i++)
        val[i] = (uint8_t)(i * 131u + (i >> 8));
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)"big";
    p.key.len = 3;
    p.value.data = val;
    p.value.len = n;
    size_t packed = protobuf_c_message_get_packed_size(&p.base);
    ASSERT_GT(packed, n);

    elector__buf b = {0};
    ASSERT_OK(elector__grpc_frame(&b, &p.base));
    ASSERT_EQ(5 + packed, elector__buf_avail(&b));

    /* Deliver it in 16 KiB pieces, as HTTP/2 DATA frames would. */
    elector__buf rx = {0};
    const uint8_t *payload;
    size_t len, fed = 0, total = elector__buf_avail(&b);
    while (fed < total) {
        ASSERT_EQ(0, elector__grpc_next(&rx, &payload, &len));
        size_t chunk = total - fed < 16384 ? total - fed : 16384;
        ASSERT_OK(elector__buf_append(&rx, elector__buf_head(&b) + fed, chunk));
        fed += chunk;
    }
    ASSERT_EQ(1, elector__grpc_next(&rx, &payload, &len));
    ASSERT_EQ(packed, len);
    Etcdserverpb__PutRequest *got = etcdserverpb__put_request__unpack(NULL, len, payload);
    ASSERT_NOT_NULL(got);
    ASSERT_EQ(n, got->value.len);
    ASSERT(memcmp(got->value.data, val, n) == 0);
    etcdserverpb__put_request__free_unpacked(got, NULL);
    elector__buf_free(&rx);
    elector__buf_free(&b);
    free(val);
}

/* ------------------------------------------------------------ grpc-timeout */

TEST(grpc_timeout_milliseconds)
{
    char out[16];
    elector__grpc_timeout(1, out);
    ASSERT_STREQ("1m", out);
    elector__grpc_timeout(5000, out);
    ASSERT_STREQ("5000m", out);
    elector__grpc_timeout(1500, out);
    ASSERT_STREQ("1500m", out);
    elector__grpc_timeout(99999999, out);
    ASSERT_STREQ("99999999m", out);
}

TEST(grpc_timeout_zero_or_negative_is_one_ms)
{
    char out[16];
    elector__grpc_timeout(0, out);
    ASSERT_STREQ("1m", out);
    elector__grpc_timeout(-1, out);
    ASSERT_STREQ("1m", out);
    elector__grpc_timeout(INT64_MIN, out);
    ASSERT_STREQ("1m", out);
}

/* The gRPC spec allows at most 8 digits followed by one unit letter. */
static void check_timeout_shape(const char *s)
{
    size_t n = strlen(s);
    ASSERT_GE(n, 2);
    ASSERT_LE(n, 9);
    for (size_t i = 0; i + 1 < n; i++)
        ASSERT(s[i] >= '0' && s[i] <= '9');
    ASSERT(strchr("HMSmun", s[n - 1]) != NULL);
}

TEST(grpc_timeout_huge_uses_seconds_and_8_digits)
{
    char out[16];
    elector__grpc_timeout(100000000, out); /* 9 digits of ms */
    ASSERT_STREQ("100000S", out);
    check_timeout_shape(out);
    elector__grpc_timeout(123456789012LL, out);
    ASSERT_STREQ("99999999S", out); /* 123456789 s has 9 digits: capped */
    check_timeout_shape(out);
    elector__grpc_timeout(INT64_MAX, out);
    check_timeout_shape(out);
    ASSERT_EQ('S', out[strlen(out) - 1]);
    elector__grpc_timeout((int64_t)99999999 * 1000 + 999, out);
    check_timeout_shape(out);
    ASSERT_STREQ("99999999S", out);

    const int64_t samples[] = {1,
                               9,
                               10,
                               99999999,
                               100000000,
                               999999999,
                               1000000000000LL,
                               (int64_t)1 << 40,
                               (int64_t)1 << 62,
                               INT64_MAX};
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        elector__grpc_timeout(samples[i], out);
        check_timeout_shape(out);
    }
}

/* ------------------------------------------------------------- grpc-message */

static void decode(const char *in, char *out, size_t cap)
{
    elector__percent_decode(in, strlen(in), out, cap);
}

TEST(percent_decode_etcd_message)
{
    char out[128];
    decode("etcdserver%3A%20no%20leader", out, sizeof(out));
    ASSERT_STREQ("etcdserver: no leader", out);
    decode("plain text", out, sizeof(out));
    ASSERT_STREQ("plain text", out);
    decode("", out, sizeof(out));
    ASSERT_STREQ("", out);
    decode("%41%62%7a%5A%3a", out, sizeof(out)); /* both hex cases */
    ASSERT_STREQ("AbzZ:", out);
    decode("100%25", out, sizeof(out));
    ASSERT_STREQ("100%", out);
}

TEST(percent_decode_invalid_escapes_verbatim)
{
    char out[128];
    decode("%zz", out, sizeof(out));
    ASSERT_STREQ("%zz", out);
    decode("a%", out, sizeof(out));
    ASSERT_STREQ("a%", out);
    decode("%", out, sizeof(out));
    ASSERT_STREQ("%", out);
    decode("%4", out, sizeof(out));
    ASSERT_STREQ("%4", out);
    decode("x%4g%g4%%41", out, sizeof(out));
    ASSERT_STREQ("x%4g%g4%A", out);
    decode("%20%", out, sizeof(out));
    ASSERT_STREQ(" %", out);
}

TEST(percent_decode_truncates_to_cap)
{
    char out[8];
    memset(out, 'Z', sizeof(out));
    decode("abcdefghijkl", out, sizeof(out));
    ASSERT_STREQ("abcdefg", out);
    memset(out, 'Z', sizeof(out));
    decode("%41%42%43%44%45%46%47%48%49", out, sizeof(out));
    ASSERT_STREQ("ABCDEFG", out);
    char one[1] = {'Z'};
    decode("abc", one, 1);
    ASSERT_EQ(0, one[0]);
    char none[1] = {'Z'};
    decode("abc", none, 0); /* cap 0: nothing written */
    ASSERT_EQ('Z', none[0]);
    /* Explicit length: stops there even without a NUL. */
    char out2[16];
    elector__percent_decode("abc%20def", 4, out2, sizeof(out2));
    ASSERT_STREQ("abc%", out2);
    elector__percent_decode("abc%20def", 6, out2, sizeof(out2));
    ASSERT_STREQ("abc ", out2);
}

TEST(percent_decode_utf8_bytes)
{
    char out[32];
    decode("ok %E2%9C%93 done", out, sizeof(out));
    ASSERT_STREQ("ok \xE2\x9C\x93 done", out);
}

TEST(percent_decode_in_place)
{
    char s[] = "etcdserver%3A%20no%20leader%zz";
    elector__percent_decode(s, strlen(s), s, sizeof(s));
    ASSERT_STREQ("etcdserver: no leader%zz", s);
}

/* -------------------------------------------------------------- grpc-status */

TEST(grpc_error_status_zero_is_ok)
{
    ASSERT_EQ(0, elector__grpc_error(0, NULL));
    ASSERT_EQ(0, elector__grpc_error(0, ""));
    ASSERT_EQ(0, elector__grpc_error(0, "etcdserver: no leader"));
}

TEST(grpc_error_etcd_messages)
{
    static const struct {
        int status;
        const char *msg;
        int want;
    } cases[] = {
        {14, "etcdserver: no leader", ELECTOR_ENOLEADER},
        {11, "etcdserver: mvcc: required revision has been compacted",
         ELECTOR_ECOMPACTED},
        {11, "etcdserver: mvcc: required revision is a future revision",
         ELECTOR_EFUTUREREV},
        {5, "etcdserver: requested lease not found", ELECTOR_ELEASE},
        {16, "etcdserver: invalid auth token", ELECTOR_ETOKEN},
        {3, "etcdserver: authentication failed, invalid user ID or password",
         ELECTOR_EAUTH},
        {3, "etcdserver: user name is empty", ELECTOR_EAUTH},
        {9, "etcdserver: user name not found", ELECTOR_EAUTH},
        {9, "etcdserver: authentication is not enabled", ELECTOR_EAUTH},
        {7, "etcdserver: permission denied", ELECTOR_EPERM},
        {3, "etcdserver: request is too large", ELECTOR_ETOOLARGE},
        {8, "grpc: trying to send message larger than max (3000000 vs. 2097152)",
         ELECTOR_ETOOLARGE},
        {8, "etcdserver: mvcc: database space exceeded", ELECTOR_ENOSPACE},
        {8, "etcdserver: corrupt cluster", ELECTOR_EALARM},
        {14, "etcdserver: request timed out", ELECTOR_ETIMEDOUT},
        {14, "etcdserver: leader changed", ELECTOR_EUNAVAILABLE},
        /* Other prefixes ("rpc error: ...") still match. */
        {14, "rpc error: code = Unavailable desc = etcdserver: no leader",
         ELECTOR_ENOLEADER},
        /* The message wins over the status code. */
        {2, "etcdserver: no leader", ELECTOR_ENOLEADER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = elector__grpc_error(cases[i].status, cases[i].msg);
        if (got != cases[i].want)
            tl_log("case %zu: (%d, \"%s\") -> %s, want %s", i, cases[i].status,
                   cases[i].msg, elector_err_name(got), elector_err_name(cases[i].want));
        ASSERT_EQ(cases[i].want, got);
    }
}

TEST(grpc_error_unknown_message_by_status)
{
    static const struct {
        int status;
        int want;
    } cases[] = {
        {1, ELECTOR_ECANCELED}, {2, ELECTOR_EGRPC},  {3, ELECTOR_EGRPC},
        {4, ELECTOR_ETIMEDOUT}, {5, ELECTOR_EGRPC},  {7, ELECTOR_EPERM},
        {8, ELECTOR_EGRPC},     {13, ELECTOR_EGRPC}, {14, ELECTOR_EUNAVAILABLE},
        {16, ELECTOR_ETOKEN},   {99, ELECTOR_EGRPC}, {-5, ELECTOR_EGRPC},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ASSERT_EQ(cases[i].want, elector__grpc_error(cases[i].status, "something else"));
        ASSERT_EQ(cases[i].want, elector__grpc_error(cases[i].status, ""));
    }
}

TEST(grpc_error_null_message)
{
    ASSERT_EQ(ELECTOR_EUNAVAILABLE, elector__grpc_error(14, NULL));
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector__grpc_error(4, NULL));
    ASSERT_EQ(ELECTOR_ECANCELED, elector__grpc_error(1, NULL));
    ASSERT_EQ(ELECTOR_EGRPC, elector__grpc_error(2, NULL));
    ASSERT_EQ(ELECTOR_EGRPC, elector__grpc_error(11, NULL));
}

TEST(grpc_error_after_percent_decode)
{
    char msg[128];
    decode("etcdserver%3A%20mvcc%3A%20required%20revision%20has%20been%20compacted", msg,
           sizeof(msg));
    ASSERT_EQ(ELECTOR_ECOMPACTED, elector__grpc_error(11, msg));
}

/* ------------------------------------------------------------------ bounded decoding */

/* A growable byte string for hand-made wire data. */
typedef struct wbytes {
    uint8_t *p;
    size_t n, cap;
} wbytes;

static void wb_put(wbytes *b, const void *p, size_t n)
{
    if (!n) return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        ASSERT_NOT_NULL(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void wb_varint(wbytes *b, uint64_t v)
{
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) t[k] |= 0x80;
        k++;
    } while (v);
    wb_put(b, t, k);
}

/* Wraps inner as length-delimited field `field`. */
static void wb_wrap(wbytes *out, unsigned field, const wbytes *inner)
{
    wb_varint(out, (uint64_t)field << 3 | 2);
    wb_varint(out, inner->n);
    wb_put(out, inner->p, inner->n);
}

/* A TxnResponse with `levels` Txn results nested in each other (each level is
 * TxnResponse.responses[0].response_txn: two messages deep). */
static wbytes nested_txn(int levels)
{
    wbytes cur = {0};
    for (int i = 0; i < levels; i++) {
        wbytes op = {0}, txn = {0};
        wb_wrap(&op, 4, &cur); /* ResponseOp.response_txn */
        wb_wrap(&txn, 3, &op); /* TxnResponse.responses */
        free(cur.p);
        free(op.p);
        cur = txn;
    }
    return cur;
}

TEST(decode_refuses_txn_results_nested_beyond_the_depth_limit)
{
    /* What a hostile server sent: 5,000 levels (protobuf-c alone recursed until the
     * stack ran out). */
    wbytes deep = nested_txn(5000);
    tl_log("5000 nested Txn results: %zu bytes", deep.n);
    int why = 0;
    ASSERT_NULL(elector__decode(&etcdserverpb__txn_response__descriptor, deep.p, deep.n,
                                64u << 20, &why));
    ASSERT_EQ(ELECTOR__DEC_TOO_DEEP, why);
    ASSERT_EQ(ELECTOR__DEC_TOO_DEEP,
              elector__pb_check(&etcdserverpb__txn_response__descriptor, deep.p, deep.n));
    free(deep.p);

    /* Nested Txns that etcd itself would return still decode: 15 levels = 30
     * messages deep, within the limit of 32. */
    wbytes ok = nested_txn(ELECTOR__PB_MAX_DEPTH / 2 - 1);
    ProtobufCMessage *m = elector__decode(&etcdserverpb__txn_response__descriptor, ok.p,
                                          ok.n, 1u << 20, &why);
    ASSERT_NOT_NULL(m);
    const Etcdserverpb__TxnResponse *t = (const void *)m;
    int depth = 0;
    while (t->n_responses) {
        ASSERT_EQ(ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN,
                  t->responses[0]->response_case);
        t = t->responses[0]->response_txn;
        depth++;
    }
    ASSERT_EQ(ELECTOR__PB_MAX_DEPTH / 2 - 1, depth);
    protobuf_c_message_free_unpacked(m, NULL);
    free(ok.p);
}

/* Fields of fixed width (wire types 1 and 5) are skipped by the budget's scan
 * (etcd's replies have none; a newer etcd's unknown fields could): a reply with
 * them decodes; one cut inside them is malformed. */
TEST(decode_scan_skips_fixed_width_fields_and_refuses_them_cut)
{
    /* header {revision 7}, then field 15 fixed64 and field 14 fixed32. */
    static const uint8_t ok[] = {0x0a, 0x02, 0x18, 0x07,                /* header */
                                 0x79, 1,    2,    3,    4, 5, 6, 7, 8, /* 15: fixed64 */
                                 0x75, 1,    2,    3,    4};            /* 14: fixed32 */
    int why = 0;
    ProtobufCMessage *m = elector__decode(&etcdserverpb__range_response__descriptor, ok,
                                          sizeof(ok), 1u << 20, &why);
    ASSERT_NOT_NULL(m);
    ASSERT_EQ(7, (long long)((Etcdserverpb__RangeResponse *)m)->header->revision);
    protobuf_c_message_free_unpacked(m, NULL);
    /* Cut inside the fixed32, then inside the fixed64. */
    ASSERT_NULL(elector__decode(&etcdserverpb__range_response__descriptor, ok,
                                sizeof(ok) - 1, 1u << 20, &why));
    ASSERT_EQ(ELECTOR__DEC_MALFORMED, why);
    ASSERT_NULL(elector__decode(&etcdserverpb__range_response__descriptor, ok, 4 + 5,
                                1u << 20, &why));
    ASSERT_EQ(ELECTOR__DEC_MALFORMED, why);
}

TEST(decode_budget_stops_a_small_reply_that_expands)
{
    /* 8 MiB of empty KeyValues ("12 00": kvs, length 0): protobuf-c made a
     * KeyValue struct plus bookkeeping for each, 566 MB in all. */
    size_t n = 8u << 20;
    uint8_t *p = malloc(n);
    ASSERT_NOT_NULL(p);
    for (size_t i = 0; i < n; i += 2)
        p[i] = 0x12, p[i + 1] = 0;
    int why = 0;
    double t0 = tl_now();
    ASSERT_NULL(elector__decode(&etcdserverpb__range_response__descriptor, p, n,
                                32u << 20, &why));
    tl_log("8 MiB of empty keys refused in %.0f ms", (tl_now() - t0) * 1e3);
    ASSERT_EQ(ELECTOR__DEC_OVER_BUDGET, why);

    /* The same reply with 1,000 keys fits a small budget. */
    ProtobufCMessage *m = elector__decode(&etcdserverpb__range_response__descriptor, p,
                                          2000, 1u << 20, &why);
    ASSERT_NOT_NULL(m);
    ASSERT_EQ(1000, (long long)((Etcdserverpb__RangeResponse *)m)->n_kvs);
    protobuf_c_message_free_unpacked(m, NULL); /* malloc'd: the default free works */
    free(p);
}

TEST(decode_budget_fits_real_replies_with_room)
{
    /* A 1 MiB value (etcd's default request limit is 1.5 MiB) decodes in a budget
     * of twice its size. */
    size_t n = 1u << 20;
    Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT, *kvs[1] = {&kv};
    kv.key.data = (uint8_t *)"e/694d7b1c2a4e5f01";
    kv.key.len = 18;
    kv.value.data = calloc(1, n);
    kv.value.len = n;
    kv.create_revision = 7;
    Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    r.n_kvs = 1;
    r.kvs = kvs;
    size_t len = protobuf_c_message_get_packed_size(&r.base);
    uint8_t *buf = malloc(len);
    protobuf_c_message_pack(&r.base, buf);
    int why = 0;
    ProtobufCMessage *m =
        elector__decode(&etcdserverpb__range_response__descriptor, buf, len, 2 * n, &why);
    ASSERT_NOT_NULL(m);
    ASSERT_EQ(n, ((Etcdserverpb__RangeResponse *)m)->kvs[0]->value.len);
    protobuf_c_message_free_unpacked(m, NULL);
    ASSERT_NULL(
        elector__decode(&etcdserverpb__range_response__descriptor, buf, len, n, &why));
    ASSERT_EQ(ELECTOR__DEC_OVER_BUDGET, why);
    free(buf);
    free(kv.value.data);
}

TEST(pb_check_refuses_malformed_wire_data)
{
    const ProtobufCMessageDescriptor *d = &etcdserverpb__range_response__descriptor;
    static const uint8_t trunc_len[] = {0x12, 0x05, 0x01}; /* length past the end */
    static const uint8_t trunc_varint[] = {0x18, 0x80};    /* varint cut short */
    static const uint8_t long_varint[] = {0x18, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    static const uint8_t group[] = {0x1b};                  /* wire type 3 */
    static const uint8_t fixed_cut[] = {0x19, 1, 2, 3};     /* fixed64, 3 bytes */
    static const uint8_t good[] = {0x18, 0x01, 0x20, 0x05}; /* more=1, count=5 */
    ASSERT_EQ(ELECTOR__DEC_MALFORMED, elector__pb_check(d, trunc_len, sizeof(trunc_len)));
    ASSERT_EQ(ELECTOR__DEC_MALFORMED,
              elector__pb_check(d, trunc_varint, sizeof(trunc_varint)));
    ASSERT_EQ(ELECTOR__DEC_MALFORMED,
              elector__pb_check(d, long_varint, sizeof(long_varint)));
    ASSERT_EQ(ELECTOR__DEC_MALFORMED, elector__pb_check(d, group, sizeof(group)));
    ASSERT_EQ(ELECTOR__DEC_MALFORMED, elector__pb_check(d, fixed_cut, sizeof(fixed_cut)));
    ASSERT_EQ(0, elector__pb_check(d, good, sizeof(good)));
    ASSERT_EQ(0, elector__pb_check(d, good, 0));
}

/* ------------------------------------------------------------------ Txn shape */

static Etcdserverpb__ResponseOp *resp_op(int kind)
{
    static Etcdserverpb__RangeResponse rr = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    static Etcdserverpb__PutResponse pr = ETCDSERVERPB__PUT_RESPONSE__INIT;
    static Etcdserverpb__DeleteRangeResponse dr =
        ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
    Etcdserverpb__ResponseOp *op = calloc(1, sizeof(*op));
    etcdserverpb__response_op__init(op);
    op->response_case = (Etcdserverpb__ResponseOp__ResponseCase)kind;
    if (kind == 1) op->response_range = &rr;
    if (kind == 2) op->response_put = &pr;
    if (kind == 3) op->response_delete_range = &dr;
    return op;
}

TEST(txn_shape_check_names_the_first_result_that_does_not_match)
{
    /* The campaign Txn: success = [Put], failure = [Put, Range]. */
    Etcdserverpb__RequestOp put = ETCDSERVERPB__REQUEST_OP__INIT,
                            range = ETCDSERVERPB__REQUEST_OP__INIT;
    Etcdserverpb__PutRequest pq = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    put.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    put.request_put = &pq;
    range.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    range.request_range = &rq;
    Etcdserverpb__RequestOp *succ[1] = {&put}, *fail[2] = {&put, &range};
    Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
    req.n_success = 1;
    req.success = succ;
    req.n_failure = 2;
    req.failure = fail;

    Etcdserverpb__ResponseOp *ops[2] = {resp_op(2), resp_op(1)};
    Etcdserverpb__TxnResponse resp = ETCDSERVERPB__TXN_RESPONSE__INIT;
    resp.succeeded = 0;
    resp.n_responses = 2;
    resp.responses = ops;
    char why[200];
    ASSERT_OK(elector__txn_shape_check(&req, &resp, why, sizeof(why)));

    /* The attack: a DeleteRange result where the Range was asked. */
    free(ops[1]);
    ops[1] = resp_op(3);
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ASSERT_STREQ("result 2 is a DeleteRange result where a Range was asked", why);

    /* No result at all where one was asked (would read as "no predecessor"). */
    ops[1]->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE__NOT_SET;
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ASSERT_STREQ("result 2 is empty where a Range was asked", why);

    /* A Txn result where the Range was asked; a Txn result where the request
     * names no operation at all. */
    static Etcdserverpb__TxnResponse inner = ETCDSERVERPB__TXN_RESPONSE__INIT;
    ops[1]->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
    ops[1]->response_txn = &inner;
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ASSERT_STREQ("result 2 is a Txn result where a Range was asked", why);
    range.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST__NOT_SET;
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ASSERT_STREQ("result 2 is a Txn result where nothing was asked", why);
    range.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    ops[1]->response_txn = NULL;

    /* The right kind with a count that does not fit the branch that ran. */
    resp.succeeded = 1;
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ASSERT_STREQ("2 results for the success branch of 1 operations", why);
    resp.n_responses = 0;
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    free(ops[0]);
    free(ops[1]);
}

TEST(txn_shape_check_follows_nested_txns)
{
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__RequestOp range = ETCDSERVERPB__REQUEST_OP__INIT,
                            *inner_ops[1] = {&range};
    range.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    range.request_range = &rq;
    Etcdserverpb__TxnRequest inner = ETCDSERVERPB__TXN_REQUEST__INIT;
    inner.n_success = 1;
    inner.success = inner_ops;
    Etcdserverpb__RequestOp nest = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = {&nest};
    nest.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
    nest.request_txn = &inner;
    Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
    req.n_success = 1;
    req.success = ops;

    Etcdserverpb__ResponseOp *in_ops[1] = {resp_op(2)}; /* a Put where Range was asked */
    Etcdserverpb__TxnResponse in_resp = ETCDSERVERPB__TXN_RESPONSE__INIT;
    in_resp.succeeded = 1;
    in_resp.n_responses = 1;
    in_resp.responses = in_ops;
    Etcdserverpb__ResponseOp out_op = ETCDSERVERPB__RESPONSE_OP__INIT,
                             *out_ops[1] = {&out_op};
    out_op.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
    out_op.response_txn = &in_resp;
    Etcdserverpb__TxnResponse resp = ETCDSERVERPB__TXN_RESPONSE__INIT;
    resp.succeeded = 1;
    resp.n_responses = 1;
    resp.responses = out_ops;
    char why[200];
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ASSERT_STREQ("in the Txn at 1: result 1 is a Put result where a Range was asked",
                 why);
    free(in_ops[0]);
    in_ops[0] = resp_op(1);
    ASSERT_OK(elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    free(in_ops[0]);
}

/* ------------------------------------------------------------------ edges (issue 23) */

#include <stdio.h>
#include "elector/version.h"

TEST(version_number_matches_the_headers_and_the_string)
{
    ASSERT_EQ(ELECTOR_VERSION_NUMBER, elector_version_number());
    char s[32];
    int v = elector_version_number();
    snprintf(s, sizeof(s), "%d.%d.%d", v >> 16, (v >> 8) & 0xff, v & 0xff);
    ASSERT_STREQ(s, elector_version());
}

TEST(rpc_name_and_path_of_an_unknown_rpc_are_null)
{
    ASSERT_STREQ("Range", elector_rpc_name(ELECTOR_RPC_RANGE));
    ASSERT_STREQ("/etcdserverpb.KV/Range", elector_rpc_path(ELECTOR_RPC_RANGE));
    ASSERT_NULL(elector_rpc_name((elector_rpc)9999));
    ASSERT_NULL(elector_rpc_path((elector_rpc)-1));
}

/* A request over the 64 MiB gRPC limit is refused before anything is framed. */
TEST(grpc_frame_refuses_a_message_over_64_mib)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)"k";
    p.key.len = 1;
    p.value.len = ELECTOR__GRPC_MAX_MSG;
    p.value.data = calloc(1, p.value.len);
    ASSERT_NOT_NULL(p.value.data);
    elector__buf b = {0};
    ASSERT_EQ(ELECTOR_ETOOLARGE, elector__grpc_frame(&b, &p.base));
    ASSERT_EQ((size_t)0, b.len);
    p.value.len = ELECTOR__GRPC_MAX_MSG - 16; /* key and lengths fit under */
    ASSERT_OK(elector__grpc_frame(&b, &p.base));
    ASSERT_EQ(5 + protobuf_c_message_get_packed_size(&p.base), b.len);
    elector__buf_free(&b);
    free(p.value.data);
}

TEST(pb_check_refuses_a_cut_tag_field_zero_and_a_cut_length)
{
    const ProtobufCMessageDescriptor *d = &etcdserverpb__range_response__descriptor;
    static const uint8_t cut_tag[] = {0x80};       /* tag varint cut short */
    static const uint8_t field0[] = {0x00, 0x01};  /* field number 0 */
    static const uint8_t cut_len[] = {0x12, 0x80}; /* length varint cut short */
    /* Field 2^33 (no such field), length-delimited, 1 byte: skipped. */
    static const uint8_t huge_field[] = {0x82, 0x80, 0x80, 0x80, 0x80, 0x02, 0x01, 0x00};
    ASSERT_EQ(ELECTOR__DEC_MALFORMED, elector__pb_check(d, cut_tag, sizeof(cut_tag)));
    ASSERT_EQ(ELECTOR__DEC_MALFORMED, elector__pb_check(d, field0, sizeof(field0)));
    ASSERT_EQ(ELECTOR__DEC_MALFORMED, elector__pb_check(d, cut_len, sizeof(cut_len)));
    ASSERT_EQ(0, elector__pb_check(d, huge_field, sizeof(huge_field)));
}

TEST(txn_shape_check_failure_branch_count_and_empty_result_of_the_right_kind)
{
    Etcdserverpb__RequestOp range = ETCDSERVERPB__REQUEST_OP__INIT;
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    range.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    range.request_range = &rq;
    Etcdserverpb__RequestOp *fail[2] = {&range, &range};
    Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
    req.n_failure = 2;
    req.failure = fail;
    Etcdserverpb__ResponseOp *ops[2] = {resp_op(1), resp_op(1)};
    Etcdserverpb__TxnResponse resp = ETCDSERVERPB__TXN_RESPONSE__INIT;
    resp.responses = ops;
    resp.n_responses = 1;
    char why[200];
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ASSERT_STREQ("1 results for the failure branch of 2 operations", why);
    resp.n_responses = 2;
    ASSERT_OK(elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ops[1]->response_range = NULL; /* a Range result, but no RangeResponse in it */
    ASSERT_EQ(-1, elector__txn_shape_check(&req, &resp, why, sizeof(why)));
    ASSERT_STREQ("result 2 is empty where a Range was asked", why);
    free(ops[0]);
    free(ops[1]);
}

TEST(transient_errors_are_the_outages_only)
{
    ASSERT(elector__transient(ELECTOR_EUNAVAILABLE));
    ASSERT(elector__transient(ELECTOR_ETIMEDOUT));
    ASSERT(elector__transient(ELECTOR_ENOLEADER));
    ASSERT(elector__transient(ELECTOR_ECONNECT));
    ASSERT(!elector__transient(0));
    ASSERT(!elector__transient(ELECTOR_EPROTO));
    ASSERT(!elector__transient(ELECTOR_EAUTH));
}

TEST(backoff_never_exceeds_its_maximum)
{
    /* A minimum above the maximum: the maximum, with jitter in [0.5, 1]. */
    ASSERT_EQ(100, elector__backoff_ms(1, 500, 100, UINT32_MAX));
    ASSERT_EQ(50, elector__backoff_ms(1, 500, 100, 0));
    ASSERT_EQ(0, elector__backoff_ms(0, 500, 100, UINT32_MAX));
    ASSERT_EQ(1600, elector__backoff_ms(30, 50, 1600, UINT32_MAX));
    ASSERT_EQ(200, elector__backoff_ms(3, 50, 1600, UINT32_MAX));
}

/* The consumed front is reused before the buffer grows; bytes stay in order. */
TEST(buf_reserve_compacts_only_when_it_must)
{
    elector__buf b = {0};
    ASSERT_OK(elector__buf_append(&b, "0123456789", 10));
    size_t cap = b.cap;
    elector__buf_consume(&b, 4);
    ASSERT_OK(elector__buf_reserve(&b, 1)); /* room at the end: nothing moves */
    ASSERT_EQ((size_t)4, b.off);
    ASSERT_OK(elector__buf_reserve(&b, cap - 8)); /* room only with the front */
    ASSERT_EQ((size_t)0, b.off);
    ASSERT_EQ(cap, b.cap);
    ASSERT(!memcmp(elector__buf_head(&b), "456789", 6));
    b.off = b.len; /* all sent but kept (h2.c: a unary request, for a resend) */
    ASSERT_OK(elector__buf_reserve(&b, 1)); /* the next reserve starts over */
    ASSERT_EQ((size_t)0, b.off);
    ASSERT_EQ((size_t)0, b.len);
    elector__buf_free(&b);
}
