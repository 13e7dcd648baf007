/* SPDX-License-Identifier: MIT */
/* TLS on the connection: the context (CA, client certificate), the handshake
 * with the endpoint's name or address checked, ALPN h2, and reads and writes.
 * A failure is returned (an error code, what went wrong in why); conn.c fails
 * the connection with it.
 * OpenSSL is called by its usual names; ssl_lazy.h sends those calls through
 * the table that ssl_lazy.c fills when the first TLS endpoint is configured. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include "transport_private.h"
#include "ssl_lazy.h"

/* What went wrong, into why; returns err. The caller (conn.c) fails the
 * connection with it. */
static int tls_err(char *why, size_t cap, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int tls_err(char *why, size_t cap, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return err;
}

/* OpenSSL 3 has no reason string for system errors (a missing file): fall back
 * to the full error text. */
static const char *ssl_err_text(void)
{
    static char buf[256];
    unsigned long ec = ERR_get_error();
    const char *r = ec ? ERR_reason_error_string(ec) : NULL;
    if (r) return r;
    if (!ec) return "unknown error";
    ERR_error_string_n(ec, buf, sizeof(buf));
    return buf;
}

/* A new context from the configured files, into *out; 0, or an error code with
 * what is wrong in why. Called at start, and again when the files change
 * (tls_reload.c): a failure then leaves the previous context in use. */
int elector__tls_ctx_build(elector_etcd *e, SSL_CTX **out, char *why, size_t cap)
{
    *out = NULL;
    if (elector__ssl_load(why, cap)) return ELECTOR_ETLS;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(why, cap, "cannot create TLS context");
        return ELECTOR_ETLS;
    }
    int err = 0;
    SSL_CTX_set_verify(
        ctx, e->cfg.insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(ctx,
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    static const unsigned char alpn[] = "\x02h2";
    /* SSL_CTX_set_alpn_protos returns 0 on success, unlike its neighbours. */
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0) {
        snprintf(why, cap, "cannot set up TLS (version, ALPN): %s", ssl_err_text());
        err = ELECTOR_ETLS;
        goto out;
    }
    int ok = e->s_cacert ? SSL_CTX_load_verify_locations(ctx, e->s_cacert, NULL)
                         : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        snprintf(why, cap, "cannot load CA file '%s': %s",
                 e->s_cacert ? e->s_cacert : "(system)", ssl_err_text());
        err = ELECTOR_EINVAL;
        goto out;
    }
    if (e->s_cert && SSL_CTX_use_certificate_chain_file(ctx, e->s_cert) != 1) {
        snprintf(why, cap, "cannot load client certificate '%s': %s", e->s_cert,
                 ssl_err_text());
        err = ELECTOR_EINVAL;
        goto out;
    }
    const char *key = e->s_key ? e->s_key : e->s_cert;
    if (e->s_cert && (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
                      SSL_CTX_check_private_key(ctx) != 1)) {
        snprintf(why, cap, "cannot use client key '%s' with certificate '%s': %s", key,
                 e->s_cert, ssl_err_text());
        err = ELECTOR_EINVAL;
        goto out;
    }
out:
    ERR_clear_error();
    if (err)
        SSL_CTX_free(ctx);
    else
        *out = ctx;
    return err;
}

void elector__tls_ctx_free(SSL_CTX *ctx)
{
    if (ctx) SSL_CTX_free(ctx);
}

int elector__tls_setup(elector_etcd *e)
{
    char why[600];
    int err = elector__tls_ctx_build(e, &e->ssl_ctx, why, sizeof(why));
    return err ? elector__set_err(e, err, "%s", why) : 0;
}

void elector__tls_free(elector_etcd *e)
{
    if (e->ssl) SSL_free(e->ssl);
    e->ssl = NULL;
}

void elector__tls_free_ctx(elector_etcd *e)
{
    if (e->ssl_ctx) SSL_CTX_free(e->ssl_ctx);
    e->ssl_ctx = NULL;
}

int elector__tls_start(elector_etcd *e, char *why, size_t cap)
{
    const elector__endpoint *ep = &e->eps[e->ep];
    e->ssl = SSL_new(e->ssl_ctx);
    BIO *bio = e->ssl ? elector__ssl_socket_bio(e->fd) : NULL;
    if (!bio)
        return tls_err(why, cap, ELECTOR_ETLS,
                       "cannot create TLS session: out of memory");
    SSL_set_bio(e->ssl, bio, bio); /* the SSL object owns it now */
    unsigned char tmp[16];
    bool is_ip =
        inet_pton(AF_INET, ep->host, tmp) == 1 || inet_pton(AF_INET6, ep->host, tmp) == 1;
    /* Without these the certificate is checked against the CA only, not against
     * the endpoint: any certificate of that CA would do. So a failure is fatal.
     * insecure_skip_verify: no check at all (SNI still names the host). */
    bool ok = e->cfg.insecure_skip_verify
                  ? is_ip || SSL_set_tlsext_host_name(e->ssl, ep->host) == 1
              : is_ip
                  ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(e->ssl), ep->host) == 1
                  : SSL_set_tlsext_host_name(e->ssl, ep->host) == 1 &&
                        SSL_set1_host(e->ssl, ep->host) == 1;
    if (!ok)
        return tls_err(why, cap, ELECTOR_ETLS,
                       "cannot set up the check of the server's %s '%s': %s",
                       is_ip ? "IP address" : "host name", ep->host, ssl_err_text());
    e->cstate = C_TLS;
    return 0;
}

