/* SPDX-License-Identifier: MIT */
/* The tool speaks etcdctl: its global options and their ETCDCTL_* variables
 * (ELECTOR_* first), --user NAME[:PASSWORD], Go durations, -wjson, help and
 * version, TLS without verification, and `lock` against `etcdctl lock` both
 * ways. Real etcd (auth and TLS clusters where it matters). Every JSON line the
 * tool writes here is checked against docs/elector-events.schema.json. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include "elect_util.h"
#include "testlib.h"
#include "tool_util.h"

static const char *const PATH_ENV = "PATH=/usr/bin:/bin";

/* ---------------------------------------------------------------- help, forms */

TEST(help_and_version_are_commands_too)
{
    char *out = NULL;
    ASSERT_EQ(0, tool(&out, NULL, (const char *[]){"help", NULL}));
    ASSERT_CONTAINS(out, "Usage: elector [OPTIONS] COMMAND");
    ASSERT_CONTAINS(out, "lock NAME");
    free(out);
    static const char *const cmds[] = {"campaign", "observe", "leader", "run", "lock"};
    for (size_t i = 0; i < 5; i++) {
        char want[64];
        snprintf(want, sizeof(want), "Usage: elector [OPTIONS] %s NAME", cmds[i]);
        ASSERT_EQ(0, tool(&out, NULL, (const char *[]){"help", cmds[i], NULL}));
        ASSERT_CONTAINS(out, want);
        free(out);
        ASSERT_EQ(0, tool(&out, NULL, (const char *[]){cmds[i], "--help", NULL}));
        ASSERT_CONTAINS(out, want);
        free(out);
        ASSERT_EQ(0, tool(&out, NULL, (const char *[]){cmds[i], "-h", NULL}));
        ASSERT_CONTAINS(out, want);
        free(out);
    }
    ASSERT_EQ(0, tool(&out, NULL, (const char *[]){"version", NULL}));
    ASSERT_CONTAINS(out, "elector ");
    free(out);
    char *err = NULL;
    ASSERT_EQ(2, tool(&out, &err, (const char *[]){"help", "dance", NULL}));
    ASSERT_CONTAINS(err, "help: unknown command 'dance'");
    free(out);
    free(err);
}

TEST(go_durations_and_every_option_form)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *out = NULL, *err = NULL;
    ASSERT_EQ(4, tool(&out, NULL,
                      (const char *[]){"--dial-timeout", "1m30s", "leader", "x",
                                       "--endpoints", eps, NULL}));
    free(out);
    char epeq[300];
    snprintf(epeq, sizeof(epeq), "--endpoints=%s", eps);
    ASSERT_EQ(4, tool(&out, NULL,
                      (const char *[]){"-wjson", "leader", epeq, "x",
                                       "--command-timeout=1.5s", "--keepalive-time",
                                       "250ms", "--keepalive-timeout=1.5s", NULL}));
    ASSERT_CONTAINS(out, "{\"event\":\"no_leader\",\"name\":\"x\"");
    free(out);
    ASSERT_EQ(
        2, tool(&out, &err,
                (const char *[]){"leader", "x", epeq, "--dial-timeout", "1m30", NULL}));
    ASSERT_CONTAINS(err, "--dial-timeout: invalid duration '1m30'");
    free(out);
    free(err);
    eh_stop(c);
}

/* ETCDCTL_DIAL_TIMEOUT is honoured: a member that accepts and never answers
 * fails after it, not after the default 5 s. */
