/* SPDX-License-Identifier: MIT */
/* The low-level client's KV calls against a real single-member etcd: binary
 * keys and values, large values, every Range option, historic reads,
 * DeleteRange with prev_kv, etcd's request size limit, and Txn compare
 * semantics with both branches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elector/etcd.h"
#include "etcd_harness.h"
#include "testlib.h"

/* ---------------------------------------------------------------- helpers */

static eh_cluster *start1(void)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

static elector_etcd *client(const char *endpoints)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 5000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

static ProtobufCBinaryData bin(const void *p, size_t n)
{
    return (ProtobufCBinaryData){n, (uint8_t *)p};
}

static ProtobufCBinaryData str(const char *s)
{
    return bin(s, strlen(s));
}

static int bin_eq(ProtobufCBinaryData b, const void *p, size_t n)
{
    return b.len == n && (n == 0 || memcmp(b.data, p, n) == 0);
}

static int bin_eq_str(ProtobufCBinaryData b, const char *s)
{
    return bin_eq(b, s, strlen(s));
}

static int put_ex(elector_etcd *e, ProtobufCBinaryData k, ProtobufCBinaryData v,
                  int64_t lease, Etcdserverpb__PutResponse **out)
{
    Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
    r.key = k;
    r.value = v;
    r.lease = lease;
    r.prev_kv = out != NULL;
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &r.base, NULL, &m);
    if (out)
        *out = (Etcdserverpb__PutResponse *)m;
    else if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* Puts a text key/value and returns the store revision of the write. */
static int64_t put(elector_etcd *e, const char *k, const char *v)
{
    Etcdserverpb__PutResponse *pr = NULL;
    int rc = put_ex(e, str(k), str(v), 0, &pr);
    if (rc) tl_log("put %s: %s (%s)", k, elector_err_name(rc), elector_etcd_errstr(e));
    ASSERT_OK(rc);
    ASSERT_NOT_NULL(pr->header);
    int64_t rev = pr->header->revision;
    protobuf_c_message_free_unpacked(&pr->base, NULL);
    return rev;
}

static int range(elector_etcd *e, const Etcdserverpb__RangeRequest *r,
                 Etcdserverpb__RangeResponse **out)
{
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &r->base, NULL, &m);
    *out = (Etcdserverpb__RangeResponse *)m;
    return rc;
}

/* Range over a prefix with the fields the caller filled in req (key/range_end
 * are set here). Asserts success. */
static Etcdserverpb__RangeResponse *range_prefix(elector_etcd *e, const char *prefix,
                                                 Etcdserverpb__RangeRequest *req)
{
    static uint8_t end[256];
    size_t n = strlen(prefix);
    req->key = str(prefix);
    req->range_end = bin(end, elector_prefix_end((const uint8_t *)prefix, n, end));
    Etcdserverpb__RangeResponse *rr = NULL;
    ASSERT_OK(range(e, req, &rr));
    return rr;
}

/* Value of a text key, or NULL when absent (malloc'd). */
static char *get(elector_etcd *e, const char *k)
{
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = str(k);
    Etcdserverpb__RangeResponse *rr = NULL;
    ASSERT_OK(range(e, &r, &rr));
    char *v = NULL;
    if (rr->n_kvs == 1) {
        v = malloc(rr->kvs[0]->value.len + 1);
        memcpy(v, rr->kvs[0]->value.data, rr->kvs[0]->value.len);
        v[rr->kvs[0]->value.len] = 0;
    } else {
        ASSERT_EQ(0, (long long)rr->n_kvs);
    }
    protobuf_c_message_free_unpacked(&rr->base, NULL);
    return v;
}

/* "a,b,c": the keys of a response with the first skip bytes of each cut off. */
static const char *keys_of(const Etcdserverpb__RangeResponse *rr, size_t skip, char *buf,
                           size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < rr->n_kvs; i++) {
        const ProtobufCBinaryData *k = &rr->kvs[i]->key;
        size_t kl = k->len > skip ? k->len - skip : 0;
        o += (size_t)snprintf(buf + o, cap - o, "%s%.*s", i ? "," : "", (int)kl,
                              (const char *)k->data + (k->len - kl));
        if (o >= cap) break;
    }
    return buf;
}

static void free_msg(void *m)
{
    if (m) protobuf_c_message_free_unpacked(m, NULL);
}

/* ---------------------------------------------------------------- round trips */

