/* SPDX-License-Identifier: MIT */
/* See help.h. The man page (docs/elector.1) says the same at length. */
#include "options/help.h"

/* The health options of campaign and run (run also stops CMD first). */
#define HEALTH_OPTIONS                                                                   \
    "  --health-cmd CMD    a health check, `/bin/sh -c CMD`: after --health-retries\n"   \
    "                      failures in a row, step down (run: stop CMD as on a loss;\n"  \
    "                      then resign) and stay out of the election until a check\n"    \
    "                      passes, then campaign again\n"                                \
    "  --health-interval D   between checks (default 10s)\n"                             \
    "  --health-timeout D    a check running longer fails, its group killed (10s)\n"     \
    "  --health-retries N    failures in a row that make it unhealthy (default 3)\n"     \
    "  --health-start-period D  failures in this first period do not count (0)\n"        \
    "  --health-holdoff D    after stepping down for health, stay out at least this\n"   \
    "                      long (default 10s; 0: none), doubled with each such step-\n"  \
    "                      down in a row up to --health-holdoff-max (default 5m), "      \
    "from\n"                                                                             \
    "                      10s again after that long without one. A new leader is not\n" \
    "                      stepped down by one failure in its first interval.\n"         \
    "Checks and whatever they start are killed at the timeout, when the check ends\n"    \
    "and with elector (a cgroup of their own, and a subreaper).\n"                       \
    "Takes part in `elector switchover` (see there).\n"

/* Waiting and starting: campaign, run, lock. */
#define WAIT_OPTIONS                                                                     \
    "  --timeout DURATION  give up waiting to be elected (the lock) after this long:\n"  \
    "                      our key is deleted, exit 6 (default: wait without limit)\n"   \
    "  --no-wait           give up at once if another leads (holds the lock): exit 6\n"  \
    "  --fail-fast         etcd unreachable at start: exit 1 at once (default: retry\n"  \
    "                      with backoff from 0.5s to 30s, saying so on stderr, in\n"     \
    "                      systemd's STATUS= and elector_start_retries_total)\n"

