/* SPDX-License-Identifier: MIT */
/* The TLS files follow the disk. cert-manager, a Vault agent or a Kubernetes
 * secret volume (which swaps a "..data" symlink) rewrite the client
 * certificate, key and CA bundle while the client runs. Before each TLS
 * handshake the three files are looked at (stat, through symlinks); when one
 * changed (device, inode, size or mtime), a new context is built from them.
 * New files that do not load (half written, a key that does not match the
 * certificate) are a notice, and the previous context stays in use; they are
 * tried again once they change again. The connection in use is left alone: a
 * lease stays valid, and the next connection uses the new files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "transport_private.h"

typedef struct file_sig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int err; /* errno of stat, 0 when it worked */
} file_sig;

enum { F_CA, F_CERT, F_KEY, F_N };

struct elector__tls_files {
    file_sig loaded[F_N]; /* the files of the context in use */
    file_sig failed[F_N]; /* the last files that did not load */
    bool have_failed;
    file_sig pw_loaded, pw_failed; /* the password file, likewise */
    bool pw_have_loaded, pw_have_failed;
};

static struct elector__tls_files *files(elector_etcd *e)
{
    if (!e->tls_files) e->tls_files = calloc(1, sizeof(*e->tls_files));
    return e->tls_files;
}

static void sig_take(const char *path, file_sig *s)
{
    memset(s, 0, sizeof(*s));
    if (!path) return;
    struct stat st;
    if (stat(path, &st) != 0) {
        s->err = errno ? errno : EIO;
        return;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->size = st.st_size;
    s->mtime = st.st_mtim;
}

static bool sigs_equal1(const file_sig *a, const file_sig *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->err == b->err;
}

static bool sigs_equal(const file_sig *a, const file_sig *b)
{
    for (int i = 0; i < F_N; i++)
        if (a[i].dev != b[i].dev || a[i].ino != b[i].ino || a[i].size != b[i].size ||
            a[i].mtime.tv_sec != b[i].mtime.tv_sec ||
            a[i].mtime.tv_nsec != b[i].mtime.tv_nsec || a[i].err != b[i].err)
            return false;
    return true;
}

static void sigs_take(const elector_etcd *e, file_sig *out)
{
    sig_take(e->s_cacert, &out[F_CA]);
    sig_take(e->s_cert, &out[F_CERT]);
    sig_take(e->s_key, &out[F_KEY]);
}

int elector__tls_files_note(elector_etcd *e)
{
    if (!files(e)) return elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
    sigs_take(e, e->tls_files->loaded);
    return 0;
}

/* The first line of the file, without its line end; NULL with errno-like code
 * in *why_err, or 0 there for an empty line. */
static char *read_first_line(const char *path, int *why_err)
{
    enum { MAX = 4096 };
    *why_err = 0;
    FILE *f = fopen(path, "re");
    if (!f) {
        *why_err = errno ? errno : EIO;
        return NULL;
    }
    char *buf = calloc(1, MAX);
    if (!buf) {
        fclose(f);
        *why_err = ENOMEM;
        return NULL;
    }
    size_t n = fread(buf, 1, MAX - 1, f);
    if (ferror(f)) *why_err = errno ? errno : EIO;
    fclose(f);
    buf[n] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    char *out = !*why_err && buf[0] ? elector__strdup(buf) : NULL;
    explicit_bzero(buf, MAX);
    free(buf);
    return out;
}

void elector__password_refresh(elector_etcd *e)
{
    struct elector__tls_files *f = files(e);
    if (!e->s_password_file || !f) return;
    file_sig now;
    sig_take(e->s_password_file, &now);
    if (f->pw_have_loaded && sigs_equal1(&now, &f->pw_loaded)) return;
    if (f->pw_have_failed && sigs_equal1(&now, &f->pw_failed)) return;
    int err = now.err;
    char *pw = err ? NULL : read_first_line(e->s_password_file, &err);
    if (!pw) {
        f->pw_failed = now;
        f->pw_have_failed = true;
        elector__notice(e, ELECTOR_EINVAL,
                        "the password file %s %s; the previous password stays in use",
                        e->s_password_file,
                        err ? strerror(err) : "has an empty first line");
        return;
    }
    bool changed = f->pw_have_loaded;
    if (e->s_password) explicit_bzero(e->s_password, strlen(e->s_password));
    free(e->s_password);
    e->s_password = pw;
    f->pw_loaded = now;
    f->pw_have_loaded = true;
    f->pw_have_failed = false;
    if (changed)
        elector__notice(e, 0, "the password file %s changed: read again",
                        e->s_password_file);
}

void elector__tls_refresh(elector_etcd *e)
{
    struct elector__tls_files *f = e->tls_files;
    if (!f || !e->ssl_ctx || (!e->s_cacert && !e->s_cert)) return;
    file_sig now[F_N];
    sigs_take(e, now);
    if (sigs_equal(now, f->loaded)) return;
    if (f->have_failed && sigs_equal(now, f->failed)) return; /* told already */
    SSL_CTX *ctx;
    char why[600];
    int err = elector__tls_ctx_build(e, &ctx, why, sizeof(why));
    if (err) {
        memcpy(f->failed, now, sizeof(now));
        f->have_failed = true;
        elector__notice(e, err,
                        "the TLS files changed but do not load, the previous ones stay "
                        "in use: %s",
                        why);
        return;
    }
    elector__tls_ctx_free(e->ssl_ctx);
    e->ssl_ctx = ctx;
    memcpy(f->loaded, now, sizeof(now));
    f->have_failed = false;
    e->stats.tls_reloads++;
    elector__notice(e, 0, "the TLS files changed: loaded again (CA %s, certificate %s)",
                    e->s_cacert ? e->s_cacert : "(system)",
                    e->s_cert ? e->s_cert : "(none)");
}

void elector__tls_files_free(elector_etcd *e)
{
    free(e->tls_files);
    e->tls_files = NULL;
}

void elector_etcd_set_notice(elector_etcd *e, elector_etcd_notice_cb cb, void *ud)
{
    if (!e) return;
    e->notice_cb = cb;
    e->notice_ud = ud;
}