TEST(put_and_range_round_trip_binary_keys_and_values_with_zero_bytes)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));

    static const uint8_t k1[] = {'b', 0, 'i', 'n', 0xff, 0x00, 0x01};
    static const uint8_t k2[] = {'b', 0, 'i', 'n', 0xff, 0x00}; /* k1's prefix */
    static const uint8_t k3[] = {0, 0, 0};
    static const uint8_t v1[] = {0, 0, 'v', 0, 0xfe, 0xff, 0};
    static const uint8_t v2[] = {0};
    ASSERT_OK(put_ex(e, bin(k1, sizeof(k1)), bin(v1, sizeof(v1)), 0, NULL));
    ASSERT_OK(put_ex(e, bin(k2, sizeof(k2)), bin(v2, sizeof(v2)), 0, NULL));
    ASSERT_OK(put_ex(e, bin(k3, sizeof(k3)), bin(NULL, 0), 0, NULL)); /* empty value */

    /* Exact reads: a key with a zero byte is neither cut short nor confused
     * with the key that is its prefix. */
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__RangeResponse *rr;
    r.key = bin(k1, sizeof(k1));
    ASSERT_OK(range(e, &r, &rr));
    ASSERT_EQ(1, (long long)rr->n_kvs);
    ASSERT(bin_eq(rr->kvs[0]->key, k1, sizeof(k1)));
    ASSERT(bin_eq(rr->kvs[0]->value, v1, sizeof(v1)));
    ASSERT_EQ(1, rr->kvs[0]->version);
    free_msg(rr);

    r.key = bin(k2, sizeof(k2));
    ASSERT_OK(range(e, &r, &rr));
    ASSERT_EQ(1, (long long)rr->n_kvs);
    ASSERT(bin_eq(rr->kvs[0]->value, v2, sizeof(v2)));
    free_msg(rr);

    r.key = bin(k3, sizeof(k3));
    ASSERT_OK(range(e, &r, &rr));
    ASSERT_EQ(1, (long long)rr->n_kvs);
    ASSERT_EQ(0, (long long)rr->kvs[0]->value.len);
    free_msg(rr);

    /* A prefix range over the binary prefix finds both, in key order. */
    uint8_t end[sizeof(k2)];
    r.key = bin(k2, sizeof(k2));
    r.range_end = bin(end, elector_prefix_end(k2, sizeof(k2), end));
    ASSERT_OK(range(e, &r, &rr));
    ASSERT_EQ(2, (long long)rr->n_kvs);
    ASSERT(bin_eq(rr->kvs[0]->key, k2, sizeof(k2)));
    ASSERT(bin_eq(rr->kvs[1]->key, k1, sizeof(k1)));
    free_msg(rr);

    elector_etcd_free(e);
    eh_stop(c);
}

TEST(one_mib_value_round_trip)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    size_t n = 1u << 20;
    uint8_t *v = malloc(n);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        v[i] = (uint8_t)x;
    }
    v[0] = v[n - 1] = 0;
    double t0 = tl_now();
    ASSERT_OK(put_ex(e, str("big"), bin(v, n), 0, NULL));
    double t1 = tl_now();
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = str("big");
    Etcdserverpb__RangeResponse *rr;
    ASSERT_OK(range(e, &r, &rr));
    double t2 = tl_now();
    tl_log("1 MiB put %.1f ms, range %.1f ms", (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    ASSERT_EQ(1, (long long)rr->n_kvs);
    ASSERT_EQ((long long)n, (long long)rr->kvs[0]->value.len);
    ASSERT(memcmp(rr->kvs[0]->value.data, v, n) == 0);
    free_msg(rr);

    /* Values just under and over the 16 KiB HTTP/2 frame and 64 KiB window
     * boundaries, one after the other on the same connection. */
    static const size_t sizes[] = {16379, 16384, 16385, 65530,
                                   65535, 65536, 65537, 131072};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char k[16];
        snprintf(k, sizeof(k), "big%zu", i);
        Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
        p.key = str(k);
        p.value = bin(v + i, sizes[i]);
        ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &p.base, NULL, NULL));
        r.key = str(k);
        ASSERT_OK(range(e, &r, &rr));
        ASSERT_EQ(1, (long long)rr->n_kvs);
        ASSERT(bin_eq(rr->kvs[0]->value, v + i, sizes[i]));
        free_msg(rr);
    }
    free(v);
    elector_etcd_free(e);
    eh_stop(c);
}

/* Several async large puts at once: the HTTP/2 flow control and the write
 * buffer must interleave them without corrupting any. */
struct async_put {
    int done, err;
};

static void async_put_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    struct async_put *a = ud;
    a->done = 1;
    a->err = err;
}

TEST(concurrent_large_puts_are_not_interleaved_wrongly)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    enum { N = 6 };
    size_t n = 700 * 1024;
    uint8_t *v[N];
    struct async_put st[N] = {{0}};
    for (int i = 0; i < N; i++) {
        v[i] = malloc(n);
        memset(v[i], 'A' + i, n);
        v[i][i] = 0;
        char k[16];
        snprintf(k, sizeof(k), "cc%d", i);
        Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
        p.key = str(k);
        p.value = bin(v[i], n);
        ASSERT_OK(
            elector_etcd_call(e, ELECTOR_RPC_PUT, &p.base, NULL, async_put_cb, &st[i]));
    }
    double dl = tl_now() + 10;
    for (;;) {
        int all = 1;
        for (int i = 0; i < N; i++)
            all &= st[i].done;
        if (all) break;
        ASSERT_LT(tl_now(), dl);
        ASSERT_OK(elector_etcd_run_once(e, 100));
    }
    for (int i = 0; i < N; i++) {
        if (st[i].err) tl_log("put %d: %s", i, elector_err_name(st[i].err));
        ASSERT_OK(st[i].err);
        char k[16];
        snprintf(k, sizeof(k), "cc%d", i);
        Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
        r.key = str(k);
        Etcdserverpb__RangeResponse *rr;
        ASSERT_OK(range(e, &r, &rr));
        ASSERT_EQ(1, (long long)rr->n_kvs);
        ASSERT(bin_eq(rr->kvs[0]->value, v[i], n));
        free_msg(rr);
        free(v[i]);
    }
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- range options */