TEST(etcdctl_variables_are_read_and_elector_ones_win)
{
    eh_cluster *c = start1();
    char good[300], bad[64], ctl[320], el[320], dial[64];
    snprintf(good, sizeof(good), "%s", eh_endpoints(c));
    snprintf(bad, sizeof(bad), "127.0.0.1:1");
    char *out = NULL, *err = NULL;
    snprintf(ctl, sizeof(ctl), "ETCDCTL_ENDPOINTS=%s", good);
    const char *e1[] = {ctl, "ETCDCTL_WRITE_OUT=json", "ETCDCTL_COMMAND_TIMEOUT=3s",
                        PATH_ENV, NULL};
    ASSERT_EQ(4, tool_with_env(&out, NULL, e1, (const char *[]){"leader", "v", NULL}));
    ASSERT_CONTAINS(out, "\"event\":\"no_leader\"");
    free(out);
    /* ELECTOR_ENDPOINTS wins over ETCDCTL_ENDPOINTS; the command line over both. */
    snprintf(ctl, sizeof(ctl), "ETCDCTL_ENDPOINTS=%s", bad);
    snprintf(el, sizeof(el), "ELECTOR_ENDPOINTS=%s", good);
    const char *e2[] = {ctl, el, PATH_ENV, NULL};
    ASSERT_EQ(4, tool_with_env(&out, NULL, e2, (const char *[]){"leader", "v", NULL}));
    free(out);
    snprintf(el, sizeof(el), "ELECTOR_ENDPOINTS=%s", bad);
    const char *e3[] = {el, PATH_ENV, NULL};
    ASSERT_EQ(4,
              tool_with_env(&out, NULL, e3,
                            (const char *[]){"leader", "v", "--endpoints", good, NULL}));
    free(out);
    int port;
    int ls = silent_listener(&port);
    snprintf(ctl, sizeof(ctl), "ETCDCTL_ENDPOINTS=127.0.0.1:%d", port);
    snprintf(dial, sizeof(dial), "ETCDCTL_DIAL_TIMEOUT=500ms");
    const char *e4[] = {ctl, dial, "ETCDCTL_COMMAND_TIMEOUT=500ms", PATH_ENV, NULL};
    double t0 = tl_now();
    ASSERT_EQ(1, tool_with_env(&out, &err, e4, (const char *[]){"leader", "v", NULL}));
    double dt = tl_now() - t0;
    tl_log("ETCDCTL_DIAL_TIMEOUT=500ms, a silent member: exit 1 after %.2f s: %s", dt,
           err);
    ASSERT_LT(dt, 2.5);
    free(out);
    free(err);
    const char *e5[] = {"ETCDCTL_DIAL_TIMEOUT=soon", PATH_ENV, NULL};
    ASSERT_EQ(2, tool_with_env(&out, &err, e5, (const char *[]){"leader", "v", NULL}));
    /* One log line, as every other error (issue 25: one format). */
    ASSERT_CONTAINS(err,
                    " error elector: $ETCDCTL_DIAL_TIMEOUT: invalid duration 'soon' (use "
                    "e.g. 500ms, 10s, 1m30s, 1.5h)\n");
    ASSERT(strchr(err, '\n') == err + strlen(err) - 1);
    free(out);
    free(err);
    close(ls);
    eh_stop(c);
}

