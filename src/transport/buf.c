/* SPDX-License-Identifier: MIT */
/* A growable byte buffer with a consumed-front offset, so that reading whole
 * messages off the front costs no memmove until the buffer is compacted. */
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"

int elector__buf_reserve(elector__buf *b, size_t extra)
{
    if (b->off > 0 && (b->off == b->len || b->cap - b->len < extra)) {
        /* Compact before growing: the consumed front is dead space. */
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (b->cap - b->len >= extra) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2) return ELECTOR_ENOMEM;
        cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap);
    if (!p) return ELECTOR_ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int elector__buf_append(elector__buf *b, const void *p, size_t n)
{
    if (n == 0) return 0;
    int rc = elector__buf_reserve(b, n);
    if (rc) return rc;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void elector__buf_consume(elector__buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len) b->off = b->len = 0;
}

void elector__buf_free(elector__buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}