/* Keys r/a..r/e created in the order c, a, e, b, d, with values that sort
 * differently again, b written three times and d twice; plus neighbours that a
 * prefix range must not include ("r" + 0x2f + 1 = "r0" is the range end). */
typedef struct fixture {
    int64_t create[5]; /* create revision of r/a .. r/e */
    int64_t mod[5];
} fixture;

static void fill(elector_etcd *e, fixture *f)
{
    put(e, "r", "outside");
    put(e, "r0", "outside"); /* == range_end: excluded */
    put(e, "q/z", "outside");
    const char *order = "caebd";
    const char *vals[5] = {"3", "1", "5", "2", "4"}; /* a..e */
    for (int i = 0; i < 5; i++) {
        int k = order[i] - 'a';
        char key[8];
        snprintf(key, sizeof(key), "r/%c", order[i]);
        f->create[k] = f->mod[k] = put(e, key, vals[k]);
    }
    f->mod[1] = put(e, "r/b", "1");
    f->mod[1] = put(e, "r/b", "1");
    f->mod[3] = put(e, "r/d", "2");
    put(e, "r/", "root-of-prefix"); /* the prefix itself is in the range */
}

TEST(range_with_prefix_limit_sort_count_only_and_keys_only)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    fixture f;
    fill(e, &f);
    char buf[256];

    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__RangeResponse *rr = range_prefix(e, "r/", &r);
    ASSERT_STREQ(",a,b,c,d,e", keys_of(rr, 2, buf, sizeof(buf)));
    ASSERT_EQ(6, rr->count);
    ASSERT(!rr->more);
    free_msg(rr);

    /* limit: the first n in key order, more set, count still the total. */
    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.limit = 2;
    rr = range_prefix(e, "r/", &r);
    ASSERT_STREQ(",a", keys_of(rr, 2, buf, sizeof(buf)));
    ASSERT(rr->more);
    ASSERT_EQ(6, rr->count);
    free_msg(rr);

    /* sort: each target, both orders. The prefix key itself ("r/") is put
     * last, so it has the highest create/mod revision and version 1. */
    static const struct {
        Etcdserverpb__RangeRequest__SortTarget target;
        Etcdserverpb__RangeRequest__SortOrder order;
        const char *want;
    } sorts[] = {
        {ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY,
         ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND, "e,d,c,b,a,"},
        {ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE,
         ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND, "c,a,e,b,d,"},
        {ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE,
         ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND, ",d,b,e,a,c"},
        {ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__MOD,
         ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND, "c,a,e,b,d,"},
        {ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VALUE,
         ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND, "b,d,a,e,c,"},
        {ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VALUE,
         ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND, ",c,e,a,d,b"},
    };
    for (size_t i = 0; i < sizeof(sorts) / sizeof(sorts[0]); i++) {
        r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
        r.sort_target = sorts[i].target;
        r.sort_order = sorts[i].order;
        rr = range_prefix(e, "r/", &r);
        tl_log("sort target %d order %d: %s", sorts[i].target, sorts[i].order,
               keys_of(rr, 2, buf, sizeof(buf)));
        ASSERT_STREQ(sorts[i].want, keys_of(rr, 2, buf, sizeof(buf)));
        free_msg(rr);
    }
    /* By version, descending: b (3), d (2), then the rest at 1 in key order
     * (etcd sorts stably on the key order). Only check the two leaders. */
    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VERSION;
    r.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
    rr = range_prefix(e, "r/", &r);
    ASSERT_EQ(6, (long long)rr->n_kvs);
    ASSERT(bin_eq_str(rr->kvs[0]->key, "r/b"));
    ASSERT_EQ(3, rr->kvs[0]->version);
    ASSERT(bin_eq_str(rr->kvs[1]->key, "r/d"));
    ASSERT_EQ(2, rr->kvs[1]->version);
    free_msg(rr);

    /* sort + limit: the limit applies after sorting. */
    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY;
    r.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
    r.limit = 2;
    rr = range_prefix(e, "r/", &r);
    ASSERT_STREQ("e,d", keys_of(rr, 2, buf, sizeof(buf)));
    free_msg(rr);

    /* count_only: no kvs, the count. */
    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.count_only = 1;
    rr = range_prefix(e, "r/", &r);
    ASSERT_EQ(0, (long long)rr->n_kvs);
    ASSERT_EQ(6, rr->count);
    free_msg(rr);

    /* keys_only: keys without values. */
    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.keys_only = 1;
    rr = range_prefix(e, "r/", &r);
    ASSERT_EQ(6, (long long)rr->n_kvs);
    for (size_t i = 0; i < rr->n_kvs; i++)
        ASSERT_EQ(0, (long long)rr->kvs[i]->value.len);
    free_msg(rr);

    /* range_end "\0": every key >= key. */
    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = str("r/d");
    r.range_end = bin("", 1);
    ASSERT_OK(range(e, &r, &rr));
    ASSERT_STREQ("r/d,r/e,r0", keys_of(rr, 0, buf, sizeof(buf)));
    free_msg(rr);

    /* A prefix of all 0xff bytes has no end: elector_prefix_end gives "\0". */
    uint8_t ff[2] = {0xff, 0xff}, end[2];
    ASSERT_EQ(1, (long long)elector_prefix_end(ff, 2, end));
    ASSERT_EQ(0, end[0]);

    /* A missing key: no kvs, count 0, not an error. */
    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = str("nope");
    ASSERT_OK(range(e, &r, &rr));
    ASSERT_EQ(0, (long long)rr->n_kvs);
    ASSERT_EQ(0, rr->count);
    free_msg(rr);

    elector_etcd_free(e);
    eh_stop(c);
}

