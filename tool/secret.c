/* See secret.h. */
#define _GNU_SOURCE
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define PW_MAX 4096

void tool_secret_protect(void)
{
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

void tool_secret_free(char *s)
{
    if (!s) return;
    explicit_bzero(s, strlen(s));
    free(s);
}

bool tool_file_exposed(const struct stat *st)
{
    return S_ISREG(st->st_mode) && (st->st_mode & (S_IRWXG | S_IRWXO)) != 0;
}

static void exposed_warning(const char *path, const char *what, mode_t mode, char *warn,
                            size_t cap)
{
    snprintf(warn, cap,
             "warning: %s '%s' is accessible by group or others (mode 0%03o); "
             "chmod 600 it",
             what, path, (unsigned)(mode & 0777));
}

char *tool_password_read(const char *path, char *err, size_t err_cap, char *warn,
                         size_t warn_cap)
{
    if (warn_cap) warn[0] = 0;
    if (err_cap) err[0] = 0;
    if (!path) {
        char *p = getenv("ELECTOR_PASSWORD");
        if (!p) return NULL;
        char *copy = strdup(p);
        /* The environment block is ours: wipe the value where it lies, then drop
         * the variable so no child inherits it. */
        explicit_bzero(p, strlen(p));
        unsetenv("ELECTOR_PASSWORD");
        if (!copy) snprintf(err, err_cap, "out of memory");
        return copy;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, err_cap, "cannot read --password-file %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && tool_file_exposed(&st))
        exposed_warning(path, "--password-file", st.st_mode, warn, warn_cap);
    char *buf = malloc(PW_MAX);
    if (!buf) {
        close(fd);
        snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    size_t n = 0;
    int rerr = 0;
    while (n < PW_MAX - 1) {
        ssize_t k = read(fd, buf + n, PW_MAX - 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) rerr = errno;
        if (k <= 0) break;
        n += (size_t)k;
        if (memchr(buf + n - (size_t)k, '\n', (size_t)k)) break; /* the first line is in */
    }
    close(fd);
    buf[n] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    char *pw = rerr ? NULL : strdup(buf);
    explicit_bzero(buf, PW_MAX);
    free(buf);
    if (rerr) snprintf(err, err_cap, "cannot read --password-file %s: %s", path, strerror(rerr));
    else if (!pw) snprintf(err, err_cap, "out of memory");
    return pw;
}

int tool_check_key_file(const char *path, const char *option, char *warn, size_t cap)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || !tool_file_exposed(&st)) return 0;
    exposed_warning(path, option, st.st_mode, warn, cap);
    return 1;
}

int tool_check_cleartext(const elector_etcd *etcd, const char *user, char *warn, size_t cap)
{
    elector_endpoint_info info, first;
    int bad = 0;
    for (int i = 0; elector_etcd_endpoint_info(etcd, i, &info) == 0; i++) {
        if (info.tls || info.loopback) continue;
        if (!bad++) first = info;
    }
    if (!bad) return 0;
    char more[48] = "";
    if (bad > 1) snprintf(more, sizeof(more), " (and %d more endpoints)", bad - 1);
    snprintf(warn, cap,
             "warning: the password of '%s' goes in cleartext to %s%s; use https:// "
             "endpoints (or --cacert) so it is not readable on the network",
             user, first.authority, more);
    return 1;
}