static const char GENERAL[] =
    "Usage: elector [OPTIONS] COMMAND NAME [ARGS]\n"
    "\n"
    "Leader election and locks on etcd v3, compatible with `etcdctl elect` and\n"
    "`etcdctl lock` (they share elections and locks with elector).\n"
    "\n"
    "Commands:\n"
    "  campaign NAME [VALUE]    Campaign for leadership of NAME; once elected print the "
    "key\n"
    "                           and the value (as `etcdctl elect`) and hold it until "
    "SIGINT\n"
    "                           or SIGTERM.\n"
    "  observe NAME             Print every leader change of NAME until interrupted.\n"
    "  leader NAME              Print the current leader of NAME once (exit 4 if none).\n"
    "  run NAME [--] CMD [ARG]  Campaign; run CMD only while leader, under a guard "
    "process.\n"
    "  lock NAME [[--] CMD...]  Take the lock NAME (as `etcdctl lock`): print its key "
    "and\n"
    "                           hold it until interrupted, or run CMD while holding it.\n"
    "  switchover NAME --to V   Make the elector candidate whose value is V the leader\n"
    "                           (rolling upgrades); exit 0 once it leads.\n"
    "  timing [--ttl D ...]     Print the worst-case failover, the clock drift and the\n"
    "                           etcd outage that the settings tolerate (no etcd).\n"
    "  help [COMMAND]           This help, or a command's (also: COMMAND --help).\n"
    "  version                  Print the version.\n"
    "\n"
    "Global options (etcdctl's; also from $ELECTOR_NAME or $ETCDCTL_NAME, e.g.\n"
    "$ETCDCTL_DIAL_TIMEOUT; the command line wins, then ELECTOR_, then ETCDCTL_):\n"
    "  --endpoints LIST            etcd endpoints, comma separated: host:port,\n"
    "                              http://host:port, https://host:port (default\n"
    "                              127.0.0.1:2379)\n"
    "  --user NAME[:PASSWORD]      etcd user; without a password, it is read from\n"
    "                              $ELECTOR_PASSWORD, $ETCDCTL_PASSWORD, "
    "--password-file, or\n"
    "                              asked for on the terminal\n"
    "  --password PASSWORD         the password (seen by `ps`: prefer the variables)\n"
    "  --cacert FILE               CA bundle to verify etcd's certificate\n"
    "  --cert FILE, --key FILE     client certificate and key\n"
    "  --insecure-skip-tls-verify  accept any server certificate (for tests only)\n"
    "  --insecure-transport=false  TLS only: endpoints without a scheme use TLS, an\n"
    "                              http:// one is refused (default true: cleartext\n"
    "                              unless --cacert or --cert is given)\n"
    "  --dial-timeout DURATION     connect timeout per endpoint (default 5s)\n"
    "  --command-timeout DURATION  a request's timeout once connected (default 2s)\n"
    "  --keepalive-time DURATION   HTTP/2 PING after this long without traffic (10s)\n"
    "  --keepalive-timeout DURATION  the PING's answer within this (default 2s)\n"
    "  -w, --write-out FORMAT      simple (default) or json: one event per line\n"
    "                              (docs/elector-events.schema.json)\n"
    "  --hex                       print keys and values as \\xNN bytes\n"
    "  --debug                     the same as --log-level debug\n"
    "  -d, --discovery-srv DOMAIN  the members from DNS SRV records\n"
    "                              _etcd-client-ssl._tcp.DOMAIN (https) and\n"
    "                              _etcd-client._tcp.DOMAIN (http), instead of\n"
    "                              --endpoints\n"
    "  --discovery-srv-name NAME   _etcd-client-ssl-NAME._tcp.DOMAIN and so on\n"
    "  --insecure-discovery=false  use only the https (_etcd-client-ssl) records\n"
    "                              (always so when TLS is configured)\n"
    "elector's (also from $ELECTOR_NAME):\n"
    "  --password-file FILE        the password: the first line of FILE (read again\n"
    "                              when it changes, at the next authentication)\n"
    "  --auto-sync-interval DURATION  every DURATION, take the endpoint list from\n"
    "                              the cluster's member list (learners skipped);\n"
    "                              0 (default): off, the list stays as given\n"
    "  --ttl DURATION              session lease TTL, whole seconds (default 10s)\n"
    "  --log-level LEVEL           error, warn, info (default), debug\n"
    "  --log-format FORMAT         text (default) or json; stderr, one line per message\n"
    "  -h, --help                  help;  --version  print the version\n"
    "Command options: elector help COMMAND.\n"
    "\n"
    "Durations use Go's syntax: 250ms, 1.5s, 1m30s, 2h45m, 300us; a bare number is\n"
    "seconds. Booleans: --flag, --flag=true, --flag=false (variables: 1, true, 0, "
    "false).\n"
    "\n"
    "Exit status: 0 success (also a stop by SIGINT/SIGTERM: resigned, or a standby\n"
    "that was never elected), 1 error (etcd unreachable with --fail-fast, TLS, auth, a\n"
    "port taken, ...; lock: interrupted before the lock was acquired), 2 bad usage,\n"
    "3 leadership (the lock) lost, 4 no leader (leader), 5 switchover refused,\n"
    "6 timed out (switchover; campaign, run, lock: --timeout or --no-wait), 7\n"
    "switchover handed over but the target did not confirm it took over. run and lock\n"
    "with a command: CMD's status when it ended on its own (128+N if killed by signal\n"
    "N; 126 not executable, 127 not found, both checked before campaigning), 0 when\n"
    "the SIGINT/SIGTERM relayed to it ended it, 3 when it was stopped because\n"
    "leadership ended.\n"
    "\n"
    "--http serves GET /leader (the leader, on every instance), /healthz and /metrics;\n"
    "--http 0.0.0.0:PORT for probes and scrapes from other hosts. Under systemd\n"
    "(Type=notify): READY=1, STATUS=, WATCHDOG=1, STOPPING=1 on $NOTIFY_SOCKET.\n"
    "\n"
    "Election NAME is the key prefix NAME/: an election `a` also waits behind keys of\n"
    "`a/b` (etcd's Go client and etcdctl do the same); do not nest names.\n"
    "\n"
    "Examples:\n"
    "  elector campaign my-service node-1\n"
    "  elector --endpoints 10.0.0.1:2379,10.0.0.2:2379 -w json observe my-service\n"
    "  elector leader my-service || echo \"nobody leads\"\n"
    "  elector run my-service --ttl 5s --http :9090 -- ./scheduler --config s.yaml\n"
    "  elector lock backup -- ./backup.sh\n"
    "  elector run my-service --health-cmd 'curl -fs localhost:8080/ok' -- ./server\n"
    "  elector switchover my-service --to node-2\n"
    "  elector timing --ttl 5s --drift 1%\n"
    "\n"
    "More in elector(1).\n";

