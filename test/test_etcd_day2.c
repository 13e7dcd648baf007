/* SPDX-License-Identifier: MIT */
/* Day-2 operations against real etcd: TLS files rotated on disk under a
 * running leader (new CA, cluster restarted trusting only it), a bad new key
 * that must not replace working material, and a 3-member cluster whose every
 * member is replaced one by one under a leader with endpoint auto-sync. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "elect_util.h"
#include "elector/etcd.h"
#include "etcd_harness.h"
#include "testlib.h"

/* ---------------------------------------------------------------- notices */

static int n_ok, n_err;
static char last_err[1024];

static void notice(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e;
    (void)ud;
    tl_log("notice (%s): %s", err ? elector_strerror(err) : "info", msg);
    if (err) {
        n_err++;
        snprintf(last_err, sizeof(last_err), "%s", msg);
    } else {
        n_ok++;
    }
}

/* ---------------------------------------------------------------- files */

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    ASSERT_NOT_NULL(in);
    ASSERT_NOT_NULL(out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        ASSERT_EQ(n, fwrite(buf, 1, n, out));
    fclose(in);
    ASSERT_OK(fclose(out));
}

/* A Kubernetes secret volume: DIR/..vN/{ca.crt,tls.crt,tls.key}, DIR/..data
 * a symlink to the current ..vN, DIR/ca.crt -> ..data/ca.crt and so on. */
typedef struct secret_dir {
    char *dir;
    int version;
    char ca[512], crt[512], key[512];
} secret_dir;

/* A new version from the three files (key NULL: take it from key_from);
 * made complete, then swapped in with one rename of the ..data link. */
static void secret_publish(secret_dir *s, const char *ca, const char *crt,
                           const char *key)
{
    char vdir[600], path[700], tmp[600], data[600];
    s->version++;
    snprintf(vdir, sizeof(vdir), "%s/..v%d", s->dir, s->version);
    ASSERT_OK(mkdir(vdir, 0700));
    snprintf(path, sizeof(path), "%s/ca.crt", vdir);
    copy_file(ca, path);
    snprintf(path, sizeof(path), "%s/tls.crt", vdir);
    copy_file(crt, path);
    snprintf(path, sizeof(path), "%s/tls.key", vdir);
    copy_file(key, path);
    snprintf(tmp, sizeof(tmp), "%s/..data_tmp", s->dir);
    snprintf(data, sizeof(data), "%s/..data", s->dir);
    char target[64];
    snprintf(target, sizeof(target), "..v%d", s->version);
    unlink(tmp);
    ASSERT_OK(symlink(target, tmp));
    ASSERT_OK(rename(tmp, data));
}

static void secret_init(secret_dir *s, eh_cluster *c)
{
    memset(s, 0, sizeof(*s));
    s->dir = tl_tmpdir("secret");
    ASSERT_NOT_NULL(s->dir);
    secret_publish(s, eh_cacert(c), eh_cert(c), eh_key(c));
    const char *names[] = {"ca.crt", "tls.crt", "tls.key"};
    char *dst[] = {s->ca, s->crt, s->key};
    for (int i = 0; i < 3; i++) {
        char target[64];
        snprintf(dst[i], 512, "%s/%s", s->dir, names[i]);
        snprintf(target, sizeof(target), "..data/%s", names[i]);
        ASSERT_OK(symlink(target, dst[i]));
    }
}

static elector_etcd *tls_client(eh_cluster *c, const secret_dir *s)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.cacert = s->ca;
    cfg.cert = s->crt;
    cfg.key = s->key;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 3000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    if (elector_etcd_err(e)) tl_log("client: %s", elector_etcd_errstr(e));
    ASSERT_EQ(0, elector_etcd_err(e));
    elector_etcd_set_notice(e, notice, NULL);
    return e;
}

static int put(elector_etcd *e, const char *k, const char *v)
{
    Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
    r.key.data = (uint8_t *)k;
    r.key.len = strlen(k);
    r.value.data = (uint8_t *)v;
    r.value.len = strlen(v);
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &r.base, NULL, &m);
    if (rc) tl_log("put: %s (%s)", elector_strerror(rc), elector_etcd_errstr(e));
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* A put on a connection the server closed while nobody looked fails once
 * (it may have been sent): try again, as an application would. */
static int put_again(elector_etcd *e, const char *k, const char *v)
{
    int rc = put(e, k, v);
    for (int i = 0; i < 3 && rc == ELECTOR_EUNAVAILABLE; i++)
        rc = put(e, k, v);
    return rc;
}

static int count_events(const eu_cand *c, elector_event_type t)
{
    int n = 0;
    for (int i = 0; i < c->n; i++)
        n += c->types[i] == t;
    return n;
}

