/* SPDX-License-Identifier: MIT */
/* The allocation-failure injector of `elector_oom`, a test-only build of the
 * elector tool (test/CMakeLists.txt; test/test_tool_oom.c runs it). The program
 * is the tool's own objects and the static libelector, linked with
 * -Wl,--wrap= for every allocating call they make (malloc, calloc, realloc,
 * strdup, strndup, asprintf, vasprintf and their _FORTIFY_SOURCE forms
 * __asprintf_chk / __vasprintf_chk, open_memstream), so each such call comes
 * here. Nothing in tool/ changes for it; the real `elector` is not linked with
 * this. Allocations made inside shared libraries (libc's own, nghttp2,
 * protobuf-c's default allocator, libmicrohttpd) are not counted.
 *
 * Environment (read once, at start):
 *   ELECTOR_TOOL_OOM_N=n       arms the injector: count every allocation of this
 *                              process from its start, and fail the nth (only
 *                              that one, as test_oom does); 0 counts only
 *   ELECTOR_TOOL_OOM_REPORT=path  at exit, write "allocations A failed F\n" there
 *   ELECTOR_TOOL_OOM_TRACE=1   the failing call's stack on stderr
 *                              (addresses for addr2line -e elector_oom -f -i)
 *   ELECTOR_TOOL_OOM_LEAK=1    leak a block at start (the test's check that
 *                              LeakSanitizer sees a leak of elector_oom)
 *   ELECTOR_TOOL_OOM_SITES=path  at exit, one line per allocation counted (up
 *                              to 65536): its number and its call site, as an
 *                              offset into the program (hex, for addr2line -e
 *                              elector_oom: the address after the call)
 * Unset: every call goes straight to the real function.
 *
 * Only the process that was started counts: its forks (the guard of `run`, a
 * health check's reaper) allocate freely (a pthread_atfork handler disarms
 * them), so N names one allocation of elector itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_vasprintf(char **p, const char *fmt, va_list ap);
int __real___vasprintf_chk(char **p, int flag, const char *fmt, va_list ap);
FILE *__real_open_memstream(char **p, size_t *n);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_asprintf(char **p, const char *fmt, ...);
int __wrap_vasprintf(char **p, const char *fmt, va_list ap);
int __wrap___asprintf_chk(char **p, int flag, const char *fmt, ...);
int __wrap___vasprintf_chk(char **p, int flag, const char *fmt, va_list ap);
FILE *__wrap_open_memstream(char **p, size_t *n);

static bool armed;
static long fail_at; /* 0: none fails */
static long count;   /* allocations seen */
static long failed;  /* allocations made to fail */
static const char *report_path;
static const char *sites_path;
static bool trace;
#define MAX_SITES 65536
static uintptr_t sites[MAX_SITES]; /* call sites, as offsets into the program */
extern char __executable_start[];  /* the linker's: where the program is mapped */

static bool inject(void *caller)
{
    if (!__atomic_load_n(&armed, __ATOMIC_RELAXED)) return false;
    long n = __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
    if (n <= MAX_SITES) sites[n - 1] = (uintptr_t)caller - (uintptr_t)__executable_start;
    if (n != fail_at) return false;
    __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
    if (trace) {
        static const char msg[] = "elector_oom: this allocation fails:\n";
        if (write(2, msg, sizeof(msg) - 1) < 0) {
        }
        void *bt[24];
        backtrace_symbols_fd(bt, backtrace(bt, 24), 2);
    }
    errno = ENOMEM;
    return true;
}

#define RA __builtin_return_address(0)

static void disarm_in_child(void)
{
    armed = false;
    report_path = sites_path = NULL;
}

/* At exit (an atexit handler, so before the destructors): from here on
 * nothing fails. libgcov's own dump of the counters (coverage builds) runs
 * later, in a destructor, and allocates through these wrappers too. */
static void write_report(void)
{
    armed = false;
    FILE *f = report_path ? fopen(report_path, "w") : NULL;
    if (f) {
        fprintf(f, "allocations %ld failed %ld\n", count, failed);
        fclose(f);
    }
    f = sites_path ? fopen(sites_path, "w") : NULL;
    if (f) {
        for (long i = 0; i < count && i < MAX_SITES; i++)
            fprintf(f, "%ld %" PRIxPTR "\n", i + 1, sites[i]);
        fclose(f);
    }
}

static void *volatile leaked;

__attribute__((constructor)) static void oom_init(void)
{
    if (getenv("ELECTOR_TOOL_OOM_LEAK")) {
        leaked = __real_malloc(64);
        leaked = NULL;
    }
    const char *n = getenv("ELECTOR_TOOL_OOM_N");
    if (!n || !*n) return;
    fail_at = strtol(n, NULL, 10);
    report_path = getenv("ELECTOR_TOOL_OOM_REPORT");
    sites_path = getenv("ELECTOR_TOOL_OOM_SITES");
    trace = getenv("ELECTOR_TOOL_OOM_TRACE") != NULL;
    if (report_path && !*report_path) report_path = NULL;
    if (sites_path && !*sites_path) sites_path = NULL;
    pthread_atfork(NULL, NULL, disarm_in_child);
    atexit(write_report);
    armed = true;
}

void *__wrap_malloc(size_t n)
{
    return inject(RA) ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    return inject(RA) ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    return inject(RA) ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    return inject(RA) ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return inject(RA) ? NULL : __real_strndup(s, n);
}

/* On failure *p is left as it was, as glibc's asprintf does. */
int __wrap_vasprintf(char **p, const char *fmt, va_list ap)
{
    return inject(RA) ? -1 : __real_vasprintf(p, fmt, ap);
}

int __wrap_asprintf(char **p, const char *fmt, ...)
{
    if (inject(RA)) return -1;
    va_list ap;
    va_start(ap, fmt);
    int rc = __real_vasprintf(p, fmt, ap);
    va_end(ap);
    return rc;
}

int __wrap___vasprintf_chk(char **p, int flag, const char *fmt, va_list ap)
{
    return inject(RA) ? -1 : __real___vasprintf_chk(p, flag, fmt, ap);
}

int __wrap___asprintf_chk(char **p, int flag, const char *fmt, ...)
{
    if (inject(RA)) return -1;
    va_list ap;
    va_start(ap, fmt);
    int rc = __real___vasprintf_chk(p, flag, fmt, ap);
    va_end(ap);
    return rc;
}

FILE *__wrap_open_memstream(char **p, size_t *n)
{
    return inject(RA) ? NULL : __real_open_memstream(p, n);
}
