/* SPDX-License-Identifier: MIT */
/* examples/cpp/myapp.cpp (the C++ API's example) against real etcd: two
 * instances; the leader is killed, the other leads; Ctrl-C on a leader
 * resigns and a third takes over before the lease could have expired. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elect_util.h"
#include "etcd_harness.h"
#include "testlib.h"

static void start_app(eu_child *ch, eh_cluster *c, const char *id)
{
    const char *argv[] = {MYAPP_BIN, id, eh_endpoints(c), NULL};
    int fd = -1;
    pid_t pid = tl_spawn(argv, &fd);
    ASSERT(pid > 0);
    eu_child_wrap(ch, pid, fd);
}

static void echo_line(const char *line)
{
    tl_log("myapp: %s", line);
}

TEST_WITH_TIMEOUT(kill_the_leader_the_other_leads_ctrl_c_resigns, 120)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    eu_child a, b, d;
    char line[512];
    start_app(&a, c, "a");
    a.on_line = echo_line;
    ASSERT_OK(eu_child_expect(&a, "[a] I am the leader now", line, sizeof(line), 15000));
    ASSERT_OK(eu_child_expect(&a, "[a] work: a tick", line, sizeof(line), 5000));
    start_app(&b, c, "b");
    b.on_line = echo_line;
    ASSERT_OK(eu_child_expect(&b, "[b] leader is a", line, sizeof(line), 15000));

    /* SIGKILL: no resign, but the C++ session's release helper (on by
     * default) revokes a's lease at once: b leads well before a's TTL (10 s)
     * could have run out. */
    double t0 = tl_now();
    eu_child_kill(&a);
    ASSERT_OK(eu_child_expect(&b, "[b] I am the leader now", line, sizeof(line), 30000));
    double handover = tl_now() - t0;
    tl_log("b leads %.3f s after a was killed (TTL 10 s)", handover);
    ASSERT(handover < 5);
    ASSERT_OK(eu_child_expect(&b, "[b] work: b tick", line, sizeof(line), 5000));
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "myapp/work", "--print-value-only", NULL));
    ASSERT_CONTAINS(out, "b tick");
    free(out);

    /* Ctrl-C: b resigns and exits 0; d takes over at once. */
    start_app(&d, c, "d");
    d.on_line = echo_line;
    ASSERT_OK(eu_child_expect(&d, "[d] leader is b", line, sizeof(line), 15000));
    t0 = tl_now();
    kill(b.pid, SIGINT);
    ASSERT_OK(eu_child_expect(&b, "[b] resigned", line, sizeof(line), 10000));
    ASSERT_OK(eu_child_expect(&d, "[d] I am the leader now", line, sizeof(line), 30000));
    double took = tl_now() - t0;
    tl_log("d leads %.2f s after Ctrl-C to b (TTL 10 s)", took);
    ASSERT_OK(tl_reap(b.pid, 0, 10));
    b.pid = 0;
    ASSERT(took < 10); /* before the lease could have expired: it resigned */
    kill(d.pid, SIGINT);
    ASSERT_OK(eu_child_expect(&d, "[d] resigned", line, sizeof(line), 10000));
    ASSERT_OK(tl_reap(d.pid, 0, 10));
    d.pid = 0;
    close(b.fd);
    close(d.fd);
    eh_stop(c);
}

TEST(bad_usage_exits_2)
{
    const char *argv[] = {MYAPP_BIN, NULL};
    ASSERT_EQ(2, tl_run(NULL, argv));
}
