/* SPDX-License-Identifier: MIT */
/* JSON strings, shared by the log (--log-format json), the -w json events and the
 * HTTP endpoint's renderers; growing a malloc'd buffer. */
#ifndef ELECTOR_TOOL_JSON_H
#define ELECTOR_TOOL_JSON_H

#include <stddef.h>
#include <stdint.h>

/* Makes room in a malloc'd buffer (*buf, len bytes used, *cap allocated) for n
 * more bytes plus a NUL; returns 0 or -1 (overflow, out of memory). */
int tool_buf_reserve(char **buf, size_t len, size_t *cap, size_t n);

/* Appends s (len bytes, any bytes) as a JSON string literal, with quotes, to a
 * malloc'd buffer (*buf, *len, *cap); returns 0 or -1 on allocation failure.
 * Bytes that are not valid UTF-8 are written as \\u00XX of each byte. */
int tool_json_str(char **buf, size_t *len, size_t *cap, const uint8_t *s, size_t n);

#endif