TEST(range_filters_by_min_and_max_create_and_mod_revision)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    fixture f;
    fill(e, &f);
    char buf[256];
    /* Created in the order c, a, e, b, d: create revisions of a, e, b are the
     * middle three. */
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.min_create_revision = f.create[0]; /* a */
    r.max_create_revision = f.create[1]; /* b */
    Etcdserverpb__RangeResponse *rr = range_prefix(e, "r/", &r);
    ASSERT_STREQ("a,b,e", keys_of(rr, 2, buf, sizeof(buf)));
    free_msg(rr);

    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.min_create_revision = f.create[1]; /* b and later: b, d and "r/" */
    rr = range_prefix(e, "r/", &r);
    ASSERT_STREQ(",b,d", keys_of(rr, 2, buf, sizeof(buf)));
    free_msg(rr);

    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.max_create_revision = f.create[0]; /* c, a */
    rr = range_prefix(e, "r/", &r);
    ASSERT_STREQ("a,c", keys_of(rr, 2, buf, sizeof(buf)));
    free_msg(rr);

    /* mod revision: b and d were rewritten after all were created. */
    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.min_mod_revision = f.mod[1];
    r.max_mod_revision = f.mod[3];
    rr = range_prefix(e, "r/", &r);
    ASSERT_STREQ("b,d", keys_of(rr, 2, buf, sizeof(buf)));
    ASSERT_EQ(f.mod[1], rr->kvs[0]->mod_revision);
    ASSERT_EQ(f.create[1], rr->kvs[0]->create_revision);
    ASSERT_EQ(3, rr->kvs[0]->version);
    free_msg(rr);

    r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.max_mod_revision = f.create[3] - 1; /* everything before d's creation */
    rr = range_prefix(e, "r/", &r);
    ASSERT_STREQ("a,c,e", keys_of(rr, 2, buf, sizeof(buf)));
    free_msg(rr);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(range_at_a_historic_revision_and_future_or_compacted_revisions_fail)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t r1 = put(e, "h", "v1");
    int64_t r2 = put(e, "h", "v2");
    int64_t r3 = put(e, "h2", "other");
    Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = str("h");
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_DELETE_RANGE, &d.base, NULL, NULL));
    char *now = get(e, "h");
    ASSERT_NULL(now); /* deleted now */

    static const struct {
        int which;
        const char *want;
        int64_t version;
    } cases[] = {{1, "v1", 1}, {2, "v2", 2}, {3, "v2", 2}};
    int64_t revs[4] = {0, r1, r2, r3};
    for (size_t i = 0; i < 3; i++) {
        Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
        r.key = str("h");
        r.revision = revs[cases[i].which];
        Etcdserverpb__RangeResponse *rr;
        ASSERT_OK(range(e, &r, &rr));
        ASSERT_EQ(1, (long long)rr->n_kvs);
        ASSERT(bin_eq_str(rr->kvs[0]->value, cases[i].want));
        ASSERT_EQ(cases[i].version, rr->kvs[0]->version);
        ASSERT_EQ(r1, rr->kvs[0]->create_revision);
        free_msg(rr);
    }
    /* Before the key existed. */
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = str("h");
    r.revision = r1 - 1;
    Etcdserverpb__RangeResponse *rr;
    ASSERT_OK(range(e, &r, &rr));
    ASSERT_EQ(0, (long long)rr->n_kvs);
    free_msg(rr);

    /* In the future. */
    r.revision = r3 + 100;
    ASSERT_EQ(ELECTOR_EFUTUREREV, range(e, &r, &rr));
    ASSERT_NULL(rr);
    ASSERT_CONTAINS(elector_etcd_errstr(e), "future revision");

    /* Compacted away. */
    Etcdserverpb__CompactionRequest cr = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    cr.revision = r2;
    cr.physical = 1;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_COMPACT, &cr.base, NULL, NULL));
    r.revision = r1;
    ASSERT_EQ(ELECTOR_ECOMPACTED, range(e, &r, &rr));
    ASSERT_CONTAINS(elector_etcd_errstr(e), "compacted");
    r.revision = r2; /* the compaction revision itself is still readable */
    ASSERT_OK(range(e, &r, &rr));
    ASSERT_EQ(1, (long long)rr->n_kvs);
    ASSERT(bin_eq_str(rr->kvs[0]->value, "v2"));
    free_msg(rr);
    /* Compacting again at the same revision is an error, not a crash. */
    ASSERT_EQ(ELECTOR_ECOMPACTED,
              elector_etcd_call_sync(e, ELECTOR_RPC_COMPACT, &cr.base, NULL, NULL));
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(delete_range_returns_prev_kvs_and_count)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    put(e, "d/1", "one");
    put(e, "d/2", "two");
    int64_t last = put(e, "d/3", "three");
    put(e, "d0", "keep");

    /* Single key, without prev_kv: just the count. */
    Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = str("d/3");
    ProtobufCMessage *m;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_DELETE_RANGE, &d.base, NULL, &m));
    Etcdserverpb__DeleteRangeResponse *dr = (void *)m;
    ASSERT_EQ(1, dr->deleted);
    ASSERT_EQ(0, (long long)dr->n_prev_kvs);
    ASSERT_EQ(last + 2, dr->header->revision); /* after d0's put */
    free_msg(m);

    /* Prefix with prev_kv: the deleted pairs as they were. */
    uint8_t end[8];
    d.key = str("d/");
    d.range_end = bin(end, elector_prefix_end((const uint8_t *)"d/", 2, end));
    d.prev_kv = 1;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_DELETE_RANGE, &d.base, NULL, &m));
    dr = (void *)m;
    ASSERT_EQ(2, dr->deleted);
    ASSERT_EQ(2, (long long)dr->n_prev_kvs);
    ASSERT(bin_eq_str(dr->prev_kvs[0]->key, "d/1"));
    ASSERT(bin_eq_str(dr->prev_kvs[0]->value, "one"));
    ASSERT(bin_eq_str(dr->prev_kvs[1]->key, "d/2"));
    ASSERT(bin_eq_str(dr->prev_kvs[1]->value, "two"));
    ASSERT_EQ(1, dr->prev_kvs[1]->version);
    free_msg(m);

    /* Nothing left to delete: 0, no revision bump. */
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_DELETE_RANGE, &d.base, NULL, &m));
    dr = (void *)m;
    ASSERT_EQ(0, dr->deleted);
    ASSERT_EQ(last + 3, dr->header->revision);
    free_msg(m);

    char *v = get(e, "d0");
    ASSERT_STREQ("keep", v);
    free(v);

    /* Put with prev_kv returns the overwritten pair. */
    Etcdserverpb__PutResponse *pr;
    ASSERT_OK(put_ex(e, str("d0"), str("new"), 0, &pr));
    ASSERT_NOT_NULL(pr->prev_kv);
    ASSERT(bin_eq_str(pr->prev_kv->value, "keep"));
    free_msg(pr);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- size limit */

