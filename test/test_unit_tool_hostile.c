/* SPDX-License-Identifier: MIT */
/* The tool's defences of issue 10 that need no server: escaping of untrusted bytes
 * (tool/text/escape.c) and the handling of secrets (tool/options/secret.c). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "text/escape.h"
#include "options/secret.h"
#include "testlib.h"

static char *esc(const char *s, size_t n)
{
    char *r = tool_escape_dup(s, n);
    ASSERT_NOT_NULL(r);
    return r;
}

#define ESC_EQ(want, lit)                                                                \
    do {                                                                                 \
        char *r_ = esc(lit, sizeof(lit) - 1);                                            \
        ASSERT_STREQ(want, r_);                                                          \
        free(r_);                                                                        \
    } while (0)

TEST(escape_shows_terminal_controls_as_text)
{
    /* Colour, title, clear screen: none of it reaches the terminal. */
    ESC_EQ("\\x1b[31mred\\x1b[0m", "\x1b[31mred\x1b[0m");
    ESC_EQ("\\x1b]0;pwned\\x07", "\x1b]0;pwned\x07");
    ESC_EQ("a\\x00b\\x7fc", "a\0b\x7f"
                            "c");
    /* A forged second log line stays on the first. */
    ESC_EQ("key\\nelector: elected: forged", "key\nelector: elected: forged");
    ESC_EQ("cr\\rtab\\tback\\\\slash", "cr\rtab\tback\\slash");
}

TEST(escape_keeps_utf8_text_and_shows_the_rest_in_hex)
{
    ESC_EQ("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xa7",
           "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xa7");
    /* C1 controls (CSI is U+009B), invalid bytes, overlongs, surrogates. */
    ESC_EQ("\\xc2\\x9b2J", "\xc2\x9b"
                           "2J");
    ESC_EQ("\\x9b2J", "\x9b"
                      "2J");
    ESC_EQ("\\xff\\xfe", "\xff\xfe");
    ESC_EQ("\\xc0\\xaf", "\xc0\xaf");
    ESC_EQ("\\xed\\xa0\\x80", "\xed\xa0\x80");
    ESC_EQ("cut\\xe2\\x82", "cut\xe2\x82");
    /* Bidirectional overrides and line separators ("Trojan Source"). */
    ESC_EQ("a\\u{202e}b\\u{2028}c", "a\xe2\x80\xae"
                                    "b\xe2\x80\xa8"
                                    "c");
}

TEST(escape_reports_the_full_length_and_truncates_safely)
{
    char out[8];
    size_t n = tool_escape(out, sizeof(out), "\x1b\x1b\x1b", 3);
    ASSERT_EQ(12, n);
    ASSERT_EQ(7, strlen(out));
    ASSERT_EQ(0, tool_escape(out, sizeof(out), "", 0));
    ASSERT_STREQ("", out);
    ASSERT_EQ(4, tool_escape(NULL, 0, "\n\n", 2));
}

/* ---------------------------------------------------------------- secrets */

static char *write_file(const char *dir, const char *name, const char *text, mode_t mode)
{
    char *p = NULL;
    ASSERT(asprintf(&p, "%s/%s", dir, name) > 0);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    ASSERT_EQ((ssize_t)strlen(text), write(fd, text, strlen(text)));
    ASSERT_OK(fchmod(fd, mode));
    close(fd);
    return p;
}