/* --user NAME:PASSWORD and ETCDCTL_USER/ETCDCTL_PASSWORD, as etcdctl takes them. */
TEST(etcdctl_user_forms_authenticate)
{
    eh_opts eo = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    const char *eps = eh_endpoints(c);
    char rootpw[128], user[160], pass[160], eluser[160], elpass[160];
    snprintf(rootpw, sizeof(rootpw), "root:%s", EH_ROOT_PASSWORD);
    snprintf(user, sizeof(user), "ETCDCTL_USER=root:%s", EH_ROOT_PASSWORD);
    char *out = NULL, *err = NULL;
    const char *e1[] = {user, PATH_ENV, NULL};
    ASSERT_EQ(4,
              tool_with_env(&out, &err, e1,
                            (const char *[]){"leader", "x", "--endpoints", eps, NULL}));
    ASSERT(!strstr(err, "warn"));
    free(out);
    free(err);
    ASSERT_EQ(4, tool(&out, &err,
                      (const char *[]){"leader", "x", "--endpoints", eps, "--user",
                                       rootpw, NULL}));
    ASSERT_CONTAINS(err,
                    "warn elector: the password given by --user NAME:PASSWORD is visible "
                    "to other users");
    free(out);
    free(err);
    snprintf(pass, sizeof(pass), "ETCDCTL_PASSWORD=%s", EH_ROOT_PASSWORD);
    const char *e2[] = {"ETCDCTL_USER=root", pass, PATH_ENV, NULL};
    ASSERT_EQ(4,
              tool_with_env(&out, NULL, e2,
                            (const char *[]){"leader", "x", "--endpoints", eps, NULL}));
    free(out);
    snprintf(eluser, sizeof(eluser), "ELECTOR_USER=%s", EH_USER);
    snprintf(elpass, sizeof(elpass), "ELECTOR_PASSWORD=%s", EH_USER_PASSWORD);
    const char *e3[] = {eluser, elpass, "ETCDCTL_USER=root:wrong", PATH_ENV, NULL};
    char name[64];
    snprintf(name, sizeof(name), "%sx", EH_USER_PREFIX); /* alice may read only there */
    ASSERT_EQ(4,
              tool_with_env(&out, NULL, e3,
                            (const char *[]){"leader", name, "--endpoints", eps, NULL}));
    free(out);
    ASSERT_EQ(4, tool(&out, NULL,
                      (const char *[]){"leader", "x", "--endpoints", eps, "--user",
                                       "root", "--password", EH_ROOT_PASSWORD, NULL}));
    free(out);
    /* A wrong password names where it came from. */
    const char *e4[] = {"ETCDCTL_USER=root", "ETCDCTL_PASSWORD=wrong", PATH_ENV, NULL};
    ASSERT_EQ(1,
              tool_with_env(&out, &err, e4,
                            (const char *[]){"leader", "x", "--endpoints", eps, NULL}));
    ASSERT_CONTAINS(err, "authentication failed");
    ASSERT_CONTAINS(err, "(from $ETCDCTL_PASSWORD)");
    free(out);
    free(err);
    /* Two passwords at one level. */
    ASSERT_EQ(2, tool(&out, &err,
                      (const char *[]){"leader", "x", "--endpoints", eps, "--user",
                                       rootpw, "--password", "p", NULL}));
    ASSERT_CONTAINS(err, "the password is given twice, by --password and by --user "
                         "NAME:PASSWORD");
    free(out);
    free(err);
    eh_stop(c);
}

/* On a terminal, a user without a password is asked for one, as etcdctl does. */
TEST(password_is_asked_for_on_a_terminal)
{
    eh_opts eo = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    ASSERT(pid >= 0);
    if (pid == 0) {
        execl(ELECTOR_BIN, ELECTOR_BIN, "--endpoints", eh_endpoints(c), "--user", "root",
              "leader", "x", (char *)NULL);
        _exit(127);
    }
    char buf[4096] = "";
    size_t len = 0;
    double end = tl_now() + 10;
    bool sent = false;
    for (;;) {
        struct timeval tv = {0, 50000};
        fd_set r;
        FD_ZERO(&r);
        FD_SET(master, &r);
        if (select(master + 1, &r, NULL, NULL, &tv) > 0) {
            ssize_t n = read(master, buf + len, sizeof(buf) - 1 - len);
            if (n <= 0) break; /* EIO: the child is gone */
            len += (size_t)n;
            buf[len] = 0;
        }
        if (!sent && strstr(buf, "Password for root: ")) {
            /* Once the prompt shows, echo is already off: what the user types
             * now is neither shown nor flushed away. */
            struct termios t;
            ASSERT_EQ(0, tcgetattr(master, &t));
            ASSERT(!(t.c_lflag & ECHO));
            char line[128];
            snprintf(line, sizeof(line), "%s\n", EH_ROOT_PASSWORD);
            ASSERT_EQ((ssize_t)strlen(line), write(master, line, strlen(line)));
            sent = true;
        }
        if (tl_now() > end) break;
    }
    int st;
    pid_t w = 0;
    for (double until = tl_now() + 5;
         (w = waitpid(pid, &st, WNOHANG)) == 0 && tl_now() < until;)
        usleep(10000);
    if (w == 0) { /* still waiting for its password: a failure, not a hang */
        kill(pid, SIGKILL);
        w = waitpid(pid, &st, 0);
        tl_log("elector still running after 10 s; terminal: %s", buf);
        ASSERT(!"elector ended within 10 s");
    }
    ASSERT_EQ(pid, w);
    close(master);
    tl_log("terminal: %s", buf);
    ASSERT(sent);
    ASSERT(!strstr(buf, EH_ROOT_PASSWORD)); /* not echoed */
    ASSERT_CONTAINS(buf, "no leader for x");
    ASSERT_EQ(4, WEXITSTATUS(st));
    eh_stop(c);
}