TEST(oversized_request_fails_with_etoolarge_and_client_stays_usable)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    put(e, "before", "x");
    /* 1.75 MiB: under gRPC's receive limit (1.5 MiB + 512 KiB overhead), over
     * etcd's --max-request-bytes (1.5 MiB): etcd's own "request is too large".
     * 2 MiB: over gRPC's limit ("received message larger than max"). 3 MiB:
     * well over it, more than the server's flow-control window. */
    static const size_t sizes[] = {(size_t)(1.75 * 1024 * 1024), 2u << 20, 3u << 20};
    for (size_t i = 0; i < 3; i++) {
        size_t n = sizes[i];
        uint8_t *v = calloc(1, n);
        double t0 = tl_now();
        int rc = put_ex(e, str("huge"), bin(v, n), 0, NULL);
        double dt = tl_now() - t0;
        tl_log("put of %zu bytes: %s in %.0f ms: %s", n, elector_err_name(rc), dt * 1e3,
               elector_etcd_errstr(e));
        ASSERT_EQ(ELECTOR_ETOOLARGE, rc);
        ASSERT_LT(dt, 3.0);
        free(v);
        /* The connection is still good: the next calls succeed at once. */
        t0 = tl_now();
        put(e, "after", "y");
        char *got = get(e, "before");
        ASSERT_STREQ("x", got);
        free(got);
        ASSERT_LT(tl_now() - t0, 1.0);
    }
    char *got = get(e, "huge");
    ASSERT_NULL(got);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- txn */

