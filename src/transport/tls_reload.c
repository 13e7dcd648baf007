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
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "transport_private.h"

/* A password file changed less than this long ago may be half written (a
 * partial first line): it is read once it has been still for that long. A
 * file that never keeps still is read after SETTLE_MAX_MS all the same. */
enum { SETTLE_MS = 100, SETTLE_MAX_MS = 2000 };

typedef struct file_sig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool regular; /* a regular file (not a directory, socket, ...) */
    int err;      /* errno of stat, 0 when it worked */
} file_sig;

enum { F_CA, F_CERT, F_KEY, F_N };

struct elector__tls_files {
    file_sig loaded[F_N]; /* the files of the context in use */
    file_sig failed[F_N]; /* the last files that did not load */
    bool have_failed;
    file_sig pw_loaded, pw_failed; /* the password file, likewise */
    bool pw_have_loaded, pw_have_failed;
    int64_t pw_settling_since_ms; /* it has been changing since (0: it is still) */
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
    s->regular = S_ISREG(st.st_mode);
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

/* Every TLS file may be followed (elector__file_trusted below): 0, or
 * ELECTOR_EINVAL with why. */
static int tls_files_trusted(const elector_etcd *e, char *why, size_t cap)
{
    const char *paths[F_N] = {e->s_cacert, e->s_cert, e->s_key};
    for (int i = 0; i < F_N; i++)
        if (paths[i] && elector__file_trusted(paths[i], why, cap)) return ELECTOR_EINVAL;
    return 0;
}

int elector__tls_files_note(elector_etcd *e)
{
    char why[PATH_MAX + 200];
    if (tls_files_trusted(e, why, sizeof(why)))
        return elector__set_err(e, ELECTOR_EINVAL, "%s", why);
    if (!files(e)) return elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
    sigs_take(e, e->tls_files->loaded);
    return 0;
}

/* A symlink is followed only when its owner is this process's user, root, or
 * the owner of the directory that holds it (the kernel's fs.protected_symlinks
 * rule, for every directory, not only sticky ones): else whoever may write
 * that directory could point the client at a file of their choosing, or make
 * it send the first line of another file as its password. Kubernetes'
 * "..data" links and an administrator's links pass. Each link of a chain is
 * looked at (up to 8). Returns 0, or ELECTOR_EINVAL with why. */
int elector__file_trusted(const char *path, char *why, size_t cap)
{
    char cur[PATH_MAX];
    snprintf(cur, sizeof(cur), "%s", path);
    for (int hop = 0; hop < 8; hop++) {
        struct stat st, dir;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return 0; /* open says why */
        char parent[PATH_MAX];
        snprintf(parent, sizeof(parent), "%s", cur);
        char *slash = strrchr(parent, '/');
        if (slash == parent)
            parent[1] = 0;
        else if (slash)
            *slash = 0;
        else
            snprintf(parent, sizeof(parent), ".");
        uid_t dir_uid = stat(parent, &dir) == 0 ? dir.st_uid : (uid_t)-1;
        if (st.st_uid != geteuid() && st.st_uid != 0 && st.st_uid != dir_uid) {
            snprintf(why, cap,
                     "%s is a symlink owned by uid %u, neither this process's user, "
                     "root, nor the owner of its directory: not followed",
                     cur, (unsigned)st.st_uid);
            return ELECTOR_EINVAL;
        }
        char target[PATH_MAX];
        ssize_t n = readlink(cur, target, sizeof(target) - 1);
        if (n < 0) return 0;
        target[n] = 0;
        if (target[0] == '/' || !slash)
            snprintf(cur, sizeof(cur), "%s", target);
        else if (snprintf(cur, sizeof(cur), "%s/%s", parent, target) >= (int)sizeof(cur))
            return 0; /* too long: open fails and says so */
    }
    return 0; /* a longer chain: open says ELOOP */
}

/* The first line of the file, without its line end; NULL with errno-like code
 * in *why_err, or 0 there for an empty line. *moved: the file changed while it
 * was read (its size or mtime differ before and after). */
static char *read_first_line(const char *path, int *why_err, bool *moved)
{
    enum { MAX = 4096 };
    *why_err = 0;
    *moved = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *why_err = errno ? errno : EIO;
        return NULL;
    }
    char *buf = calloc(1, MAX);
    struct stat before, after;
    if (!buf || fstat(fd, &before) != 0) {
        *why_err = buf ? (errno ? errno : EIO) : ENOMEM;
        free(buf);
        close(fd);
        return NULL;
    }
    size_t n = 0;
    for (ssize_t k; n < MAX - 1; n += (size_t)k) {
        k = read(fd, buf + n, MAX - 1 - n);
        if (k < 0 && errno == EINTR)
            k = 0;
        else if (k < 0)
            *why_err = errno ? errno : EIO;
        if (k <= 0) break;
    }
    *moved = fstat(fd, &after) != 0 || after.st_size != before.st_size ||
             after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
             after.st_mtim.tv_nsec != before.st_mtim.tv_nsec;
    close(fd);
    buf[n] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    char *out = !*why_err && buf[0] ? elector__strdup(buf) : NULL;
    explicit_bzero(buf, MAX);
    free(buf);
    return out;
}

