/* SPDX-License-Identifier: MIT */
/* The leadership-history checker; see checker.h and docs/FAULTS.md.
 *
 * Terms. A candidate's term with token T starts at its "elected" line and ends at
 * the earliest of: its "lost"/"resigned" line for T (the library's own account;
 * LOST is capped at the validity deadline, also for a process that was frozen and
 * noticed late), its "notleader" sample for T (the first moment
 * elector_is_leader() said false), its death as recorded by the runner, and the
 * scenario's teardown. A term still open at a death ends at the death.
 * For an `elector run` candidate the term is its command's tree's activity (see
 * job_line()): elector's belief is not what acts; a job that found the job lock
 * held by another tree ("jbusy") is an overlap by the kernel's account.
 *
 * Safety (any count > 0 fails the run):
 *   overlaps        two terms (of different candidates) share a moment
 *   token_order     terms ordered by start must carry strictly increasing tokens
 *   token_mismatch  a term's token must be the create revision of its key in
 *                   etcd's history (history.jsonl, recorded live by etcdctl)
 *   write_outside   every fenced write ("rw") and guarded Txn a candidate sent
 *                   must lie within its own term for that token
 *   stale_accepted  a write the resource accepted must not arrive while another
 *                   candidate's term is active; the resource must never accept a
 *                   token below one it accepted before
 *   txn_order       guarded puts of the resource key in etcd's history carry
 *                   non-decreasing tokens
 *   txn_guard       ... and each was committed while the key of its token still
 *                   existed (its create revision < put revision < its deletion)
 *   unknown_token   accepted writes and guarded puts carry tokens of known terms
 *   not_etcd_leader a term's key must have outlived every key of the election
 *                   created before it (else it never had the lowest create
 *                   revision, i.e. never was the leader by etcd's own history)
 *   txn_phantom     every guarded Txn a candidate saw succeed is a put in etcd's
 *                   history with its token and sequence number
 *   transitions     each candidate's own lines follow the model's automaton
 *                   (model/election.pml, docs/MODEL.md): "elected" only while
 *                   no term of its is open, "lost"/"resigned"/"notleader" only
 *                   for a token it was elected with
 * Liveness, per round (fault, heal, endround marks of the runner): every
 * leaderless gap inside [fault, endround] lasts at most bound after
 * max(gap start, heal). failover = that length for the first gap that ends after
 * the heal (0 if leadership was back before the heal); takeover = the start of
 * the first term that began after the fault, minus the fault. A round without
 * any gap counts as "kept". A round's heal may carry its own bound ("heal R
 * bound_ms=N ...": a heal by a new etcd Raft leader, docs/FAULTS.md "Bounds").
 * runner.log "expect R ok|fail TEXT" lines are the scenario's expectations of
 * the tool; a failed one counts (expect_fail) and fails the check.
 */
#define _GNU_SOURCE
#include "checker.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "futil.h"

#define NEVER INT64_MAX
#define KEYMAX 200

#define VEC(T)                                                                           \
    struct {                                                                             \
        T *v;                                                                            \
        size_t n, cap;                                                                   \
    }
#define PUSH(vec, x)                                                                     \
    do {                                                                                 \
        if ((vec).n == (vec).cap) {                                                      \
            (vec).cap = (vec).cap ? 2 * (vec).cap : 64;                                  \
            (vec).v = realloc((vec).v, (vec).cap * sizeof *(vec).v);                     \
            if (!(vec).v) abort();                                                       \
        }                                                                                \
        (vec).v[(vec).n++] = (x);                                                        \
    } while (0)

typedef struct term {
    int cand;
    int64_t token;
    char key[KEYMAX];
    int64_t start, end;
    char how[40];      /* what ended it */
    bool job;          /* an `elector run` job's activity (fault-job), not a belief */
    int nproc, nended; /* job: processes seen (jstart), ended by themselves (jend) */
} term;

typedef struct cwrite { /* a candidate's fenced write or guarded Txn */
    int cand;
    int64_t t, token;
    long seq;
    bool txn;
    char res[24];
} cwrite;

typedef struct rwrite { /* a write as the resource saw it */
    int64_t t, token;
    long seq;
    int cand;
    bool accepted;
} rwrite;

typedef struct hev { /* an etcd history event */
    bool del;
    char key[KEYMAX];
    int64_t crev, mrev;
    char val[64];
} hev;

typedef struct creation { /* a key as etcd created it */
    char key[KEYMAX];
    int64_t crev, drev; /* drev: deletion revision, NEVER if none seen */
} creation;

typedef struct round_ {
    int r;
    int64_t tf, th, te;
    int64_t qb, qe; /* no quorum in between: nobody may be elected */
    int64_t
        bound_ms; /* this round's liveness bound (heal ... bound_ms=N), 0: the run's */
    char desc[160];
} round_;

typedef struct ctx {
    const char *dir;
    FILE *rep;
    fc_result *r;
    int64_t t0, teardown;
    int64_t ttl_ms, bound_ms, history_from;
    char txn_key[KEYMAX], election[KEYMAX];
    VEC(term) terms;
    VEC(cwrite) cw;
    VEC(rwrite) rw;
    VEC(hev) hist;
    VEC(creation) cr;
    VEC(round_) rounds;
    VEC(int64_t) gap_lo;
    VEC(int64_t) gap_hi;
    struct {
        int id;
        int64_t t;
    } deaths[16384];
    int ndeaths;
    int64_t resource_self_stale;
} ctx;

