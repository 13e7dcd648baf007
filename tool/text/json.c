/* SPDX-License-Identifier: MIT */
/* See json.h. */
#include "text/json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "text/escape.h"

int tool_buf_reserve(char **buf, size_t len, size_t *cap, size_t n)
{
    if (n > SIZE_MAX - len - 1) return -1;
    size_t need = len + n + 1;
    if (*buf && need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : c * 2;
    char *q = realloc(*buf, c);
    if (!q) return -1;
    *buf = q;
    *cap = c;
    return 0;
}

/* Writes s as the inside of a JSON string to out (if non-NULL); returns the
 * number of bytes it takes. */
static const char hex[] = "0123456789abcdef";
static const char short_esc[] = "\"\\\b\f\n\r\t", short_rep[] = "\"\\bfnrt";

static size_t json_escape(char *out, const uint8_t *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        const char *e = memchr(short_esc, c, sizeof(short_esc) - 1);
        if (e) { /* \" \\ \b \f \n \r \t */
            if (out) {
                out[o] = '\\';
                out[o + 1] = short_rep[e - short_esc];
            }
            o += 2;
            i++;
            continue;
        }
        size_t k = c < 0x20 ? 0 : tool_utf8_seq(s + i, n - i, NULL);
        if (k == 0) { /* control character or a byte that is not UTF-8 */
            if (out) {
                memcpy(out + o, "\\u00", 4);
                out[o + 4] = hex[c >> 4];
                out[o + 5] = hex[c & 15];
            }
            o += 6;
            i++;
            continue;
        }
        if (out) memcpy(out + o, s + i, k);
        o += k;
        i += k;
    }
    return o;
}

int tool_json_str(char **buf, size_t *len, size_t *cap, const uint8_t *s, size_t n)
{
    if (!s) n = 0;
    size_t need = json_escape(NULL, s, n);
    if (need > SIZE_MAX - 2 || tool_buf_reserve(buf, *len, cap, need + 2) != 0) return -1;
    char *o = *buf + *len;
    *o++ = '"';
    json_escape(o, s, n);
    o[need] = '"';
    *len += need + 2;
    (*buf)[*len] = 0;
    return 0;
}
