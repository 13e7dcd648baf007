/* SPDX-License-Identifier: MIT */
/* See secret.h. */
#define _GNU_SOURCE
#include "options/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <termios.h>
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
             "%s '%s' is accessible by group or others (mode 0%03o); "
             "chmod 600 it",
             what, path, (unsigned)(mode & 0777));
}

static char *password_from_env(char *err, size_t err_cap)
{
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

char *tool_password_read(const char *path, char *err, size_t err_cap, char *warn,
                         size_t warn_cap)
{
    if (warn_cap) warn[0] = 0;
    if (err_cap) err[0] = 0;
    if (!path) return password_from_env(err, err_cap);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, err_cap, "cannot read --password-file %s: %s", path,
                 strerror(errno));
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
        if (memchr(buf + n - (size_t)k, '\n', (size_t)k))
            break; /* the first line is in */
    }
    close(fd);
    buf[n] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    /* An empty first line is no password, as when the library reads the file
     * again while running (it keeps the previous one then). */
    bool empty = !rerr && !buf[0];
    char *pw = rerr || empty ? NULL : strdup(buf);
    explicit_bzero(buf, PW_MAX);
    free(buf);
    if (rerr)
        snprintf(err, err_cap, "cannot read --password-file %s: %s", path,
                 strerror(rerr));
    else if (empty)
        snprintf(err, err_cap,
                 "--password-file %s has an empty first line: no password in it", path);
    else if (!pw)
        snprintf(err, err_cap, "out of memory");
    return pw;
}

int tool_check_key_file(const char *path, const char *option, char *warn, size_t cap)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || !tool_file_exposed(&st)) return 0;
    exposed_warning(path, option, st.st_mode, warn, cap);
    return 1;
}

int tool_check_cleartext(const elector_etcd *etcd, const char *user, char *warn,
                         size_t cap)
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
             "the password of '%s' goes in cleartext to %s%s; use https:// "
             "endpoints (or --cacert) so it is not readable on the network",
             user, first.authority, more);
    return 1;
}

/* ---------------------------------------------------------------- credentials */

void tool_creds_free(tool_creds *c)
{
    free(c->user);
    tool_secret_free(c->password);
    c->user = c->password = NULL;
}

/* A password candidate: its level (lower wins) and how to get it. */
struct cand {
    int level; /* ORIGIN_ARGV, ORIGIN_ELECTOR, ORIGIN_ETCDCTL */
    const char *value;
    const char *file; /* read the password from this file */
    char from[96];
};

/* The password's sources as given (a file, a value, NAME:PASSWORD), into cs
 * (3); *best the one that wins (the command line before $ELECTOR_* before
 * $ETCDCTL_*; NULL: none). 0, or EXIT_USAGE when two of one level compete. */
static int password_source(const tool_opts *o, struct cand *cs, const struct cand **best,
                           char *err, size_t err_cap)
{
    const char *u = o->user.value;
    const char *colon = u ? strchr(u, ':') : NULL;
    *best = NULL;
    int n = 0;
    if (o->password_file.value) {
        cs[n] = (struct cand){.level = o->password_file.origin,
                              .file = o->password_file.value};
        snprintf(cs[n++].from, sizeof(cs[0].from), "%s", o->password_file.from);
    }
    if (o->password.value) {
        cs[n] = (struct cand){.level = o->password.origin, .value = o->password.value};
        snprintf(cs[n++].from, sizeof(cs[0].from), "%s", o->password.from);
    }
    if (colon) {
        cs[n] = (struct cand){.level = o->user.origin, .value = colon + 1};
        snprintf(cs[n++].from, sizeof(cs[0].from), "%s NAME:PASSWORD", o->user.from);
    }
    for (int i = 0; i < n; i++) {
        if (*best && cs[i].level == (*best)->level) {
            snprintf(err, err_cap,
                     "the password is given twice, by %s and by %s: give it once",
                     (*best)->from, cs[i].from);
            return EXIT_USAGE;
        }
        if (!*best || cs[i].level < (*best)->level) *best = &cs[i];
    }
    return 0;
}

