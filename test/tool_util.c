/* SPDX-License-Identifier: MIT */
/* Helpers shared by the tests that run the elector tool as a process. */
#define _GNU_SOURCE
#include "tool_util.h"
#include "json_check.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef ELECTOR_BIN
#error "ELECTOR_BIN must name the built elector binary"
#endif

eh_cluster *start1(void)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

/* Runs elector to completion; returns its exit status, output in out and err. */
int tool(char **out, char **err, const char *const args[])
{
    const char *argv[32] = {ELECTOR_BIN};
    int n = 1;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char *e = NULL;
    tl_run_opts o = {.err = &e, .timeout_s = 30};
    int rc = tl_run_ex(out, argv, &o);
    if (out) json_check_text(*out);
    json_check_text(e);
    if (err)
        *err = e;
    else {
        if (e && *e) fputs(e, stderr);
        free(e);
    }
    return rc;
}

static void check_line(const char *line)
{
    json_check_text(line);
}

/* Starts elector in the background; its stdout lines are read with
 * eu_child_expect. */
void tool_bg(eu_child *ch, const char *const args[])
{
    const char *argv[32] = {ELECTOR_BIN};
    int n = 1;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int fd;
    pid_t pid = tl_spawn(argv, &fd);
    ASSERT_GT(pid, 0);
    eu_child_wrap(ch, pid, fd);
    ch->on_line = check_line;
}

/* Waits for a background elector to exit; returns its exit status. */
int tool_wait(eu_child *ch, double timeout_s)
{
    double end = tl_now() + timeout_s;
    int st;
    while (waitpid(ch->pid, &st, WNOHANG) == 0) {
        if (tl_now() > end) return -1;
        tl_msleep(20);
    }
    /* What it wrote and nobody read yet is checked too. */
    if (ch->on_line) {
        ssize_t n;
        fcntl(ch->fd, F_SETFL, O_NONBLOCK); /* a descendant may hold the pipe open */
        while (ch->len < sizeof(ch->buf) - 1 &&
               (n = read(ch->fd, ch->buf + ch->len, sizeof(ch->buf) - 1 - ch->len)) > 0)
            ch->len += (size_t)n;
        ch->buf[ch->len] = 0;
        json_check_text(ch->buf);
        ch->len = 0;
    }
    close(ch->fd);
    ch->pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int tool_with_env(char **out, char **err, const char *const envp[],
                  const char *const args[])
{
    const char *argv[40] = {ELECTOR_BIN};
    int n = 1;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char *e = NULL;
    tl_run_opts o = {.err = &e, .timeout_s = 30, .envp = envp};
    int rc = tl_run_ex(out, argv, &o);
    if (out) json_check_text(*out);
    json_check_text(e);
    if (err)
        *err = e;
    else {
        if (e && *e) fputs(e, stderr);
        free(e);
    }
    return rc;
}

void tool_bg_ex(eu_child *ch, const tool_bg_opts *o, const char *const args[])
{
    const char *argv[40] = {ELECTOR_BIN};
    int n = 1;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int p[2];
    ASSERT_OK(pipe2(p, O_CLOEXEC));
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int in = o->in_fd >= 0 ? o->in_fd : open("/dev/null", O_RDONLY);
        dup2(in, 0);
        dup2(p[1], 1);
        if (o->err_path) {
            int e = open(o->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(e, 2);
        }
        for (int i = 0; o->set && o->set[i]; i++)
            putenv((char *)o->set[i]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    eu_child_wrap(ch, pid, p[0]);
    ch->on_line = check_line;
}

char *check_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0;
    char tmp[8192];
    size_t k;
    while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        buf = realloc(buf, len + k + 1);
        memcpy(buf + len, tmp, k);
        len += k;
        buf[len] = 0;
    }
    fclose(f);
    if (!buf) buf = calloc(1, 1);
    /* Only complete lines: the writer may still be at work. */
    char *last = strrchr(buf, '\n');
    char save = last ? last[1] : buf[0];
    if (last)
        last[1] = 0;
    else
        buf[0] = 0;
    json_check_text(buf);
    if (last)
        last[1] = save;
    else
        buf[0] = save;
    return buf;
}

bool wait_contains(const char *path, const char *needle, double timeout_s)
{
    double end = tl_now() + timeout_s;
    for (;;) {
        char *s = check_file(path);
        bool yes = s && strstr(s, needle);
        free(s);
        if (yes) return true;
        if (tl_now() > end) return false;
        tl_msleep(20);
    }
}

int silent_listener(int *port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ASSERT_OK(bind(s, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(s, 16));
    ASSERT_OK(getsockname(s, (struct sockaddr *)&a, &l));
    *port = ntohs(a.sin_port);
    return s;
}

bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

bool wait_file(const char *p, double timeout_s)
{
    double end = tl_now() + timeout_s;
    while (!file_exists(p)) {
        if (tl_now() > end) return false;
        tl_msleep(20);
    }
    return true;
}

char *slurp(const char *p)
{
    FILE *f = fopen(p, "r");
    if (!f) return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

bool pid_alive(pid_t pid)
{
    return kill(pid, 0) == 0 || errno != ESRCH;
}

void stoppable(char *buf, size_t cap, const char *dir)
{
    snprintf(buf, cap,
             "trap 'echo term > %s/term; exit 0' TERM; echo $$ > %s/pid.tmp; "
             "mv %s/pid.tmp %s/pid; while :; do sleep 0.05; done",
             dir, dir, dir, dir);
}

pid_t read_pid(const char *dir)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/pid", dir);
    ASSERT(wait_file(p, 10));
    return (pid_t)atoi(slurp(p));
}