/* The file changed SETTLE_MS ago or less (or its mtime is as far ahead: a
 * clock set back must not stall it for good). */
static bool changed_lately(const file_sig *s)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t age_ms = (int64_t)(now.tv_sec - s->mtime.tv_sec) * 1000 +
                     (now.tv_nsec - s->mtime.tv_nsec) / 1000000;
    return age_ms > -SETTLE_MS && age_ms < SETTLE_MS;
}

static void password_refused(elector_etcd *e, const file_sig *now, const char *what)
{
    struct elector__tls_files *f = e->tls_files;
    f->pw_failed = *now;
    f->pw_have_failed = true;
    elector__notice(e, ELECTOR_EINVAL,
                    "the password file %s %s; the previous password stays in use",
                    e->s_password_file, what);
}

/* pw, read from the password file as it is (now), becomes the password in
 * use (a change of the settings); the one it replaces is wiped. */
static void password_adopt(elector_etcd *e, const file_sig *now, char *pw)
{
    struct elector__tls_files *f = e->tls_files;
    bool changed = f->pw_have_loaded;
    if (e->s_password) explicit_bzero(e->s_password, strlen(e->s_password));
    free(e->s_password);
    e->s_password = pw;
    f->pw_loaded = *now;
    f->pw_have_loaded = true;
    f->pw_have_failed = false;
    e->settings_gen++;
    if (changed)
        elector__notice(e, 0, "the password file %s changed: read again",
                        e->s_password_file);
}

int elector__password_refresh(elector_etcd *e)
{
    struct elector__tls_files *f = files(e);
    if (!e->s_password_file || !f) return 0;
    file_sig now;
    sig_take(e->s_password_file, &now);
    if (f->pw_have_loaded && sigs_equal1(&now, &f->pw_loaded)) return 0;
    if (f->pw_have_failed && sigs_equal1(&now, &f->pw_failed)) return 0;
    char why[PATH_MAX + 200];
    if (elector__file_trusted(e->s_password_file, why, sizeof(why))) {
        password_refused(e, &now, why);
        return 0;
    }
    /* Half written? Not before it keeps still (bounded: a file rewritten all
     * the time is read as it is). */
    int64_t t = elector__now_ms();
    bool patient =
        !f->pw_settling_since_ms || t - f->pw_settling_since_ms < SETTLE_MAX_MS;
    int err = now.err;
    bool settling = !err && now.regular && changed_lately(&now) && patient;
    char *pw = NULL;
    if (!err && !settling) {
        bool moved;
        pw = read_first_line(e->s_password_file, &err, &moved);
        if (pw && moved && patient) {
            explicit_bzero(pw, strlen(pw));
            free(pw);
            pw = NULL;
            settling = true;
        }
    }
    if (settling) {
        if (!f->pw_settling_since_ms) f->pw_settling_since_ms = t;
        return SETTLE_MS;
    }
    f->pw_settling_since_ms = 0;
    if (!pw) {
        char what[300];
        snprintf(what, sizeof(what), "%s",
                 err ? strerror(err) : "has an empty first line");
        password_refused(e, &now, what);
        return 0;
    }
    password_adopt(e, &now, pw);
    return 0;
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
    char why[PATH_MAX + 200];
    int err = tls_files_trusted(e, why, sizeof(why));
    if (!err) err = elector__tls_ctx_build(e, &ctx, why, sizeof(why));
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

void elector__etcd_set_notice(elector_etcd *e, elector_etcd_notice_cb cb, void *ud)
{
    if (!e) return;
    e->notice_cb = cb;
    e->notice_ud = ud;
}
