/* SPDX-License-Identifier: MIT */
/* TLS and credential files without a server: the TLS files and the password
 * file followed on disk (tls_reload.c), OpenSSL calls that fail (the lazily
 * loaded table of ssl_lazy.h, replaced entry by entry), and a handshake with a
 * peer that is not a TLS server (a loopback socket this test drives). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include "transport_private.h"
/* OpenSSL's own names, so that the table's entries can be named. */
#define ELECTOR_SSL_LAZY_IMPL
#include "ssl_lazy.h"
#include "testlib.h"

#include <etcdserverpb/rpc.pb-c.h>

/* ---------------------------------------------------------------- helpers */

/* A self-signed certificate and its key (EC P-256), made by the openssl tool. */
static void make_pair(const char *dir, const char *name, const char *cn)
{
    char crt[512], key[512], subj[128];
    snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name);
    snprintf(key, sizeof(key), "%s/%s.key", dir, name);
    snprintf(subj, sizeof(subj), "/CN=%s", cn);
    const char *argv[] = {"openssl",
                          "req",
                          "-x509",
                          "-newkey",
                          "ec",
                          "-pkeyopt",
                          "ec_paramgen_curve:P-256",
                          "-nodes",
                          "-keyout",
                          key,
                          "-out",
                          crt,
                          "-subj",
                          subj,
                          "-days",
                          "2",
                          NULL};
    tl_run_opts o = {.quiet_stderr = 1};
    ASSERT_EQ(0, tl_run_ex(NULL, argv, &o));
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ASSERT_NOT_NULL(f);
    char *buf = malloc(65536);
    *n = fread(buf, 1, 65536, f);
    fclose(f);
    return buf;
}

/* Writes data over path in place (same inode). */
static void put_file(const char *path, const char *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT(fd >= 0);
    ASSERT_EQ((ssize_t)n, write(fd, data, n));
    close(fd);
}

/* put_file, with an mtime a second ago: a password file that keeps still
 * (one changed in the last 100 ms is not read yet: it may be half written). */
static void put_still(const char *path, const char *data, size_t n)
{
    put_file(path, data, n);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct timespec ts[2] = {{now.tv_sec - 1, now.tv_nsec},
                             {now.tv_sec - 1, now.tv_nsec}};
    ASSERT_OK(utimensat(AT_FDCWD, path, ts, 0));
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    char *d = slurp(from, &n);
    put_file(to, d, n);
    free(d);
}

static void set_mtime(const char *path, time_t sec, long nsec)
{
    struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
    ASSERT_OK(utimensat(AT_FDCWD, path, ts, 0));
}

typedef struct notices {
    int n, errs;
    int last_err;
    char last[700];
} notices;

static void on_notice(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e;
    notices *s = ud;
    s->n++;
    s->errs += err != 0;
    s->last_err = err;
    snprintf(s->last, sizeof(s->last), "%s", msg);
    tl_log("notice (%s): %s", err ? elector_err_name(err) : "info", msg);
}

static uint64_t reloads(const elector_etcd *e)
{
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    return st.tls_reloads;
}

/* A listening TCP socket on a free loopback port; its port in *port. Nobody
 * accepts: the kernel completes connections into the backlog. */
static int listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(fd, 64)); /* never accepted: room for every client */
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &l));
    *port = ntohs(a.sin_port);
    return fd;
}

/* ---------------------------------------------------------------- TLS files */