/* A stop signal while the prompt waits (echo off): the terminal gets its echo
 * back, and elector ends by that signal (no etcd needed: nothing is sent before
 * the password is in). */
TEST(a_signal_at_the_password_prompt_restores_the_terminal)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    ASSERT(pid >= 0);
    if (pid == 0) {
        execl(ELECTOR_BIN, ELECTOR_BIN, "--endpoints", "127.0.0.1:1", "--user", "root",
              "leader", "x", (char *)NULL);
        _exit(127);
    }
    char buf[4096] = "";
    size_t len = 0;
    double end = tl_now() + 10;
    while (!strstr(buf, "Password for root: ")) {
        ASSERT_LT(tl_now(), end);
        struct timeval tv = {0, 50000};
        fd_set r;
        FD_ZERO(&r);
        FD_SET(master, &r);
        if (select(master + 1, &r, NULL, NULL, &tv) > 0) {
            ssize_t n = read(master, buf + len, sizeof(buf) - 1 - len);
            ASSERT_GT(n, 0);
            len += (size_t)n;
            buf[len] = 0;
        }
    }
    struct termios t;
    ASSERT_EQ(0, tcgetattr(master, &t));
    ASSERT(!(t.c_lflag & ECHO)); /* off while asking */
    ASSERT_OK(kill(pid, SIGTERM));
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    ASSERT(WIFSIGNALED(st));
    ASSERT_EQ(SIGTERM, WTERMSIG(st));
    ASSERT_EQ(0, tcgetattr(master, &t));
    ASSERT(t.c_lflag & ECHO); /* restored */
    close(master);
}

/* Every password source is gone from what run's and lock's commands see: their
 * environment, and the environment and command line of elector's guard (their
 * parent, a fork of elector). */
