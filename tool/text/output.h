/* SPDX-License-Identifier: MIT */
/* What the tool writes on stdout: keys and values (the simple format, as
 * etcdctl prints them), and the -w json events, whose contract is
 * docs/elector-events.schema.json. Pure encoders plus thin writers. */
#ifndef ELECTOR_TOOL_OUTPUT_H
#define ELECTOR_TOOL_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One -w json event. Byte strings (key, value, predecessor) appear twice: as
 * text ("key") when they are valid UTF-8, and always as base64 ("key_base64"),
 * so that every byte can be recovered. NULL pointers leave fields out. */
typedef struct tool_event_out {
    const char *event;  /* waiting, elected, proclaimed, proclaim_failed, lost, resigned,
                           failed, leader, no_leader, healthy, unhealthy */
    const char *name;   /* the election */
    const uint8_t *key; /* ours (campaign, run, lock) or the leader's (observe, leader) */
    size_t key_len;
    const uint8_t *value; /* the value under key */
    size_t value_len;
    const uint8_t *predecessor; /* waiting: the key just ahead of ours */
    size_t predecessor_len;
    int64_t token;      /* key's create revision; 0: left out */
    int64_t lease;      /* key's lease; 0: left out */
    const char *error;  /* ELECTOR_E* name (lost, failed, proclaim_failed, ...) */
    const char *reason; /* its text */
    const char *check;  /* healthy, unhealthy: the last check's result (NULL: none) */
    int failures;       /* with check: consecutive failures counted */
    int64_t mono_ns;    /* CLOCK_MONOTONIC of the change */
    int64_t unix_ms;    /* the same instant on the wall clock */
} tool_event_out;

/* The event as one line of JSON (no newline) in a malloc'd string; NULL when
 * out of memory. */
char *tool_event_json(const tool_event_out *e);

/* Standard base64 with padding (RFC 4648 section 4) into a malloc'd string. */
char *tool_base64(const void *s, size_t n);

/* Writes line and a newline to f and flushes. Returns 0, or -1 with errno. */
int tool_write_line(FILE *f, const char *line);

/* Writes a key and a value on two lines, as etcdctl does: the bytes as they are
 * (escaped when tty: stdout is a terminal), or with hex, every byte as \xNN
 * (etcdctl --hex). Flushes. Returns 0, or -1 with errno. */
int tool_write_kv(FILE *f, bool tty, bool hex, const uint8_t *k, size_t kl,
                  const uint8_t *v, size_t vl);

#endif
