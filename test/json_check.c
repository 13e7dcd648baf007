/* SPDX-License-Identifier: MIT */
/* See json_check.h. */
#define _GNU_SOURCE
#include "json_check.h"

#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"

#ifndef ELECTOR_DOCS_DIR
#error "ELECTOR_DOCS_DIR must name the docs/ directory with the schemas"
#endif

/* ---------------------------------------------------------------- parser */

struct parser {
    const char *s, *end;
    char *err;
    size_t cap;
    int depth;
};

static jv *perr(struct parser *p, const char *what)
{
    if (p->err && !p->err[0])
        snprintf(p->err, p->cap, "%s at offset %td", what, p->end - p->s);
    return NULL;
}

static void ws(struct parser *p)
{
    while (p->s < p->end &&
           (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static jv *node(jtype t)
{
    jv *v = calloc(1, sizeof(*v));
    if (v) v->t = t;
    return v;
}

static void put_utf8(char *o, size_t *n, uint32_t c)
{
    if (c < 0x80) {
        o[(*n)++] = (char)c;
    } else if (c < 0x800) {
        o[(*n)++] = (char)(0xc0 | c >> 6);
        o[(*n)++] = (char)(0x80 | (c & 63));
    } else if (c < 0x10000) {
        o[(*n)++] = (char)(0xe0 | c >> 12);
        o[(*n)++] = (char)(0x80 | ((c >> 6) & 63));
        o[(*n)++] = (char)(0x80 | (c & 63));
    } else {
        o[(*n)++] = (char)(0xf0 | c >> 18);
        o[(*n)++] = (char)(0x80 | ((c >> 12) & 63));
        o[(*n)++] = (char)(0x80 | ((c >> 6) & 63));
        o[(*n)++] = (char)(0x80 | (c & 63));
    }
}

static int hex4(const char *s, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A string at p->s (the opening quote); returns it malloc'd. */
static char *pstring(struct parser *p, size_t *len)
{
    p->s++;
    char *o = malloc((size_t)(p->end - p->s) * 2 + 4);
    size_t n = 0;
    if (!o) return NULL;
    while (p->s < p->end && *p->s != '"') {
        unsigned char c = (unsigned char)*p->s++;
        if (c < 0x20) break; /* raw control characters are not allowed */
        if (c != '\\') {
            o[n++] = (char)c;
            continue;
        }
        if (p->s >= p->end) break;
        char e = *p->s++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (simple && e) {
            o[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        uint32_t cp;
        if (e != 'u' || p->end - p->s < 4 || hex4(p->s, &cp)) break;
        p->s += 4;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t lo;
            if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' ||
                hex4(p->s + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                break;
            p->s += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            break;
        }
        put_utf8(o, &n, cp);
    }
    if (p->s >= p->end || *p->s != '"') {
        free(o);
        perr(p, "bad string");
        return NULL;
    }
    p->s++;
    o[n] = 0;
    *len = n;
    return o;
}

static jv *pvalue(struct parser *p);

static int push(jv *v, jv *item, char *key)
{
    jv **items = realloc(v->items, (v->n + 1) * sizeof(*items));
    if (!items) return -1;
    v->items = items;
    if (v->t == J_OBJ) {
        char **keys = realloc(v->keys, (v->n + 1) * sizeof(*keys));
        if (!keys) return -1;
        v->keys = keys;
        v->keys[v->n] = key;
    }
    v->items[v->n++] = item;
    return 0;
}

static jv *pcontainer(struct parser *p, bool obj)
{
    if (++p->depth > 64) return perr(p, "too deep");
    jv *v = node(obj ? J_OBJ : J_ARR);
    p->s++;
    ws(p);
    if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
        p->s++;
        p->depth--;
        return v;
    }
    for (;;) {
        char *key = NULL;
        ws(p);
        if (obj) {
            size_t kl;
            if (p->s >= p->end || *p->s != '"' || !(key = pstring(p, &kl))) break;
            for (size_t i = 0; i < v->n; i++)
                if (!strcmp(v->keys[i], key)) {
                    free(key);
                    json_free(v);
                    return perr(p, "duplicate key");
                }
            ws(p);
            if (p->s >= p->end || *p->s != ':') {
                free(key);
                break;
            }
            p->s++;
        }
        jv *item = pvalue(p);
        if (!item || push(v, item, key)) {
            free(key);
            json_free(item);
            break;
        }
        ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
            p->s++;
            p->depth--;
            return v;
        }
        break;
    }
    json_free(v);
    return perr(p, obj ? "bad object" : "bad array");
}

static jv *pvalue(struct parser *p)
{
    ws(p);
    if (p->s >= p->end) return perr(p, "unexpected end");
    char c = *p->s;
    if (c == '{' || c == '[') return pcontainer(p, c == '{');
    if (c == '"') {
        jv *v = node(J_STR);
        if (v && !(v->str = pstring(p, &v->len))) {
            free(v);
            return NULL;
        }
        return v;
    }
    static const struct {
        const char *word;
        jtype t;
        bool b;
    } words[] = {
        {"true", J_BOOL, true}, {"false", J_BOOL, false}, {"null", J_NULL, false}};
    for (size_t i = 0; i < 3; i++) {
        size_t wl = strlen(words[i].word);
        if ((size_t)(p->end - p->s) >= wl && !strncmp(p->s, words[i].word, wl)) {
            p->s += wl;
            jv *v = node(words[i].t);
            v->b = words[i].b;
            return v;
        }
    }
    /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *q = p->s;
    if (q < p->end && *q == '-') q++;
    if (q >= p->end || *q < '0' || *q > '9') return perr(p, "bad value");
    if (*q == '0')
        q++;
    else
        while (q < p->end && *q >= '0' && *q <= '9')
            q++;
    bool is_int = true;
    if (q < p->end && *q == '.') {
        is_int = false;
        if (++q >= p->end || *q < '0' || *q > '9') return perr(p, "bad number");
        while (q < p->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < p->end && (*q == 'e' || *q == 'E')) {
        is_int = false;
        q++;
        if (q < p->end && (*q == '+' || *q == '-')) q++;
        if (q >= p->end || *q < '0' || *q > '9') return perr(p, "bad number");
        while (q < p->end && *q >= '0' && *q <= '9')
            q++;
    }
    char buf[64];
    if ((size_t)(q - p->s) >= sizeof(buf)) return perr(p, "number too long");
    memcpy(buf, p->s, (size_t)(q - p->s));
    buf[q - p->s] = 0;
    jv *v = node(J_NUM);
    v->num = strtod(buf, NULL);
    v->is_int = is_int;
    p->s = q;
    return v;
}

jv *json_parse(const char *s, size_t n, char *err, size_t cap)
{
    struct parser p = {s, s + n, err, cap, 0};
    if (cap) err[0] = 0;
    jv *v = pvalue(&p);
    ws(&p);
    if (v && p.s != p.end) {
        json_free(v);
        return perr(&p, "trailing bytes");
    }
    return v;
}

void json_free(jv *v)
{
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

const jv *json_get(const jv *o, const char *key)
{
    if (!o || o->t != J_OBJ) return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) return o->items[i];
    return NULL;
}

/* ---------------------------------------------------------------- validator */

static bool json_equal(const jv *a, const jv *b)
{
    if (a->t != b->t) return false;
    switch (a->t) {
    case J_NULL:
        return true;
    case J_BOOL:
        return a->b == b->b;
    case J_NUM:
        return a->num == b->num;
    case J_STR:
        return a->len == b->len && !memcmp(a->str, b->str, a->len);
    default:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++) {
            const jv *bi = a->t == J_OBJ ? json_get(b, a->keys[i]) : b->items[i];
            if (!bi || !json_equal(a->items[i], bi)) return false;
        }
        return true;
    }
}

static bool type_is(const jv *inst, const char *t)
{
    if (!strcmp(t, "object")) return inst->t == J_OBJ;
    if (!strcmp(t, "array")) return inst->t == J_ARR;
    if (!strcmp(t, "string")) return inst->t == J_STR;
    if (!strcmp(t, "boolean")) return inst->t == J_BOOL;
    if (!strcmp(t, "null")) return inst->t == J_NULL;
    if (!strcmp(t, "number")) return inst->t == J_NUM;
    if (!strcmp(t, "integer")) return inst->t == J_NUM && inst->is_int;
    return false;
}

/* Code points in a UTF-8 string (minLength counts them). */
static size_t cps(const jv *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++)
        n += ((unsigned char)s->str[i] & 0xc0) != 0x80;
    return n;
}

#define FAIL(...)                                                                        \
    do {                                                                                 \
        snprintf(err, cap, __VA_ARGS__);                                                 \
        return -1;                                                                       \
    } while (0)

int json_validate(const jv *root, const jv *sc, const jv *inst, char *err, size_t cap)
{
    if (sc->t == J_BOOL) {
        if (!sc->b) FAIL("a value where the schema allows none");
        return 0;
    }
    if (sc->t != J_OBJ) FAIL("schema is not an object");
    for (size_t i = 0; i < sc->n; i++) {
        const char *kw = sc->keys[i];
        const jv *a = sc->items[i];
        if (!strcmp(kw, "$schema") || !strcmp(kw, "$id") || !strcmp(kw, "title") ||
            !strcmp(kw, "description") || !strcmp(kw, "$comment") || !strcmp(kw, "$defs"))
            continue;
        if (!strcmp(kw, "$ref")) {
            const char *pfx = "#/$defs/";
            if (a->t != J_STR || strncmp(a->str, pfx, strlen(pfx)))
                FAIL("unsupported $ref");
            const jv *def = json_get(json_get(root, "$defs"), a->str + strlen(pfx));
            if (!def) FAIL("$ref %s not found", a->str);
            if (json_validate(root, def, inst, err, cap)) return -1;
        } else if (!strcmp(kw, "type")) {
            bool ok = false;
            if (a->t == J_STR) ok = type_is(inst, a->str);
            for (size_t k = 0; a->t == J_ARR && k < a->n; k++)
                ok |= type_is(inst, a->items[k]->str);
            if (!ok) FAIL("wrong type");
        } else if (!strcmp(kw, "enum")) {
            bool ok = false;
            for (size_t k = 0; k < a->n; k++)
                ok |= json_equal(a->items[k], inst);
            if (!ok) FAIL("%s not in enum", inst->t == J_STR ? inst->str : "value");
        } else if (!strcmp(kw, "const")) {
            if (!json_equal(a, inst)) FAIL("not the const");
        } else if (!strcmp(kw, "pattern")) {
            if (inst->t != J_STR) continue;
            regex_t re;
            if (regcomp(&re, a->str, REG_EXTENDED | REG_NOSUB))
                FAIL("bad pattern %s", a->str);
            int m = regexec(&re, inst->str, 0, NULL, 0);
            regfree(&re);
            if (m || strlen(inst->str) != inst->len)
                FAIL("'%s' does not match %s", inst->str, a->str);
        } else if (!strcmp(kw, "minimum")) {
            if (inst->t == J_NUM && inst->num < a->num)
                FAIL("%g below %g", inst->num, a->num);
        } else if (!strcmp(kw, "minLength")) {
            if (inst->t == J_STR && cps(inst) < (size_t)a->num) FAIL("string too short");
        } else if (!strcmp(kw, "required")) {
            if (inst->t != J_OBJ) continue;
            for (size_t k = 0; k < a->n; k++)
                if (!json_get(inst, a->items[k]->str))
                    FAIL("\"%s\" missing", a->items[k]->str);
        } else if (!strcmp(kw, "dependentRequired")) {
            if (inst->t != J_OBJ) continue;
            for (size_t k = 0; k < a->n; k++) {
                if (!json_get(inst, a->keys[k])) continue;
                const jv *need = a->items[k];
                for (size_t m = 0; m < need->n; m++)
                    if (!json_get(inst, need->items[m]->str))
                        FAIL("\"%s\" needs \"%s\"", a->keys[k], need->items[m]->str);
            }
        } else if (!strcmp(kw, "properties")) {
            if (inst->t != J_OBJ) continue;
            for (size_t k = 0; k < a->n; k++) {
                const jv *v = json_get(inst, a->keys[k]);
                if (v && json_validate(root, a->items[k], v, err, cap)) {
                    size_t l = strlen(err);
                    snprintf(err + l, cap - l, " (in \"%s\")", a->keys[k]);
                    return -1;
                }
            }
        } else if (!strcmp(kw, "additionalProperties")) {
            if (inst->t != J_OBJ) continue;
            const jv *props = json_get(sc, "properties");
            for (size_t k = 0; k < inst->n; k++) {
                if (json_get(props, inst->keys[k])) continue;
                if (json_validate(root, a, inst->items[k], err, cap))
                    FAIL("property \"%s\" not allowed", inst->keys[k]);
            }
        } else if (!strcmp(kw, "oneOf") || !strcmp(kw, "allOf")) {
            int ok = 0;
            char sub[256] = "";
            for (size_t k = 0; k < a->n; k++) {
                char e2[256];
                if (json_validate(root, a->items[k], inst, e2, sizeof(e2)) == 0)
                    ok++;
                else if (!sub[0])
                    snprintf(sub, sizeof(sub), "%s", e2);
            }
            if (!strcmp(kw, "allOf") && ok != (int)a->n) FAIL("allOf: %s", sub);
            if (!strcmp(kw, "oneOf") && ok != 1)
                FAIL("oneOf: %d of %zu branches match%s%s", ok, a->n,
                     ok ? "" : "; first: ", ok ? "" : sub);
        } else {
            FAIL("unsupported keyword %s", kw);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- the tool's lines */

unsigned char *json_b64_decode(const char *s, size_t *out_len)
{
    size_t n = strlen(s);
    if (n % 4) return NULL;
    unsigned char *o = malloc(n / 4 * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            char c = s[i + j];
            int d = c >= 'A' && c <= 'Z'               ? c - 'A'
                    : c >= 'a' && c <= 'z'             ? c - 'a' + 26
                    : c >= '0' && c <= '9'             ? c - '0' + 52
                    : c == '+'                         ? 62
                    : c == '/'                         ? 63
                    : c == '=' && i + 4 == n && j >= 2 ? (pad++, 0)
                                                       : -1;
            if (d < 0 || (pad && c != '=')) {
                free(o);
                return NULL;
            }
            v = v << 6 | (uint32_t)d;
        }
        o[k++] = (unsigned char)(v >> 16);
        if (pad < 2) o[k++] = (unsigned char)(v >> 8);
        if (pad < 1) o[k++] = (unsigned char)v;
    }
    *out_len = k;
    return o;
}

static bool utf8_ok(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char b = p[i];
        size_t len;
        uint32_t c, min;
        if (b < 0x80) {
            i++;
            continue;
        } else if (b >= 0xc2 && b <= 0xdf) {
            len = 2, c = b & 0x1f, min = 0x80;
        } else if (b >= 0xe0 && b <= 0xef) {
            len = 3, c = b & 0x0f, min = 0x800;
        } else if (b >= 0xf0 && b <= 0xf4) {
            len = 4, c = b & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return false;
            c = c << 6 | (p[i + k] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return false;
        i += len;
    }
    return true;
}

/* The schemas, loaded once per process. */
static jv *g_events, *g_log;
static long g_checked;

static jv *load_schema(const char *file)
{
    char path[512], err[200];
    snprintf(path, sizeof(path), "%s/%s", ELECTOR_DOCS_DIR, file);
    FILE *f = fopen(path, "r");
    if (!f) {
        tl_log("cannot open %s", path);
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0, k;
    char tmp[4096];
    while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        buf = realloc(buf, cap = n + k + 1);
        memcpy(buf + n, tmp, k);
        n += k;
    }
    fclose(f);
    jv *v = buf ? json_parse(buf, n, err, sizeof(err)) : NULL;
    if (!v) tl_log("%s: %s", path, err);
    free(buf);
    (void)cap;
    return v;
}

int json_check_line(const char *line, size_t n, char *err, size_t cap)
{
    if (!g_events) g_events = load_schema("elector-events.schema.json");
    if (!g_log) g_log = load_schema("elector-log.schema.json");
    if (!g_events || !g_log) FAIL("schemas not loaded");
    char perr_[200];
    jv *v = json_parse(line, n, perr_, sizeof(perr_));
    if (!v) FAIL("not JSON: %s", perr_);
    int rc;
    if (json_get(v, "event")) {
        rc = json_validate(g_events, g_events, v, err, cap);
        static const char *const pairs[] = {"key", "value", "predecessor"};
        for (size_t i = 0; !rc && i < 3; i++) {
            char b64[40];
            snprintf(b64, sizeof(b64), "%s_base64", pairs[i]);
            const jv *t = json_get(v, pairs[i]), *b = json_get(v, b64);
            if (!b) continue;
            size_t dl;
            unsigned char *d = json_b64_decode(b->str, &dl);
            if (!d) {
                snprintf(err, cap, "%s is not base64", b64);
                rc = -1;
            } else if (utf8_ok(d, dl) != (t != NULL)) {
                snprintf(err, cap, "\"%s\" must be there exactly when %s is UTF-8",
                         pairs[i], b64);
                rc = -1;
            } else if (t && (t->len != dl || memcmp(t->str, d, dl))) {
                snprintf(err, cap, "\"%s\" and %s differ", pairs[i], b64);
                rc = -1;
            }
            free(d);
        }
    } else {
        rc = json_validate(g_log, g_log, v, err, cap);
    }
    json_free(v);
    return rc;
}

int json_check_text(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if ((len > 9 && !strncmp(p, "{\"event\":", 9)) ||
            (len > 8 && !strncmp(p, "{\"time\":", 8))) {
            char err[400];
            if (json_check_line(p, len, err, sizeof(err))) {
                tl_log("schema violation: %s\n  line: %.*s", err,
                       (int)(len > 2000 ? 2000 : len), p);
                ASSERT(!"a line of the tool's JSON output violates its schema");
            }
            n++;
            g_checked++;
        }
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

long json_checked_total(void)
{
    return g_checked;
}