TEST(commands_never_see_a_password)
{
    eh_opts eo = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    char *dir = tl_tmpdir("pwenv");
    char script[1024], user[160], pass[160], elpass[160], rootpw[160];
    snprintf(script, sizeof(script),
             "{ env; tr '\\0' '\\n' < /proc/$PPID/environ; tr '\\0' ' ' < "
             "/proc/$PPID/cmdline; "
             "} > %s/seen",
             dir);
    snprintf(user, sizeof(user), "ETCDCTL_USER=root:%s", EH_ROOT_PASSWORD);
    snprintf(pass, sizeof(pass), "ETCDCTL_PASSWORD=%s", EH_ROOT_PASSWORD);
    snprintf(elpass, sizeof(elpass), "ELECTOR_PASSWORD=%s", EH_ROOT_PASSWORD);
    snprintf(rootpw, sizeof(rootpw), "root:%s", EH_ROOT_PASSWORD);
    const char *const *envs[] = {
        (const char *[]){user, PATH_ENV, NULL},
        (const char *[]){"ETCDCTL_USER=root", pass, elpass, PATH_ENV, NULL},
        (const char *[]){PATH_ENV, NULL},
    };
    for (int i = 0; i < 6; i++) {
        bool lock = i % 2;
        const char *const *env = envs[i / 2];
        char name[32];
        snprintf(name, sizeof(name), "pw%d", i);
        const char *args[12] = {"--endpoints", eh_endpoints(c), lock ? "lock" : "run",
                                name};
        int n = 4;
        if (i / 2 == 2) { /* the password on the command line */
            args[n++] = "--user";
            args[n++] = rootpw;
        }
        args[n++] = "--";
        args[n++] = "sh";
        args[n++] = "-c";
        args[n++] = script;
        args[n] = NULL;
        char *err = NULL;
        ASSERT_EQ(0, tool_with_env(NULL, &err, env, args));
        char path[600];
        snprintf(path, sizeof(path), "%s/seen", dir);
        char *seen = check_file(path);
        tl_log("%s with %s: %zu bytes seen, no password", lock ? "lock" : "run", env[0],
               strlen(seen));
        ASSERT_CONTAINS(seen, "ELECTOR_TOKEN=");
        ASSERT(!strstr(seen, EH_ROOT_PASSWORD));
        /* The guard's /proc/PID/environ may still name a variable whose value was
         * wiped in place (zeros); never with a value. */
        for (const char *q = seen; (q = strstr(q, "PASSWORD=")); q++)
            ASSERT(q[9] == '\n' || q[9] == 0);
        ASSERT(!strstr(seen, "ETCDCTL_USER=root:"));
        free(seen);
        free(err);
    }
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- TLS */

TEST(insecure_skip_tls_verify_connects_with_a_loud_warning)
{
    eh_opts eo = {.members = 1, .tls = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    char *out = NULL, *err = NULL;
    const char *base[] = {"leader",        "x",        "--endpoints",
                          eh_endpoints(c), "--cacert", eh_wrong_cacert(c),
                          "--cert",        eh_cert(c), "--key",
                          eh_key(c),       NULL};
    ASSERT_EQ(1, tool(&out, &err, base));
    ASSERT_CONTAINS(err, "not trusted");
    free(out);
    free(err);
    const char *skip[] = {"leader",
                          "x",
                          "--endpoints",
                          eh_endpoints(c),
                          "--cacert",
                          eh_wrong_cacert(c),
                          "--cert",
                          eh_cert(c),
                          "--key",
                          eh_key(c),
                          "--insecure-skip-tls-verify",
                          NULL};
    ASSERT_EQ(4, tool(&out, &err, skip));
    ASSERT_CONTAINS(err,
                    "warn elector: --insecure-skip-tls-verify: etcd's certificate is not "
                    "checked");
    free(out);
    free(err);
    /* The same from etcdctl's variables, TLS files included. */
    char ca[600], cert[600], key[600], ep[300];
    snprintf(ca, sizeof(ca), "ETCDCTL_CACERT=%s", eh_wrong_cacert(c));
    snprintf(cert, sizeof(cert), "ETCDCTL_CERT=%s", eh_cert(c));
    snprintf(key, sizeof(key), "ETCDCTL_KEY=%s", eh_key(c));
    snprintf(ep, sizeof(ep), "ETCDCTL_ENDPOINTS=%s", eh_endpoints(c));
    const char *env[] = {ca,       cert, key, ep, "ETCDCTL_INSECURE_SKIP_TLS_VERIFY=true",
                         PATH_ENV, NULL};
    ASSERT_EQ(4, tool_with_env(&out, &err, env, (const char *[]){"leader", "x", NULL}));
    ASSERT_CONTAINS(err, "--insecure-skip-tls-verify");
    free(out);
    free(err);
    snprintf(ca, sizeof(ca), "ETCDCTL_CACERT=%s", eh_cacert(c));
    const char *env2[] = {ca, cert, key, ep, PATH_ENV, NULL};
    ASSERT_EQ(4, tool_with_env(&out, &err, env2, (const char *[]){"leader", "x", NULL}));
    ASSERT(!strstr(err, "warn"));
    free(out);
    free(err);
    eh_stop(c);
}

/* ---------------------------------------------------------------- lock */

static pid_t ctl_spawn(eh_cluster *c, eu_child *ch, const char *const args[])
{
    const char *argv[20] = {"etcdctl", "--endpoints", eh_endpoints(c)};
    int n = 3;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int fd;
    pid_t pid = tl_spawn(argv, &fd);
    ASSERT_GT(pid, 0);
    eu_child_wrap(ch, pid, fd);
    return pid;
}

TEST(lock_prints_its_key_holds_it_and_etcdctl_lock_waits)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child a, ctl;
    char key[256], line[256];
    tool_bg(&a, (const char *[]){"--endpoints", eps, "lock", "L", NULL});
    ASSERT_OK(eu_child_expect(&a, "L/", key, sizeof(key), 10000));
    ASSERT_OK(eu_child_expect(&a, "", line, sizeof(line), 2000));
    ASSERT_STREQ("", line); /* etcdctl's output: the key and the (empty) value */
    /* The key is etcd's Mutex's: NAME/<lease in hex>, an empty value. */
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "--prefix", "L/", NULL));
    char want[300];
    snprintf(want, sizeof(want), "%s\n\n", key);
    ASSERT_STREQ(want, out);
    free(out);
    pid_t p = ctl_spawn(c, &ctl, (const char *[]){"lock", "L", NULL});
    ASSERT_EQ(-1, eu_child_expect(&ctl, "L/", line, sizeof(line), 1500)); /* waits */
    kill(a.pid, SIGINT);
    ASSERT_EQ(0, tool_wait(&a, 10));
    ASSERT_OK(
        eu_child_expect(&ctl, "L/", line, sizeof(line), 5000)); /* released: its turn */
    ASSERT(strcmp(line, key) != 0);
    tl_reap(p, SIGINT, 5);
    eh_stop(c);
}

