/* SPDX-License-Identifier: MIT */
/* bench_range — libelector's side of the client-overhead benchmark.
 *
 * N sequential unary etcd Range calls through libelector, to compare with
 * bare_range (hand-rolled nghttp2 + protobuf-c, the floor). Two ways to call:
 *
 *   --mode sync   elector_etcd_call_sync() per call (the blocking helper)
 *   --mode async  elector_etcd_call() + elector_etcd_run_once() until the callback
 *                 ran; the response is inspected inside the callback
 *
 *   bench_range --endpoint 127.0.0.1:2379 --n 2000 --warmup 200 --key bench-key \
 *               [--mode sync|async|both]
 *
 * prints one line per mode:
 *   bench=elector_sync calls=N us_mean=.. us_p50=.. us_p90=.. us_p99=.. us_max=..
 *   total_ms=.. cpu_us_per_call=.. rss_kb=.. threads=..
 * ("both" runs sync then async on the same client; RSS is then cumulative.)
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elector/etcd.h"
#include "range_common.h"

static void die(const char *what, elector_etcd *e, int err)
{
    fprintf(stderr, "bench_range: %s: %s (%s)\n", what, elector_strerror(err),
            e ? elector_etcd_errstr(e) : "");
    exit(1);
}

/* ---- the two ways of calling ---- */

static void range_sync(elector_etcd *e, const Etcdserverpb__RangeRequest *req)
{
    ProtobufCMessage *m;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &req->base, NULL, &m);
    if (rc) die("Range", e, rc);
    const Etcdserverpb__RangeResponse *r = (const Etcdserverpb__RangeResponse *)m;
    if (r->n_kvs != 1) die("Range did not return exactly one kv", e, 0);
    protobuf_c_message_free_unpacked(m, NULL);
}

struct async_ctx {
    bool done;
    int err;
    size_t n_kvs;
};

static void range_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    struct async_ctx *a = ud;
    a->done = true;
    a->err = err;
    if (!err) a->n_kvs = ((const Etcdserverpb__RangeResponse *)m)->n_kvs;
}

static void range_async(elector_etcd *e, const Etcdserverpb__RangeRequest *req)
{
    struct async_ctx a = {0};
    int rc = elector_etcd_call(e, ELECTOR_RPC_RANGE, &req->base, NULL, range_cb, &a);
    if (rc) die("Range", e, rc);
    while (!a.done) {
        rc = elector_etcd_run_once(e, -1);
        if (rc) die("run_once", e, rc);
    }
    if (a.err) die("Range", e, a.err);
    if (a.n_kvs != 1) die("Range did not return exactly one kv", e, 0);
}

static void run(const char *name, elector_etcd *e, const Etcdserverpb__RangeRequest *req,
                bool async, int n, int warmup)
{
    int64_t *lat = malloc(sizeof(int64_t) * (size_t)n);
    if (!lat) die("malloc", NULL, ELECTOR_ENOMEM);
    int64_t t_start = 0, c_start = 0;
    for (int i = 0; i < warmup + n; i++) {
        if (i == warmup) {
            t_start = elector_now_ns();
            c_start = bu_cpu_us();
        }
        int64_t t0 = elector_now_ns();
        if (async)
            range_async(e, req);
        else
            range_sync(e, req);
        int64_t t1 = elector_now_ns();
        if (i >= warmup) lat[i - warmup] = t1 - t0;
    }
    int64_t total = elector_now_ns() - t_start, cpu = bu_cpu_us() - c_start;
    bu_report_calls(name, lat, n, total, cpu);
    free(lat);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_range [--endpoint HOST:PORT] [--n N] [--warmup W] [--key K] "
            "[--mode sync|async|both]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bu_range_opts o = {.mode = "both"};
    if (!bu_range_args(argc, argv, &o)) usage();
    int n = o.n, warmup = o.warmup;
    bool do_sync = !strcmp(o.mode, "sync") || !strcmp(o.mode, "both");
    bool do_async = !strcmp(o.mode, "async") || !strcmp(o.mode, "both");
    if (!do_sync && !do_async) usage();

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = o.endpoint;
    elector_etcd *e = elector_etcd_new(&cfg);
    if (!e) die("elector_etcd_new", NULL, ELECTOR_ENOMEM);
    if (elector_etcd_err(e)) die("elector_etcd_new", e, elector_etcd_err(e));

    Etcdserverpb__PutRequest put;
    Etcdserverpb__RangeRequest req;
    bu_range_requests(o.key, &put, &req);
    ProtobufCMessage *pr;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &put.base, NULL, &pr);
    if (rc) die("Put", e, rc);
    protobuf_c_message_free_unpacked(pr, NULL);

    if (do_sync) run("elector_sync", e, &req, false, n, warmup);
    if (do_async) run("elector_async", e, &req, true, n, warmup);
    elector_etcd_free(e);
    return 0;
}