static double rel(const ctx *c, int64_t t)
{
    return t == NEVER ? -1.0 : (double)(t - c->t0) / 1e9;
}

static void say(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(ctx *c, const char *fmt, ...)
{
    if (!c->rep) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(c->rep, fmt, ap);
    va_end(ap);
    fputc('\n', c->rep);
}

/* ---- parsing helpers --------------------------------------------------------- */

static char *next_line(char **p)
{
    if (!*p || !**p) return NULL;
    char *s = *p, *nl = strchr(s, '\n');
    if (nl) {
        *nl = '\0';
        *p = nl + 1;
    } else {
        *p = s + strlen(s);
    }
    return s;
}

static const char *kv_str(const char *line, const char *name, char *out, size_t cap)
{
    /* name=value, value up to the next space */
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", name);
    const char *p = strstr(line, pat);
    out[0] = '\0';
    if (!p) return NULL;
    p += strlen(pat);
    size_t n = strcspn(p, " ");
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

static int64_t kv_num(const char *line, const char *name, int64_t dflt)
{
    char buf[32];
    return kv_str(line, name, buf, sizeof buf) ? strtoll(buf, NULL, 10) : dflt;
}

/* ---- runner.log ---------------------------------------------------------------- */

static round_ *round_get(ctx *c, int r)
{
    for (size_t i = 0; i < c->rounds.n; i++)
        if (c->rounds.v[i].r == r) return &c->rounds.v[i];
    round_ nr = {.r = r, .tf = 0, .th = 0, .te = 0};
    PUSH(c->rounds, nr);
    return &c->rounds.v[c->rounds.n - 1];
}

static int read_runner(ctx *c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/runner.log", c->dir);
    char *buf = fu_read_file(path, NULL), *p = buf, *line;
    if (!buf) return -1;
    while ((line = next_line(&p))) {
        long long t;
        char word[32];
        int off = 0;
        if (sscanf(line, "%lld %31s %n", &t, word, &off) < 2) continue;
        const char *rest = line + off;
        if (!strcmp(word, "config")) {
            c->t0 = t;
            char tmp[KEYMAX];
            if (kv_str(line, "scenario", tmp, sizeof tmp))
                snprintf(c->r->scenario, sizeof c->r->scenario, "%.63s", tmp);
            c->ttl_ms = kv_num(line, "ttl_ms", 2000);
            c->bound_ms = kv_num(line, "bound_ms", c->ttl_ms + 2000);
            c->history_from = kv_num(line, "history_from", 0);
            kv_str(line, "txn_key", c->txn_key, sizeof c->txn_key);
            kv_str(line, "election", c->election, sizeof c->election);
        } else if (!strcmp(word, "death")) {
            int id;
            if (sscanf(rest, "%d", &id) == 1 && c->ndeaths < 16384) {
                c->deaths[c->ndeaths].id = id;
                c->deaths[c->ndeaths++].t = t;
            }
        } else if (!strcmp(word, "fault") || !strcmp(word, "heal") ||
                   !strcmp(word, "endround")) {
            int r, n = 0;
            if (sscanf(rest, "%d %n", &r, &n) < 1) continue;
            round_ *rd = round_get(c, r);
            if (word[0] == 'f') {
                if (!rd->tf) rd->tf = t;
                snprintf(rd->desc, sizeof rd->desc, "%s", rest + n);
            } else if (word[0] == 'h') {
                rd->th = t;
                rd->bound_ms = kv_num(line, "bound_ms", 0);
            } else {
                rd->te = t;
            }
        } else if (!strcmp(word, "teardown")) {
            c->teardown = t;
        } else if (!strcmp(word, "quiet_begin") || !strcmp(word, "quiet_end")) {
            int r;
            if (sscanf(rest, "%d", &r) != 1) continue;
            round_ *rd = round_get(c, r);
            if (word[6] == 'b')
                rd->qb = t;
            else
                rd->qe = t;
        } else if (!strcmp(word, "expect")) {
            char res[8] = "";
            int r;
            if (sscanf(rest, "%d %7s", &r, res) != 2) continue;
            if (!strcmp(res, "ok")) {
                c->r->expect_ok++;
            } else {
                c->r->expect_fail++;
                say(c, "VIOLATION expectation: %s", line);
            }
        } else if (!strcmp(word, "stuck")) {
            c->r->liveness++;
            say(c, "VIOLATION liveness: %s", line);
        }
    }
    free(buf);
    if (!c->teardown) c->teardown = NEVER;
    return 0;
}

static int64_t death_of(const ctx *c, int id)
{
    for (int i = 0; i < c->ndeaths; i++)
        if (c->deaths[i].id == id) return c->deaths[i].t;
    return NEVER;
}

/* ---- cand-N.log ----------------------------------------------------------------- */

static term *find_term(ctx *c, int cand, int64_t token)
{
    for (size_t i = c->terms.n; i-- > 0;)
        if (c->terms.v[i].cand == cand && c->terms.v[i].token == token)
            return &c->terms.v[i];
    return NULL;
}

static void end_term(term *tm, int64_t t, const char *how)
{
    if (t < tm->end) {
        tm->end = t;
        snprintf(tm->how, sizeof tm->how, "%s", how);
    }
}

/* The job of an `elector run` candidate (fault-job's lines, see job.c). Its term
 * is its activity: from the main process's start to the last moment any process
 * of its tree is known to have acted (a line written, a fenced write's reply
 * received). A tree that is killed acts no more; a tree still alive acts every
 * ~20 ms. */
typedef struct jproc {
    int pid;
    size_t term; /* index in c->terms */
} jproc;

static term *job_term(ctx *c, int id, int64_t token)
{
    for (size_t i = c->terms.n; i-- > 0;)
        if (c->terms.v[i].job && c->terms.v[i].cand == id && c->terms.v[i].token == token)
            return &c->terms.v[i];
    return NULL;
}

static void job_touch(term *tm, int64_t t)
{
    if (t > tm->end) tm->end = t;
}

static void job_line(ctx *c, int id, int64_t t, const char *word, const char *rest,
                     jproc *procs, int *nprocs)
{
    int pid = 0;
    long long token = 0;
    char role[16] = "", key[KEYMAX] = "";
    if (!strcmp(word, "jstart")) {
        if (sscanf(rest, "%d %15s %lld %199s", &pid, role, &token, key) < 4) return;
        term *tm = job_term(c, id, token);
        if (!strcmp(role, "main")) {
            if (tm) {
                say(c, "ANOMALY cand %d: a second job main with token %lld", id, token);
            } else {
                term nt = {.cand = id, .token = token, .start = t, .end = t, .job = true};
                snprintf(nt.key, sizeof nt.key, "%s", key);
                snprintf(nt.how, sizeof nt.how, "job");
                PUSH(c->terms, nt);
                tm = &c->terms.v[c->terms.n - 1];
            }
        }
        if (!tm) {
            say(c, "ANOMALY cand %d: job process %d (%s) of token %lld without a main",
                id, pid, role, token);
            return;
        }
        tm->nproc++;
        job_touch(tm, t);
        if (*nprocs < 64) procs[(*nprocs)++] = (jproc){pid, (size_t)(tm - c->terms.v)};
        return;
    }
    if (sscanf(rest, "%d", &pid) != 1) return;
    term *tm = NULL;
    for (int i = 0; i < *nprocs; i++)
        if (procs[i].pid == pid) tm = &c->terms.v[procs[i].term];
    if (!tm) return;
    job_touch(tm, t);
    if (!strcmp(word, "jw")) {
        /* T jw PID ROLE TOKEN SEQ RES [MAX] T_DONE: acted until the reply */
        const char *sp = strrchr(rest, ' ');
        if (sp) job_touch(tm, strtoll(sp + 1, NULL, 10));
    } else if (!strcmp(word, "jend")) {
        tm->nended++;
    } else if (!strcmp(word, "jbusy")) {
        /* the kernel's account: another job's tree held the lock at our start */
        c->r->overlaps++;
        say(c,
            "VIOLATION overlap of job trees: cand %d's job (token %" PRId64
            ") started at "
            "%+.6fs while a process of another job's tree was still alive (the job lock "
            "was held)",
            id, tm->token, rel(c, tm->start));
    }
}

static void read_candidate(ctx *c, int id, const char *path)
{
    jproc procs[64];
    int nprocs = 0;
    char *buf = fu_read_file(path, NULL), *p = buf, *line;
    if (!buf) {
        c->r->errors++;
        return;
    }
    term *open = NULL;
    long rss_first = -1, rss_last = -1;
    long long last_watch = 0;
    int64_t t_start = 0, t_last = 0;
    while ((line = next_line(&p))) {
        long long t, token = 0;
        char word[24], key[KEYMAX] = "", res[24] = "";
        long seq = 0;
        int off = 0;
        if (sscanf(line, "%lld %23s %n", &t, word, &off) < 2) continue;
        const char *rest = line + off;
        if (!t_start) t_start = t;
        t_last = t;
        if (word[0] == 'j') {
            job_line(c, id, t, word, rest, procs, &nprocs);
        } else if (!strcmp(word, "elected")) {
            if (sscanf(rest, "%lld %199s", &token, key) < 1) continue;
            if (open && open->end == NEVER) {
                end_term(open, t, "elected-again");
                c->r->transitions++;
                say(c,
                    "VIOLATION cand %d: elected (token %lld) while its term %" PRId64
                    " was still open (the model's candidate goes leader -> idle first)",
                    id, token, open->token);
            }
            term tm = {.cand = id, .token = token, .start = t, .end = NEVER};
            snprintf(tm.key, sizeof tm.key, "%s", key);
            PUSH(c->terms, tm);
            open = &c->terms.v[c->terms.n - 1];
        } else if (!strcmp(word, "lost") || !strcmp(word, "resigned") ||
                   !strcmp(word, "notleader")) {
            char reason[34] = ""; /* fits in how[] after "lost:" */
            if (sscanf(rest, "%lld %199s %33s", &token, key, reason) < 1) continue;
            term *tm = find_term(c, id, token);
            if (!tm) {
                c->r->transitions++;
                say(c,
                    "VIOLATION cand %d: %s for token %lld it never was elected with (no "
                    "such transition in the model)",
                    id, word, token);
                continue;
            }
            char how[40]; /* "lost:" + reason */
            if (!strcmp(word, "lost"))
                snprintf(how, sizeof how, "lost:%s", reason);
            else
                snprintf(how, sizeof how, "%s", word);
            end_term(tm, t, how);
        } else if (!strcmp(word, "rw") || !strcmp(word, "txn")) {
            if (sscanf(rest, "%lld %ld %23s", &token, &seq, res) < 3) continue;
            cwrite w = {
                .cand = id, .t = t, .token = token, .seq = seq, .txn = word[0] == 't'};
            snprintf(w.res, sizeof w.res, "%s", res);
            PUSH(c->cw, w);
        } else if (!strcmp(word, "stats")) {
            long long tx = 0, wa = 0;
            if (sscanf(rest, "txn %lld watch %lld", &tx, &wa) == 2) last_watch = wa;
        } else if (!strcmp(word, "rss")) {
            long kb = atol(rest);
            if (rss_first < 0) rss_first = kb;
            rss_last = kb;
        }
    }
    free(buf);
    c->r->watch_requests += last_watch;
    /* A term still open ends with the process, or with the scenario. */
    int64_t d = death_of(c, id);
    for (size_t i = 0; i < c->terms.n; i++) {
        term *tm = &c->terms.v[i];
        if (tm->cand != id) continue;
        if (tm->job) {
            /* elector's death does not end its job: the job's own lines do */
            snprintf(tm->how, sizeof tm->how, "%s",
                     tm->nended >= tm->nproc ? "job:exited" : "job:killed");
            continue;
        }
        if (d != NEVER && d >= tm->start) end_term(tm, d, "death");
        if (tm->end == NEVER) end_term(tm, c->teardown, "teardown");
    }
    if (rss_first >= 0 && c->r->nrss < (int)(sizeof c->r->rss / sizeof c->r->rss[0])) {
        fc_rss *x = &c->r->rss[c->r->nrss++];
        x->id = id;
        x->first_kb = rss_first;
        x->last_kb = rss_last;
        x->lived_s = (double)(t_last - t_start) / 1e9;
    }
}

/* ---- resource.log ------------------------------------------------------------- */

static void read_resource(ctx *c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/resource.log", c->dir);
    char *buf = fu_read_file(path, NULL), *p = buf, *line;
    if (!buf) {
        c->r->errors++;
        say(c, "ERROR cannot read %s", path);
        return;
    }
    int64_t highest = 0;
    while ((line = next_line(&p))) {
        long long t, token;
        long seq;
        int cand;
        char kind[16];
        if (sscanf(line, "%lld %15s %lld %ld %d", &t, kind, &token, &seq, &cand) < 5) {
            long long st;
            if (sscanf(line, "%lld summary", &t) == 1 && strstr(line, "stale_accepted")) {
                const char *s = strstr(line, "stale_accepted ");
                st = s ? atoll(s + 15) : 0;
                if (st) c->resource_self_stale += st;
            }
            continue;
        }
        rwrite w = {
            .t = t, .token = token, .seq = seq, .cand = cand, .accepted = kind[0] == 'A'};
        if (w.accepted) {
            if (token < highest) {
                c->r->stale_accepted++;
                say(c,
                    "VIOLATION stale write accepted by the resource: cand %d token %lld "
                    "seq %ld "
                    "at %+.6fs after token %" PRId64 " was accepted",
                    cand, token, seq, rel(c, t), highest);
            }
            if (token > highest) highest = token;
            c->r->accepted_writes++;
        } else {
            c->r->fenced_rejects++;
        }
        PUSH(c->rw, w);
    }
    free(buf);
}

/* ---- history.jsonl (etcdctl watch -w json) --------------------------------------- */

static int b64val(int ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

static void b64dec(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64val((unsigned char)s[i]);
        if (v < 0) continue;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o + 1 < cap) out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
}

static void json_field_str(const char *obj, const char *end, const char *name, char *out,
                           size_t cap)
{
    char pat[40];
    snprintf(pat, sizeof pat, "\"%s\":\"", name);
    out[0] = '\0';
    const char *p = strstr(obj, pat);
    if (!p || p >= end) return;
    p += strlen(pat);
    const char *q = strchr(p, '"');
    if (!q || q > end) return;
    b64dec(p, (size_t)(q - p), out, cap);
}

static int64_t json_field_num(const char *obj, const char *end, const char *name)
{
    char pat[40];
    snprintf(pat, sizeof pat, "\"%s\":", name);
    const char *p = strstr(obj, pat);
    if (!p || p >= end) return 0;
    return strtoll(p + strlen(pat), NULL, 10);
}

static void read_history(ctx *c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/history.jsonl", c->dir);
    char *buf = fu_read_file(path, NULL), *p = buf, *line;
    if (!buf) {
        c->r->errors++;
        say(c, "ERROR cannot read %s", path);
        return;
    }
    int64_t last = c->history_from - 1;
    while ((line = next_line(&p))) {
        if (strstr(line, "\"Canceled\":true")) {
            /* Canceled without a compact revision (e.g. "no leader"): the runner
             * restarts the recorder right after the last revision it saw. */
            int64_t cr = json_field_num(line, line + strlen(line), "CompactRevision");
            if (cr <= 0) continue;
            PUSH(c->gap_lo, last + 1);
            PUSH(c->gap_hi, cr > last ? cr : last + 1);
            c->r->history_gaps++;
            say(c,
                "NOTE etcd history gap: revisions %" PRId64 "..%" PRId64
                " compacted before the recorder saw them",
                last + 1, cr);
            continue;
        }
        for (const char *q = line; (q = strstr(q, "\"kv\":{")) != NULL;) {
            bool del = q >= line + 9 && !strncmp(q - 9, "\"type\":1,", 9);
            const char *obj = q + 5, *end = strchr(obj, '}');
            if (!end) break;
            hev e = {.del = del};
            json_field_str(obj, end, "key", e.key, sizeof e.key);
            json_field_str(obj, end, "value", e.val, sizeof e.val);
            e.crev = json_field_num(obj, end, "create_revision");
            e.mrev = json_field_num(obj, end, "mod_revision");
            if (e.mrev > last) last = e.mrev;
            PUSH(c->hist, e);
            q = end;
        }
    }
    free(buf);
}

static bool rev_unknown(const ctx *c, int64_t rev)
{
    if (rev < c->history_from) return true;
    for (size_t i = 0; i < c->gap_lo.n; i++)
        if (rev >= c->gap_lo.v[i] && rev <= c->gap_hi.v[i]) return true;
    return false;
}

static creation *find_creation(ctx *c, int64_t crev)
{
    size_t lo = 0, hi = c->cr.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->cr.v[mid].crev < crev)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->cr.n && c->cr.v[lo].crev == crev ? &c->cr.v[lo] : NULL;
}

static int cmp_creation(const void *a, const void *b)
{
    int64_t x = ((const creation *)a)->crev, y = ((const creation *)b)->crev;
    return x < y ? -1 : x > y;
}

static int cmp_hev(const void *a, const void *b)
{
    int64_t x = ((const hev *)a)->mrev, y = ((const hev *)b)->mrev;
    return x < y ? -1 : x > y;
}

static void build_creations(ctx *c)
{
    qsort(c->hist.v, c->hist.n, sizeof *c->hist.v, cmp_hev);
    for (size_t i = 0; i < c->hist.n; i++) {
        hev *e = &c->hist.v[i];
        if (!strcmp(e->key, c->txn_key)) continue;
        if (!e->del && e->crev == e->mrev) {
            creation k = {.crev = e->crev, .drev = NEVER};
            snprintf(k.key, sizeof k.key, "%s", e->key);
            PUSH(c->cr, k);
        }
    }
    qsort(c->cr.v, c->cr.n, sizeof *c->cr.v, cmp_creation);
    for (size_t i = 0; i < c->hist.n; i++) {
        hev *e = &c->hist.v[i];
        if (!e->del) continue;
        creation *best = NULL;
        for (size_t k = 0; k < c->cr.n; k++)
            if (c->cr.v[k].crev < e->mrev && !strcmp(c->cr.v[k].key, e->key))
                best = &c->cr.v[k];
        if (best && best->drev == NEVER) best->drev = e->mrev;
    }
}

/* ---- checks ------------------------------------------------------------------------ */

static int cmp_term(const void *a, const void *b)
{
    const term *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->token < y->token ? -1 : x->token > y->token;
}

static void drop_after_teardown(ctx *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->terms.n; i++) {
        term *tm = &c->terms.v[i];
        if (tm->start >= c->teardown) continue;
        if (tm->end > c->teardown) end_term(tm, c->teardown, "teardown");
        c->terms.v[k++] = *tm;
    }
    c->terms.n = k;
    qsort(c->terms.v, c->terms.n, sizeof *c->terms.v, cmp_term);
}

