/* SPDX-License-Identifier: MIT */
/* range_common.h — what the two client-overhead programs share: the command
 * line, the requests (one small key, read back with Range), and the report line
 * (bench_stats.h). bench_range.c calls through libelector, bare_range.c through
 * a hand-rolled nghttp2 + protobuf-c loop; everything else is the same here.
 * Header-only, like bench_stats.h. */
#ifndef ELECTOR_BENCH_RANGE_COMMON_H
#define ELECTOR_BENCH_RANGE_COMMON_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <etcdserverpb/rpc.pb-c.h>
#include "bench_stats.h"

typedef struct bu_range_opts {
    const char *endpoint, *key, *mode;
    int n, warmup;
} bu_range_opts;

/* Parses --endpoint HOST:PORT --n N --warmup W --key K, and --mode M when
 * mode is wanted (o->mode non-NULL on entry: its default). Defaults:
 * 127.0.0.1:2379, 2000, 200, bench-key. False on a bad command line. */
static inline bool bu_range_args(int argc, char **argv, bu_range_opts *o)
{
    o->endpoint = "127.0.0.1:2379";
    o->key = "bench-key";
    o->n = 2000;
    o->warmup = 200;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return false;
        if (!strcmp(argv[i], "--endpoint"))
            o->endpoint = argv[++i];
        else if (!strcmp(argv[i], "--n"))
            o->n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup"))
            o->warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--key"))
            o->key = argv[++i];
        else if (o->mode && !strcmp(argv[i], "--mode"))
            o->mode = argv[++i];
        else
            return false;
    }
    return o->n > 0 && o->warmup >= 0;
}

/* The Put that stores the key (one small value, so every Range returns one kv)
 * and the Range that reads it. */
static inline void bu_range_requests(const char *key, Etcdserverpb__PutRequest *put,
                                     Etcdserverpb__RangeRequest *range)
{
    static const char value[] = "bench-value-0123456789";
    etcdserverpb__put_request__init(put);
    put->key.data = (uint8_t *)key;
    put->key.len = strlen(key);
    put->value.data = (uint8_t *)value;
    put->value.len = sizeof(value) - 1;
    etcdserverpb__range_request__init(range);
    range->key.data = (uint8_t *)key;
    range->key.len = strlen(key);
}

#endif
