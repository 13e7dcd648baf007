/* SPDX-License-Identifier: MIT */
/* Real-etcd harness for tests: starts 1..EH_MAX_MEMBERS etcd processes on
 * free loopback ports, optionally with TLS and/or password auth, and lets a
 * test kill, stop, pause, resume and restart members.
 *
 * Every process it starts is tracked by pid and reaped. Members get
 * PR_SET_PDEATHSIG(SIGKILL), and an atexit handler kills the members of all
 * live clusters, so a failed ASSERT (exit(1)) does not leave etcd behind.
 * Members are in the test's process group (the runner kills it at the end).
 *
 * Call the harness from the test's main thread: PDEATHSIG fires when the
 * *thread* that forked a member exits, so a member started or restarted from
 * a short-lived helper thread would die with that thread. A cluster belongs
 * to the process that started it: a forked child may run eh_etcdctl on it,
 * but must not control members; its eh_stop and atexit leave them alone.
 *
 * Functions returning int return 0 on success and -1 on failure (with a
 * message on stderr) unless said otherwise. Member indexes are 0-based.
 *
 * Environment: ELECTOR_ETCD_DIR selects the etcd version: a directory with
 * etcd and etcdctl (scripts/etcd35.sh prints one), put first in PATH;
 * ETCD_BIN / ETCDCTL_BIN override the binaries (default: found
 * in PATH, else /usr/bin); EH_LOG_LEVEL sets etcd's --log-level (default
 * "warn"); each member logs to <eh_dir>/mN.log, which TL_KEEP_TMP=1 keeps.
 */
#ifndef ELECTOR_ETCD_HARNESS_H
#define ELECTOR_ETCD_HARNESS_H

#include <sys/types.h>

#define EH_MAX_MEMBERS 8

typedef struct eh_cluster eh_cluster;

typedef struct eh_opts {
    int members;            /* 1..EH_MAX_MEMBERS; 0 means 1 */
    int tls;                /* https client URLs, client cert auth, certs made */
    int auth;               /* root + EH_USER with a role limited to its prefix */
    const char *extra_args; /* extra etcd flags, space separated, or NULL */
    /* one more client URL each member advertises (MemberList shows it, nothing
     * listens there unless the test does), or NULL */
    const char *advertise_more;
} eh_opts;

/* Starts the members and waits until all are healthy (20 s). NULL on failure,
 * after printing why (with the members' log tails) and cleaning up. A start
 * that fails because a member died early (e.g. a port taken meanwhile) is
 * retried once with fresh ports. */
eh_cluster *eh_start(const eh_opts *o);

/* SIGKILLs every member still running (whatever state: paused, crashed),
 * reaps them, removes the temp dir and frees the cluster. NULL is ignored. */
void eh_stop(eh_cluster *c);

int eh_members(eh_cluster *c);           /* number of members */
const char *eh_endpoints(eh_cluster *c); /* "127.0.0.1:P1,127.0.0.1:P2"; with
                                            tls "https://127.0.0.1:P1,..." */
const char *eh_endpoint(eh_cluster *c, int i);
int eh_client_port(eh_cluster *c, int i);
const char *eh_dir(eh_cluster *c); /* the cluster's temp dir */

/* Member control. kill/stop/pause/resume fail on a member not running. */
int eh_member_kill(eh_cluster *c, int i);    /* SIGKILL, reap */
int eh_member_stop(eh_cluster *c, int i);    /* SIGTERM, wait for the graceful
                                                exit (10 s, then SIGKILL), reap */
int eh_member_pause(eh_cluster *c, int i);   /* SIGSTOP */
int eh_member_resume(eh_cluster *c, int i);  /* SIGCONT */
int eh_member_restart(eh_cluster *c, int i); /* same ports and data dir; does
                                                not wait for health */
