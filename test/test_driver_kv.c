/* SPDX-License-Identifier: MIT */
/* The key operations (elector_kv_put_sync, _get_sync, _delete_sync) of a
 * client on its own thread (own_thread) against real etcd: a put bound to a session's
 * lease goes with the lease; put if absent writes only once; get and delete by key and by
 * prefix; bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elector/election.h"
#include "elect_util.h"
#include "etcd_harness.h"
#include "testlib.h"

/* A client on its own thread (own_thread) to endpoints. */
static elector_etcd *driver_on(const char *endpoints)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = 1000;
    cfg.request_timeout_ms = 2000;
    elector_etcd *d = NULL;
    ASSERT_OK(eu_own_new(&cfg, NULL, &d));
    return d;
}

static void put(elector_etcd *d, const char *k, const char *v, int64_t lease, unsigned fl,
                int want)
{
    ASSERT_EQ(want, elector_kv_put_sync(d, k, strlen(k), v, strlen(v), lease, fl, 5000));
}

static size_t count(elector_etcd *d, const char *k, bool prefix)
{
    elector_kv *kvs = NULL;
    size_t n = 99;
    ASSERT_OK(elector_kv_get_sync(d, k, strlen(k), prefix, 5000, &kvs, &n));
    elector_kvs_free(kvs, n);
    return n;
}

TEST(put_get_delete_and_lease_bound_keys)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    elector_etcd *d = driver_on(eh_endpoints(c));

    /* put, put if absent, get by key with every field */
    put(d, "g/a", "1", 0, 0, 0);
    put(d, "g/a", "2", 0, ELECTOR_KV_PUT_IF_ABSENT, 1);
    put(d, "g/b", "3", 0, ELECTOR_KV_PUT_IF_ABSENT, 0);
    put(d, "h", "x", 0, 0, 0);
    elector_kv *kvs = NULL;
    size_t n = 0;
    ASSERT_OK(elector_kv_get_sync(d, "g/a", 3, false, 5000, &kvs, &n));
    ASSERT_EQ(1, n);
    ASSERT_EQ(1, kvs[0].value_len);
    ASSERT_EQ('1', kvs[0].value[0]); /* the absent-only put wrote nothing */
    ASSERT_EQ(kvs[0].create_revision, kvs[0].mod_revision);
    ASSERT_EQ(0, kvs[0].lease);
    elector_kvs_free(kvs, n);

    /* by prefix, in key order; a missing key: none */
    ASSERT_OK(elector_kv_get_sync(d, "g/", 2, true, 5000, &kvs, &n));
    ASSERT_EQ(2, n);
    ASSERT_EQ(0, memcmp(kvs[0].key, "g/a", 3));
    ASSERT_EQ(0, memcmp(kvs[1].key, "g/b", 3));
    ASSERT_EQ('3', kvs[1].value[0]);
    elector_kvs_free(kvs, n);
    ASSERT_EQ(0, count(d, "nope", false));

    /* a key on a session's lease goes when the session is closed (revoked) */
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 10;
    sc.release_on_exit = false;
    elector_session *s = elector_session_new(d, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    int64_t lease = elector_session_lease(s);
    ASSERT_GT(lease, 0);
    put(d, "g/m1", "cap", lease, ELECTOR_KV_PUT_IF_ABSENT, 0);
    ASSERT_OK(elector_kv_get_sync(d, "g/m1", 4, false, 5000, &kvs, &n));
    ASSERT_EQ(1, n);
    ASSERT_EQ(lease, kvs[0].lease);
    elector_kvs_free(kvs, n);
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "--prefix", "--keys-only", "g/", NULL));
    ASSERT(tl_contains(out, "g/m1"));
    free(out);
    elector_session_close(s); /* revokes the lease (asynchronously) */
    int64_t end = elector_now_ns() + 5000000000LL;
    while (count(d, "g/m1", false) != 0 && elector_now_ns() < end)
        ;
    ASSERT_EQ(0, count(d, "g/m1", false));
    /* a put on a lease that is gone fails and writes nothing */
    ASSERT_EQ(ELECTOR_ELEASE, elector_kv_put_sync(d, "g/m2", 4, "", 0, lease, 0, 5000));
    ASSERT_EQ(0, count(d, "g/m2", false));

    /* delete by key, then by prefix (h stays) */
    int64_t del = -1;
    ASSERT_OK(elector_kv_delete_sync(d, "g/a", 3, false, 5000, &del));
    ASSERT_EQ(1, del);
    ASSERT_OK(elector_kv_delete_sync(d, "g/a", 3, false, 5000, &del));
    ASSERT_EQ(0, del);
    put(d, "g/c", "", 0, 0, 0);
    ASSERT_OK(elector_kv_delete_sync(d, "g/", 2, true, 5000, &del));
    ASSERT_EQ(2, del);
    ASSERT_EQ(0, count(d, "g/", true));
    ASSERT_EQ(1, count(d, "h", false));

    /* bad input */
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_put_sync(d, "", 0, "v", 1, 0, 0, 100));
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_put_sync(d, "k", 1, NULL, 1, 0, 0, 100));
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_put_sync(d, "k", 1, "v", 1, -1, 0, 100));
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_put_sync(d, "k", 1, "v", 1, 0, 8, 100));
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_get_sync(d, "k", 1, false, 100, NULL, &n));
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_delete_sync(d, NULL, 0, true, 100, NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_delete_sync(NULL, "k", 1, true, 100, NULL));
    elector_etcd_free(d);
    eh_stop(c);
}

TEST(unreachable_etcd_gives_an_error_in_time)
{
    elector_etcd *d = driver_on("127.0.0.1:1");
    elector_kv *kvs = (elector_kv *)1;
    size_t n = 7;
    int rc = elector_kv_get_sync(d, "k", 1, true, 500, &kvs, &n);
    ASSERT(rc < 0);
    ASSERT_NULL(kvs);
    ASSERT_EQ(0, n);
    ASSERT(elector_kv_put_sync(d, "k", 1, "v", 1, 0, 0, 500) < 0);
    elector_etcd_free(d);
}
