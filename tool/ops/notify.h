/* SPDX-License-Identifier: MIT */
/* systemd's service notification protocol, without libsystemd: datagrams of
 * "VAR=VALUE\n..." to the unix socket named by $NOTIFY_SOCKET (a path, or an
 * abstract name when it starts with '@'), as sd_notify(3) documents. No threads:
 * the tool's event loop asks when the next watchdog ping is due and sends it. */
#ifndef ELECTOR_TOOL_NOTIFY_H
#define ELECTOR_TOOL_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

typedef struct tool_notify tool_notify;

/* From the environment: $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID, which
 * are then unset (a command that `run` starts does not inherit them: systemd
 * would take its messages for ours, or ignore them). Returns NULL when
 * $NOTIFY_SOCKET is unset or empty; NULL with a message in err when it cannot be
 * used (a malformed name, no socket). The watchdog is on when $WATCHDOG_USEC is a
 * positive number and $WATCHDOG_PID, if set, is this process. */
tool_notify *tool_notify_open(char *err, size_t cap);
void tool_notify_free(tool_notify *n); /* NULL is a no-op */

/* Sends one datagram (e.g. "READY=1\nSTATUS=leading"). 0, or -1 with errno. */
int tool_notify_send(tool_notify *n, const char *msg);

/* The watchdog's ping interval in ms ($WATCHDOG_USEC / 2), 0 when off. */
int64_t tool_notify_watchdog_ms(const tool_notify *n);

/* ms until the next WATCHDOG=1 is due at now_ms (0: now), -1 when off. */
int64_t tool_notify_timeout(const tool_notify *n, int64_t now_ms);

/* Sends WATCHDOG=1 when due at now_ms. */
void tool_notify_tick(tool_notify *n, int64_t now_ms);

#endif
