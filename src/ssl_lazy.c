#define ELECTOR_SSL_LAZY_IMPL
#include "ssl_lazy.h"

#include <dlfcn.h>
#include <stdio.h>

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
    /* dlsym searches libssl's dependencies too, so libcrypto's symbols resolve. */
#define ELECTOR__SSL_LOAD(f)                                                             \
    if (!(*(void **)&elector__ssl.f = dlsym(h, #f))) {                                    \
        snprintf(err, cap, "OpenSSL lacks %s", #f);                                       \
        dlclose(h);                                                                       \
        return -1;                                                                        \
    }
    ELECTOR__SSL_FUNCS(ELECTOR__SSL_LOAD)
#undef ELECTOR__SSL_LOAD
    handle = h;
    return 0;
}