typedef struct txn_env {
    int64_t create, mod, lease;
} txn_env;

static int64_t grant(elector_etcd *e, int64_t ttl)
{
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.ttl = ttl;
    ProtobufCMessage *m;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_GRANT, &g.base, NULL, &m));
    int64_t id = ((Etcdserverpb__LeaseGrantResponse *)m)->id;
    free_msg(m);
    return id;
}

/* One txn with a single compare on key; returns `succeeded`. The success
 * branch reads the key, the failure branch reads "t/none". */
static int txn1(elector_etcd *e, const char *key, int target, int result, int64_t num,
                const char *val)
{
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    Etcdserverpb__Compare *cmps[1] = {&cmp};
    cmp.key = str(key);
    cmp.target = (Etcdserverpb__Compare__CompareTarget)target;
    cmp.result = (Etcdserverpb__Compare__CompareResult)result;
    switch (target) {
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION:
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
        cmp.version = num;
        break;
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE:
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
        cmp.create_revision = num;
        break;
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD:
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        cmp.mod_revision = num;
        break;
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE:
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
        cmp.value = str(val);
        break;
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE:
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
        cmp.lease = num;
        break;
    default:
        ASSERT(0);
    }
    Etcdserverpb__RangeRequest rs = ETCDSERVERPB__RANGE_REQUEST__INIT, rf = rs;
    rs.key = str(key);
    rf.key = str("t/none");
    Etcdserverpb__RequestOp os = ETCDSERVERPB__REQUEST_OP__INIT, of = os;
    os.request_case = of.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    os.request_range = &rs;
    of.request_range = &rf;
    Etcdserverpb__RequestOp *ss[1] = {&os}, *ff[1] = {&of};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_compare = 1;
    t.compare = cmps;
    t.n_success = 1;
    t.success = ss;
    t.n_failure = 1;
    t.failure = ff;
    ProtobufCMessage *m;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_TXN, &t.base, NULL, &m);
    if (rc) tl_log("txn: %s: %s", elector_err_name(rc), elector_etcd_errstr(e));
    ASSERT_OK(rc);
    Etcdserverpb__TxnResponse *tr = (void *)m;
    int ok = tr->succeeded;
    /* The branch that ran answered with one range response. */
    ASSERT_EQ(1, (long long)tr->n_responses);
    ASSERT_EQ(ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE,
              tr->responses[0]->response_case);
    Etcdserverpb__RangeResponse *rr = tr->responses[0]->response_range;
    if (ok) {
        ASSERT_EQ(1, (long long)rr->n_kvs); /* the compared key, if it exists */
        ASSERT(bin_eq_str(rr->kvs[0]->key, key));
    } else {
        ASSERT_EQ(0, (long long)rr->n_kvs);
    }
    free_msg(m);
    return ok;
}

