/* SPDX-License-Identifier: MIT */
/* A JSON parser and a validator for the subset of JSON Schema (draft 2020-12)
 * that docs/elector-events.schema.json and docs/elector-log.schema.json use,
 * so the tests can check every line the tool writes against the documented
 * contract without a dependency. Supported keywords: type, properties, required,
 * additionalProperties, dependentRequired, enum, const, pattern (POSIX ERE, which
 * agrees with ECMA-262 on the patterns used), minimum, minLength, oneOf, allOf,
 * $ref (to #/$defs/...), boolean schemas; annotations ($schema, $id, title,
 * description, $comment, $defs) are skipped. Any other keyword fails the
 * validation, so the subset cannot silently shrink the contract. */
#ifndef ELECTOR_TEST_JSON_CHECK_H
#define ELECTOR_TEST_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>

typedef enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jv {
    jtype t;
    bool b;
    double num;
    bool is_int; /* written without fraction or exponent */
    char *str;   /* J_STR: UTF-8, NUL-terminated (len excludes the NUL) */
    size_t len;
    struct jv **items; /* J_ARR: values; J_OBJ: values, with keys */
    char **keys;
    size_t n;
} jv;

/* Parses exactly one JSON value (surrounding whitespace allowed). NULL on error,
 * with a message in err. */
jv *json_parse(const char *s, size_t n, char *err, size_t cap);
void json_free(jv *v);
const jv *json_get(const jv *obj, const char *key);

/* 0 if inst is valid against schema (root: for $ref), else -1 with a message. */
int json_validate(const jv *root, const jv *schema, const jv *inst, char *err,
                  size_t cap);

/* Checks one line the tool wrote: an event (it has "event") against
 * docs/elector-events.schema.json, plus what a schema cannot say (each text
 * field equals its base64 field decoded; the text is there exactly when the
 * bytes are UTF-8), or a log message (it has "level") against
 * docs/elector-log.schema.json. Returns 0, or -1 with a message. */
int json_check_line(const char *line, size_t n, char *err, size_t cap);

/* Checks every line of text that starts with '{"event"' or '{"time"'; a failure
 * fails the test (ASSERT). Returns how many lines were checked. Counted in
 * json_checked_total(). */
int json_check_text(const char *text);
long json_checked_total(void);

/* Decodes standard base64 into a malloc'd buffer; NULL if invalid. */
unsigned char *json_b64_decode(const char *s, size_t *out_len);

#endif
