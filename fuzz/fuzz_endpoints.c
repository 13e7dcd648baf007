/* SPDX-License-Identifier: MIT */
/* libFuzzer target: endpoint list parsing (src/transport/endpoint.c).
 * Input: byte 0 = tls_default (low bit), the rest = the list (made NUL-terminated;
 * an embedded NUL simply ends the string early, as it would in C). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    bool tls_default = data[0] & 1;
    char *list = malloc(size);
    if (!list) return 0;
    memcpy(list, data + 1, size - 1);
    list[size - 1] = 0;

    char err[300];
    elector__endpoint *eps = NULL;
    int n = elector__endpoints_parse(list, tls_default, &eps, err, sizeof(err));
    if (n > 0) {
        /* Touch every field: ASan sees a bad pointer or a missing terminator. */
        size_t total = 0;
        for (int i = 0; i < n; i++) {
            total += strlen(eps[i].host) + strlen(eps[i].port) + strlen(eps[i].authority);
            if (!eps[i].host[0] || !eps[i].port[0]) abort(); /* accepted an empty part */
        }
        (void)total;
        elector__endpoints_free(eps, n);
    } else {
        if (eps) abort(); /* *out must be NULL on error */
        if (n != ELECTOR_EINVAL && n != ELECTOR_ENOMEM) abort();
        if (strlen(err) >= sizeof(err)) abort(); /* message NUL-terminated */
    }
    free(list);
    return 0;
}