static void check_terms(ctx *c)
{
    fc_result *r = c->r;
    r->intervals = (int)c->terms.n;
    for (size_t i = 0; i < c->terms.n; i++) {
        term *a = &c->terms.v[i];
        if (!strncmp(a->how, "lost", 4)) r->losses++;
        for (size_t j = i + 1; j < c->terms.n; j++) {
            term *b = &c->terms.v[j];
            if (b->start >= a->end) continue;
            if (b->cand == a->cand && b->token == a->token) continue;
            r->overlaps++;
            say(c,
                "VIOLATION overlap: cand %d token %" PRId64
                " [%+.6fs, %+.6fs) ended by %s "
                "and cand %d token %" PRId64
                " [%+.6fs, %+.6fs) ended by %s overlap %.3f ms",
                a->cand, a->token, rel(c, a->start), rel(c, a->end), a->how, b->cand,
                b->token, rel(c, b->start), rel(c, b->end), b->how,
                (double)((a->end < b->end ? a->end : b->end) - b->start) / 1e6);
        }
        if (i > 0 && a->token <= c->terms.v[i - 1].token) {
            r->token_order++;
            say(c,
                "VIOLATION token order: cand %d elected at %+.6fs with token %" PRId64
                " after cand %d's token %" PRId64,
                a->cand, rel(c, a->start), a->token, c->terms.v[i - 1].cand,
                c->terms.v[i - 1].token);
        }
        creation *k = find_creation(c, a->token);
        if (k && !strcmp(k->key, a->key)) continue;
        if (!k && rev_unknown(c, a->token)) {
            r->token_unverified++;
            say(c, "NOTE token %" PRId64 " of cand %d not verifiable (history gap)",
                a->token, a->cand);
            continue;
        }
        r->token_mismatch++;
        say(c,
            "VIOLATION token %" PRId64 " of cand %d (key %s) is not the create revision "
            "of that key in etcd's history (%s)",
            a->token, a->cand, a->key, k ? k->key : "no key created at that revision");
    }
}

