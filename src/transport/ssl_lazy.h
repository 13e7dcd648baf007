/* SPDX-License-Identifier: MIT */
/* OpenSSL, loaded on first use. A process that talks only plain-text h2c never
 * maps libssl/libcrypto, whose relocation and initialization cost about 1.7 MB
 * of RSS. client.c calls OpenSSL by its usual names; the macros below send those
 * calls through a table that elector__ssl_load() fills with dlsym(). OpenSSL's
 * own function-like macros (SSL_CTX_set_mode, SSL_set_tlsext_host_name, ...)
 * expand to SSL_CTX_ctrl / SSL_ctrl and so go through the table as well. */
#ifndef ELECTOR_SSL_LAZY_H
#define ELECTOR_SSL_LAZY_H

#include <stddef.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define ELECTOR__SSL_FUNCS(X)                                                            \
    X(TLS_client_method)                                                                 \
    X(SSL_CTX_new)                                                                       \
    X(SSL_CTX_free)                                                                      \
    X(SSL_CTX_ctrl)                                                                      \
    X(SSL_CTX_set_verify)                                                                \
    X(SSL_CTX_set_alpn_protos)                                                           \
    X(SSL_CTX_load_verify_locations)                                                     \
    X(SSL_CTX_set_default_verify_paths)                                                  \
    X(SSL_CTX_use_certificate_chain_file)                                                \
    X(SSL_CTX_use_PrivateKey_file)                                                       \
    X(SSL_CTX_check_private_key)                                                         \
    X(SSL_new)                                                                           \
    X(SSL_free)                                                                          \
    X(SSL_set_bio)                                                                       \
    X(SSL_get0_alpn_selected)                                                            \
    X(BIO_get_new_index)                                                                 \
    X(BIO_meth_new)                                                                      \
    X(BIO_meth_set_write)                                                                \
    X(BIO_meth_set_read)                                                                 \
    X(BIO_meth_set_ctrl)                                                                 \
    X(BIO_new)                                                                           \
    X(BIO_set_data)                                                                      \
    X(BIO_get_data)                                                                      \
    X(BIO_set_init)                                                                      \
    X(BIO_set_flags)                                                                     \
    X(BIO_clear_flags)                                                                   \
    X(SSL_get0_param)                                                                    \
    X(SSL_ctrl)                                                                          \
    X(SSL_set1_host)                                                                     \
    X(SSL_connect)                                                                       \
    X(SSL_get_error)                                                                     \
    X(SSL_get_verify_result)                                                             \
    X(SSL_read)                                                                          \
    X(SSL_write)                                                                         \
    X(ERR_get_error)                                                                     \
    X(ERR_peek_last_error)                                                               \
    X(ERR_reason_error_string)                                                           \
    X(ERR_error_string_n)                                                                \
    X(ERR_clear_error)                                                                   \
    X(X509_VERIFY_PARAM_set1_ip_asc)                                                     \
    X(X509_verify_cert_error_string)

struct elector__ssl_api {
#define ELECTOR__SSL_MEMBER(f) __typeof__(f) *f;
    ELECTOR__SSL_FUNCS(ELECTOR__SSL_MEMBER)
#undef ELECTOR__SSL_MEMBER
};
extern struct elector__ssl_api elector__ssl;

/* Loads libssl (and with it libcrypto) once. Returns 0, or -1 with a message. */
int elector__ssl_load(char *err, size_t cap);

/* A socket BIO that sends with MSG_NOSIGNAL: OpenSSL's own socket BIO writes with
 * write(), which raises SIGPIPE when the peer has closed. NULL when out of
 * memory. SSL_set_bio() hands it to the SSL object, which frees it. */
BIO *elector__ssl_socket_bio(int fd);

#ifndef ELECTOR_SSL_LAZY_IMPL
#define TLS_client_method elector__ssl.TLS_client_method
#define SSL_CTX_new elector__ssl.SSL_CTX_new
#define SSL_CTX_free elector__ssl.SSL_CTX_free
#define SSL_CTX_ctrl elector__ssl.SSL_CTX_ctrl
#define SSL_CTX_set_verify elector__ssl.SSL_CTX_set_verify
#define SSL_CTX_set_alpn_protos elector__ssl.SSL_CTX_set_alpn_protos
#define SSL_CTX_load_verify_locations elector__ssl.SSL_CTX_load_verify_locations
#define SSL_CTX_set_default_verify_paths elector__ssl.SSL_CTX_set_default_verify_paths
#define SSL_CTX_use_certificate_chain_file elector__ssl.SSL_CTX_use_certificate_chain_file
#define SSL_CTX_use_PrivateKey_file elector__ssl.SSL_CTX_use_PrivateKey_file
#define SSL_CTX_check_private_key elector__ssl.SSL_CTX_check_private_key
#define SSL_new elector__ssl.SSL_new
#define SSL_free elector__ssl.SSL_free
#define SSL_set_bio elector__ssl.SSL_set_bio
#define SSL_get0_alpn_selected elector__ssl.SSL_get0_alpn_selected
#define BIO_get_new_index elector__ssl.BIO_get_new_index
#define BIO_meth_new elector__ssl.BIO_meth_new
#define BIO_meth_set_write elector__ssl.BIO_meth_set_write
#define BIO_meth_set_read elector__ssl.BIO_meth_set_read
#define BIO_meth_set_ctrl elector__ssl.BIO_meth_set_ctrl
#define BIO_new elector__ssl.BIO_new
#define BIO_set_data elector__ssl.BIO_set_data
#define BIO_get_data elector__ssl.BIO_get_data
#define BIO_set_init elector__ssl.BIO_set_init
#define BIO_set_flags elector__ssl.BIO_set_flags
#define BIO_clear_flags elector__ssl.BIO_clear_flags
#define SSL_get0_param elector__ssl.SSL_get0_param
#define SSL_ctrl elector__ssl.SSL_ctrl
#define SSL_set1_host elector__ssl.SSL_set1_host
#define SSL_connect elector__ssl.SSL_connect
#define SSL_get_error elector__ssl.SSL_get_error
#define SSL_get_verify_result elector__ssl.SSL_get_verify_result
#define SSL_read elector__ssl.SSL_read
#define SSL_write elector__ssl.SSL_write
#define ERR_get_error elector__ssl.ERR_get_error
#define ERR_peek_last_error elector__ssl.ERR_peek_last_error
#define ERR_reason_error_string elector__ssl.ERR_reason_error_string
#define ERR_error_string_n elector__ssl.ERR_error_string_n
#define ERR_clear_error elector__ssl.ERR_clear_error
#define X509_VERIFY_PARAM_set1_ip_asc elector__ssl.X509_VERIFY_PARAM_set1_ip_asc
#define X509_verify_cert_error_string elector__ssl.X509_verify_cert_error_string
#endif

#endif