TEST(tls_files_are_loaded_again_on_each_kind_of_change)
{
    char *dir = tl_tmpdir("tlsfiles");
    ASSERT_NOT_NULL(dir);
    make_pair(dir, "a", "a");
    make_pair(dir, "b", "bbbbbbbbbbbbbbbb"); /* another size */
    char ca[600], crt[600], key[600], a_crt[600], a_key[600], b_crt[600], b_key[600],
        tmp[600];
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(crt, sizeof(crt), "%s/client.pem", dir);
    snprintf(key, sizeof(key), "%s/client.key", dir);
    snprintf(a_crt, sizeof(a_crt), "%s/a.crt", dir);
    snprintf(a_key, sizeof(a_key), "%s/a.key", dir);
    snprintf(b_crt, sizeof(b_crt), "%s/b.crt", dir);
    snprintf(b_key, sizeof(b_key), "%s/b.key", dir);
    snprintf(tmp, sizeof(tmp), "%s/tmp.pem", dir);
    copy_file(a_crt, ca);
    copy_file(a_crt, crt);
    copy_file(a_key, key);
    set_mtime(ca, 1000000000, 0);

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "https://127.0.0.1:1"; /* never dialled: no call is made */
    cfg.cacert = ca;
    cfg.cert = crt;
    cfg.key = key;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    notices nt = {0};
    elector_etcd_set_notice(e, on_notice, &nt);
    SSL_CTX *ctx0 = e->ssl_ctx;
    ASSERT(ctx0 != NULL);

    /* Nothing changed: the context stays, nothing said. */
    elector__tls_refresh(e);
    ASSERT_EQ(0, (long long)reloads(e));
    ASSERT_EQ(0, nt.n);
    ASSERT(e->ssl_ctx == ctx0);

    /* The CA's mtime alone, by whole seconds, then by nanoseconds only. */
    set_mtime(ca, 1000000007, 0);
    elector__tls_refresh(e);
    ASSERT_EQ(1, (long long)reloads(e));
    ASSERT_EQ(1, nt.n);
    ASSERT_EQ(0, nt.last_err);
    ASSERT_CONTAINS(nt.last, "the TLS files changed: loaded again");
    ASSERT_CONTAINS(nt.last, ca);
    ASSERT_CONTAINS(nt.last, crt);
    set_mtime(ca, 1000000007, 5000);
    elector__tls_refresh(e);
    ASSERT_EQ(2, (long long)reloads(e));

    /* The certificate and key rewritten in place (same inode), their mtimes
     * put back: only the sizes differ. */
    struct stat st_crt, st_key;
    ASSERT_OK(stat(crt, &st_crt));
    ASSERT_OK(stat(key, &st_key));
    copy_file(b_crt, crt);
    copy_file(b_key, key);
    set_mtime(crt, st_crt.st_mtim.tv_sec, st_crt.st_mtim.tv_nsec);
    set_mtime(key, st_key.st_mtim.tv_sec, st_key.st_mtim.tv_nsec);
    struct stat now;
    ASSERT_OK(stat(crt, &now));
    ASSERT_EQ((long long)st_crt.st_ino, (long long)now.st_ino);
    ASSERT_NE((long long)st_crt.st_size, (long long)now.st_size);
    elector__tls_refresh(e);
    ASSERT_EQ(3, (long long)reloads(e));

    /* The CA replaced by another file of the same size and mtime (a rename
     * over it, as a secret volume's swap does): only the inode differs. */
    struct stat st_ca;
    ASSERT_OK(stat(ca, &st_ca));
    copy_file(ca, tmp);
    set_mtime(tmp, st_ca.st_mtim.tv_sec, st_ca.st_mtim.tv_nsec);
    ASSERT_OK(rename(tmp, ca));
    ASSERT_OK(stat(ca, &now));
    ASSERT_NE((long long)st_ca.st_ino, (long long)now.st_ino);
    ASSERT_EQ((long long)st_ca.st_size, (long long)now.st_size);
    elector__tls_refresh(e);
    ASSERT_EQ(4, (long long)reloads(e));
    SSL_CTX *ctx4 = e->ssl_ctx;

    /* The key gone: a notice, the previous context stays; said once. */
    int before = nt.n;
    ASSERT_OK(unlink(key));
    elector__tls_refresh(e);
    ASSERT_EQ(before + 1, nt.n);
    ASSERT_EQ(ELECTOR_EINVAL, nt.last_err);
    ASSERT_CONTAINS(nt.last, "do not load, the previous ones stay in use");
    ASSERT_CONTAINS(nt.last, key);
    ASSERT(e->ssl_ctx == ctx4);
    elector__tls_refresh(e);
    ASSERT_EQ(before + 1, nt.n);
    ASSERT_EQ(4, (long long)reloads(e));

    /* A key that is not the certificate's: refused, the previous one stays. */
    copy_file(a_key, key);
    elector__tls_refresh(e);
    ASSERT_EQ(before + 2, nt.n);
    ASSERT_EQ(ELECTOR_EINVAL, nt.last_err);
    ASSERT_CONTAINS(nt.last, "cannot use client key");
    ASSERT(e->ssl_ctx == ctx4);
    ASSERT_EQ(4, (long long)reloads(e));

    /* The matching key back: loaded, and a later failure is said again. */
    copy_file(b_key, key);
    elector__tls_refresh(e);
    ASSERT_EQ(5, (long long)reloads(e));
    ASSERT_EQ(0, nt.last_err);
    ASSERT(e->ssl_ctx != ctx4);
    elector_etcd_free(e);

    /* A CA file alone, then a client certificate alone (the system's CA
     * store): followed the same, the notice names what is not a file. */
    for (int i = 0; i < 2; i++) {
        cfg.cacert = i == 0 ? ca : NULL;
        cfg.cert = i == 0 ? NULL : crt;
        cfg.key = i == 0 ? NULL : key;
        e = elector_etcd_new(&cfg);
        ASSERT_EQ(0, elector_etcd_err(e));
        elector_etcd_set_notice(e, on_notice, &nt);
        const char *f = i == 0 ? ca : crt;
        set_mtime(f, 1000000100 + i, 0);
        elector__tls_refresh(e);
        ASSERT_EQ(1, (long long)reloads(e));
        ASSERT_CONTAINS(nt.last, i == 0 ? "certificate (none)" : "CA (system)");
        elector_etcd_free(e);
    }
    free(dir);
}