TEST(lock_runs_the_command_with_etcdctls_variables_after_etcdctl_releases)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child ctl, a;
    char ckey[256], line[512];
    pid_t p = ctl_spawn(c, &ctl, (const char *[]){"lock", "L2", NULL});
    ASSERT_OK(eu_child_expect(&ctl, "L2/", ckey, sizeof(ckey), 10000));
    tool_bg(&a,
            (const char *[]){"--endpoints", eps, "lock", "L2", "sh", "-c",
                             "echo \"got $ETCD_LOCK_KEY $ETCD_LOCK_REV $ELECTOR_TOKEN "
                             "$ELECTOR_KEY\"; exit 7",
                             NULL});
    ASSERT_EQ(
        -1, eu_child_expect(&a, "got", line, sizeof(line), 1500)); /* etcdctl holds it */
    kill(p, SIGINT);
    ASSERT_OK(eu_child_expect(&a, "got", line, sizeof(line), 5000));
    char k[256], k2[256];
    long long rev = 0, token = 0;
    ASSERT_EQ(4, sscanf(line, "got %255s %lld %lld %255s", k, &rev, &token, k2));
    ASSERT_EQ(0, strncmp(k, "L2/", 3));
    ASSERT_STREQ(k, k2);
    ASSERT_EQ(rev, token);
    ASSERT_GT(rev, 0);
    ASSERT_EQ(7, tool_wait(&a, 10)); /* the command's status */
    tl_reap(p, SIGKILL, 5);
    /* Released after the command: the lock is free. */
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "--prefix", "L2/", "--keys-only", NULL));
    ASSERT_STREQ("", out);
    free(out);
    /* 127 not found, 126 not executable, as shells do. */
    ASSERT_EQ(127, tool(NULL, NULL,
                        (const char *[]){"--endpoints", eps, "lock", "L2", "--",
                                         "/nonexistent/cmd", NULL}));
    char *dir = tl_tmpdir("noexec"), path[512];
    snprintf(path, sizeof(path), "%s/script", dir);
    FILE *f = fopen(path, "w");
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);
    ASSERT_EQ(126, tool(NULL, NULL,
                        (const char *[]){"--endpoints", eps, "lock", "L2", path, NULL}));
    free(dir);
    eh_stop(c);
}

TEST(etcdctl_lock_command_waits_for_an_elector_lock)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child a, ctl;
    char key[256], line[256];
    tool_bg(&a, (const char *[]){"--endpoints", eps, "-w", "json", "lock", "L3", NULL});
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"elected\"", line, sizeof(line), 10000));
    ASSERT_CONTAINS(line, "\"key\":\"L3/");
    ASSERT_CONTAINS(line, "\"value\":\"\",\"value_base64\":\"\"");
    pid_t p = ctl_spawn(c, &ctl,
                        (const char *[]){"lock", "L3", "--", "sh", "-c",
                                         "echo \"ctl $ETCD_LOCK_KEY\"", NULL});
    ASSERT_EQ(-1, eu_child_expect(&ctl, "ctl", key, sizeof(key), 1500));
    kill(a.pid, SIGTERM);
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"resigned\"", line, sizeof(line), 5000));
    ASSERT_EQ(0, tool_wait(&a, 10));
    ASSERT_OK(eu_child_expect(&ctl, "ctl L3/", key, sizeof(key), 5000));
    tl_reap(p, SIGKILL, 5);
    eh_stop(c);
}