static const char CAMPAIGN[] =
    "Usage: elector [OPTIONS] campaign NAME [VALUE] [--proclaim-stdin] [--http ADDR]\n"
    "\n"
    "Campaign for leadership of NAME with VALUE (default: the host name). Once elected,\n"
    "print the key and the value on two lines, as `etcdctl elect` does, and hold\n"
    "leadership until SIGINT, SIGTERM or SIGHUP; then resign, revoke the lease, exit 0.\n"
    "If leadership is lost: the reason on stderr, exit 3. While waiting, stderr says\n"
    "behind which key. -w json: one event per line (waiting, elected, proclaimed,\n"
    "proclaim_failed, lost, resigned, failed).\n"
    "\n"
    "Options:\n"
    "  --value V           the value (instead of the VALUE argument)\n"
    "  --proclaim-stdin    proclaim each line read from stdin as the new value; lines\n"
    "                      read before the election: the latest, once elected\n"
    "  --http ADDR         serve GET /leader, /healthz[?leader=1], /metrics on ADDR "
    "(PORT,\n"
    "                      :PORT or HOST:PORT; host 127.0.0.1 by default)\n"
    "  --ttl DURATION      session lease TTL (default 10s)\n"
    "  --release-on-exit=false\n"
    "                      no release helper: if elector dies (SIGKILL, crash), the\n"
    "                      next candidate waits for the TTL instead of "
    "milliseconds\n" WAIT_OPTIONS HEALTH_OPTIONS "Global options: elector --help.\n";

static const char OBSERVE[] =
    "Usage: elector [OPTIONS] observe NAME [--http ADDR]\n"
    "\n"
    "Print the key and the value of every new leader of NAME, and every value it\n"
    "proclaims, until interrupted (-w json: leader and no_leader events). An\n"
    "unreachable cluster at the start is retried with backoff (said on stderr) unless\n"
    "--fail-fast; a failed authentication or TLS is an error (exit 1) at once; later\n"
    "the connection lost and back are said on stderr, and observing resumes. A closed\n"
    "stdout ends it quietly (exit 0).\n"
    "\n"
    "Options:\n"
    "  --http ADDR         serve GET /leader, /healthz, /metrics on ADDR\n"
    "  --fail-fast         etcd unreachable at start: exit 1 at once\n"
    "Global options: elector --help.\n";

static const char LEADER[] =
    "Usage: elector [OPTIONS] leader NAME\n"
    "\n"
    "Print the current leader of NAME: its key and value on two lines (-w json: one\n"
    "leader event). Exit 4, with no output, when nobody leads.\n"
    "Global options: elector --help.\n";

