/* Command-line parsing for the elector tool: pure functions, no I/O, so they can
 * be unit-tested and fuzzed. Global options may stand before or after the
 * command name, as with etcdctl. */
#ifndef ELECTOR_TOOL_OPTS_H
#define ELECTOR_TOOL_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tool_cmd { CMD_NONE, CMD_CAMPAIGN, CMD_OBSERVE, CMD_LEADER, CMD_RUN };
enum tool_fmt { FMT_SIMPLE, FMT_JSON };
enum tool_log { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Exit statuses (also in --help and the man page). */
enum {
    EXIT_OK = 0,
    EXIT_ERROR = 1,     /* etcd unreachable, TLS, auth, ... */
    EXIT_USAGE = 2,     /* bad command line */
    EXIT_LOST = 3,      /* we led and lost leadership */
    EXIT_NOLEADER = 4   /* `leader`: nobody leads */
};

typedef struct tool_opts {
    enum tool_cmd cmd;
    const char *name;      /* election name */
    const char *value;     /* campaign value (NULL: default) */
    char **argv;           /* run: the command (NULL-terminated, points into argv) */
    const char *endpoints; /* NULL: env or default */
    int64_t ttl_s;         /* 0: default 10 */
    int64_t dial_timeout_ms;
    int64_t grace_ms;      /* run: SIGTERM this long before the deadline */
    const char *cacert, *cert, *key, *user, *password_file;
    const char *http;      /* --http ADDR */
    int events_fd;         /* run -w json: events to this fd (0: stderr) */
    enum tool_fmt fmt;
    enum tool_log log;
    bool proclaim_stdin, restart, help, version;
} tool_opts;

/* Parses "500ms", "10s", "1.5s", "2m", "1h"; a bare number means seconds.
 * Returns 0 and *ms, or -1 (negative, empty, unknown unit, overflow). */
int tool_parse_duration_ms(const char *s, int64_t *ms);

/* Parses argv (argv[0] is the program). Returns 0, or EXIT_USAGE with a one-line
 * message in err that says what is wrong and what to do. --help/--version set
 * the flags and succeed even without a command. */
int tool_parse_args(int argc, char **argv, tool_opts *o, char *err, size_t cap);

#endif
