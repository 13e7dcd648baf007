/* SPDX-License-Identifier: MIT */
/* The tool's handling of secrets: the etcd password (and, in the library, the
 * auth token it buys), TLS keys. */
#ifndef ELECTOR_TOOL_SECRET_H
#define ELECTOR_TOOL_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include "elector/etcd.h"
#include "options/opts.h"

/* Keeps secrets out of core dumps and away from ptrace by the same user
 * (PR_SET_DUMPABLE 0) for as long as the process lives: the client holds the
 * password and the token to authenticate again. execve() resets the flag, so a
 * command run by `elector run` is not affected. */
void tool_secret_protect(void);

/* The password for --user: the first line of path (read with read(2): no stdio
 * buffer keeps a copy) or, with path NULL, $ELECTOR_PASSWORD, which is then wiped
 * in place and removed from the environment (so `elector run` does not hand it
 * to its command). Returns a malloc'd string to free with tool_secret_free(), or
 * NULL: with *err set if path could not be read, or no password at all. When the
 * file is readable by group or others, a warning goes to warn (else warn[0] = 0). */
char *tool_password_read(const char *path, char *err, size_t err_cap, char *warn,
                         size_t warn_cap);

/* The user and password to authenticate with, resolved from the options and
 * the environment the way etcdctl does it: --user NAME[:PASSWORD] (the
 * password after the first ':'), or a password from --password-file,
 * --password, $ELECTOR_PASSWORD or $ETCDCTL_PASSWORD. The command line wins
 * over ELECTOR_* variables, which win over ETCDCTL_* ones; two passwords at the
 * same level are an error. */
typedef struct tool_creds {
    char *user;       /* malloc'd; NULL: no authentication */
    char *password;   /* malloc'd, free with tool_secret_free(); NULL: none */
    char from[300];   /* where the password came from, for hints ("$ETCDCTL_PASSWORD");
                         "" when there is none */
    bool on_argv;     /* the password was on the command line (see tool_creds_scrub) */
    const char *file; /* --password-file the password came from (the library reads
                         it again when it changes); NULL: not from a file */
} tool_creds;

/* Resolves o's credentials into c. Returns 0, or EXIT_USAGE with a message in
 * err (two passwords at one level, an unreadable --password-file). A warning
 * (a password on the command line, a password file others may read) goes to
 * warn (else warn[0] = 0). Reads the password file; prompts for nothing. */
int tool_creds_resolve(const tool_opts *o, tool_creds *c, char *err, size_t err_cap,
                       char *warn, size_t warn_cap);

/* Removes every password from where others can read it: wipes in place, then
 * unsets $ELECTOR_PASSWORD, $ETCDCTL_PASSWORD and, if they hold NAME:PASSWORD,
 * $ELECTOR_USER and $ETCDCTL_USER (so `run` and `lock` do not hand them to the
 * command, and /proc/PID/environ does not show them); overwrites a password
 * given in argv (--password P, --user NAME:P) with zeros. */
void tool_creds_scrub(const tool_opts *o, char **argv);

/* Asks for the password of user on the controlling terminal without echo, as
 * etcdctl does when --user has none. NULL when stdin is not a terminal or
 * nothing was read. */
char *tool_password_prompt(const char *user);

void tool_creds_free(tool_creds *c);

/* Wipes (explicit_bzero) and frees; NULL is a no-op. */
void tool_secret_free(char *s);

/* True when st describes a file that group or others may access (ssh's rule
 * for private keys: any of the 077 bits). */
bool tool_file_exposed(const struct stat *st);

/* For a private key file: 1 and a warning in warn when it is exposed, else 0. */
int tool_check_key_file(const char *path, const char *option, char *warn, size_t cap);

/* 1 and a warning in warn when the client would send a password in cleartext to
 * an endpoint that is not on this machine (no TLS, not loopback); else 0. */
int tool_check_cleartext(const elector_etcd *etcd, const char *user, char *warn,
                         size_t cap);

#endif
