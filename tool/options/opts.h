/* SPDX-License-Identifier: MIT */
/* Command-line parsing for the elector tool: pure functions, no I/O, so they can
 * be unit-tested and fuzzed.
 *
 * Options are parsed with getopt_long: --opt VALUE, --opt=VALUE, -w json, -wjson,
 * boolean flags as --flag or --flag=true|false, before or after the command
 * name, as with etcdctl. For `run` and `lock`, the first argument after NAME
 * (or whatever follows `--`) starts the command to run: what comes after it is
 * the command's own.
 *
 * Every option not given on the command line is taken from the environment:
 * ELECTOR_<NAME> first, then, for etcdctl's global options, ETCDCTL_<NAME>
 * (NAME: the long option in upper case, '-' as '_'; ETCDCTL_ENDPOINTS,
 * ETCDCTL_DIAL_TIMEOUT, ...). The command line wins over both. */
#ifndef ELECTOR_TOOL_OPTS_H
#define ELECTOR_TOOL_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tool_cmd {
    CMD_NONE,
    CMD_CAMPAIGN,
    CMD_OBSERVE,
    CMD_LEADER,
    CMD_RUN,
    CMD_LOCK,
    CMD_SWITCHOVER,
    CMD_TIMING,
    CMD_HELP,
    CMD_VERSION
};
enum tool_fmt { FMT_SIMPLE, FMT_JSON };
enum tool_log { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };
enum tool_logfmt { LOGFMT_TEXT, LOGFMT_JSON };

/* Exit statuses (also in --help and the man page). */
enum {
    EXIT_OK = 0,
    EXIT_ERROR = 1,      /* etcd unreachable, TLS, auth, a port taken, ... */
    EXIT_USAGE = 2,      /* bad command line or environment */
    EXIT_LOST = 3,       /* we led (held the lock) and lost it */
    EXIT_NOLEADER = 4,   /* `leader`: nobody leads */
    EXIT_REFUSED = 5,    /* `switchover`: cannot be done (unknown or ambiguous target, a
                            foreign candidate ahead, another switchover, target gone) */
    EXIT_TIMEOUT = 6,    /* `switchover`: the target did not lead within --timeout;
                            campaign, run, lock: not elected (the lock not taken)
                            within --timeout, or at once with --no-wait */
    EXIT_UNCONFIRMED = 7 /* `switchover`: handed over (the target's key was first),
                            but the target did not confirm it took over */
};

/* Where a setting came from: the command line or a variable. */
typedef enum tool_origin {
    ORIGIN_NONE,
    ORIGIN_ARGV,
    ORIGIN_ELECTOR,
    ORIGIN_ETCDCTL
} tool_origin;

typedef struct tool_setting {
    const char *value; /* points into argv or the environment; NULL: not set */
    tool_origin origin;
    char from[80]; /* "--user" or "$ETCDCTL_USER", for messages */
    int argi;      /* argv index of the string that holds the value (ORIGIN_ARGV) */
    size_t argoff; /* offset of the value in that string (--user=VALUE) */
} tool_setting;

