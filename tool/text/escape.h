/* SPDX-License-Identifier: MIT */
/* Escaping of untrusted bytes (etcd keys and values, text from the server) before
 * they reach a terminal or a log: control characters could move the cursor,
 * recolour or retitle the terminal, or start a forged log line. */
#ifndef ELECTOR_TOOL_ESCAPE_H
#define ELECTOR_TOOL_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes s (n bytes, any bytes) to out (cap bytes, always NUL-terminated when cap
 * > 0) with these shown as text: \n \r \t, \\ for a backslash, \xNN for other C0
 * controls, DEL, C1 controls (U+0080-U+009F) and bytes that are not UTF-8, and
 * \u{XXXX} for the Unicode line separators and bidirectional controls (U+2028,
 * U+2029, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069). Valid UTF-8 text passes
 * unchanged. Returns the length of the whole result, as snprintf does. */
size_t tool_escape(char *out, size_t cap, const void *s, size_t n);

/* The same into a malloc'd string; NULL when out of memory. */
char *tool_escape_dup(const void *s, size_t n);

/* The tool's one UTF-8 decoder: the length of the valid UTF-8 sequence at s
 * (n > 0 bytes; RFC 3629: no overlongs, no surrogates, at most U+10FFFF) and its
 * code point in *cp (if cp is not NULL), or 0 if s does not start one. */
size_t tool_utf8_seq(const void *s, size_t n, uint32_t *cp);

/* True when s (n bytes) is valid UTF-8 (RFC 3629: no overlongs, no surrogates,
 * at most U+10FFFF). */
bool tool_utf8_valid(const void *s, size_t n);

#endif