TEST(txn_compares_value_version_create_mod_and_lease)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    txn_env t;
    t.lease = grant(e, 30);
    Etcdserverpb__PutResponse *pr;
    ASSERT_OK(put_ex(e, str("t/k"), str("m1"), t.lease, &pr));
    t.create = pr->header->revision;
    free_msg(pr);
    put(e, "t/other", "x");
    ASSERT_OK(put_ex(e, str("t/k"), str("m2"), t.lease, &pr));
    t.mod = pr->header->revision;
    free_msg(pr);
    put(e, "t/nolease", "");

    enum {
        EQ = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL,
        GT = ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER,
        LT = ETCDSERVERPB__COMPARE__COMPARE_RESULT__LESS,
        NE = ETCDSERVERPB__COMPARE__COMPARE_RESULT__NOT_EQUAL
    };
    enum {
        VER = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION,
        CRE = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE,
        MOD = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD,
        VAL = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE,
        LEA = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE
    };
    /* Compare semantics: "key's attribute <result> the given one". */
    const struct {
        int target, result;
        int64_t num;
        const char *val;
        int want;
    } cases[] = {
        {VAL, EQ, 0, "m2", 1},         {VAL, EQ, 0, "m1", 0},
        {VAL, NE, 0, "m1", 1},         {VAL, NE, 0, "m2", 0},
        {VAL, GT, 0, "m1", 1},         {VAL, GT, 0, "m3", 0},
        {VAL, LT, 0, "m3", 1},         {VAL, LT, 0, "m2", 0},
        {VAL, GT, 0, "", 1},           {VER, EQ, 2, NULL, 1},
        {VER, EQ, 1, NULL, 0},         {VER, GT, 1, NULL, 1},
        {VER, GT, 2, NULL, 0},         {VER, LT, 3, NULL, 1},
        {VER, LT, 2, NULL, 0},         {VER, NE, 2, NULL, 0},
        {VER, NE, 0, NULL, 1},         {CRE, EQ, t.create, NULL, 1},
        {CRE, EQ, t.mod, NULL, 0},     {CRE, LT, t.mod, NULL, 1},
        {CRE, GT, t.create, NULL, 0},  {CRE, GT, t.create - 1, NULL, 1},
        {CRE, NE, t.create, NULL, 0},  {MOD, EQ, t.mod, NULL, 1},
        {MOD, EQ, t.create, NULL, 0},  {MOD, GT, t.create, NULL, 1},
        {MOD, LT, t.mod + 1, NULL, 1}, {MOD, LT, t.mod, NULL, 0},
        {MOD, NE, t.mod, NULL, 0},     {LEA, EQ, t.lease, NULL, 1},
        {LEA, EQ, 0, NULL, 0},         {LEA, NE, t.lease, NULL, 0},
        {LEA, NE, 0, NULL, 1},         {LEA, GT, t.lease - 1, NULL, 1},
        {LEA, LT, t.lease, NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got =
            txn1(e, "t/k", cases[i].target, cases[i].result, cases[i].num, cases[i].val);
        if (got != cases[i].want)
            tl_log("case %zu: target %d result %d num %lld val %s: got %d", i,
                   cases[i].target, cases[i].result, (long long)cases[i].num,
                   cases[i].val ? cases[i].val : "-", got);
        ASSERT_EQ(cases[i].want, got);
    }
    /* A key without lease compares as lease 0. */
    ASSERT_EQ(1, txn1(e, "t/nolease", LEA, EQ, 0, NULL));
    ASSERT_EQ(1, txn1(e, "t/nolease", VAL, EQ, 0, ""));
    /* A missing key: version 0 and create revision 0 (the create-if-absent
     * idiom). With the key missing, the success branch's range is empty. */
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    cmp.key = str("t/missing");
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.create_revision = 0;
    Etcdserverpb__Compare *cmps[1] = {&cmp};
    Etcdserverpb__TxnRequest tx = ETCDSERVERPB__TXN_REQUEST__INIT;
    tx.n_compare = 1;
    tx.compare = cmps;
    ProtobufCMessage *m;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_TXN, &tx.base, NULL, &m));
    ASSERT(((Etcdserverpb__TxnResponse *)m)->succeeded);
    free_msg(m);
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
    cmp.version = 0;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_TXN, &tx.base, NULL, &m));
    ASSERT(((Etcdserverpb__TxnResponse *)m)->succeeded);
    free_msg(m);

    /* Compare over a range: every key in it must satisfy it. */
    uint8_t end[8];
    cmp.key = str("t/");
    cmp.range_end = bin(end, elector_prefix_end((const uint8_t *)"t/", 2, end));
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER;
    cmp.version = 0;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_TXN, &tx.base, NULL, &m));
    ASSERT(((Etcdserverpb__TxnResponse *)m)->succeeded); /* all three exist */
    free_msg(m);
    cmp.version = 1; /* t/other, t/nolease are at version 1 */
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_TXN, &tx.base, NULL, &m));
    ASSERT(!((Etcdserverpb__TxnResponse *)m)->succeeded);
    free_msg(m);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(txn_runs_the_branch_chosen_by_all_compares_and_returns_its_responses)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    put(e, "x/a", "1");
    int64_t rev0 = put(e, "x/b", "2");

    /* compares: x/a == "1" AND x/b version == 1 */
    Etcdserverpb__Compare c1 = ETCDSERVERPB__COMPARE__INIT,
                          c2 = ETCDSERVERPB__COMPARE__INIT;
    c1.key = str("x/a");
    c1.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
    c1.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
    c1.value = str("1");
    c2.key = str("x/b");
    c2.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
    c2.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
    c2.version = 1;
    Etcdserverpb__Compare *cmps[2] = {&c1, &c2};

    /* success: put x/a=10 (prev_kv), range x/, delete x/b (prev_kv), nested txn */
    Etcdserverpb__PutRequest sp = ETCDSERVERPB__PUT_REQUEST__INIT;
    sp.key = str("x/a");
    sp.value = str("10");
    sp.prev_kv = 1;
    uint8_t end[8];
    Etcdserverpb__RangeRequest sr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    sr.key = str("x/");
    sr.range_end = bin(end, elector_prefix_end((const uint8_t *)"x/", 2, end));
    Etcdserverpb__DeleteRangeRequest sd = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    sd.key = str("x/b");
    sd.prev_kv = 1;
    Etcdserverpb__TxnRequest nested =
        ETCDSERVERPB__TXN_REQUEST__INIT; /* no compares: true */
    Etcdserverpb__RequestOp s_ops[4] = {
        ETCDSERVERPB__REQUEST_OP__INIT, ETCDSERVERPB__REQUEST_OP__INIT,
        ETCDSERVERPB__REQUEST_OP__INIT, ETCDSERVERPB__REQUEST_OP__INIT};
    s_ops[0].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    s_ops[0].request_put = &sp;
    s_ops[1].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    s_ops[1].request_range = &sr;
    s_ops[2].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    s_ops[2].request_delete_range = &sd;
    s_ops[3].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
    s_ops[3].request_txn = &nested;
    Etcdserverpb__RequestOp *succ[4] = {&s_ops[0], &s_ops[1], &s_ops[2], &s_ops[3]};

    /* failure: put x/fail=1, range x/a */
    Etcdserverpb__PutRequest fp = ETCDSERVERPB__PUT_REQUEST__INIT;
    fp.key = str("x/fail");
    fp.value = str("1");
    Etcdserverpb__RangeRequest fr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    fr.key = str("x/a");
    Etcdserverpb__RequestOp f_ops[2] = {ETCDSERVERPB__REQUEST_OP__INIT,
                                        ETCDSERVERPB__REQUEST_OP__INIT};
    f_ops[0].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    f_ops[0].request_put = &fp;
    f_ops[1].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    f_ops[1].request_range = &fr;
    Etcdserverpb__RequestOp *fail[2] = {&f_ops[0], &f_ops[1]};

    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_compare = 2;
    t.compare = cmps;
    t.n_success = 4;
    t.success = succ;
    t.n_failure = 2;
    t.failure = fail;

    /* Make the second compare false first: x/b at version 2. */
    int64_t rev1 = put(e, "x/b", "2b");
    ASSERT_EQ(rev0 + 1, rev1);
    ProtobufCMessage *m;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_TXN, &t.base, NULL, &m));
    Etcdserverpb__TxnResponse *tr = (void *)m;
    ASSERT(!tr->succeeded);
    ASSERT_EQ(rev1 + 1, tr->header->revision); /* the failure branch wrote once */
    ASSERT_EQ(2, (long long)tr->n_responses);
    ASSERT_EQ(ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT,
              tr->responses[0]->response_case);
    ASSERT_EQ(ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE,
              tr->responses[1]->response_case);
    ASSERT_EQ(1, (long long)tr->responses[1]->response_range->n_kvs);
    ASSERT(bin_eq_str(tr->responses[1]->response_range->kvs[0]->value, "1"));
    free_msg(m);
    char *v = get(e, "x/fail");
    ASSERT_STREQ("1", v);
    free(v);

    /* Now make both compares hold: x/b deleted and re-created at version 1. */
    Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = str("x/b");
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_DELETE_RANGE, &d.base, NULL, NULL));
    int64_t rev2 = put(e, "x/b", "bb");
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_TXN, &t.base, NULL, &m));
    tr = (void *)m;
    ASSERT(tr->succeeded);
    ASSERT_EQ(rev2 + 1, tr->header->revision); /* one txn = one revision */
    ASSERT_EQ(4, (long long)tr->n_responses);
    ASSERT_EQ(ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT,
              tr->responses[0]->response_case);
    Etcdserverpb__PutResponse *ppr = tr->responses[0]->response_put;
    ASSERT_NOT_NULL(ppr->prev_kv);
    ASSERT(bin_eq_str(ppr->prev_kv->value, "1"));
    /* The range sees the put made earlier in the same txn. */
    ASSERT_EQ(ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE,
              tr->responses[1]->response_case);
    Etcdserverpb__RangeResponse *rr = tr->responses[1]->response_range;
    ASSERT_EQ(3, (long long)rr->n_kvs); /* x/a, x/b, x/fail */
    ASSERT(bin_eq_str(rr->kvs[0]->value, "10"));
    ASSERT_EQ(rev2 + 1, rr->kvs[0]->mod_revision);
    ASSERT_EQ(ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE,
              tr->responses[2]->response_case);
    Etcdserverpb__DeleteRangeResponse *ddr = tr->responses[2]->response_delete_range;
    ASSERT_EQ(1, ddr->deleted);
    ASSERT_EQ(1, (long long)ddr->n_prev_kvs);
    ASSERT(bin_eq_str(ddr->prev_kvs[0]->value, "bb"));
    ASSERT_EQ(ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN,
              tr->responses[3]->response_case);
    ASSERT(tr->responses[3]->response_txn->succeeded);
    free_msg(m);
    v = get(e, "x/b");
    ASSERT_NULL(v);
    v = get(e, "x/a");
    ASSERT_STREQ("10", v);
    free(v);

    /* Two puts of the same key in one txn are refused by etcd. */
    Etcdserverpb__RequestOp *dup[2] = {&s_ops[0], &s_ops[0]};
    Etcdserverpb__TxnRequest bad = ETCDSERVERPB__TXN_REQUEST__INIT;
    bad.n_success = 2;
    bad.success = dup;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_TXN, &bad.base, NULL, &m);
    tl_log("duplicate-key txn: %s: %s", elector_err_name(rc), elector_etcd_errstr(e));
    ASSERT_EQ(ELECTOR_EGRPC, rc);
    ASSERT_CONTAINS(elector_etcd_errstr(e), "duplicate key");
    elector_etcd_free(e);
    eh_stop(c);
}