typedef struct tool_opts {
    enum tool_cmd cmd;
    enum tool_cmd help_cmd; /* `help CMD`, `CMD --help`: about CMD (CMD_NONE: all) */
    const char *name;       /* election (lock) name */
    const char *value;      /* campaign value (NULL: default) */
    char **argv; /* run, lock: the command (NULL-terminated, points into argv) */
    const char *endpoints;                           /* NULL: default */
    int64_t ttl_s;                                   /* 0: default 10 */
    int64_t dial_timeout_ms, command_timeout_ms;     /* 0: defaults */
    int64_t keepalive_time_ms, keepalive_timeout_ms; /* 0: the library's defaults */
    int64_t auto_sync_interval_ms;                   /* --auto-sync-interval; 0: off */
    /* --discovery-srv DOMAIN, --discovery-srv-name NAME (NULL: not given);
     * --insecure-discovery=false: only _etcd-client-ssl records */
    const char *discovery_srv, *discovery_srv_name;
    bool srv_secure_only;
    int64_t grace_ms; /* run, lock: SIGTERM this long before the deadline */
    const char *cacert, *cert, *key;
    tool_setting user, password, password_file;
    const char *http; /* --http ADDR */
    /* run, campaign: --health-* (tool/supervise/healthcheck.h); health_cmd NULL: none */
    const char *health_cmd;
    int64_t health_interval_ms, health_timeout_ms, health_start_ms;
    int health_retries;
    /* after a health step-down: out of the election this long, doubled with each
     * step-down in a row up to the max (default 10 s, 5 min; 0: no hold-off) */
    int64_t health_holdoff_ms, health_holdoff_max_ms;
    /* switchover: --to VALUE, --timeout (0: default 60 s); campaign, run, lock:
     * --timeout: give up waiting after this (0: wait without limit) */
    const char *to;
    int64_t timeout_ms;
    bool no_wait;   /* campaign, run, lock: give up at once if another leads */
    int limit;      /* lock -n N: a semaphore, up to N holders (0, 1: a lock) */
    bool fail_fast; /* campaign, run, lock, observe: etcd unreachable at start ends
                       elector (exit 1) instead of retrying with backoff */
    int events_fd;  /* run/lock -w json: events to this fd (0: stderr) */
    enum tool_fmt fmt;
    enum tool_log log;
    enum tool_logfmt log_format;
    bool proclaim_stdin, restart, help, version, hex;
    /* campaign, lock without a command: --release-on-exit=false (the library's
     * release helper is on by default there) */
    bool no_release;
    bool pid_ns; /* run, lock: the command in a PID namespace of its own */
    /* run, lock: when the key or lease is deleted from outside, SIGTERM and
     * --grace as for a deadline, instead of SIGKILL at once (allows overlap) */
    bool grace_on_loss;
    bool insecure_skip_verify;
    bool insecure_transport; /* default true: endpoints without scheme are cleartext
                                unless TLS files are given; false: they use TLS,
                                and an http:// endpoint is refused */
    bool cmd_after_dashes;   /* run/lock: the command came after `--` */
    /* timing: --margin (0: the library's), --rtt (default 5 ms),
     * --election-timeout (default 1 s, etcd's), --drift (a fraction: 0.005 is
     * 0.5 %; default 0) */
    int64_t margin_ms, rtt_ms, election_timeout_ms;
    double drift;
    /* Environment variables that were read, for the debug log: "ETCDCTL_USER ...". */
    char env_used[512];
} tool_opts;

/* Go's time.ParseDuration syntax: a sequence of decimal numbers, each with an
 * optional fraction and a unit (ns, us, µs, ms, s, m, h): "300ms", "1.5h",
 * "2h45m", "1m30s". "0" needs no unit; a bare number otherwise means seconds
 * (an extension). No sign. Returns 0 and *ns, or -1 (empty, unknown unit,
 * overflow past 2562047h, garbage). */
int tool_parse_duration_ns(const char *s, int64_t *ns);

/* The same in milliseconds, rounded up (300us is 1ms; 0 stays 0). */
int tool_parse_duration_ms(const char *s, int64_t *ms);

/* Go's strconv.ParseBool: 1 t T TRUE true True, 0 f F FALSE false False.
 * Returns 0 and *v, or -1. */
int tool_parse_bool(const char *s, bool *v);

typedef const char *(*tool_getenv_fn)(const char *name);

/* Parses argv (argv[0] is the program) and then the environment through
 * env (NULL: no environment). Returns 0, or EXIT_USAGE with a one-line message
 * in err that says what is wrong and what to do. `help`, `version`, --help and
 * --version succeed without a NAME. */
int tool_parse_args_env(int argc, char **argv, tool_getenv_fn env, tool_opts *o,
                        char *err, size_t cap);

/* The same with the process environment (getenv). */
int tool_parse_args(int argc, char **argv, tool_opts *o, char *err, size_t cap);

/* The options, for documentation checks: the long name of option i (NULL past
 * the last), its short letter (0: none), and whether it is read from
 * ELECTOR_<NAME> (1) or from ELECTOR_<NAME> and ETCDCTL_<NAME> (2), or not (0). */
const char *tool_option_name(int i, char *shrt, int *env);

/* The command's name ("run"), or NULL for CMD_NONE. */
const char *tool_cmd_name(enum tool_cmd c);

#endif
