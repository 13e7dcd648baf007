/* SPDX-License-Identifier: MIT */
/* Self-test of the checker: synthetic scenario directories, each with one known
 * flaw (or none), must yield exactly the expected counts. A checker that cannot
 * see a planted overlap proves nothing about a run that reports none. Also the
 * runner's check of the root network namespace (futil.c, fu_addr_gained): a
 * planted address must be found, loopback ones and old ones must not.
 *
 *   fault-checker-selftest     exit 0 when every case is judged as expected */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checker.h"
#include "futil.h"

static char root[256];
static int failures;

static void b64(const char *in, char *out)
{
    static const char t[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(in), o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)in[i] << 16;
        if (i + 1 < n) v |= (unsigned char)in[i + 1] << 8;
        if (i + 2 < n) v |= (unsigned char)in[i + 2];
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

static void put(FILE *h, long rev, long crev, const char *key, const char *val)
{
    char k[256], v[256];
    b64(key, k);
    b64(val, v);
    fprintf(h,
            "{\"Header\":{\"revision\":%ld},\"Events\":[{\"kv\":{\"key\":\"%s\",\"create_"
            "revision\":"
            "%ld,\"mod_revision\":%ld,\"version\":1,\"value\":\"%s\"}}],"
            "\"CompactRevision\":0,"
            "\"Canceled\":false,\"Created\":false}\n",
            rev, k, crev, rev, v);
}

static void del(FILE *h, long rev, const char *key)
{
    char k[256];
    b64(key, k);
    fprintf(
        h,
        "{\"Header\":{\"revision\":%ld},\"Events\":[{\"type\":1,\"kv\":{\"key\":\"%s\","
        "\"mod_revision\":%ld}}],\"CompactRevision\":0,\"Canceled\":false,\"Created\":"
        "false}\n",
        rev, k, rev);
}

static FILE *open_in(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) {
        perror(p);
        exit(2);
    }
    return f;
}

#define S 1000000000LL /* one second in ns; times below are in seconds */
#define T(x) ((long long)((x)*S))

/* Flaws that can be planted into the base history. */
enum {
    OK = 0,
    OVERLAP = 1,       /* cand 1 elected before cand 0's term ended */
    STALE = 2,         /* resource accepts cand 0's token while cand 1 leads */
    ORDER = 4,         /* resource accepts a lower token after a higher one */
    GUARD = 8,         /* guarded put with token 10 after its key was deleted */
    LIVENESS = 16,     /* no leader for 5 s after a heal, bound 4 s */
    NOT_LEADER = 32,   /* cand 1's predecessor key outlives cand 1's key */
    OUTSIDE = 64,      /* cand 0 writes after its term ended */
    PHANTOM = 128,     /* a txn reported ok that etcd never stored */
    NOQUORUM = 256,    /* an election inside a no-quorum window */
    RUN = 512,         /* candidates are `elector run` jobs (fault-job lines) */
    RAFTBOUND = 2048,  /* the round's heal carries its own, larger bound (6 s) */
    BUSY = 1024,       /* RUN: cand 1's job found the job lock taken (a silent
                          process of cand 0's tree was still alive) */
    TRANSITION = 4096, /* cand 0 elected twice in one term, and lost a token it
                          never had: outside the model's automaton */
};

/* cand 0's job (token 10): main, worker and escapee from 2.0; main and worker
 * end on SIGTERM at 2.95; the escapee is SIGKILLed after its last fenced write
 * at 2.98, whose reply came at 2.99: the tree acted until 2.99. */