static term *term_of_token(ctx *c, int64_t token)
{
    for (size_t i = 0; i < c->terms.n; i++)
        if (c->terms.v[i].token == token) return &c->terms.v[i];
    return NULL;
}

static term *other_active(ctx *c, int64_t t, int64_t token)
{
    for (size_t i = 0; i < c->terms.n; i++) {
        term *tm = &c->terms.v[i];
        if (tm->token != token && tm->start <= t && t < tm->end) return tm;
    }
    return NULL;
}

static void check_writes(ctx *c)
{
    fc_result *r = c->r;
    for (size_t i = 0; i < c->cw.n; i++) {
        cwrite *w = &c->cw.v[i];
        if (w->t >= c->teardown) continue;
        /* A Txn that guarded_txn refused locally (not leading) was never sent. */
        if (w->txn && !strncmp(w->res, "refused", 7)) continue;
        if (!w->txn && !strcmp(w->res, "err")) continue;
        term *tm = find_term(c, w->cand, w->token);
        if (tm && w->t >= tm->start && w->t <= tm->end) continue;
        r->write_outside++;
        if (tm)
            say(c,
                "VIOLATION cand %d sent %s token %" PRId64
                " seq %ld at %+.6fs outside its "
                "term [%+.6fs, %+.6fs) (ended by %s)",
                w->cand, w->txn ? "a guarded txn" : "a fenced write", w->token, w->seq,
                rel(c, w->t), rel(c, tm->start), rel(c, tm->end), tm->how);
        else
            say(c,
                "VIOLATION cand %d sent a write with token %" PRId64
                " it never was elected "
                "with (seq %ld at %+.6fs)",
                w->cand, w->token, w->seq, rel(c, w->t));
    }
    for (size_t i = 0; i < c->rw.n; i++) {
        rwrite *w = &c->rw.v[i];
        if (!w->accepted || w->t >= c->teardown) continue;
        term *tm = term_of_token(c, w->token);
        if (!tm) {
            r->unknown_token++;
            say(c,
                "VIOLATION resource accepted token %" PRId64
                " (cand %d seq %ld at %+.6fs) "
                "that no term had",
                w->token, w->cand, w->seq, rel(c, w->t));
            continue;
        }
        if (w->t >= tm->start && w->t <= tm->end) continue;
        term *o = other_active(c, w->t, w->token);
        if (o) {
            r->stale_accepted++;
            say(c,
                "VIOLATION stale write accepted: cand %d token %" PRId64
                " seq %ld arrived at "
                "%+.6fs, its term ended at %+.6fs (%s), while cand %d leads with token "
                "%" PRId64 " since %+.6fs",
                w->cand, w->token, w->seq, rel(c, w->t), rel(c, tm->end), tm->how,
                o->cand, o->token, rel(c, o->start));
        } else {
            r->late_writes++;
            say(c,
                "NOTE late write: cand %d token %" PRId64
                " seq %ld arrived %.3f ms after its "
                "term ended (%s); nobody else led then",
                w->cand, w->token, w->seq, (double)(w->t - tm->end) / 1e6, tm->how);
        }
    }
}

