/* SPDX-License-Identifier: MIT */
/* Where the release helper (elector-release, release.c) is. The path fixed
 * at configure time alone left it off for anything not installed there: a
 * `cmake --install --prefix P`, the build tree, a program built against a
 * prefix all waited for the TTL after a crash. So the library looks beside
 * itself first. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "election_private.h"

#ifndef ELECTOR_RELEASE_HELPER_PATH
#define ELECTOR_RELEASE_HELPER_PATH "/usr/local/lib/elector/elector-release"
#endif

/* Where the helper is: $ELECTOR_RELEASE_HELPER if set (and only there);
 * else beside the object this code was loaded from (dladdr), as installed
 * (LIBDIR/libelector.so -> LIBDIR/elector/), as a program linked statically
 * sits (PREFIX/bin/prog -> PREFIX/lib/elector/; the build tree's programs,
 * build/DIR/prog, and its Python extension, build/python/elector/, find
 * build/lib/elector/), then the path compiled in (the configured LIBDIR):
 * `cmake --install --prefix P`, the build tree and programs built against a
 * prefix all find it, not only /usr/local. 0 with the path in out, or
 * ELECTOR_EINVAL after a notice that names every place tried and what to do. */
/* A helper found by searching is run only if it, and the directory that holds
 * it, belong to root or to this process's user and nobody else may write
 * them: it is given the client's password, and a search that looks beside a
 * program in a shared directory (/tmp/x/bin/../../lib) must not run what
 * another user put there. $ELECTOR_RELEASE_HELPER and the configured path
 * are the user's and the installer's choice. */
/* Owned by root or by us, and writable by no one else: not by others, and by
 * the group only if it is root's or our own (a umask of 002 with a group per
 * user, as Debian gives its users, leaves build trees group-writable). */
static bool ours(const struct stat *st)
{
    uid_t me = geteuid();
    bool group_ok =
        !(st->st_mode & S_IWGRP) || st->st_gid == 0 || st->st_gid == getegid();
    return (st->st_uid == 0 || st->st_uid == me) && !(st->st_mode & S_IWOTH) && group_ok;
}

static bool trusted(const char *path)
{
    struct stat f, d;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    return !access(path, X_OK) && !stat(path, &f) && !stat(dir, &d) &&
           S_ISREG(f.st_mode) && ours(&f) && ours(&d);
}

/* The directory of the object that holds this code (the shared library, or
 * the program it is linked into) into dir[0], and of the running program
 * (/proc/self/exe) into dir[1] when it is another; how many. dladdr names the
 * main program as it was invoked (argv[0], maybe relative): only a name that
 * resolves counts. */
static int bases(char dir[2][PATH_MAX])
{
    int n = 0;
    Dl_info info;
    if (dladdr((void *)elector__release_find, &info) && info.dli_fname &&
        strchr(info.dli_fname, '/') && realpath(info.dli_fname, dir[n]))
        n++;
    ssize_t len = readlink("/proc/self/exe", dir[n], PATH_MAX - 1);
    if (len > 0) {
        dir[n][len] = 0;
        if (!n || strcmp(dir[0], dir[1])) n++;
    }
    for (int i = 0; i < n; i++) {
        char *slash = strrchr(dir[i], '/');
        if (slash) *slash = 0;
    }
    return n;
}

int elector__release_find(elector_etcd *e, char *out, size_t cap)
{
    const char *env = secure_getenv("ELECTOR_RELEASE_HELPER");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        if (!access(out, X_OK)) return 0;
        elector__notice(e, ELECTOR_EINVAL,
                        "no release helper at $ELECTOR_RELEASE_HELPER (%s): %s; after a "
                        "crash the next candidate waits for the TTL",
                        env, strerror(errno));
        return ELECTOR_EINVAL;
    }
    static const char *const beside[] = {"/elector/", "/../lib/elector/",
                                         "/../../lib/elector/"};
    char tried[6 * PATH_MAX + 64] = "";
    size_t used = 0;
    char dir[2][PATH_MAX];
    int n = bases(dir);
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
            snprintf(out, cap, "%s%selector-release", dir[b], beside[i]);
            if (trusted(out)) return 0;
            int w = snprintf(tried + used, sizeof(tried) - used, "%s, ", out);
            if (w > 0 && used + (size_t)w < sizeof(tried)) used += (size_t)w;
        }
    snprintf(out, cap, "%s", ELECTOR_RELEASE_HELPER_PATH);
    if (!access(out, X_OK)) return 0;
    elector__notice(
        e, ELECTOR_EINVAL,
        "no release helper (tried %s%s): set ELECTOR_RELEASE_HELPER to the path "
        "of elector-release, or install it with libelector; after a crash the "
        "next candidate waits for the TTL",
        tried, ELECTOR_RELEASE_HELPER_PATH);
    return ELECTOR_EINVAL;
}