static const char RUN[] =
    "Usage: elector [OPTIONS] run NAME [--value V] [--grace D] [--grace-on-loss]\n"
    "                             [--restart] [--pid-namespace] [--] CMD [ARGS]\n"
    "\n"
    "Campaign; while leader, run CMD with ELECTOR_NAME, ELECTOR_KEY, ELECTOR_TOKEN\n"
    "(fencing token) and ELECTOR_LEASE in its environment (never a password). A guard\n"
    "process owns CMD and every descendant: SIGTERM to CMD's group at the deadline "
    "minus\n"
    "--grace, then the whole tree killed, in time to be gone when leadership can no\n"
    "longer be proven, also if elector is stopped (^Z) or killed; the lease is released\n"
    "only after the tree is gone. elector pings the guard every TTL/6 and kills the\n"
    "tree and the guard itself if it does not answer (stopped, stuck). If the key or\n"
    "lease is deleted from outside, the tree is SIGKILLed at once. stdout is CMD's;\n"
    "elector writes to stderr. Arguments after CMD are CMD's own.\n"
    "\n"
    "Options:\n"
    "  --value V           the value to campaign with (default: the host name)\n"
    "  --grace DURATION    SIGTERM this long before the deadline (default min(2s, "
    "TTL/4));\n"
    "                      refused if longer than the TTL allows (see elector timing)\n"
    "  --grace-on-loss     key or lease deleted from outside: SIGTERM and --grace, not\n"
    "                      SIGKILL at once (allows up to --grace of overlap)\n"
    "  --restart           when CMD exits, resign and campaign again (backoff from "
    "200ms\n"
    "                      to 30s while CMD keeps failing quickly)\n"
    "  --pid-namespace     run CMD in a PID namespace of its own (as `unshare --pid\n"
    "                      --fork --mount-proc --kill-child`): the kernel kills the\n"
    "                      tree even if elector and its guard are both SIGKILLed.\n"
    "                      CMD is PID 2 there and sees only its tree in /proc. Root\n"
    "                      (CAP_SYS_ADMIN) only\n"
    "  --events-fd N       with -w json: the events to fd N instead of stderr\n"
    "  --http ADDR         serve GET /leader, /healthz[?leader=1], /metrics on ADDR\n"
    "  --ttl DURATION      session lease TTL (default 10s)\n" WAIT_OPTIONS HEALTH_OPTIONS
    "Exit status: CMD's when it ended on its own (128+N: signal N); 0 when the\n"
    "SIGINT/SIGTERM relayed to it ended it (systemctl stop), or stopped while waiting;\n"
    "126 cannot be executed, 127 not found: both checked before campaigning; 3 when\n"
    "it was stopped because leadership ended; 6 --timeout, --no-wait.\n"
    "Global options: elector --help.\n";

static const char LOCK[] =
    "Usage: elector [OPTIONS] lock NAME [-n N] [--grace D] [--restart] [[--] CMD "
    "[ARGS]]\n"
    "\n"
    "Take the lock NAME, as `etcdctl lock` does (same keys: NAME/<lease in hex>, an\n"
    "empty value; elector and etcdctl wait for each other). Without CMD: print the\n"
    "lock's key and an empty line (as etcdctl) and hold the lock until SIGINT or\n"
    "SIGTERM, then release it (exit 0); exit 3 if it is lost. With CMD: run it while\n"
    "holding the lock, with ETCD_LOCK_KEY, ETCD_LOCK_REV (the key's create revision, a\n"
    "fencing token) and ELECTOR_NAME, ELECTOR_KEY, ELECTOR_TOKEN, ELECTOR_LEASE in its\n"
    "environment, under run's guard (stopped by the deadline if the lock cannot be\n"
    "proven held, killed with its tree); exit with CMD's status, then release.\n"
    "\n"
    "Options:\n"
    "  --ttl DURATION      session lease TTL (default 10s, as etcdctl lock's)\n"
    "  --grace DURATION    with CMD: SIGTERM this long before the deadline\n"
    "  --grace-on-loss     with CMD: SIGTERM and --grace also when the key or lease\n"
    "                      is deleted from outside (see run)\n"
    "  --restart           with CMD: when it exits, release and take the lock again\n"
    "  --pid-namespace     with CMD: run it in a PID namespace of its own (see run)\n"
    "  --events-fd N       with CMD and -w json: the events to fd N instead of stderr\n"
    "  --http ADDR         serve GET /leader, /healthz, /metrics on ADDR\n"
    "  --release-on-exit=false\n"
    "                      without CMD: no release helper (see campaign)\n"
    "  -n, --limit N       a semaphore: up to N holders at once (1 to 64; as consul\n"
    "                      lock -n). Its keys are elector's own, shared with no other\n"
    "                      tool: __elector/semaphore/NAME/<slot>/<lease in hex>, one\n"
    "                      election per slot 0..N-1; not with --restart or "
    "--http\n" WAIT_OPTIONS
    "Exit status: 1 interrupted (SIGINT, SIGTERM) before the lock was acquired (as\n"
    "etcdctl lock; CMD not run); 6 not acquired within --timeout, or held by another\n"
    "with --no-wait (flock -n); else as run.\n"
    "Global options: elector --help.\n";