static void job0(FILE *f, const char *E)
{
    fprintf(f, "%lld jstart 200 main 10 %s/a 150 200 150\n", T(2), E);
    fprintf(f, "%lld jstart 201 worker 10 %s/a 200 200 150\n", T(2.001), E);
    fprintf(f, "%lld jstart 202 escapee 10 %s/a 201 202 202\n", T(2.002), E);
    fprintf(f, "%lld jw 200 main 10 4 ok %lld\n", T(2.1), T(2.1001));
    fprintf(f, "%lld jterm 200 main\n%lld jend 200 main term\n", T(2.95), T(2.9501));
    fprintf(f, "%lld jterm 201 worker\n%lld jend 201 worker term\n", T(2.95), T(2.9502));
    fprintf(f, "%lld jw 202 escapee 10 6 ok %lld\n", T(2.98), T(2.99));
}

static void make_case(const char *name, int flaw, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/%s", root, name);
    mkdir(dir, 0755);
    const char *E = "fault/x/election", *K = "fault/x/resource";
    FILE *f = open_in(dir, "runner.log");
    fprintf(f,
            "%lld config scenario=%s ttl_ms=2000 bound_ms=4000 election=%s txn_key=%s "
            "history_from=10 seed=1\n",
            T(1), name, E, K);
    fprintf(f, "%lld spawn 0 100\n%lld spawn 1 101\n", T(1), T(1));
    fprintf(f, "%lld fault 1 SIGTERM leader\n%lld heal 1 %sresigning\n", T(3), T(3),
            flaw & RAFTBOUND ? "bound_ms=6000 " : "");
    if (flaw & NOQUORUM)
        fprintf(f, "%lld quiet_begin 1\n%lld quiet_end 1\n", T(3.05), T(3.5));
    double e1 = flaw & LIVENESS ? 8.2 : 3.2;
    fprintf(f, "%lld endround 1\n", T(e1 + 1));
    fprintf(f, "%lld teardown\n", T(e1 + 2));
    fclose(f);

    if (flaw & RUN) {
        /* cand 1's job: token 12 from s1 (before cand 0's tree ended: overlap) */
        double s1 = flaw & OVERLAP ? 2.9 : e1;
        f = open_in(dir, "cand-0.log");
        job0(f, E);
        fclose(f);
        f = open_in(dir, "cand-1.log");
        fprintf(f, "%lld jstart 300 main 12 %s/b 250 300 250\n", T(s1), E);
        if (flaw & BUSY)
            fprintf(f, "%lld jbusy 300 main 12\n%lld jlocked 300 main 12\n",
                    T(s1 + 0.001), T(s1 + 0.002));
        fprintf(f, "%lld jstart 301 worker 12 %s/b 300 300 250\n", T(s1 + 0.003), E);
        fprintf(f, "%lld jw 300 main 12 4 ok %lld\n", T(s1 + 0.1), T(s1 + 0.11));
        fprintf(f, "%lld jw 301 worker 12 5 ok %lld\n", T(e1 + 0.5), T(e1 + 0.51));
        fclose(f);
        f = open_in(dir, "resource.log");
        fprintf(f, "%lld A 10 1 0\n", T(2.1));
        if (flaw & STALE) fprintf(f, "%lld A 10 9 0\n", T(s1 + 0.05));
        fprintf(f, "%lld A 12 4 1\n", T(s1 + 0.1));
        fclose(f);
        goto history;
    }
    /* cand 0: token 10, term [2, 3) */
    f = open_in(dir, "cand-0.log");
    fprintf(f, "%lld start 100 0\n", T(1.1));
    fprintf(f, "%lld elected 10 %s/a\n", T(2), E);
    if (flaw & TRANSITION)
        fprintf(f, "%lld elected 10 %s/a\n%lld lost 9 %s/a -20\n", T(2.05), E, T(2.06),
                E);
    fprintf(f, "%lld rw 10 1 ok\n%lld txn 10 1 ok %lld\n", T(2.1), T(2.1), T(2.11));
    fprintf(f, "%lld resigned 10 %s/a\n", T(3), E);
    fprintf(f, "%lld notleader 10 %s/a %lld\n", T(3.0001), E, T(2.99));
    if (flaw & OUTSIDE) fprintf(f, "%lld rw 10 2 ok\n", T(3.1));
    if (flaw & PHANTOM) fprintf(f, "%lld txn 10 7 ok %lld\n", T(2.5), T(2.51));
    fclose(f);

    /* cand 1: token 12, term [e1, teardown) */
    double s1 = flaw & OVERLAP ? 2.9 : e1;
    f = open_in(dir, "cand-1.log");
    fprintf(f, "%lld start 101 1\n", T(1.1));
    fprintf(f, "%lld waiting %s/a\n", T(1.2), E);
    fprintf(f, "%lld elected 12 %s/b\n", T(s1), E);
    fprintf(f, "%lld rw 12 1 ok\n%lld txn 12 1 ok %lld\n", T(s1 + 0.1), T(s1 + 0.1),
            T(s1 + 0.11));
    fclose(f);

    f = open_in(dir, "resource.log");
    fprintf(f, "%lld A 10 1 0\n", T(2.1));
    if (flaw & STALE) fprintf(f, "%lld A 10 5 0\n", T(s1 + 0.05));
    fprintf(f, "%lld A 12 1 1\n", T(s1 + 0.1));
    if (flaw & ORDER) fprintf(f, "%lld A 10 6 0\n", T(s1 + 0.2));
    if (flaw & OUTSIDE) fprintf(f, "%lld R 10 2 0 12\n", T(3.1));
    fclose(f);

history:
    f = open_in(dir, "history.jsonl");
    char ka[64], kb[64];
    snprintf(ka, sizeof ka, "%s/a", E);
    snprintf(kb, sizeof kb, "%s/b", E);
    put(f, 10, 10, ka, "cand-0");
    put(f, 11, 11, K, "10 1");
    put(f, 12, 12, kb, "cand-1");
    if (!(flaw & NOT_LEADER)) del(f, 13, ka);
    if (flaw & GUARD) put(f, 14, 11, K, "10 3");
    put(f, 15, 11, K, "12 1");
    del(f, 16, kb);
    if (flaw & NOT_LEADER) del(f, 17, ka);
    fclose(f);
}