/* A client whose TLS comes from the https:// scheme alone (the system's CA
 * store, no files) has nothing to follow. */
TEST(tls_without_files_has_nothing_to_reload)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "https://127.0.0.1:1";
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    ASSERT(e->ssl_ctx != NULL);
    notices nt = {0};
    elector_etcd_set_notice(e, on_notice, &nt);
    SSL_CTX *ctx = e->ssl_ctx;
    elector__tls_refresh(e);
    ASSERT(e->ssl_ctx == ctx);
    ASSERT_EQ(0, nt.n);
    elector_etcd_free(e);
    elector_etcd_set_notice(NULL, on_notice, &nt); /* NULL: ignored */
}

/* ---------------------------------------------------------------- password file */

static int new_err(const elector_etcd_config *cfg, char *msg, size_t cap);

TEST(password_file_is_followed_and_bad_files_keep_the_previous_password)
{
    char *dir = tl_tmpdir("pwfile");
    ASSERT_NOT_NULL(dir);
    char pw[600];
    snprintf(pw, sizeof(pw), "%s/pw", dir);
    put_still(pw, "first\nsecond line\n", 18);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.user = "u";
    cfg.password_file = pw;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    ASSERT_STREQ("first", e->s_password); /* read by elector_etcd_new */
    notices nt = {0};
    elector_etcd_set_notice(e, on_notice, &nt);

    elector__password_refresh(e); /* unchanged: not read again */
    ASSERT_EQ(0, nt.n);

    put_still(pw, "second\r\n", 8);
    elector__password_refresh(e);
    ASSERT_STREQ("second", e->s_password);
    ASSERT_EQ(1, nt.n);
    ASSERT_EQ(0, nt.last_err);
    ASSERT_CONTAINS(nt.last, "changed: read again");

    /* The same text with only its mtime changed, then only its inode (a new
     * file renamed over it, the same size and mtime): read again each time. */
    struct stat st;
    ASSERT_OK(stat(pw, &st));
    set_mtime(pw, st.st_mtim.tv_sec + 10, st.st_mtim.tv_nsec);
    elector__password_refresh(e);
    ASSERT_EQ(2, nt.n);
    ASSERT_STREQ("second", e->s_password);
    char tmp[700];
    snprintf(tmp, sizeof(tmp), "%s.new", pw);
    put_file(tmp, "second\r\n", 8);
    set_mtime(tmp, st.st_mtim.tv_sec + 10, st.st_mtim.tv_nsec);
    ASSERT_OK(rename(tmp, pw));
    elector__password_refresh(e);
    ASSERT_EQ(3, nt.n);
    ASSERT_CONTAINS(nt.last, "changed: read again");

    /* An empty first line: a notice, once; the password stays. */
    put_still(pw, "\nthird\n", 7);
    elector__password_refresh(e);
    ASSERT_EQ(4, nt.n);
    ASSERT_EQ(ELECTOR_EINVAL, nt.last_err);
    ASSERT_CONTAINS(nt.last, "has an empty first line");
    ASSERT_STREQ("second", e->s_password);
    elector__password_refresh(e);
    ASSERT_EQ(4, nt.n);

    /* Gone; a directory (opens, but cannot be read); a socket (stat works,
     * open fails): each said with its reason, the password kept. */
    ASSERT_OK(unlink(pw));
    elector__password_refresh(e);
    ASSERT_EQ(5, nt.n);
    ASSERT_CONTAINS(nt.last, strerror(ENOENT));
    ASSERT_OK(mkdir(pw, 0700));
    elector__password_refresh(e);
    ASSERT_EQ(6, nt.n);
    ASSERT_CONTAINS(nt.last, strerror(EISDIR));
    ASSERT_OK(rmdir(pw));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    ASSERT_LT(strlen(pw), sizeof(un.sun_path));
    strcpy(un.sun_path, pw);
    ASSERT_OK(bind(s, (struct sockaddr *)&un, sizeof(un)));
    elector__password_refresh(e);
    ASSERT_EQ(7, nt.n);
    ASSERT_CONTAINS(nt.last, strerror(ENXIO));
    ASSERT_STREQ("second", e->s_password);
    close(s);
    ASSERT_OK(unlink(pw));

    /* A good file again. */
    put_still(pw, "third", 5);
    elector__password_refresh(e);
    ASSERT_EQ(8, nt.n);
    ASSERT_EQ(0, nt.last_err);
    ASSERT_STREQ("third", e->s_password);
    elector_etcd_free(e);
    free(dir);
}

