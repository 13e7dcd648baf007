/* SPDX-License-Identifier: MIT */
#define ELECTOR_SSL_LAZY_IMPL
#include "ssl_lazy.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

struct elector__ssl_api elector__ssl;
static void *handle;

int elector__ssl_load(char *err, size_t cap)
{
    if (handle) return 0;
    static const char *names[] = {"libssl.so.3", "libssl.so"};
    void *h = NULL;
    for (size_t i = 0; !h && i < sizeof(names) / sizeof(names[0]); i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, cap, "TLS needs OpenSSL 3 (Debian: libssl3): %s", dlerror());
        return -1;
    }
    /* One entry per function: a name and the table's slot its address goes to.
     * dlsym searches libssl's dependencies too, so libcrypto's symbols resolve. */
    static const struct {
        const char *name;
        void **slot;
    } syms[] = {
#define ELECTOR__SSL_ENTRY(f) {#f, (void **)&elector__ssl.f},
        ELECTOR__SSL_FUNCS(ELECTOR__SSL_ENTRY)
#undef ELECTOR__SSL_ENTRY
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        if (!(*syms[i].slot = dlsym(h, syms[i].name))) {
            snprintf(err, cap, "OpenSSL lacks %s", syms[i].name);
            dlclose(h);
            return -1;
        }
    }
    handle = h;
    return 0;
}

/* ---- the socket BIO (this file sees OpenSSL's real names, so calls go
 * through the table explicitly) ---- */

static int bio_fd(BIO *b)
{
    return (int)(intptr_t)elector__ssl.BIO_get_data(b);
}

static int bio_write(BIO *b, const char *buf, int len)
{
    elector__ssl.BIO_clear_flags(b, BIO_FLAGS_RWS | BIO_FLAGS_SHOULD_RETRY);
    ssize_t n = send(bio_fd(b), buf, (size_t)len, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        elector__ssl.BIO_set_flags(b, BIO_FLAGS_WRITE | BIO_FLAGS_SHOULD_RETRY);
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
    elector__ssl.BIO_clear_flags(b, BIO_FLAGS_RWS | BIO_FLAGS_SHOULD_RETRY);
    ssize_t n = recv(bio_fd(b), buf, (size_t)len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        elector__ssl.BIO_set_flags(b, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY);
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

BIO *elector__ssl_socket_bio(int fd)
{
    static BIO_METHOD *meth; /* one per process, never freed */
    if (!meth) {
        int idx = elector__ssl.BIO_get_new_index();
        if (idx == -1) return NULL;
        BIO_METHOD *m = elector__ssl.BIO_meth_new(
            idx | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "elector socket");
        if (!m || !elector__ssl.BIO_meth_set_write(m, bio_write) ||
            !elector__ssl.BIO_meth_set_read(m, bio_read) ||
            !elector__ssl.BIO_meth_set_ctrl(m, bio_ctrl))
            return NULL; /* (m leaks: out of memory anyway) */
        meth = m;
    }
    BIO *b = elector__ssl.BIO_new(meth);
    if (!b) return NULL;
    elector__ssl.BIO_set_data(b, (void *)(intptr_t)fd);
    elector__ssl.BIO_set_init(b, 1);
    return b;
}