static const char SWITCHOVER[] =
    "Usage: elector [OPTIONS] switchover NAME --to VALUE [--timeout D]\n"
    "\n"
    "Make the candidate of NAME whose value is VALUE the leader, for a rolling\n"
    "upgrade: the elector candidates (run, campaign) ahead of it step back to the end\n"
    "of the line, then the leader steps down as on any loss (run: its command is\n"
    "stopped and its tree gone before its key is deleted); the target is elected by\n"
    "the usual protocol. The request is the key __elector/switchover/NAME, under a\n"
    "lease of its own, withdrawn in every outcome. Once VALUE's key is first and its\n"
    "elector confirmed it leads (run: its command started), print its key and value\n"
    "as `leader` does (-w json: a leader event). With etcd auth, the users\n"
    "of the candidates and of the requester need readwrite on NAME/, on the prefix\n"
    "__elector/candidates/NAME/ and on the key __elector/switchover/NAME.\n"
    "\n"
    "Options:\n"
    "  --to VALUE          the value of the candidate that is to lead (required)\n"
    "  --timeout DURATION  give up after this long (default 60s)\n"
    "Exit status: 0 VALUE leads (also when it already did); 5 refused: no candidate\n"
    "or several have VALUE, a candidate ahead of it is not elector's (etcdctl elect)\n"
    "or lacks those grants (its key is named), another switchover is under way, or\n"
    "the target left; 6 timed out (the request is withdrawn; leadership stays where\n"
    "it is); 7 handed over (VALUE's key was first) but VALUE did not confirm it took\n"
    "over before --timeout or before its key went (stopped, cut off from etcd, or not\n"
    "an elector candidate): the message names the next in line; 1 etcd errors (a\n"
    "denied permission: the message names the grants).\n"
    "Global options: elector --help.\n";

static const char TIMING[] =
    "Usage: elector timing [--ttl D] [--grace D] [--grace-on-loss]\n"
    "                      [--release-on-exit=false] [--margin D] [--rtt D]\n"
    "                      [--election-timeout D] [--drift PCT]\n"
    "\n"
    "Print the timing budget of these settings, without etcd: the worst-case failover\n"
    "after a crash, a freeze and a partition (also with a new etcd Raft leader), how\n"
    "long before etcd can expire the lease the old leader stops believing it leads\n"
    "(and run's guard has stopped its command), the clock drift that keeps this so,\n"
    "and how long an etcd outage leaves leadership and run's command untouched.\n"
    "Settings under which the guard could not stop the command before the lease can\n"
    "expire (a drift beyond the margin), or would stop it between two renewals that\n"
    "succeed (a --grace or --margin too large), are refused: the reason on stderr,\n"
    "exit 2. docs/OPERATIONS.md \"Timing budget\" explains every line.\n"
    "\n"
    "Options:\n"
    "  --ttl DURATION      session lease TTL, whole seconds (default 10s)\n"
    "  --grace DURATION    run's --grace (default min(2s, TTL/4))\n"
    "  --grace-on-loss     run's --grace-on-loss: say how long it may overlap\n"
    "  --release-on-exit=false\n"
    "                      no release helper: a crash fails over at the lease's expiry\n"
    "  --margin DURATION   the library's safety margin (default max(TTL/10, 200ms))\n"
    "  --rtt DURATION      a round trip to etcd (default 5ms)\n"
    "  --election-timeout DURATION  etcd's --election-timeout (default 1s)\n"
    "  --drift PCT         how much slower the leader's clock may run: 0.5% or 0.005\n"
    "                      (default 0)\n"
    "Exit status: 0 the report on stdout; 2 settings refused (or bad usage).\n";

static const char HELP[] =
    "Usage: elector help [COMMAND]\n"
    "\n"
    "Print the help of elector, or of COMMAND (campaign, observe, leader, run, lock,\n"
    "switchover, timing).\n";

static const char VERSION[] = "Usage: elector version\n\nPrint elector's version.\n";

const char *tool_help(enum tool_cmd cmd)
{
    switch (cmd) {
    case CMD_CAMPAIGN:
        return CAMPAIGN;
    case CMD_OBSERVE:
        return OBSERVE;
    case CMD_LEADER:
        return LEADER;
    case CMD_RUN:
        return RUN;
    case CMD_LOCK:
        return LOCK;
    case CMD_SWITCHOVER:
        return SWITCHOVER;
    case CMD_TIMING:
        return TIMING;
    case CMD_VERSION:
        return VERSION;
    case CMD_HELP:
        return HELP;
    default:
        return GENERAL;
    }
}