static void expect(const char *name, int flaw, int (*get)(const fc_result *),
                   int want_min, int want_max)
{
    char dir[512];
    make_case(name, flaw, dir, sizeof dir);
    fc_result r;
    char rp[600];
    snprintf(rp, sizeof rp, "%s/check.txt", dir);
    FILE *rep = fopen(rp, "w");
    int rc = fc_check(dir, NULL, &r, rep);
    if (rep) fclose(rep);
    int got = get(&r);
    bool ok = rc >= 0 && got >= want_min && got <= want_max;
    /* flawless parts must stay clean: only the planted flaw may count */
    int total = fc_safety(&r) + r.liveness;
    if ((flaw == OK || flaw == RUN) && total != 0) ok = false;
    printf("%-4s %-12s got %d (want %d..%d), all violations %d\n", ok ? "ok" : "FAIL",
           name, got, want_min, want_max, total);
    if (!ok) {
        failures++;
        char cmd[700];
        snprintf(cmd, sizeof cmd, "cat %s", rp);
        if (system(cmd) != 0) fprintf(stderr, "cannot show %s\n", rp);
    }
}

static int g_all(const fc_result *r)
{
    return fc_safety(r) + r->liveness;
}
static int g_overlap(const fc_result *r)
{
    return r->overlaps;
}
static int g_stale(const fc_result *r)
{
    return r->stale_accepted;
}
static int g_guard(const fc_result *r)
{
    return r->txn_guard + r->txn_order;
}
static int g_live(const fc_result *r)
{
    return r->liveness;
}
static int g_nl(const fc_result *r)
{
    return r->not_etcd_leader;
}
static int g_out(const fc_result *r)
{
    return r->write_outside;
}
static int g_phantom(const fc_result *r)
{
    return r->txn_phantom;
}
static int g_noq(const fc_result *r)
{
    return r->no_quorum_elections;
}
static int g_trans(const fc_result *r)
{
    return r->transitions;
}
static int g_fail(const fc_result *r)
{
    return r->nfailover;
}

