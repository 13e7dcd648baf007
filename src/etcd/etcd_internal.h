/* SPDX-License-Identifier: MIT */
/* What the etcd layer (src/etcd/) offers the layer above it (src/election/),
 * beside the public API of <elector/etcd.h> (watches, keepalives): key helpers.
 * It passes on the transport's facilities (timers, the rule of callbacks and
 * freeing, errors, delays), which the layer above uses through this header. */
#ifndef ELECTOR_ETCD_INTERNAL_H
#define ELECTOR_ETCD_INTERNAL_H

#include "transport_internal.h"

/* The key prefix "NAME/" of a name, and the range end that selects every key
 * under it; one allocation, computed once. */
typedef struct elector__prefix {
    uint8_t *key;
    size_t len;
    uint8_t *end;
    size_t end_len;
} elector__prefix;

/* Returns 0 or ELECTOR_ENOMEM. */
int elector__prefix_init(elector__prefix *p, const char *name);
void elector__prefix_free(elector__prefix *p);

/* What a watcher does once its watch ended with err (the callback's error): a
 * broken or compacted watch never counts as news, the watcher reads the
 * current state again. */
enum elector__watch_next {
    ELECTOR__WATCH_GIVE_UP, /* EPROTO: a server that broke the protocol will not heal */
    ELECTOR__WATCH_REREAD,  /* ECOMPACTED: read again now, watch from there */
    ELECTOR__WATCH_RETRY    /* anything else: read again after a pause */
};
enum elector__watch_next elector__watch_next(int err);

#endif