static void check_txn_history(ctx *c)
{
    fc_result *r = c->r;
    int64_t prev = 0, prev_rev = 0;
    for (size_t i = 0; i < c->hist.n; i++) {
        hev *e = &c->hist.v[i];
        if (e->del || strcmp(e->key, c->txn_key) != 0) continue;
        long long token = 0, seq = 0;
        sscanf(e->val, "%lld %lld", &token, &seq);
        r->txn_puts++;
        if (token < prev) {
            r->txn_order++;
            say(c,
                "VIOLATION guarded put at revision %" PRId64 " carries token %lld after "
                "token %" PRId64 " at revision %" PRId64,
                e->mrev, token, prev, prev_rev);
        }
        if (token > prev) {
            prev = token;
            prev_rev = e->mrev;
        }
        creation *k = find_creation(c, token);
        if (!k) {
            if (rev_unknown(c, token)) continue;
            r->unknown_token++;
            say(c,
                "VIOLATION guarded put at revision %" PRId64
                " with token %lld: no key was "
                "created at that revision",
                e->mrev, token);
            continue;
        }
        if (e->mrev > k->crev && e->mrev < k->drev) continue;
        r->txn_guard++;
        say(c,
            "VIOLATION guarded put at revision %" PRId64
            " with token %lld committed while "
            "its key %s did not exist (created %" PRId64 ", deleted %" PRId64 ")",
            e->mrev, token, k->key, k->crev, k->drev);
    }
}