typedef struct pickup {
    eu_cand *cand;
    uint64_t connects;
    uint64_t renewals;
    double connected_at; /* first connection with the new files */
} pickup;

static bool picked_up(void *arg)
{
    pickup *p = arg;
    elector_etcd_stats st;
    elector_etcd_get_stats(p->cand->etcd, &st);
    elector_session_stats ss;
    elector_session_get_stats(p->cand->s, &ss);
    if (st.connects > p->connects && !p->connected_at) p->connected_at = tl_now();
    return st.connects > p->connects && ss.renewals > p->renewals;
}

/* ---------------------------------------------------------------- TLS */

TEST_WITH_TIMEOUT(tls_rotated_files_and_new_ca_are_picked_up_by_a_running_leader, 120)
{
    eh_opts o = {.members = 1, .tls = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    secret_dir s;
    secret_init(&s, c);
    eu_cand *cand = eu_cand_new_client(tls_client(c, &s), "rotate", 20);
    ASSERT_OK(elector_campaign(cand->el, "v", 1));
    ASSERT(eu_wait_event(cand, 0, ELECTOR_EV_ELECTED, 10000) >= 0);
    eu_pump(500);

    /* New CA, server and client certificates; the client's secret volume
     * swaps to them; the cluster restarts trusting only the new CA. */
    ASSERT_OK(eh_tls_rotate(c));
    secret_publish(&s, eh_cacert(c), eh_cert(c), eh_key(c));
    pickup p = {.cand = cand};
    elector_etcd_stats st;
    elector_etcd_get_stats(cand->etcd, &st);
    p.connects = st.connects;
    /* The member restarts trusting only the new CA; the leader's loop runs
     * all along (no wait for health in between), so the figure is what a
     * running leader needs: from the member's restart to its first
     * connection with the new files (etcd's start-up, the reconnect backoff,
     * the handshake), and to the first renewal of its lease over it. */
    ASSERT_OK(eh_member_stop(c, 0));
    ASSERT_OK(eh_member_restart(c, 0));
    double t_start = tl_now();
    elector_session_stats ss;
    elector_session_get_stats(cand->s, &ss);
    p.renewals = ss.renewals;
    ASSERT(eu_pump_until(20000, picked_up, &p));
    double t_done = tl_now();
    tl_log("FIGURE rotation pickup: first connection with the new files %.3f s after the "
           "member was restarted with the new CA (lease renewed over it after %.3f s)",
           p.connected_at - t_start, t_done - t_start);
    ASSERT_OK(eh_wait_healthy(c, 0, 20));
    elector_etcd_get_stats(cand->etcd, &st);
    ASSERT_EQ(1, (long long)st.tls_reloads);
    ASSERT_EQ(0, n_err);
    ASSERT(elector_is_leader(cand->el));
    ASSERT_EQ(0, count_events(cand, ELECTOR_EV_LOST));
    ASSERT_EQ(1, count_events(cand, ELECTOR_EV_ELECTED));
    ASSERT_OK(put(cand->etcd, "after-rotation", "ok"));
    eu_cand_free(cand);
    free(s.dir);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(tls_bad_new_files_are_reported_and_the_previous_ones_stay_in_use, 120)
{
    eh_opts o = {.members = 1, .tls = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    secret_dir s;
    secret_init(&s, c);
    elector_etcd *e = tls_client(c, &s);
    ASSERT_OK(put(e, "k", "1"));

    /* A key that does not match the certificate. */
    char *d = tl_tmpdir("badkey");
    char other[600], half[600];
    snprintf(other, sizeof(other), "%s/other.key", d);
    const char *gen[] = {"openssl", "genpkey",  "-algorithm",
                         "EC",      "-pkeyopt", "ec_paramgen_curve:prime256v1",
                         "-out",    other,      NULL};
    ASSERT_OK(tl_run(NULL, gen));
    secret_publish(&s, eh_cacert(c), eh_cert(c), other);
    ASSERT_OK(eh_member_stop(c, 0)); /* the next connection looks at the files */
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 20));
    ASSERT_OK(put_again(e, "k", "2"));
    ASSERT_EQ(1, n_err);
    ASSERT_CONTAINS(last_err, "previous ones stay in use");
    ASSERT_CONTAINS(last_err, "tls.key");
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    ASSERT_EQ(0, (long long)st.tls_reloads);

    /* A half-written certificate. */
    snprintf(half, sizeof(half), "%s/half.crt", d);
    FILE *in = fopen(eh_cert(c), "rb"), *out = fopen(half, "wb");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf), in);
    fwrite(buf, 1, n / 2, out);
    fclose(in);
    fclose(out);
    secret_publish(&s, eh_cacert(c), half, eh_key(c));
    ASSERT_OK(eh_member_stop(c, 0));
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 20));
    ASSERT_OK(put_again(e, "k", "3"));
    ASSERT_EQ(2, n_err);
    ASSERT_CONTAINS(last_err, "tls.crt");

    /* Good files again: loaded. */
    secret_publish(&s, eh_cacert(c), eh_cert(c), eh_key(c));
    ASSERT_OK(eh_member_stop(c, 0));
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 20));
    ASSERT_OK(put_again(e, "k", "4"));
    elector_etcd_get_stats(e, &st);
    ASSERT_EQ(1, (long long)st.tls_reloads);
    ASSERT_EQ(2, n_err);
    free(d);
    free(s.dir);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- members */

