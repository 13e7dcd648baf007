/* SPDX-License-Identifier: MIT */
/* Small shared helpers: clocks, memory, errors (and a client's last error),
 * delays and their jitter. Every file of the transport may use them; they use
 * nothing of it (they sit at its bottom). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "transport_private.h"

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The deadline clock. CLOCK_BOOTTIME, like CLOCK_MONOTONIC, ignores wall-clock
 * steps; unlike it, it keeps counting while the host is suspended, as etcd's
 * clock (on another host) does. */
int64_t elector_now_ns(void)
{
    return clock_ns(CLOCK_BOOTTIME);
}

int64_t elector__mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

int64_t elector__mono_of(int64_t boot_ns)
{
    int64_t mono = clock_ns(CLOCK_MONOTONIC);
    return boot_ns - (clock_ns(CLOCK_BOOTTIME) - mono);
}

int64_t elector__now_ms(void)
{
    return elector_now_ns() / 1000000;
}

char *elector__strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int elector__memdup(uint8_t **dst, size_t *dlen, const void *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    if (!c) return ELECTOR_ENOMEM;
    if (n) memcpy(c, p, n); /* an empty bytes field has data NULL */
    free(*dst);
    *dst = c;
    *dlen = n;
    return 0;
}

/* One row per code, from the one X-macro list (elector/error.h). */
static const struct error_row {
    int value;
    const char *name, *text;
} errors[] = {{0, "OK", "success"},
#define ELECTOR_ERR_ROW_(name, value, text) {value, #name, text},
              ELECTOR_ERRNO_MAP(ELECTOR_ERR_ROW_)
#undef ELECTOR_ERR_ROW_
};

static const struct error_row *error_row(int err)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].value == err) return &errors[i];
    return NULL;
}

const char *elector_strerror(int err)
{
    const struct error_row *r = error_row(err);
    return r ? r->text : "unknown error";
}

const char *elector_err_name(int err)
{
    const struct error_row *r = error_row(err);
    return r ? r->name : "UNKNOWN";
}

bool elector__transient(int err)
{
    return err == ELECTOR_EUNAVAILABLE || err == ELECTOR_ETIMEDOUT ||
           err == ELECTOR_ENOLEADER || err == ELECTOR_ECONNECT;
}

int64_t elector__backoff_ms(int failures, int64_t min_ms, int64_t max_ms, uint32_t rnd)
{
    if (failures <= 0) return 0;
    int64_t d = min_ms;
    for (int i = 1; i < failures && d < max_ms; i++)
        d = d > max_ms / 2 ? max_ms : d * 2;
    if (d > max_ms) d = max_ms;
    /* Jitter in [0.5, 1.0] spreads reconnecting clients apart. */
    return d / 2 + (int64_t)((long double)(d - d / 2) * rnd / UINT32_MAX);
}

int elector__set_err(elector_etcd *e, int err, const char *fmt, ...)
{
    e->err = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->errstr, sizeof(e->errstr), fmt, ap);
    va_end(ap);
    return err;
}

uint32_t elector__next_rnd(elector_etcd *e)
{
    /* xorshift32: jitter only, no need for quality. */
    uint32_t x = e->rnd;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return e->rnd = x;
}

void elector__notice(elector_etcd *e, int err, const char *fmt, ...)
{
    if (!e->notice_cb) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    e->notice_cb(e, err, msg, e->notice_ud);
}