/* The runner's rule for the root network namespace (fu_addr_gained): only
 * addresses that are new and outside 127.0.0.0/8 and ::1 count. */
static void expect_gained(const char *name, const char *before, const char *now, int want,
                          const char *want_text)
{
    char out[256];
    int n = fu_addr_gained(before, now, out, sizeof out);
    if (n != want || strcmp(out, want_text) != 0) {
        fprintf(stderr, "FAIL %s: %d gained (%s), expected %d (%s)\n", name, n, out, want,
                want_text);
        failures++;
    } else {
        printf("ok   %-15s %d address%s gained\n", name, n, n == 1 ? "" : "es");
    }
}

static void root_namespace_rule(void)
{
    const char *base = "lo 127.0.0.1\neth0 192.0.2.2\nlo ::1\neth0 fe80::1\n";
    expect_gained("addr-same", base, base, 0, "");
    expect_gained("addr-loopback", base, "lo 127.0.0.1\nlo 127.9.9.9\nlo ::1\n", 0, "");
    expect_gained("addr-private", base,
                  "lo 127.0.0.1\neth0 192.0.2.2\nelfh1 10.199.21.1\nlo ::1\n", 1,
                  "elfh1 10.199.21.1");
    expect_gained("addr-link-local", base, "eth0 192.0.2.2\nelfh1 fe80::2\n", 1,
                  "elfh1 fe80::2");
    expect_gained("addr-moved", base, "eth1 192.0.2.2\n", 1, "eth1 192.0.2.2");
    expect_gained("addr-two", "", "a 10.0.0.1\nb ::2\nlo 127.0.0.1", 2,
                  "a 10.0.0.1; b ::2");
    /* the snapshot itself: loopback is there, and nothing is gained against itself */
    char *snap = fu_addr_snapshot();
    if (!snap || !strstr(snap, " 127.0.0.1\n")) {
        fprintf(stderr, "FAIL addr-snapshot: %s\n", snap ? snap : "(none)");
        failures++;
    } else {
        expect_gained("addr-snapshot", snap, snap, 0, "");
    }
    free(snap);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/fault-checker-selftest-%d", (int)getpid());
    mkdir(root, 0755);
    expect("clean", OK, g_all, 0, 0);
    expect("clean-rounds", OK, g_fail, 1, 1);
    expect("overlap", OVERLAP, g_overlap, 1, 1);
    expect("stale", STALE, g_stale, 1, 1);
    expect("order", ORDER, g_stale, 1, 2);
    expect("guard", GUARD, g_guard, 1, 2);
    expect("liveness", LIVENESS, g_live, 1, 1);
    expect("round-bound", LIVENESS | RAFTBOUND, g_live, 0, 0);
    expect("not-leader", NOT_LEADER, g_nl, 1, 1);
    expect("outside", OUTSIDE, g_out, 1, 1);
    expect("phantom", PHANTOM, g_phantom, 1, 1);
    expect("no-quorum", NOQUORUM, g_noq, 1, 1);
    expect("transition", TRANSITION, g_trans, 2, 2);
    /* `elector run` candidates: the job trees' activity is what is judged */
    expect("run-clean", RUN, g_all, 0, 0);
    expect("run-rounds", RUN, g_fail, 1, 1);
    expect("run-overlap", RUN | OVERLAP, g_overlap, 1, 1);
    expect("run-busy", RUN | BUSY, g_overlap, 1, 1);
    expect("run-stale", RUN | STALE, g_stale, 1, 1);
    root_namespace_rule();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (failures == 0 && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
    printf("%s\n", failures ? "checker self-test FAILED" : "checker self-test passed");
    return failures ? 1 : 0;
}