static bool synced_to(void *arg)
{
    eu_cand *cand = ((void **)arg)[0];
    const char *want = ((void **)arg)[1];
    elector_endpoint_info info;
    for (int i = 0; elector_etcd_endpoint_info(cand->etcd, i, &info) == 0; i++)
        if (strstr(want, info.authority)) return true;
    return false;
}

TEST_WITH_TIMEOUT(autosync_follows_every_member_replaced_under_a_running_leader, 240)
{
    eh_opts o = {.members = 3};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    char *original = strdup(eh_endpoints(c));
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = original;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 3000;
    cfg.auto_sync_interval_ms = 500;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    elector_etcd_set_notice(e, notice, NULL);
    eu_cand *cand = eu_cand_new_client(e, "members", 20);
    ASSERT_OK(elector_campaign(cand->el, "v", 1));
    ASSERT(eu_wait_event(cand, 0, ELECTOR_EV_ELECTED, 10000) >= 0);
    double t0 = tl_now();
    for (int r = 0; r < 3; r++) {
        /* etcd takes a change only once every member has been connected for
         * 5 s (--strict-reconfig-check); the leader runs meanwhile. */
        eu_pump(5500);
        int added = eh_member_add(c);
        ASSERT(added >= 0);
        tl_log("member m%d added at %s", added, eh_endpoint(c, added));
        /* The leader's client learns the new member before an old one goes. */
        void *arg[2] = {cand, (void *)eh_endpoint(c, added)};
        ASSERT(eu_pump_until(10000, synced_to, arg));
        ASSERT_OK(eh_member_remove(c, r));
        tl_log("member m%d removed", r);
        eu_pump(1500);
        ASSERT(elector_is_leader(cand->el));
    }
    eu_pump(2000);
    /* None of the original endpoints is left, and it still leads. */
    elector_endpoint_info info;
    int n = 0;
    for (int i = 0; elector_etcd_endpoint_info(e, i, &info) == 0; i++, n++) {
        tl_log("endpoint %d: %s", i, info.authority);
        ASSERT(strstr(original, info.authority) == NULL);
    }
    ASSERT_EQ(3, n);
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    int failovers =
        count_events(cand, ELECTOR_EV_LOST) + count_events(cand, ELECTOR_EV_ELECTED) - 1;
    tl_log("FIGURE member replacement: 3 of 3 members replaced in %.1f s, failovers %d, "
           "endpoint syncs %llu, connections %llu",
           tl_now() - t0, failovers, (unsigned long long)st.endpoint_syncs,
           (unsigned long long)st.connects);
    ASSERT_EQ(0, failovers);
    ASSERT(elector_is_leader(cand->el));
    ASSERT_OK(put(e, "after-replacement", "ok"));
    eu_cand_free(cand);
    free(original);
    eh_stop(c);
}

/* ---------------------------------------------------------------- learners */

TEST_WITH_TIMEOUT(a_learner_in_the_endpoint_list_is_skipped_and_left_out_by_autosync, 120)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    int l = eh_member_add_learner(c);
    ASSERT(l > 0);
    char eps[256];
    snprintf(eps, sizeof(eps), "%s,%s", eh_endpoint(c, l), eh_endpoint(c, 0));
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eps;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 3000;
    cfg.auto_sync_interval_ms = 300;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    elector_etcd_set_notice(e, notice, NULL);
    /* The first endpoint is the learner: the put goes to the voting member. */
    ASSERT_OK(put(e, "learner", "skipped"));
    char port[16];
    snprintf(port, sizeof(port), ":%d", eh_client_port(c, 0));
    ASSERT_CONTAINS(elector_etcd_current_endpoint(e), port);
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    tl_log("connections %llu (the learner's, then the voter's)",
           (unsigned long long)st.connects);
    ASSERT_EQ(2, (long long)st.connects);
    /* An election works (lease, keepalive stream, txns). */
    eu_cand *cand = eu_cand_new_client(e, "learner", 10);
    ASSERT_OK(elector_campaign(cand->el, "v", 1));
    ASSERT(eu_wait_event(cand, 0, ELECTOR_EV_ELECTED, 10000) >= 0);
    /* Auto-sync leaves the learner out. */
    eu_pump(1500);
    elector_endpoint_info info;
    ASSERT_OK(elector_etcd_endpoint_info(e, 0, &info));
    ASSERT_CONTAINS(eh_endpoint(c, 0), info.authority);
    ASSERT(elector_etcd_endpoint_info(e, 1, &info) != 0);
    ASSERT(elector_is_leader(cand->el));
    eu_cand_free(cand);
    eh_stop(c);
}

