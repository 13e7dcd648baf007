/* SPDX-License-Identifier: MIT */
/* The command's process tree: finding it (/proc, the cgroup) and ending it. */
#define _GNU_SOURCE /* pipe2, close_range */
#include "supervise/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elector/etcd.h" /* elector_now_ns(): the deadline clock */
#include "text/log.h"

/* ---------------------------------------------------------------- the tree */

/* Every process of the system with its parent, from /proc. */
size_t sv_list_procs(struct proc **out)
{
    *out = NULL;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    struct proc *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0) continue;
        buf[k] = 0;
        char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        char state;
        long ppid;
        if (!p || sscanf(p + 1, " %c %ld", &state, &ppid) != 2) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            struct proc *q = realloc(v, nc * sizeof(*v));
            if (!q) break;
            v = q;
            cap = nc;
        }
        v[n++] = (struct proc){(pid_t)pid, (pid_t)ppid};
    }
    closedir(d);
    *out = v;
    return n;
}

/* Children elector had before it started any guard (a shell's `2> >(logger)`
 * makes the logger elector's child): never ours to kill. */
pid_t sv_keep[16];
size_t sv_nkeep;

static bool kept(pid_t pid)
{
    for (size_t i = 0; i < sv_nkeep; i++)
        if (sv_keep[i] == pid) return true;
    return false;
}

/* Sends sig to every descendant of root but the kept ones and theirs; returns
 * how many there were (zombies included). */
size_t sv_signal_descendants(pid_t root, int sig)
{
    struct proc *v;
    size_t n = sv_list_procs(&v), found = 0;
    bool changed = true;
    for (size_t i = 0; i < n; i++)
        if (v[i].ppid == root && kept(v[i].pid)) v[i].ppid = 0;
    /* Mark by setting ppid to root: a fixpoint over the parent links. */
    while (changed) {
        changed = false;
        for (size_t i = 0; i < n; i++) {
            if (v[i].pid == root || v[i].ppid == root || v[i].ppid == 0) continue;
            for (size_t j = 0; j < n; j++) {
                if (v[j].pid == v[i].ppid && v[j].ppid == root && v[j].pid != root) {
                    v[i].ppid = root;
                    changed = true;
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i].ppid == root && v[i].pid != root) {
            kill(v[i].pid, sig);
            found++;
        }
    }
    free(v);
    return found;
}

int sv_write_str(const char *dir, const char *file, const char *s)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, s, strlen(s));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* Kills every member of a cgroup: cgroup.kill (Linux 5.14+), else one by one. */
void sv_cgroup_kill(const char *cg)
{
    if (!*cg || sv_write_str(cg, "cgroup.kill", "1") == 0) return;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
    FILE *f = fopen(path, "re");
    if (!f) return;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        kill((pid_t)pid, SIGKILL);
    fclose(f);
}

/* The cgroup v2 directory this process is in ("" if there is no cgroup2 mount). */
void sv_cgroup_base(char *out, size_t cap)
{
    out[0] = 0;
    char line[PATH_MAX + 256], own[sizeof(line)] = "", mnt[PATH_MAX] = "";
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "0::", 3)) snprintf(own, sizeof(own), "%s", line + 3);
    fclose(f);
    own[strcspn(own, "\n")] = 0;
    if (!*own) return;
    if (!(f = fopen("/proc/self/mountinfo", "re"))) return;
    while (fgets(line, sizeof(line), f)) {
        /* id parent maj:min root mountpoint opts... - fstype source superopts */
        char *sep = strstr(line, " - cgroup2 ");
        char root[PATH_MAX], mp[PATH_MAX];
        if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mp) != 2) continue;
        if (strcmp(root, "/")) continue; /* a bind mount of a subtree */
        snprintf(mnt, sizeof(mnt), "%s", mp);
        break;
    }
    fclose(f);
    size_t ml = strlen(mnt), ol = strcmp(own, "/") ? strlen(own) : 0;
    if (!ml || ml + ol + 32 >= cap) return; /* room for "/elector-run.PID" */
    memcpy(out, mnt, ml);
    memcpy(out + ml, own, ol);
    out[ml + ol] = 0;
}

/* Kills the tree under root until nothing is left below it (all reaped),
 * calling reaped(pid, status) for each; gives up after max_ms (a process in
 * uninterruptible sleep). Returns 0 when the tree is gone. */
int sv_kill_tree(pid_t root, const char *cg, int sfd, int64_t max_ms,
                 void (*reaped)(void *, pid_t, int), void *ud, int (*infd)(void *),
                 void (*input)(void *))
{
    int64_t end = elector_now_ns() + max_ms * 1000000;
    for (;;) {
        sv_cgroup_kill(cg);
        size_t left = sv_signal_descendants(root, SIGKILL);
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0)
            if (reaped) reaped(ud, p, st);
        if (left == 0) return 0; /* zombies counted last round are reaped now */
        if (max_ms >= 0 && elector_now_ns() >= end) return -1;
        /* The guard answers elector's heartbeat while it waits (a large
         * address space takes a while to tear down). */
        struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN},
                               {.fd = infd ? infd(ud) : -1, .events = POLLIN}};
        if (poll(pf, 2, 10) > 0) {
            struct signalfd_siginfo si;
            if (pf[0].revents && read(sfd, &si, sizeof(si)) < 0) { /* drained; retried */
            }
            if (pf[1].revents && input) input(ud);
        }
    }
}

/* Removes the cgroups of guards that died without cleaning up (SIGKILLed with
 * elector): rmdir succeeds only on an empty cgroup, so a live tree stays. */
void sv_cgroup_sweep_stale(const char *base)
{
    DIR *d = *base ? opendir(base) : NULL;
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid;
        char *end;
        if (strncmp(de->d_name, "elector-run.", 12)) continue;
        pid = strtol(de->d_name + 12, &end, 10);
        if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
        rmdir(path);
    }
    closedir(d);
}

void sv_cgroup_remove(const char *cg)
{
    for (int i = 0; *cg && i < 100 && rmdir(cg) && errno == EBUSY; i++)
        usleep(2000);
}

/* ---------------------------------------------------------------- shared */

void tool_cgroup_base(char *out, size_t cap)
{
    sv_cgroup_base(out, cap);
}

void tool_cgroup_kill(const char *cg)
{
    sv_cgroup_kill(cg);
}

void tool_cgroup_remove(const char *cg)
{
    sv_cgroup_remove(cg);
}

int tool_kill_tree(const char *cg, int64_t max_ms)
{
    return sv_kill_tree(getpid(), cg, -1, max_ms, NULL, NULL, NULL, NULL);
}
