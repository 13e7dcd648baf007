/* Unit tests (no server) for gRPC framing, grpc-timeout, grpc-message decoding and
 * the grpc-status/etcd message mapping in src/grpc.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
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
    Etcdserverpb__RangeRequest *got = etcdserverpb__range_request__unpack(NULL, len, payload);
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
        Etcdserverpb__PutRequest *got = etcdserverpb__put_request__unpack(NULL, len, payload);
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
    Etcdserverpb__RangeRequest *got = etcdserverpb__range_request__unpack(NULL, len, payload);
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
    for (size_t i = 0; i < n; i++) val[i] = (uint8_t)(i * 131u + (i >> 8));
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
    for (size_t i = 0; i + 1 < n; i++) ASSERT(s[i] >= '0' && s[i] <= '9');
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

    const int64_t samples[] = {1, 9, 10, 99999999, 100000000, 999999999, 1000000000000LL,
                               (int64_t)1 << 40, (int64_t)1 << 62, INT64_MAX};
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
        {11, "etcdserver: mvcc: required revision has been compacted", ELECTOR_ECOMPACTED},
        {11, "etcdserver: mvcc: required revision is a future revision", ELECTOR_EFUTUREREV},
        {5, "etcdserver: requested lease not found", ELECTOR_ELEASE},
        {16, "etcdserver: invalid auth token", ELECTOR_ETOKEN},
        {3, "etcdserver: authentication failed, invalid user ID or password", ELECTOR_EAUTH},
        {3, "etcdserver: user name is empty", ELECTOR_EAUTH},
        {9, "etcdserver: user name not found", ELECTOR_EAUTH},
        {9, "etcdserver: authentication is not enabled", ELECTOR_EAUTH},
        {7, "etcdserver: permission denied", ELECTOR_EPERM},
        {3, "etcdserver: request is too large", ELECTOR_ETOOLARGE},
        {8, "grpc: trying to send message larger than max (3000000 vs. 2097152)",
         ELECTOR_ETOOLARGE},
        {14, "etcdserver: request timed out", ELECTOR_ETIMEDOUT},
        {14, "etcdserver: leader changed", ELECTOR_EUNAVAILABLE},
        /* Other prefixes ("rpc error: ...") still match. */
        {14, "rpc error: code = Unavailable desc = etcdserver: no leader", ELECTOR_ENOLEADER},
        /* The message wins over the status code. */
        {2, "etcdserver: no leader", ELECTOR_ENOLEADER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = elector__grpc_error(cases[i].status, cases[i].msg);
        if (got != cases[i].want)
            tl_log("case %zu: (%d, \"%s\") -> %s, want %s", i, cases[i].status, cases[i].msg,
                   elector_err_name(got), elector_err_name(cases[i].want));
        ASSERT_EQ(cases[i].want, got);
    }
}

TEST(grpc_error_unknown_message_by_status)
{
    static const struct {
        int status;
        int want;
    } cases[] = {
        {1, ELECTOR_ECANCELED},     {2, ELECTOR_EGRPC},     {3, ELECTOR_EGRPC},
        {4, ELECTOR_ETIMEDOUT},     {5, ELECTOR_EGRPC},     {7, ELECTOR_EPERM},
        {8, ELECTOR_EGRPC},         {13, ELECTOR_EGRPC},    {14, ELECTOR_EUNAVAILABLE},
        {16, ELECTOR_ETOKEN},       {99, ELECTOR_EGRPC},    {-5, ELECTOR_EGRPC},
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
