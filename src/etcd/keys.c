/* SPDX-License-Identifier: MIT */
/* Key helpers: the range end of a prefix, and election prefixes. */
#include <stdlib.h>
#include <string.h>
#include "etcd_internal.h"

size_t elector_prefix_end(const uint8_t *prefix, size_t len, uint8_t *out)
{
    if (len) memcpy(out, prefix, len);
    for (size_t i = len; i > 0; i--) {
        if (out[i - 1] < 0xff) {
            out[i - 1]++;
            return i;
        }
    }
    out[0] = 0;
    return 1;
}

int elector__prefix_init(elector__prefix *p, const char *name)
{
    size_t n = strlen(name) + 1;
    memset(p, 0, sizeof(*p));
    p->key = malloc(2 * n);
    if (!p->key) return ELECTOR_ENOMEM;
    memcpy(p->key, name, n - 1);
    p->key[n - 1] = '/';
    p->len = n;
    p->end = p->key + n;
    p->end_len = elector_prefix_end(p->key, n, p->end);
    return 0;
}

void elector__prefix_free(elector__prefix *p)
{
    free(p->key);
    memset(p, 0, sizeof(*p));
}
