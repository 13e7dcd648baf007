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
#include <sys/resource.h>
#include "elector/etcd.h"

static void die(const char *what, elector_etcd *e, int err)
{
    fprintf(stderr, "bench_range: %s: %s (%s)\n", what, elector_strerror(err),
            e ? elector_etcd_errstr(e) : "");
    exit(1);
}

/* ---- statistics (same code in bare_range.c) ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double pct_us(const int64_t *v, int n, double p)
{
    int i = (int)((p * n) + 0.999999) - 1;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return (double)v[i] / 1000.0;
}

static long status_field(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, fl) && line[fl] == ':') {
            v = strtol(line + fl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* user + system CPU time of this process so far, in microseconds */
static int64_t cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

static void report(const char *name, int64_t *lat, int n, int64_t total_ns, int64_t cpu)
{
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)lat[i];
    qsort(lat, (size_t)n, sizeof(lat[0]), cmp_i64);
    printf("bench=%s calls=%d us_mean=%.1f us_p50=%.1f us_p90=%.1f us_p99=%.1f us_max=%.1f "
           "total_ms=%.1f cpu_us_per_call=%.2f rss_kb=%ld threads=%ld\n",
           name, n, sum / n / 1000.0, pct_us(lat, n, 0.50), pct_us(lat, n, 0.90),
           pct_us(lat, n, 0.99), (double)lat[n - 1] / 1000.0, (double)total_ns / 1e6,
           (double)cpu / n, status_field("VmRSS"), status_field("Threads"));
    fflush(stdout);
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
            c_start = cpu_us();
        }
        int64_t t0 = elector_now_ns();
        if (async) range_async(e, req);
        else range_sync(e, req);
        int64_t t1 = elector_now_ns();
        if (i >= warmup) lat[i - warmup] = t1 - t0;
    }
    int64_t total = elector_now_ns() - t_start, cpu = cpu_us() - c_start;
    report(name, lat, n, total, cpu);
    free(lat);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_range [--endpoint HOST:PORT] [--n N] [--warmup W] [--key K] "
                    "[--mode sync|async|both]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *endpoint = "127.0.0.1:2379", *key = "bench-key", *mode = "both";
    int n = 2000, warmup = 200;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--endpoint")) endpoint = argv[++i];
        else if (!strcmp(argv[i], "--n")) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--key")) key = argv[++i];
        else if (!strcmp(argv[i], "--mode")) mode = argv[++i];
        else usage();
    }
    bool do_sync = !strcmp(mode, "sync") || !strcmp(mode, "both");
    bool do_async = !strcmp(mode, "async") || !strcmp(mode, "both");
    if (n <= 0 || warmup < 0 || (!do_sync && !do_async)) usage();

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoint;
    elector_etcd *e = elector_etcd_new(&cfg);
    if (!e) die("elector_etcd_new", NULL, ELECTOR_ENOMEM);
    if (elector_etcd_err(e)) die("elector_etcd_new", e, elector_etcd_err(e));

    /* The key holds one small value, so every Range returns one kv. */
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    static const char value[] = "bench-value-0123456789";
    put.key.data = (uint8_t *)key;
    put.key.len = strlen(key);
    put.value.data = (uint8_t *)value;
    put.value.len = sizeof(value) - 1;
    ProtobufCMessage *pr;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &put.base, NULL, &pr);
    if (rc) die("Put", e, rc);
    protobuf_c_message_free_unpacked(pr, NULL);

    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    req.key.data = (uint8_t *)key;
    req.key.len = strlen(key);
    if (do_sync) run("elector_sync", e, &req, false, n, warmup);
    if (do_async) run("elector_async", e, &req, true, n, warmup);
    elector_etcd_free(e);
    return 0;
}