int tool_creds_resolve(const tool_opts *o, tool_creds *c, char *err, size_t err_cap,
                       char *warn, size_t warn_cap)
{
    memset(c, 0, sizeof(*c));
    if (err_cap) err[0] = 0;
    if (warn_cap) warn[0] = 0;
    const char *u = o->user.value;
    const char *colon = u ? strchr(u, ':') : NULL;
    struct cand cs[3];
    const struct cand *best;
    if (password_source(o, cs, &best, err, err_cap)) return EXIT_USAGE;
    if (u && *u) {
        /* NAME:PASSWORD is always split (etcdctl takes --user whole when
         * --password is given; a name with ':' cannot be made with etcdctl, and
         * the rest would be a password leaking into messages). */
        size_t ulen = colon ? (size_t)(colon - u) : strlen(u);
        if (ulen == 0) {
            snprintf(err, err_cap, "%s: the user name is empty", o->user.from);
            return EXIT_USAGE;
        }
        c->user = strndup(u, ulen);
        if (!c->user) goto oom;
    }
    if (!best) return 0;
    snprintf(c->from, sizeof(c->from), "%s", best->from);
    c->on_argv = best->level == ORIGIN_ARGV && !best->file;
    if (best->file) {
        c->password = tool_password_read(best->file, err, err_cap, warn, warn_cap);
        c->file = best->file;
        if (!c->password) {
            tool_creds_free(c);
            return EXIT_USAGE;
        }
        if (snprintf(c->from, sizeof(c->from), "%s %s", best->from, best->file) < 0)
            c->from[0] = 0;
        return 0;
    }
    c->password = strdup(best->value);
    if (!c->password) goto oom;
    if (c->on_argv)
        snprintf(
            warn, warn_cap,
            "the password given by %s is visible to other users of this machine "
            "(ps, /proc/PID/cmdline) until elector has read it; use $ELECTOR_PASSWORD "
            "or --password-file",
            best->from);
    return 0;
oom:
    tool_creds_free(c);
    snprintf(err, err_cap, "out of memory");
    return EXIT_ERROR;
}

static void wipe_var(const char *name, bool only_if_colon)
{
    char *v = getenv(name);
    if (!v) return;
    char *colon = strchr(v, ':');
    if (only_if_colon && !colon) return;
    /* The environment block is ours: wipe the value where it lies (so that
     * /proc/PID/environ no longer shows it), then drop the variable so no child
     * inherits it. */
    explicit_bzero(v, strlen(v));
    unsetenv(name);
}

void tool_creds_scrub(const tool_opts *o, char **argv)
{
    wipe_var("ELECTOR_PASSWORD", false);
    wipe_var("ETCDCTL_PASSWORD", false);
    wipe_var("ELECTOR_USER", true);
    wipe_var("ETCDCTL_USER", true);
    if (!argv) return;
    if (o->password.origin == ORIGIN_ARGV) {
        char *p = argv[o->password.argi] + o->password.argoff;
        explicit_bzero(p, strlen(p));
    }
    if (o->user.origin == ORIGIN_ARGV) {
        char *colon = strchr(argv[o->user.argi] + o->user.argoff, ':');
        if (colon) explicit_bzero(colon + 1, strlen(colon + 1));
    }
}

/* The terminal's settings while the prompt has echo off, to restore them if a
 * signal ends the process meanwhile. */
static struct termios g_saved_tty;
static int g_tty_fd = -1;

static void restore_tty(int sig)
{
    if (g_tty_fd >= 0) tcsetattr(g_tty_fd, TCSAFLUSH, &g_saved_tty);
    signal(sig, SIG_DFL);
    raise(sig);
}

char *tool_password_prompt(const char *user)
{
    if (!isatty(STDIN_FILENO)) return NULL;
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return NULL;
    struct termios t;
    if (tcgetattr(fd, &t)) {
        close(fd);
        return NULL;
    }
    g_saved_tty = t;
    g_tty_fd = fd;
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP};
    struct sigaction sa = {.sa_handler = restore_tty}, old[5];
    for (int i = 0; i < 5; i++)
        sigaction(sigs[i], &sa, &old[i]);
    t.c_lflag &= ~(tcflag_t)ECHO;
    t.c_lflag |= ECHONL;
    /* Echo off first, then the prompt: what is typed once the prompt shows is
     * neither echoed nor thrown away by the flush (which drops only what was
     * typed before it, as getpass does). */
    tcsetattr(fd, TCSAFLUSH, &t);
    char prompt[300];
    int pn = snprintf(prompt, sizeof(prompt), "Password for %s: ", user);
    if (pn > 0 && write(fd, prompt, (size_t)pn) < 0) { /* a terminal that takes nothing */
    }
    char *buf = malloc(PW_MAX);
    size_t n = 0;
    while (buf && n < PW_MAX - 1) {
        ssize_t k = read(fd, buf + n, 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0 || buf[n] == '\n') break;
        n++;
    }
    tcsetattr(fd, TCSANOW, &g_saved_tty); /* keep what was typed after the line */
    for (int i = 0; i < 5; i++)
        sigaction(sigs[i], &old[i], NULL);
    g_tty_fd = -1;
    close(fd);
    if (!buf) return NULL;
    buf[n] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    char *pw = n ? strdup(buf) : NULL;
    explicit_bzero(buf, PW_MAX);
    free(buf);
    return pw;
}