/* Stops member i (if running), replaces its data directory with a restore of
 * the snapshot file (same name, peer URL and cluster token: the same cluster
 * ID) and starts it again, waiting until healthy. restore_args: more words for
 * the restore command, e.g. "--bump-revision=1000 --mark-compacted" (etcdutl,
 * used when it is next to etcd: 3.5; else etcdctl: 3.4), or NULL. Single-member
 * clusters only. */
int eh_member_restore(eh_cluster *c, int i, const char *snapshot,
                      const char *restore_args);
int eh_member_running(eh_cluster *c, int i); /* 1 if its process is alive
                                                (paused counts), else 0 */
pid_t eh_pid(eh_cluster *c, int i);          /* 0 when not running */

/* Waits until member i (or, with i == -1, every running, unpaused member)
 * answers `etcdctl endpoint health`. */
int eh_wait_healthy(eh_cluster *c, int i, double timeout_s);

/* Index of the member that says it is the Raft leader, or -1 if none of the
 * running, unpaused members does (right now). */
int eh_leader(eh_cluster *c);
/* Polls eh_leader() until it finds one; returns it, or -1 on timeout. */
int eh_wait_leader(eh_cluster *c, double timeout_s);

/* Runs etcdctl (ETCDCTL_API=3) with --endpoints, the TLS flags and, with
 * auth, --user=root:EH_ROOT_PASSWORD, then the NULL-terminated args. Returns
 * its exit status (-1 if it could not run, died or took over 30 s). Its stdout
 * goes to a malloc'd *out when out is non-NULL, else is discarded; its stderr
 * is passed through. */
int eh_etcdctl(eh_cluster *c, char **out, const char *arg, ...) __attribute__((sentinel));

/* The same with overrides; a NULL opts or zeroed field keeps the default. */
typedef struct eh_ctl_opts {
    const char *user;      /* "name:password"; "" for no --user at all */
    const char *endpoints; /* e.g. eh_endpoint(c, 2) */
    const char *cacert;    /* e.g. eh_wrong_cacert(c) */
    int no_client_cert;    /* omit --cert/--key */
    char **err;            /* capture stderr (malloc'd) instead of passing it */
    double timeout_s;      /* default 30 s */
} eh_ctl_opts;
int eh_etcdctl_opts(eh_cluster *c, const eh_ctl_opts *o, char **out, const char *arg, ...)
    __attribute__((sentinel));

/* TLS material (NULL without tls). The client cert has CN=root and is
 * signed by the cluster CA; the wrong CA is an unrelated one. */
const char *eh_cacert(eh_cluster *c);
const char *eh_cert(eh_cluster *c);
const char *eh_key(eh_cluster *c);
const char *eh_wrong_cacert(eh_cluster *c);

/* Credentials made by auth clusters. EH_USER has a role granting READWRITE
 * on keys with prefix EH_USER_PREFIX only. */
extern const char EH_ROOT_PASSWORD[];
extern const char EH_USER[];
extern const char EH_USER_PASSWORD[];
extern const char EH_USER_PREFIX[];

/* Day 2. eh_tls_rotate: a new CA, server and client certificates, written
 * over the same files (eh_cacert() etc.); running members keep trusting the old
 * CA until restarted. eh_member_add: `etcdctl member add` a new member, start
 * it (--initial-cluster-state=existing), wait until healthy; returns its index.
 * eh_member_remove: `etcdctl member remove` member i (asked of the others),
 * then its process is reaped. Both leave eh_endpoints() listing the members
 * running now; indexes of removed members stay taken (eh_members() counts
 * them). */
int eh_tls_rotate(eh_cluster *c);
int eh_member_add(eh_cluster *c);
int eh_member_add_learner(eh_cluster *c); /* the same with --learner */
int eh_member_remove(eh_cluster *c, int i);
int eh_member_removed(eh_cluster *c, int i); /* 1 after eh_member_remove(c, i) */

#endif /* ELECTOR_ETCD_HARNESS_H */