/* gRPC needs HTTP/2; a server that did not agree to it in ALPN is not an etcd
 * gRPC endpoint (or is something in between). */
static int check_alpn(elector_etcd *e, char *why, size_t cap)
{
    const unsigned char *proto = NULL;
    unsigned int plen = 0;
    SSL_get0_alpn_selected(e->ssl, &proto, &plen);
    if (plen == 2 && memcmp(proto, "h2", 2) == 0) return 0;
    char got[40];
    snprintf(got, sizeof(got), plen ? "'%.*s'" : "none", (int)(plen < 32 ? plen : 32),
             proto ? (const char *)proto : "");
    return tls_err(
        why, cap, ELECTOR_ETLS,
        "TLS handshake: the server did not agree to HTTP/2 (ALPN h2; it chose %s)", got);
}

int elector__tls_step(elector_etcd *e, bool *done, char *why, size_t cap)
{
    *done = false;
    /* Set again below only if this step would block on writing: left set, the
     * loop would wake at once on every pass (the socket is writable) and spin
     * until the server answers. */
    e->want_write = false;
    ERR_clear_error();
    int rc = SSL_connect(e->ssl);
    if (rc == 1) {
        int err = check_alpn(e, why, cap);
        *done = !err;
        return err;
    }
    int se = SSL_get_error(e->ssl, rc);
    if (se == SSL_ERROR_WANT_READ) return 0;
    if (se == SSL_ERROR_WANT_WRITE) {
        e->want_write = true;
        return 0;
    }
    long vr = SSL_get_verify_result(e->ssl);
    unsigned long ec = ERR_get_error();
    if (vr != X509_V_OK)
        return tls_err(why, cap, ELECTOR_ETLS,
                       "TLS handshake failed: server certificate not trusted (%s)",
                       X509_verify_cert_error_string(vr));
    return tls_err(why, cap, ELECTOR_ETLS, "TLS handshake failed: %s",
                   ec ? ERR_reason_error_string(ec)
                      : "connection closed during handshake");
}

ssize_t elector__tls_read(elector_etcd *e, uint8_t *buf, size_t len, int *err, char *why,
                          size_t cap)
{
    ERR_clear_error();
    errno = 0;
    int n = SSL_read(e->ssl, buf, (int)len);
    if (n > 0) return n;
    int se = SSL_get_error(e->ssl, n);
    if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) return 0;
    if (se == SSL_ERROR_ZERO_RETURN || (se == SSL_ERROR_SYSCALL && n == 0)) {
        *err = tls_err(why, cap, ELECTOR_EUNAVAILABLE, "connection closed by the server");
    } else if (se == SSL_ERROR_SSL && e->cstate != C_READY) {
        /* An alert right after our side of the handshake: the server refused
         * us (TLS 1.3 checks the client certificate then). */
        const char *r = ERR_reason_error_string(ERR_peek_last_error());
        *err = tls_err(why, cap, ELECTOR_ETLS, "TLS handshake refused by the server: %s",
                       r ? r : "alert");
    } else if (se == SSL_ERROR_SYSCALL && errno) {
        *err = tls_err(why, cap, ELECTOR_EUNAVAILABLE, "TLS read failed: %s",
                       strerror(errno));
    } else {
        *err = tls_err(why, cap, ELECTOR_EUNAVAILABLE, "TLS read failed: %s",
                       ssl_err_text());
    }
    return -1;
}

ssize_t elector__tls_write(elector_etcd *e, const uint8_t *buf, size_t len, int *err,
                           char *why, size_t cap)
{
    ERR_clear_error();
    errno = 0;
    int n = SSL_write(e->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    if (n > 0) return n;
    int se = SSL_get_error(e->ssl, n);
    if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) return 0;
    if (se == SSL_ERROR_SYSCALL && errno)
        *err = tls_err(why, cap, ELECTOR_EUNAVAILABLE, "TLS write failed: %s",
                       strerror(errno));
    else
        *err = tls_err(why, cap, ELECTOR_EUNAVAILABLE, "TLS write failed: %s",
                       ssl_err_text());
    return -1;
}
