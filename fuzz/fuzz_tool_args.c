/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the tool's command line (tool/options/opts.c).
 * Input: split on NUL bytes into strings ("a\0b" and "a\0b\0" both give a, b;
 * "a\0\0" gives a and an empty string).
 *   - each string goes through tool_parse_duration_ms;
 *   - the strings (at most 32) become argv[1..] after argv[0] = "elector" for
 *     tool_parse_args_env, with an environment of its own (ETCDCTL_USER,
 *     ELECTOR_TTL, ... taken from the last strings) so runs do not depend on the
 *     fuzzer's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "options/opts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 32

/* The environment: the variables named by the fuzzer's last strings. */
static int g_argc;
static char **g_argv;
static size_t t0;

static const char *fake_env(const char *name)
{
    static const char *const names[] = {"ETCDCTL_USER",         "ELECTOR_PASSWORD",
                                        "ETCDCTL_DIAL_TIMEOUT", "ELECTOR_TTL",
                                        "ETCDCTL_HEX",          "ETCDCTL_WRITE_OUT"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int k = g_argc - 1 - (int)i;
        if (!strcmp(name, names[i]) && k > 1) return g_argv[k];
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* One heap copy with a terminator, so ASan catches reads past any string. */
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;

    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "elector";
    char *p = buf, *end = buf + size;
    while (p < end && argc < MAX_ARGS + 1) {
        argv[argc++] = p;
        int64_t ms = -12345;
        int rc = tool_parse_duration_ms(p, &ms);
        if (rc == 0 && ms < 0) abort(); /* documented: negative refused */
        if (rc != 0 && rc != -1) abort();
        p += strlen(p) + 1;
    }
    argv[argc] = NULL;

    tool_opts o;
    char err[256];
    err[0] = 0;
    g_argc = argc;
    g_argv = argv;
    int rc = tool_parse_args_env(argc, argv, fake_env, &o, err, sizeof(err));
    if (rc != 0 && rc != EXIT_USAGE) abort();
    if (rc == EXIT_USAGE && !err[0]) abort(); /* usage errors carry a message */
    if (rc == 0 && o.cmd == CMD_TIMING && !o.help && !o.version) {
        /* timing: no NAME; its settings in range (-1: run's --grace default). */
        if (o.name || o.argv || o.grace_ms < -1 || o.rtt_ms < 0) abort();
        if (o.margin_ms < 0 || o.election_timeout_ms <= 0) abort();
        if (!(o.drift >= 0 && o.drift < 1)) abort();
    } else if (rc == 0 && !o.help && !o.version && o.cmd != CMD_HELP &&
               o.cmd != CMD_VERSION) {
        if (o.cmd == CMD_NONE || !o.name || !*o.name) abort();
        if (o.cmd == CMD_RUN && (!o.argv || !o.argv[0])) abort();
        if (o.cmd == CMD_LOCK && o.argv && !o.argv[0]) abort();
        if (o.user.value) t0 += strlen(o.user.value);
        if (o.password.value) t0 += strlen(o.password.value);
        if ((o.cert == NULL) != (o.key == NULL)) abort();
        /* The pointers must point into our argv strings; read them all. */
        size_t t = strlen(o.name);
        if (o.value) t += strlen(o.value);
        if (o.endpoints) t += strlen(o.endpoints);
        for (char **a = o.argv; a && *a; a++)
            t += strlen(*a);
        (void)t;
        if (o.ttl_s < 0 || o.dial_timeout_ms < 0) abort();
        if (o.grace_ms < (o.argv && o.argv[0] ? -1 : 0)) abort(); /* -1: run's default */
    }
    free(buf);
    return 0;
}