TEST(password_file_first_line_and_mode_warning)
{
    char *dir = tl_tmpdir("pw");
    char err[300], warn[600];
    char *f = write_file(dir, "ok", "s3cret\r\nsecond line\n", 0600);
    char *pw = tool_password_read(f, err, sizeof(err), warn, sizeof(warn));
    ASSERT_STREQ("s3cret", pw);
    ASSERT_STREQ("", warn);
    tool_secret_free(pw);
    free(f);

    f = write_file(dir, "open", "nolf", 0644);
    pw = tool_password_read(f, err, sizeof(err), warn, sizeof(warn));
    ASSERT_STREQ("nolf", pw);
    tl_log("%s", warn);
    ASSERT_CONTAINS(warn, "is accessible by group or others (mode 0644); chmod 600 it");
    ASSERT_CONTAINS(warn, f);
    tool_secret_free(pw);
    free(f);

    f = write_file(dir, "group", "x\n", 0640);
    pw = tool_password_read(f, err, sizeof(err), warn, sizeof(warn));
    ASSERT_CONTAINS(warn, "(mode 0640)");
    tool_secret_free(pw);
    free(f);

    pw = tool_password_read("/nonexistent/pw", err, sizeof(err), warn, sizeof(warn));
    ASSERT_NULL(pw);
    ASSERT_STREQ("cannot read --password-file /nonexistent/pw: No such file or directory",
                 err);
    /* A directory opens, but reading it fails: said, no password. */
    err[0] = 0;
    pw = tool_password_read(dir, err, sizeof(err), warn, sizeof(warn));
    ASSERT_NULL(pw);
    char want[400];
    snprintf(want, sizeof(want), "cannot read --password-file %s: Is a directory", dir);
    ASSERT_STREQ(want, err);
    free(dir);
}

TEST(password_from_the_environment_is_wiped_and_unset)
{
    setenv("ELECTOR_PASSWORD", "env-s3cret", 1);
    char *p = getenv("ELECTOR_PASSWORD");
    char err[300], warn[600];
    char *pw = tool_password_read(NULL, err, sizeof(err), warn, sizeof(warn));
    ASSERT_STREQ("env-s3cret", pw);
    ASSERT_NULL(getenv("ELECTOR_PASSWORD")); /* a `run` command does not inherit it */
    ASSERT_EQ(0, p[0]);                      /* and the old value is gone from memory */
    tool_secret_free(pw);
    ASSERT_NULL(tool_password_read(NULL, err, sizeof(err), warn, sizeof(warn)));
    ASSERT_STREQ("", err);
}

TEST(key_file_mode_warning)
{
    char *dir = tl_tmpdir("key");
    char warn[600];
    char *k = write_file(dir, "k.pem", "-----BEGIN PRIVATE KEY-----\n", 0644);
    ASSERT_EQ(1, tool_check_key_file(k, "--key", warn, sizeof(warn)));
    ASSERT_CONTAINS(warn, "--key '");
    ASSERT_CONTAINS(warn, "(mode 0644)");
    ASSERT_OK(chmod(k, 0600));
    ASSERT_EQ(0, tool_check_key_file(k, "--key", warn, sizeof(warn)));
    ASSERT_OK(chmod(k, 0400));
    ASSERT_EQ(0, tool_check_key_file(k, "--key", warn, sizeof(warn)));
    ASSERT_EQ(0, tool_check_key_file(NULL, "--key", warn, sizeof(warn)));
    ASSERT_EQ(0, tool_check_key_file("/nonexistent", "--key", warn, sizeof(warn)));
    free(k);
    free(dir);
}

static int cleartext(const char *endpoints, char *warn, size_t cap)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    elector_etcd *e = elector_etcd_new(&cfg); /* connects nowhere until a call */
    ASSERT_NOT_NULL(e);
    ASSERT_OK(elector_etcd_err(e));
    int rc = tool_check_cleartext(e, "root", warn, cap);
    elector_etcd_free(e);
    return rc;
}

TEST(cleartext_password_warning_only_off_this_machine)
{
    char warn[600];
    ASSERT_EQ(0, cleartext("127.0.0.1:2379,127.9.9.9:1,[::1]:2,localhost:3,"
                           "http://[::ffff:127.0.0.1]:4",
                           warn, sizeof(warn)));
    ASSERT_EQ(1, cleartext("127.0.0.1:2379,10.0.0.7:2379,http://etcd.example:2379", warn,
                           sizeof(warn)));
    tl_log("%s", warn);
    ASSERT_CONTAINS(warn,
                    "the password of 'root' goes in cleartext to 10.0.0.7:2379 (and 1 "
                    "more endpoints)");
    ASSERT_EQ(0, cleartext("https://10.0.0.7:2379", warn, sizeof(warn)));
}

TEST(secret_protect_makes_the_process_undumpable)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        if (prctl(PR_GET_DUMPABLE) != 1) _exit(2);
        tool_secret_protect();
        _exit(prctl(PR_GET_DUMPABLE) == 0 ? 0 : 1);
    }
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
}