/* ---------------------------------------------------------------- password */

static void write_atomic(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    ASSERT_NOT_NULL(f);
    fputs(text, f);
    ASSERT_OK(fclose(f));
    ASSERT_OK(rename(tmp, path));
}

static void restart_member0(eh_cluster *c)
{
    ASSERT_OK(eh_member_stop(c, 0));
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 20));
}

/* A client made while its password file is being written in place (a
 * shell's "echo pw > file": truncated, then written, here in two writes 40 ms
 * apart) waits for the file to keep still, and authenticates with the whole
 * password (before: it read the first half and failed with EAUTH). */
TEST_WITH_TIMEOUT(password_file_half_written_is_not_used, 60)
{
    eh_opts o = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    char *d = tl_tmpdir("pwhalf");
    char path[600], key[128];
    snprintf(path, sizeof(path), "%s/password", d);
    size_t half = strlen(EH_USER_PASSWORD) / 2;
    for (int round = 0; round < 3; round++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT(fd >= 0);
        pid_t w = fork();
        ASSERT(w >= 0);
        if (w == 0) { /* the writer: the rest, 40 ms later */
            if (write(fd, EH_USER_PASSWORD, half) != (ssize_t)half) _exit(1);
            usleep(40000);
            size_t rest = strlen(EH_USER_PASSWORD) - half;
            if (write(fd, EH_USER_PASSWORD + half, rest) != (ssize_t)rest) _exit(1);
            _exit(write(fd, "\n", 1) == 1 ? 0 : 1);
        }
        close(fd);
        struct stat st;
        double end = tl_now() + 5;
        while ((stat(path, &st) != 0 || st.st_size < (off_t)half) && tl_now() < end)
            tl_msleep(1);
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        cfg.user = EH_USER;
        cfg.password_file = path;
        elector_etcd *e = elector_etcd_new(&cfg);
        ASSERT_EQ(0, elector_etcd_err(e));
        snprintf(key, sizeof(key), "%shalf", EH_USER_PREFIX);
        double t0 = tl_now();
        int rc = put(e, key, "1");
        tl_log("round %d: put after %.0f ms: %s", round, (tl_now() - t0) * 1e3,
               elector_err_name(rc));
        ASSERT_OK(rc);
        elector_etcd_free(e);
        int status;
        ASSERT_EQ(w, waitpid(w, &status, 0));
        ASSERT_EQ(0, status);
    }
    free(d);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(password_file_is_read_again_when_it_changes, 120)
{
    eh_opts o = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    char *d = tl_tmpdir("pw");
    char path[600], key[128], newpw[64];
    snprintf(path, sizeof(path), "%s/password", d);
    char line[128];
    snprintf(line, sizeof(line), "%s\n", EH_USER_PASSWORD);
    write_atomic(path, line);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.user = EH_USER;
    cfg.password_file = path;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 3000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_EQ(0, elector_etcd_err(e));
    elector_etcd_set_notice(e, notice, NULL);
    snprintf(key, sizeof(key), "%spw", EH_USER_PREFIX);
    ASSERT_OK(put(e, key, "1"));

    /* The user's password changes in etcd (its tokens go with it), then in
     * the file: the next authentication reads the new one. */
    snprintf(newpw, sizeof(newpw), "%s:rotated-pw-77", EH_USER);
    char role[64];
    snprintf(role, sizeof(role), "%s-role", EH_USER);
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "delete", EH_USER, NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "add", newpw, NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "grant-role", EH_USER, role, NULL));
    write_atomic(path, "rotated-pw-77\n");
    restart_member0(c);
    ASSERT_OK(put_again(e, key, "2"));
    ASSERT_EQ(0, n_err);
    ASSERT(n_ok >= 1);

    /* An empty file: an error notice, the password in use stays. */
    write_atomic(path, "\n");
    restart_member0(c);
    ASSERT_OK(put_again(e, key, "3"));
    ASSERT_EQ(1, n_err);
    ASSERT_CONTAINS(last_err, "empty first line");
    ASSERT_CONTAINS(last_err, "previous password stays in use");
    free(d);
    elector_etcd_free(e);
    eh_stop(c);
}
