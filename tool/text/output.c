/* SPDX-License-Identifier: MIT */
/* See output.h. */
#define _GNU_SOURCE
#include "text/output.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "text/escape.h"
#include "text/json.h"

static const char tab[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *tool_base64(const void *src, size_t n)
{
    const uint8_t *s = src;
    if (n > (SIZE_MAX - 1) / 4 * 3 - 3) return NULL;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = tab[(v >> 6) & 63];
        *o++ = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = 0;
    return out;
}

struct jb {
    char *p;
    size_t len, cap;
    bool oom;
};

static void raw(struct jb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void raw(struct jb *b, const char *fmt, ...)
{
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->cap + (size_t)(n < 0 ? 0 : n) + 1) * 2;
        char *q = n < 0 ? NULL : realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* "field":"text","field_base64":"..." (the text only when valid UTF-8). */
static void bytes(struct jb *b, const char *field, const uint8_t *s, size_t n)
{
    if (!s || b->oom) return;
    if (tool_utf8_valid(s, n)) {
        raw(b, ",\"%s\":", field);
        if (!b->oom && tool_json_str(&b->p, &b->len, &b->cap, s, n)) b->oom = true;
    }
    char *b64 = tool_base64(s, n);
    if (!b64)
        b->oom = true;
    else
        raw(b, ",\"%s_base64\":\"%s\"", field, b64);
    free(b64);
}

char *tool_event_json(const tool_event_out *e)
{
    struct jb b = {0};
    raw(&b, "{\"event\":\"%s\",\"name\":", e->event);
    const char *name = e->name ? e->name : "";
    if (!b.oom &&
        tool_json_str(&b.p, &b.len, &b.cap, (const uint8_t *)name, strlen(name)))
        b.oom = true;
    bytes(&b, "key", e->key, e->key_len);
    if (e->lease) raw(&b, ",\"lease\":\"%" PRIx64 "\"", (uint64_t)e->lease);
    if (e->token) raw(&b, ",\"token\":%" PRId64, e->token);
    bytes(&b, "value", e->value, e->value_len);
    bytes(&b, "predecessor", e->predecessor, e->predecessor_len);
    if (e->error) {
        raw(&b, ",\"error\":\"%s\",\"reason\":", e->error);
        const char *r = e->reason ? e->reason : "";
        if (!b.oom && tool_json_str(&b.p, &b.len, &b.cap, (const uint8_t *)r, strlen(r)))
            b.oom = true;
    }
    if (e->check) {
        raw(&b, ",\"failures\":%d,\"check\":", e->failures);
        if (!b.oom && tool_json_str(&b.p, &b.len, &b.cap, (const uint8_t *)e->check,
                                    strlen(e->check)))
            b.oom = true;
    }
    raw(&b, ",\"mono_ns\":%" PRId64 ",\"unix_ms\":%" PRId64 "}", e->mono_ns, e->unix_ms);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int tool_write_line(FILE *f, const char *line)
{
    errno = 0;
    if (fputs(line, f) == EOF || fputc('\n', f) == EOF) return -1;
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

static int write_bytes(FILE *f, bool tty, bool hex, const uint8_t *p, size_t n)
{
    if (hex) {
        for (size_t i = 0; i < n; i++)
            if (fprintf(f, "\\x%02x", p[i]) < 0) return -1;
    } else {
        char *esc = tty ? tool_escape_dup(p, n) : NULL;
        if (esc)
            fputs(esc, f);
        else if (n)
            fwrite(p, 1, n, f);
        free(esc);
    }
    return fputc('\n', f) == EOF ? -1 : 0;
}

int tool_write_kv(FILE *f, bool tty, bool hex, const uint8_t *k, size_t kl,
                  const uint8_t *v, size_t vl)
{
    errno = 0;
    write_bytes(f, tty, hex, k, kl);
    write_bytes(f, tty, hex, v, vl);
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}