TEST(lock_command_is_stopped_when_the_lock_is_lost)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("locklost");
    char script[1024];
    stoppable(script, sizeof(script), dir);
    char errp[600];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    eu_child b;
    tool_bg_opts bo = {.err_path = errp, .in_fd = -1};
    tool_bg_ex(&b, &bo,
               (const char *[]){"--endpoints", eh_endpoints(c), "lock", "LL", "--", "sh",
                                "-c", script, NULL});
    pid_t cmd = read_pid(dir);
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "--prefix", "--keys-only", "LL/", NULL));
    out[strcspn(out, "\n")] = 0;
    ASSERT_OK(eh_etcdctl(c, NULL, "del", out, NULL));
    free(out);
    ASSERT_EQ(3, tool_wait(&b, 10));
    char term[600];
    snprintf(term, sizeof(term), "%s/term", dir);
    /* Deleted from outside: SIGKILL at once, no SIGTERM (--grace-on-loss would
     * ask politely first). */
    ASSERT(!file_exists(term));
    ASSERT(!pid_alive(cmd));
    char *err = check_file(errp);
    ASSERT_CONTAINS(err, "error elector: lock lost: ");
    ASSERT_CONTAINS(err, "our key is gone: killing");
    free(err);
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- the prefix rule */

/* Election `a` is the prefix a/: a candidate of `a/b` (key a/b/<lease>) is in it
 * too and, being older, leads it. etcd's Go client and etcdctl elect do the
 * same; the man page says so. */
TEST(election_a_waits_behind_keys_of_election_a_slash_b)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child ab, a;
    char key[256], line[1024];
    tool_bg(&ab, (const char *[]){"--endpoints", eps, "campaign", "a/b", "inner", NULL});
    ASSERT_OK(eu_child_expect(&ab, "a/b/", key, sizeof(key), 10000));
    tool_bg(&a, (const char *[]){"--endpoints", eps, "-w", "json", "campaign", "a",
                                 "outer", NULL});
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"waiting\"", line, sizeof(line), 10000));
    char want[300];
    snprintf(want, sizeof(want), "\"predecessor\":\"%s\"", key);
    ASSERT_CONTAINS(line, want);
    char *out = NULL;
    ASSERT_EQ(
        0, tool(&out, NULL, (const char *[]){"leader", "a", "--endpoints", eps, NULL}));
    ASSERT_CONTAINS(out, "inner");
    free(out);
    kill(ab.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&ab, 10));
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"elected\"", line, sizeof(line), 5000));
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    eh_stop(c);
}

/* A key without a lease first under NAME/ (written by hand with etcdctl):
 * `leader` exits 1 naming it (before: printed it as the leader), `observe`
 * says nobody leads and why, `campaign` says what it waits behind; deleted,
 * the candidate leads. */
TEST(a_key_without_a_lease_is_named_as_what_blocks_the_election)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "blk/state", "x", NULL));
    const char *says = "a key without a lease, blk/state, blocks election blk: no "
                       "candidate can lead until it is deleted (etcdctl del blk/state)";
    char *out = NULL, *err = NULL;
    ASSERT_EQ(
        1, tool(&out, &err, (const char *[]){"leader", "blk", "--endpoints", eps, NULL}));
    ASSERT_STREQ("", out);
    ASSERT_CONTAINS(err, says);
    free(out);
    free(err);
    eu_child obs, cand;
    char line[1024];
    tool_bg(&obs,
            (const char *[]){"--endpoints", eps, "-w", "json", "observe", "blk", NULL});
    ASSERT_OK(
        eu_child_expect(&obs, "{\"event\":\"no_leader\"", line, sizeof(line), 10000));
    tool_bg(&cand, (const char *[]){"--endpoints", eps, "-w", "json", "campaign", "blk",
                                    "v", NULL});
    ASSERT_OK(
        eu_child_expect(&cand, "{\"event\":\"waiting\"", line, sizeof(line), 10000));
    ASSERT_CONTAINS(line, "\"predecessor\":\"blk/state\"");
    ASSERT_OK(eh_etcdctl(c, NULL, "del", "blk/state", NULL));
    ASSERT_OK(eu_child_expect(&cand, "{\"event\":\"elected\"", line, sizeof(line), 5000));
    ASSERT_OK(eu_child_expect(&obs, "{\"event\":\"leader\"", line, sizeof(line), 5000));
    kill(cand.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&cand, 10));
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));
    eh_stop(c);
}