/* A password file being written (changed in the last 100 ms) is not read:
 * its first line may be partial. It is read once it keeps still, or after 2 s
 * of changing all the time (bounded: a file rewritten without end is read as
 * it is). Auth.Authenticate waits meanwhile (the settle time is returned). */
TEST(password_file_being_written_is_read_once_it_keeps_still)
{
    char *dir = tl_tmpdir("pwsettle");
    ASSERT_NOT_NULL(dir);
    char pw[600];
    snprintf(pw, sizeof(pw), "%s/pw", dir);
    put_still(pw, "old\n", 4);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.user = "u";
    cfg.password_file = pw;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    ASSERT_STREQ("old", e->s_password);
    notices nt = {0};
    elector_etcd_set_notice(e, on_notice, &nt);

    put_file(pw, "new-pa", 6); /* half of "new-password\n", just written */
    ASSERT_EQ(100, elector__password_refresh(e));
    ASSERT_STREQ("old", e->s_password);
    ASSERT_EQ(0, nt.n);
    put_still(pw, "new-password\n", 13); /* finished, and still */
    ASSERT_EQ(0, elector__password_refresh(e));
    ASSERT_STREQ("new-password", e->s_password);
    ASSERT_EQ(1, nt.n);

    /* Truncated by a shell's ">" and not written yet: not an empty line to
     * complain of, a file to wait for. */
    put_file(pw, "", 0);
    ASSERT_EQ(100, elector__password_refresh(e));
    ASSERT_EQ(1, nt.n);
    /* Rewritten every 50 ms: read as it is after 2 s of waiting. */
    double t0 = tl_now();
    int waits = 0;
    for (;;) {
        put_file(pw, "restless\n", 9);
        if (elector__password_refresh(e) == 0) break;
        waits++;
        ASSERT_LT(tl_now() - t0, 4.0);
        tl_msleep(50);
    }
    tl_log("a restless file read after %.2f s, %d waits", tl_now() - t0, waits);
    ASSERT_GE(tl_now() - t0, 1.9);
    ASSERT_STREQ("restless", e->s_password);

    /* A client made while the file is being written starts without it, and
     * reads it at its first Authenticate. */
    elector_etcd_free(e);
    put_file(pw, "fresh\n", 6);
    cfg.password = "given";
    e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    ASSERT_STREQ("given", e->s_password);
    set_mtime(pw, 1000000000, 0);
    ASSERT_EQ(0, elector__password_refresh(e));
    ASSERT_STREQ("fresh", e->s_password);
    elector_etcd_free(e);
    free(dir);
}

/* A symlink is followed only when it belongs to this process's user, root,
 * or the owner of its directory: one that another user could have put there
 * is reported, for the password file (the previous password stays) and for
 * the TLS files (elector_etcd_new fails, naming it). */