/* By etcd's history alone: the key of each term outlived its predecessors. */
static void check_etcd_leader(ctx *c)
{
    fc_result *r = c->r;
    char pfx[KEYMAX + 2];
    snprintf(pfx, sizeof pfx, "%s/", c->election);
    size_t pl = strlen(pfx);
    for (size_t i = 0; i < c->terms.n; i++) {
        term *tm = &c->terms.v[i];
        creation *k = find_creation(c, tm->token);
        if (!k || strcmp(k->key, tm->key) != 0) continue; /* reported already */
        if (c->gap_lo.n) break; /* a deletion may be missing: inconclusive */
        for (size_t j = 0; j < c->cr.n && c->cr.v[j].crev < k->crev; j++) {
            creation *p = &c->cr.v[j];
            if (strncmp(p->key, pfx, pl) != 0) continue;
            if (p->drev < k->drev) continue;
            if (p->drev == NEVER && k->drev == NEVER)
                continue; /* both outlive the history */
            r->not_etcd_leader++;
            say(c,
                "VIOLATION cand %d led with token %" PRId64
                " (key %s) but key %s, created "
                "before it at revision %" PRId64 ", was deleted only at %s%" PRId64
                " (ours at %" PRId64 "): we never had the lowest create revision",
                tm->cand, tm->token, tm->key, p->key, p->crev,
                p->drev == NEVER ? "never " : "", p->drev == NEVER ? 0 : p->drev,
                k->drev);
            break;
        }
    }
}

