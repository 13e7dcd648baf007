/* SPDX-License-Identifier: MIT */
/* See escape.h. */
#include "text/escape.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t tool_utf8_seq(const void *src, size_t n, uint32_t *cp)
{
    const uint8_t *p = src;
    uint8_t b = p[0];
    size_t len;
    uint32_t c, min;
    if (b < 0x80) {
        if (cp) *cp = b;
        return 1;
    } else if (b >= 0xc2 && b <= 0xdf) {
        len = 2, c = b & 0x1f, min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
        len = 3, c = b & 0x0f, min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
        len = 4, c = b & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    if (cp) *cp = c;
    return len;
}

/* Code points that reorder or break lines of text without being C0/C1. */
static int invisible_control(uint32_t c)
{
    return c == 0x2028 || c == 0x2029 || c == 0x200e || c == 0x200f ||
           (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

size_t tool_escape(char *out, size_t cap, const void *src, size_t n)
{
    const uint8_t *s = src;
    size_t o = 0;
    char tmp[16];
#define EMIT(str, len)                                                                   \
    do {                                                                                 \
        for (size_t k_ = 0; k_ < (len); k_++, o++)                                       \
            if (o + 1 < cap) out[o] = (str)[k_];                                         \
    } while (0)
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t len = tool_utf8_seq(s + i, n - i, &cp);
        const char *rep = NULL;
        if (len == 1) {
            if (cp == '\n')
                rep = "\\n";
            else if (cp == '\r')
                rep = "\\r";
            else if (cp == '\t')
                rep = "\\t";
            else if (cp == '\\')
                rep = "\\\\";
        }
        if (rep) {
            EMIT(rep, strlen(rep));
        } else if (len == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
            /* Not text: each byte of it shown in hex. */
            size_t k = len ? len : 1;
            for (size_t j = 0; j < k; j++) {
                snprintf(tmp, sizeof(tmp), "\\x%02x", s[i + j]);
                EMIT(tmp, 4);
            }
            len = k;
        } else if (invisible_control(cp)) {
            int m = snprintf(tmp, sizeof(tmp), "\\u{%04x}", (unsigned)cp);
            EMIT(tmp, (size_t)m);
        } else {
            EMIT((const char *)s + i, len);
        }
        i += len;
    }
#undef EMIT
    if (cap) out[o < cap ? o : cap - 1] = 0;
    return o;
}

char *tool_escape_dup(const void *s, size_t n)
{
    size_t need = tool_escape(NULL, 0, s, n);
    char *out = malloc(need + 1);
    if (out) tool_escape(out, need + 1, s, n);
    return out;
}

bool tool_utf8_valid(const void *src, size_t n)
{
    const uint8_t *s = src;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = tool_utf8_seq(s + i, n - i, &cp);
        if (!len) return false;
        i += len;
    }
    return true;
}