TEST(symlinks_another_user_could_have_made_are_not_followed)
{
    if (geteuid() != 0) tl_skip("needs root (lchown to another user)");
    char *dir = tl_tmpdir("links");
    ASSERT_NOT_NULL(dir);
    char real[600], link[600], sub[600], sublink[600], a[600], b[600], why[1200];
    snprintf(real, sizeof(real), "%s/real", dir);
    snprintf(link, sizeof(link), "%s/link", dir);
    snprintf(sub, sizeof(sub), "%s/theirs", dir);
    snprintf(sublink, sizeof(sublink), "%s/theirs/link", dir);
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    put_still(real, "secret\n", 7);
    ASSERT_OK(symlink(real, link));
    ASSERT_EQ(0, elector__file_trusted(link, why, sizeof(why))); /* root's */
    ASSERT_OK(lchown(link, 12345, 12345));
    ASSERT_EQ(ELECTOR_EINVAL, elector__file_trusted(link, why, sizeof(why)));
    tl_log("%s", why);
    ASSERT_CONTAINS(why, "/link is a symlink owned by uid 12345, neither this "
                         "process's user, root, nor the owner of its directory: not "
                         "followed");
    /* In a directory of that user's: theirs to make. */
    ASSERT_OK(mkdir(sub, 0755));
    ASSERT_OK(chown(sub, 12345, 12345));
    ASSERT_OK(symlink("../real", sublink));
    ASSERT_OK(lchown(sublink, 12345, 12345));
    ASSERT_EQ(0, elector__file_trusted(sublink, why, sizeof(why)));
    /* A chain (relative targets): root's link to a link of another user's. */
    ASSERT_OK(symlink("b", a));
    ASSERT_OK(symlink("real", b));
    ASSERT_OK(lchown(b, 12345, 12345));
    ASSERT_EQ(ELECTOR_EINVAL, elector__file_trusted(a, why, sizeof(why)));
    ASSERT_CONTAINS(why, "/b is a symlink owned by uid 12345");
    ASSERT_EQ(0, elector__file_trusted(real, why, sizeof(why))); /* no link */

    /* The password file swapped for such a link: said, the password kept. */
    char pw[600];
    snprintf(pw, sizeof(pw), "%s/pw", dir);
    put_still(pw, "mine\n", 5);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.user = "u";
    cfg.password_file = pw;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    notices nt = {0};
    elector_etcd_set_notice(e, on_notice, &nt);
    ASSERT_OK(unlink(pw));
    ASSERT_OK(symlink(real, pw));
    ASSERT_OK(lchown(pw, 12345, 12345));
    ASSERT_EQ(0, elector__password_refresh(e));
    ASSERT_STREQ("mine", e->s_password);
    ASSERT_EQ(1, nt.n);
    ASSERT_EQ(ELECTOR_EINVAL, nt.last_err);
    ASSERT_CONTAINS(nt.last, "/pw is a symlink owned by uid 12345");
    ASSERT_CONTAINS(nt.last, "the previous password stays in use");
    elector_etcd_free(e);

    /* A CA file behind such a link: elector_etcd_new says so. */
    make_pair(dir, "ca", "ca");
    char ca[600], calink[600];
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(calink, sizeof(calink), "%s/ca-link.crt", dir);
    ASSERT_OK(symlink(ca, calink));
    ASSERT_OK(lchown(calink, 12345, 12345));
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "https://127.0.0.1:1";
    cfg.cacert = calink;
    char msg[1200];
    ASSERT_EQ(ELECTOR_EINVAL, new_err(&cfg, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "/ca-link.crt is a symlink owned by uid 12345");
    ASSERT_OK(lchown(calink, 0, 0));
    ASSERT_EQ(0, new_err(&cfg, msg, sizeof(msg)));
    free(dir);
}

/* ---------------------------------------------------------------- OpenSSL failing */

static SSL_CTX *null_ctx(const SSL_METHOD *m)
{
    (void)m;
    return NULL;
}

static long ctrl_fails(SSL_CTX *c, int cmd, long l, void *p)
{
    (void)c, (void)l, (void)p;
    return cmd == SSL_CTRL_SET_MIN_PROTO_VERSION ? 0 : 1;
}

static int alpn_fails(SSL_CTX *c, const unsigned char *p, unsigned int n)
{
    (void)c, (void)p, (void)n;
    return 1;
}

static int zero_ctx(SSL_CTX *c)
{
    (void)c;
    return 0;
}

static int zero_cctx(const SSL_CTX *c)
{
    (void)c;
    return 0;
}

/* elector_etcd_new's error for cfg with the table as the caller left it. */
static int new_err(const elector_etcd_config *cfg, char *msg, size_t cap)
{
    elector_etcd *e = elector_etcd_new(cfg);
    ASSERT_NOT_NULL(e);
    int err = elector_etcd_err(e);
    snprintf(msg, cap, "%s", elector_etcd_errstr(e));
    tl_log("%s: %s", elector_err_name(err), msg);
    elector_etcd_free(e);
    return err;
}

TEST(tls_context_that_cannot_be_set_up_is_a_clear_error)
{
    char *dir = tl_tmpdir("tlsctx");
    make_pair(dir, "a", "a");
    char crt[600], key[600], msg[600];
    snprintf(crt, sizeof(crt), "%s/a.crt", dir);
    snprintf(key, sizeof(key), "%s/a.key", dir);
    char why[300];
    ASSERT_OK(elector__ssl_load(why, sizeof(why)));
    const struct elector__ssl_api real = elector__ssl;
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "https://127.0.0.1:1";

    elector__ssl.SSL_CTX_new = null_ctx;
    ASSERT_EQ(ELECTOR_ETLS, new_err(&cfg, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "cannot create TLS context");
    elector__ssl = real;

    elector__ssl.SSL_CTX_ctrl = ctrl_fails;
    ASSERT_EQ(ELECTOR_ETLS, new_err(&cfg, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "cannot set up TLS (version, ALPN)");
    elector__ssl = real;

    elector__ssl.SSL_CTX_set_alpn_protos = alpn_fails;
    ASSERT_EQ(ELECTOR_ETLS, new_err(&cfg, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "cannot set up TLS (version, ALPN)");
    elector__ssl = real;

    /* No CA file: the system's store, which cannot be loaded. */
    elector__ssl.SSL_CTX_set_default_verify_paths = zero_ctx;
    ASSERT_EQ(ELECTOR_EINVAL, new_err(&cfg, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "cannot load CA file '(system)'");
    elector__ssl = real;

    /* A key that loads but does not pass the check against the certificate. */
    cfg.cert = crt;
    cfg.key = key;
    ASSERT_EQ(0, new_err(&cfg, msg, sizeof(msg)));
    elector__ssl.SSL_CTX_check_private_key = zero_cctx;
    ASSERT_EQ(ELECTOR_EINVAL, new_err(&cfg, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "cannot use client key");
    ASSERT_CONTAINS(msg, key);
    elector__ssl = real;
    free(dir);
}

/* ---- failures when a connection starts its handshake */

static int connects;
static int (*real_connect)(SSL *);
static int (*real_get_error)(const SSL *, int);
static bool fake_want_write;

static int no_index(void)
{
    return -1;
}

static BIO_METHOD *no_meth(int type, const char *name)
{
    (void)type, (void)name;
    return NULL;
}

static BIO *no_bio(const BIO_METHOD *m)
{
    (void)m;
    return NULL;
}

static SSL *no_ssl(SSL_CTX *c)
{
    (void)c;
    return NULL;
}

static long ssl_ctrl_fails(SSL *s, int cmd, long l, void *p)
{
    (void)s, (void)cmd, (void)l, (void)p;
    return 0;
}

static int set1_host_fails(SSL *s, const char *h)
{
    (void)s, (void)h;
    return 0;
}

/* The first SSL_connect neither reads nor writes and says it would block on
 * writing; the later ones are OpenSSL's. */
static int connect_blocked_once(SSL *s)
{
    if (connects++ == 0) {
        fake_want_write = true;
        return -1;
    }
    return real_connect(s);
}

static int get_error_blocked_once(const SSL *s, int rc)
{
    if (fake_want_write) {
        fake_want_write = false;
        return SSL_ERROR_WANT_WRITE;
    }
    return real_get_error(s, rc);
}

typedef struct res {
    bool done;
    int err;
} res;

static void range_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    res *r = ud;
    r->done = true;
    r->err = err;
}

/* A Range on a client of endpoint (TLS, with the system's CA store unless
 * insecure), pumped until it ends or ms pass; its error (-1: still waiting),
 * the client's message in msg. */
static int range(const char *endpoint, bool insecure, int ms, char *msg, size_t cap)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoint;
    cfg.insecure_skip_verify = insecure;
    cfg.dial_timeout_ms = 3000;
    cfg.request_timeout_ms = 3000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    res r = {0};
    ASSERT_OK(elector_etcd_call(e, ELECTOR_RPC_RANGE, &q.base, NULL, range_cb, &r));
    double end = tl_now() + ms / 1e3;
    while (!r.done && tl_now() < end)
        elector_etcd_run_once(e, 20);
    snprintf(msg, cap, "%s", r.done ? elector_etcd_errstr(e) : "");
    if (r.done) tl_log("%s: %s", elector_err_name(r.err), msg);
    int rc = r.done ? r.err : -1;
    elector_etcd_free(e); /* a call still waiting ends (ECANCELED) */
    return rc;
}

TEST(tls_session_that_cannot_be_set_up_fails_the_call_at_once)
{
    int port;
    int lfd = listener(&port);
    char ip[64], host[64], msg[600], why[300];
    snprintf(ip, sizeof(ip), "https://127.0.0.1:%d", port);
    snprintf(host, sizeof(host), "https://localhost:%d", port);
    ASSERT_OK(elector__ssl_load(why, sizeof(why)));
    const struct elector__ssl_api real = elector__ssl;
    double t0;

    /* The socket BIO's method (made once per process, on first use): no
     * index, no method. Then no BIO, no SSL object. */
    for (int i = 0; i < 4; i++) {
        if (i == 0) elector__ssl.BIO_get_new_index = no_index;
        if (i == 1) elector__ssl.BIO_meth_new = no_meth;
        if (i == 2) elector__ssl.BIO_new = no_bio;
        if (i == 3) elector__ssl.SSL_new = no_ssl;
        t0 = tl_now();
        ASSERT_EQ(ELECTOR_ETLS, range(ip, false, 2000, msg, sizeof(msg)));
        ASSERT_LT(tl_now() - t0, 1.5); /* not the dial timeout (3 s) */
        ASSERT_CONTAINS(msg, "cannot create TLS session: out of memory");
        elector__ssl = real;
    }

    /* SNI or the host name check cannot be set: fatal, whether verified or
     * not (SNI is sent either way). */
    elector__ssl.SSL_ctrl = ssl_ctrl_fails;
    ASSERT_EQ(ELECTOR_ETLS, range(host, false, 2000, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "cannot set up the check of the server's host name 'localhost'");
    ASSERT_EQ(ELECTOR_ETLS, range(host, true, 2000, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "host name 'localhost'");
    elector__ssl = real;
    elector__ssl.SSL_set1_host = set1_host_fails;
    ASSERT_EQ(ELECTOR_ETLS, range(host, false, 2000, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "host name 'localhost'");
    elector__ssl = real;

    /* With everything working the handshake starts and waits for the
     * silent peer (by name, by address, verified or not). */
    ASSERT_EQ(-1, range(host, false, 300, msg, sizeof(msg)));
    ASSERT_EQ(-1, range(host, true, 300, msg, sizeof(msg)));
    ASSERT_EQ(-1, range(ip, true, 300, msg, sizeof(msg)));

    /* A handshake step that would block on writing waits for the socket to
     * take more, then goes on (at once: the socket has room), and then waits
     * for the silent peer without spinning: before the fix (tls.c) the
     * client's wish to write stayed set, and it called SSL_connect some
     * 80,000 times in these 0.5 s. */
    real_connect = real.SSL_connect;
    real_get_error = real.SSL_get_error;
    elector__ssl.SSL_connect = connect_blocked_once;
    elector__ssl.SSL_get_error = get_error_blocked_once;
    connects = 0;
    ASSERT_EQ(-1, range(ip, false, 500, msg, sizeof(msg)));
    tl_log("SSL_connect called %d times", connects);
    ASSERT_GE(connects, 2);
    ASSERT_LE(connects, 10);
    elector__ssl = real;
    close(lfd);
}

/* ---- peers that are not TLS servers */

/* Forks a peer on lfd: accepts one connection, reads what comes (the
 * ClientHello), writes reply (if any) and closes. */
static pid_t peer(int lfd, const char *reply)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0) _exit(1);
        char buf[4096];
        if (read(c, buf, sizeof(buf)) <= 0) _exit(2);
        if (reply && write(c, reply, strlen(reply)) < 0) _exit(3);
        close(c);
        _exit(0);
    }
    return pid;
}

TEST(tls_handshake_with_a_peer_that_closes_or_speaks_plain_text_fails_with_etls)
{
    int port;
    int lfd = listener(&port);
    char ep[64], msg[600];
    snprintf(ep, sizeof(ep), "https://127.0.0.1:%d", port);

    pid_t p = peer(lfd, NULL);
    double t0 = tl_now();
    ASSERT_EQ(ELECTOR_ETLS, range(ep, false, 2500, msg, sizeof(msg)));
    ASSERT_LT(tl_now() - t0, 2.0);
    ASSERT_CONTAINS(msg, "TLS handshake failed: connection closed during handshake");
    ASSERT_CONTAINS(msg, ep + 8);
    int st;
    ASSERT_EQ(p, waitpid(p, &st, 0));
    ASSERT_EQ(0, WEXITSTATUS(st));

    p = peer(lfd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    ASSERT_EQ(ELECTOR_ETLS, range(ep, false, 2500, msg, sizeof(msg)));
    ASSERT_CONTAINS(msg, "TLS handshake failed: ");
    ASSERT(!strstr(msg, "closed during handshake"));
    ASSERT(!strstr(msg, "not trusted"));
    ASSERT_EQ(p, waitpid(p, &st, 0));
    ASSERT_EQ(0, WEXITSTATUS(st));
    close(lfd);
}

/* ---------------------------------------------------------------- no OpenSSL */

/* libssl is loaded when the first TLS endpoint is configured. Without a usable
 * one the client says so (ETLS) instead of failing later or crashing. The
 * library search path is read at start, so this test runs itself again with
 * LD_LIBRARY_PATH pointing at a directory that holds: two empty files named
 * libssl.so.3 and libssl.so (neither loads), or a shared object without
 * OpenSSL's functions as libssl.so.3. */
TEST(tls_without_a_usable_openssl_is_a_clear_error)
{
    if (getenv("ELECTOR_TEST_SSL_CHILD")) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = "https://127.0.0.1:1";
        elector_etcd *e = elector_etcd_new(&cfg);
        printf("[%s] %s\n", elector_err_name(elector_etcd_err(e)),
               elector_etcd_errstr(e));
        elector_etcd_free(e);
        fflush(stdout);
        exit(0);
    }
    char *dir = tl_tmpdir("nossl");
    char empty[600], fake[600], p[700];
    snprintf(empty, sizeof(empty), "%s/empty", dir);
    snprintf(fake, sizeof(fake), "%s/fake", dir);
    ASSERT_OK(mkdir(empty, 0700));
    ASSERT_OK(mkdir(fake, 0700));
    snprintf(p, sizeof(p), "%s/libssl.so.3", empty);
    put_file(p, "", 0);
    snprintf(p, sizeof(p), "%s/libssl.so", empty);
    put_file(p, "", 0);
    snprintf(p, sizeof(p), "%s/libssl.so.3", fake);
    copy_file(FAKE_SSL_LIB, p);
    char self[600];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ASSERT(n > 0);
    self[n] = 0;
    const char *want[2] = {"[ETLS] TLS needs OpenSSL 3 (Debian: libssl3): ",
                           "[ETLS] OpenSSL lacks TLS_client_method"};
    const char *dirs[2] = {empty, fake};
    for (int i = 0; i < 2; i++) {
        /* The environment as it is (sanitizer options, coverage), plus two. */
        extern char **environ;
        size_t k = 0;
        while (environ[k])
            k++;
        const char **env = calloc(k + 3, sizeof(*env));
        char lib[700];
        snprintf(lib, sizeof(lib), "LD_LIBRARY_PATH=%s", dirs[i]);
        size_t m = 0;
        for (size_t j = 0; j < k; j++)
            if (strncmp(environ[j], "LD_LIBRARY_PATH=", 16)) env[m++] = environ[j];
        env[m++] = lib;
        env[m++] = "ELECTOR_TEST_SSL_CHILD=1";
        const char *argv[] = {self, "tls_without_a_usable_openssl_is_a_clear_error",
                              NULL};
        tl_run_opts o = {.envp = env, .quiet_stderr = 1};
        char *out = NULL;
        int rc = tl_run_ex(&out, argv, &o);
        tl_log("LD_LIBRARY_PATH=%s: %d: %s", dirs[i], rc, out);
        ASSERT_CONTAINS(out, want[i]);
        if (i == 0) ASSERT_CONTAINS(out, "libssl.so");
        free(out);
        free(env);
    }
    free(dir);
}

/* ---------------------------------------------------------------- edges (issue 23) */

/* A password file that fails again, for another reason (gone, then under a
 * path that is no longer a directory): said again, with the new reason. */
TEST(password_file_failing_for_a_new_reason_is_said_again)
{
    char *dir = tl_tmpdir("pwfile2");
    ASSERT_NOT_NULL(dir);
    char sub[600], pw[700];
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    snprintf(pw, sizeof(pw), "%s/pw", sub);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.user = "u";
    cfg.password_file = pw;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    notices nt = {0};
    elector_etcd_set_notice(e, on_notice, &nt);
    elector__password_refresh(e); /* the same failure as at start: not said again */
    ASSERT_EQ(0, nt.n);
    put_file(sub, "x", 1); /* sub is a file now: ENOTDIR, not ENOENT */
    elector__password_refresh(e);
    ASSERT_EQ(1, nt.n);
    ASSERT_EQ(ELECTOR_EINVAL, nt.last_err);
    ASSERT_CONTAINS(nt.last, strerror(ENOTDIR));
    elector__password_refresh(e);
    ASSERT_EQ(1, nt.n);
    elector_etcd_free(e);
    free(dir);
}