typedef struct tsq {
    int64_t token;
    long seq;
} tsq;

static int cmp_tsq(const void *a, const void *b)
{
    const tsq *x = a, *y = b;
    if (x->token != y->token) return x->token < y->token ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every Txn a candidate saw succeed is in etcd's history. */
static void check_txn_phantom(ctx *c)
{
    fc_result *r = c->r;
    VEC(tsq) puts = {0};
    int64_t first_rev = NEVER;
    for (size_t i = 0; i < c->hist.n; i++) {
        hev *e = &c->hist.v[i];
        if (e->del || strcmp(e->key, c->txn_key) != 0) continue;
        long long token = 0;
        long seq = 0;
        sscanf(e->val, "%lld %ld", &token, &seq);
        tsq x = {.token = token, .seq = seq};
        PUSH(puts, x);
        if (e->mrev < first_rev) first_rev = e->mrev;
    }
    if (puts.n) qsort(puts.v, puts.n, sizeof *puts.v, cmp_tsq);
    for (size_t i = 0; i < c->cw.n; i++) {
        cwrite *w = &c->cw.v[i];
        if (!w->txn || strcmp(w->res, "ok") != 0 || w->t >= c->teardown) continue;
        tsq key = {.token = w->token, .seq = w->seq};
        if (puts.n && bsearch(&key, puts.v, puts.n, sizeof key, cmp_tsq)) continue;
        if (c->gap_lo.n) continue; /* it may be in a compacted gap */
        r->txn_phantom++;
        say(c,
            "VIOLATION cand %d's guarded txn (token %" PRId64 " seq %ld, sent at %+.6fs) "
            "reported success but etcd's history has no such put",
            w->cand, w->token, w->seq, rel(c, w->t));
    }
    free(puts.v);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentiles. */
static void pctl(const double *v, int n, double *p50, double *p99, double *max)
{
    if (n <= 0) return;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    int i50 = (n * 50 + 99) / 100 - 1, i99 = (n * 99 + 99) / 100 - 1;
    *p50 = s[i50 < 0 ? 0 : i50];
    *p99 = s[i99 < 0 ? 0 : i99];
    *max = s[n - 1];
    free(s);
}

static void check_rounds(ctx *c)
{
    fc_result *r = c->r;
    r->bound_ms = c->bound_ms;
    for (size_t k = 0; k < c->rounds.n; k++) {
        round_ *rd = &c->rounds.v[k];
        if (!rd->tf) continue;
        int64_t bound_ms = rd->bound_ms > 0 ? rd->bound_ms : c->bound_ms;
        int64_t bound = bound_ms * 1000000;
        if (!rd->th) rd->th = rd->tf;
        if (!rd->te) rd->te = c->teardown != NEVER ? c->teardown : rd->th + bound;
        r->rounds++;
        if (rd->qb && rd->qe)
            for (size_t i = 0; i < c->terms.n; i++) {
                term *tm = &c->terms.v[i];
                if (tm->start <= rd->qb || tm->start >= rd->qe) continue;
                r->no_quorum_elections++;
                say(c,
                    "VIOLATION cand %d elected (token %" PRId64
                    ") at %+.6fs while etcd had "
                    "no quorum (%+.3fs to %+.3fs)",
                    tm->cand, tm->token, rel(c, tm->start), rel(c, rd->qb),
                    rel(c, rd->qe));
            }
        /* leaderless gaps in [tf, te] */
        int64_t cur = rd->tf, first_fail = -1, takeover = -1;
        for (size_t i = 0; i < c->terms.n && takeover < 0; i++)
            if (c->terms.v[i].start > rd->tf && c->terms.v[i].start <= rd->te)
                takeover = c->terms.v[i].start - rd->tf;
        int ngaps = 0, viol = 0;
        char gaps[512] = "";
        size_t gl = 0;
        for (size_t i = 0; i <= c->terms.n; i++) {
            int64_t s = i < c->terms.n ? c->terms.v[i].start : rd->te;
            int64_t e = i < c->terms.n ? c->terms.v[i].end : rd->te;
            if (e <= cur) continue;
            if (s > rd->te) s = rd->te;
            if (s > cur) {
                int64_t lo = cur, hi = s;
                ngaps++;
                int64_t from = lo > rd->th ? lo : rd->th;
                if (hi > rd->th && first_fail < 0) first_fail = hi - from;
                if (hi - from > bound) {
                    viol++;
                    say(c,
                        "VIOLATION liveness: round %d (%s): no leader from %+.3fs to "
                        "%+.3fs%s, "
                        "%.0f ms after max(gap start, heal at %+.3fs) > bound %" PRId64
                        " ms",
                        rd->r, rd->desc, rel(c, lo), rel(c, hi),
                        hi == rd->te ? " (round end)" : "", (double)(hi - from) / 1e6,
                        rel(c, rd->th), bound_ms);
                }
                if (gl < sizeof gaps - 40)
                    gl += (size_t)snprintf(gaps + gl, sizeof gaps - gl, " [%+.3f,%+.3f)",
                                           rel(c, lo), rel(c, hi));
            }
            if (e > cur) cur = e;
            if (cur >= rd->te) break;
        }
        r->liveness += viol;
        if (ngaps == 0) {
            r->kept++;
            say(c, "round %d: %s: leadership kept (no leaderless moment)", rd->r,
                rd->desc);
        } else {
            double f = first_fail >= 0 ? (double)first_fail / 1e6 : 0;
            if (r->nfailover < (int)(sizeof r->failover_ms / sizeof r->failover_ms[0]))
                r->failover_ms[r->nfailover++] = f;
            if (takeover >= 0 &&
                r->ntakeover < (int)(sizeof r->takeover_ms / sizeof r->takeover_ms[0]))
                r->takeover_ms[r->ntakeover++] = (double)takeover / 1e6;
            say(c,
                "round %d: %s: fault %+.3fs heal %+.3fs end %+.3fs; leaderless %.1f ms "
                "after "
                "the heal; first new term %.1f ms after the fault; leaderless:%s",
                rd->r, rd->desc, rel(c, rd->tf), rel(c, rd->th), rel(c, rd->te), f,
                takeover >= 0 ? (double)takeover / 1e6 : -1.0, gaps);
        }
    }
    pctl(r->failover_ms, r->nfailover, &r->p50_ms, &r->p99_ms, &r->max_ms);
    double dummy;
    pctl(r->takeover_ms, r->ntakeover, &r->take_p50_ms, &dummy, &r->take_max_ms);
}

/* ---- entry points ---------------------------------------------------------------- */

int fc_safety(const fc_result *r)
{
    return r->overlaps + r->token_order + r->token_mismatch + r->stale_accepted +
           r->write_outside + r->txn_order + r->txn_guard + r->unknown_token +
           r->no_quorum_elections + r->not_etcd_leader + r->txn_phantom + r->transitions;
}

int fc_check(const char *dir, const fc_opts *o, fc_result *r, FILE *report)
{
    memset(r, 0, sizeof *r);
    ctx *c = calloc(1, sizeof *c);
    if (!c) return -1;
    c->dir = dir;
    c->rep = report;
    c->r = r;
    snprintf(r->scenario, sizeof r->scenario, "?");
    if (read_runner(c) != 0) {
        fprintf(stderr, "fault-checker: cannot read %s/runner.log\n", dir);
        free(c);
        return -1;
    }
    if (o && o->bound_ms > 0) c->bound_ms = o->bound_ms;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int id;
        char tail[8];
        if (sscanf(de->d_name, "cand-%d.%7s", &id, tail) == 2 && !strcmp(tail, "log")) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            read_candidate(c, id, path);
        }
    }
    if (d) closedir(d);
    read_resource(c);
    read_history(c);
    build_creations(c);
    drop_after_teardown(c);
    check_terms(c);
    check_writes(c);
    check_txn_history(c);
    check_etcd_leader(c);
    check_txn_phantom(c);
    check_rounds(c);
    if (c->resource_self_stale) {
        r->stale_accepted += (int)c->resource_self_stale;
        say(c, "VIOLATION the resource counted %" PRId64 " stale accepted writes itself",
            c->resource_self_stale);
    }
    say(c,
        "summary %s: rounds %d terms %d losses %d | overlaps %d token_order %d "
        "token_mismatch %d (unverified %d) write_outside %d stale_accepted %d txn_order "
        "%d "
        "txn_guard %d unknown_token %d no_quorum_elections %d not_etcd_leader %d "
        "txn_phantom "
        "%d transitions %d | late_writes %d fenced_rejects %d accepted %ld "
        "txn_puts %ld history_gaps %d watch_requests %ld | liveness %d kept %d failover "
        "p50 %.0f p99 %.0f max "
        "%.0f ms (bound %" PRId64 " ms) takeover p50 %.0f max %.0f ms",
        r->scenario, r->rounds, r->intervals, r->losses, r->overlaps, r->token_order,
        r->token_mismatch, r->token_unverified, r->write_outside, r->stale_accepted,
        r->txn_order, r->txn_guard, r->unknown_token, r->no_quorum_elections,
        r->not_etcd_leader, r->txn_phantom, r->transitions, r->late_writes,
        r->fenced_rejects, r->accepted_writes, r->txn_puts, r->history_gaps,
        r->watch_requests, r->liveness, r->kept, r->p50_ms, r->p99_ms, r->max_ms,
        r->bound_ms, r->take_p50_ms, r->take_max_ms);
    free(c->terms.v);
    free(c->cw.v);
    free(c->rw.v);
    free(c->hist.v);
    free(c->cr.v);
    free(c->rounds.v);
    free(c->gap_lo.v);
    free(c->gap_hi.v);
    free(c);
    return fc_safety(r) + r->liveness + r->expect_fail + r->errors;
}
