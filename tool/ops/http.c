/* SPDX-License-Identifier: MIT */
/* The tool's HTTP endpoint on libmicrohttpd, driven by the tool's own poll()
 * loop: MHD_USE_EPOLL without a polling thread, so MHD's epoll set is the one
 * fd to watch and MHD_run() does the work. See http.h. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <microhttpd.h>
#include "ops/http.h"
#include "ops/http_addr.h"

/* libmicrohttpd is loaded only when --http is used: linked normally, it brings
 * GnuTLS, p11-kit, nettle and gmp into every elector process (about 3 MB of RSS
 * and p11-kit's start-up work) whether or not the endpoint is wanted. */
#include <dlfcn.h>

static struct {
    void *handle;
    __typeof__(MHD_add_response_header) *add_response_header;
    __typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
    __typeof__(MHD_destroy_response) *destroy_response;
    __typeof__(MHD_get_daemon_info) *get_daemon_info;
    __typeof__(MHD_get_timeout) *get_timeout;
    __typeof__(MHD_lookup_connection_value_n) *lookup_connection_value_n;
    __typeof__(MHD_queue_response) *queue_response;
    __typeof__(MHD_run) *run;
    __typeof__(MHD_start_daemon) *start_daemon;
    __typeof__(MHD_stop_daemon) *stop_daemon;
} mhd;

static const char *const mhd_names[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};

static int mhd_load(char *err, size_t cap)
{
    if (mhd.handle) return 0;
    const char *const *names = mhd_names;
    void *h = NULL;
    for (size_t i = 0; !h && i < sizeof(mhd_names) / sizeof(mhd_names[0]); i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, cap, "--http needs libmicrohttpd (Debian: libmicrohttpd12): %s",
                 dlerror());
        return -1;
    }
#define LOAD(f)                                                                          \
    if (!(*(void **)&mhd.f = dlsym(h, "MHD_" #f))) {                                     \
        snprintf(err, cap, "libmicrohttpd lacks MHD_%s", #f);                            \
        dlclose(h);                                                                      \
        return -1;                                                                       \
    }
    LOAD(add_response_header)
    LOAD(create_response_from_buffer)
    LOAD(destroy_response)
    LOAD(get_daemon_info)
    LOAD(get_timeout)
    LOAD(lookup_connection_value_n)
    LOAD(queue_response)
    LOAD(run)
    LOAD(start_daemon)
    LOAD(stop_daemon)
#undef LOAD
    mhd.handle = h;
    return 0;
}

/* Limits against slow or greedy clients (see tool_http_start). */
#define HTTP_MAX_CONNS 128
#define HTTP_PER_IP 16
#define HTTP_IDLE_S 5
#define HTTP_CONN_MEM (16 * 1024) /* per connection; our requests are one line */

#if MHD_VERSION < 0x00097002
typedef int MHD_Result_; /* before 0.9.71 handlers returned int */
#else
typedef enum MHD_Result MHD_Result_;
#endif

struct tool_http {
    struct MHD_Daemon *d;
    tool_view_fn fn;
    void *ud;
    int fd;
    int port;
    char addr[96]; /* what we listen on, "[::1]:8080" */
    int starting;  /* collect MHD's messages into log */
    char log[256];
};

/* ---------------------------------------------------------------- requests */

static MHD_Result_ reply(struct MHD_Connection *c, unsigned status, const char *ctype,
                         char *body, int owned)
{
    struct MHD_Response *r;
    if (!body) { /* a renderer ran out of memory */
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        ctype = "text/plain; charset=utf-8";
        body = "out of memory\n";
        owned = 0;
    }
    r = mhd.create_response_from_buffer(
        strlen(body), body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (owned) free(body);
        return MHD_NO; /* MHD closes the connection */
    }
    mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    mhd.add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        mhd.add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    MHD_Result_ ret = mhd.queue_response(c, status, r);
    mhd.destroy_response(r);
    return ret;
}

#define TEXT "text/plain; charset=utf-8"

/* *con_cls once the request's headers have been seen: its address is the mark. */
static char seen;

/* GET /healthz: the session's health, or ?leader: whether we lead. */
static MHD_Result_ healthz(struct MHD_Connection *c, const tool_view *v)
{
    const char *val = NULL;
    size_t vlen = 0;
    /* ?leader, ?leader=1, ?leader=true ask for leadership; ?leader=0 does not. */
    int want_leader = mhd.lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "leader", 6,
                                                    &val, &vlen) == MHD_YES &&
                      !(val && (strcmp(val, "0") == 0 || strcmp(val, "false") == 0));
    if (want_leader)
        return v->is_leader
                   ? reply(c, MHD_HTTP_OK, TEXT, "ok\n", 0)
                   : reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, TEXT, "not leader\n", 0);
    /* --health-cmd: its state in the body (the status is the session's). */
    if (v->health)
        return reply(c, v->session_healthy ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                     TEXT, tool_healthz_body(v), 1);
    return v->session_healthy
               ? reply(c, MHD_HTTP_OK, TEXT, "ok\n", 0)
               : reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, TEXT, "unhealthy\n", 0);
}

static MHD_Result_ on_request(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload_data, size_t *upload_data_size,
                              void **con_cls)
{
    (void)version;
    (void)upload_data;
    tool_http *h = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        /* Answered at once, without reading a body: MHD closes the connection. */
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT, "method not allowed\n", 0);
    }
    /* A response queued in the first call (headers only) makes MHD 0.9.7x
     * close the connection; answering in a later call keeps it alive. */
    if (*con_cls != &seen) {
        *con_cls = &seen;
        return MHD_YES;
    }
    if (*upload_data_size) { /* a GET with a body: ignored */
        *upload_data_size = 0;
        return MHD_YES;
    }
    int which = strcmp(url, "/leader") == 0    ? 1
                : strcmp(url, "/healthz") == 0 ? 2
                : strcmp(url, "/metrics") == 0 ? 3
                                               : 0;
    if (!which) return reply(c, MHD_HTTP_NOT_FOUND, TEXT, "not found\n", 0);

    tool_view v;
    memset(&v, 0, sizeof(v));
    h->fn(h->ud, &v);
    switch (which) {
    case 1:
        return reply(c, MHD_HTTP_OK, "application/json", tool_leader_json(&v), 1);
    case 2:
        return healthz(c, &v);
    default:
        return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                     tool_metrics_render(&v), 1);
    }
}

/* ---------------------------------------------------------------- daemon */

/* MHD's own messages: the last one is kept while starting, to explain a failure;
 * dropped afterwards (client misbehaviour is not the tool's news). */
static void on_log(void *cls, const char *fmt, va_list ap)
{
    tool_http *h = cls;
    if (!h->starting) return;
    vsnprintf(h->log, sizeof(h->log), fmt, ap);
    size_t n = strlen(h->log);
    while (n > 0 && (h->log[n - 1] == '\n' || h->log[n - 1] == '.'))
        h->log[--n] = 0;
}

/* Why the daemon did not start, into err: MHD's message names the step that
 * failed (errno alone may be a later step's). */
static void start_error(tool_http *h, int e, char *err, size_t cap)
{
    /* "Failed to bind to port 80: Permission denied" -> "bind: Permission denied" */
    unsigned p;
    int off = 0;
    if (sscanf(h->log, "Failed to bind to port %u: %n", &p, &off) == 1 && off > 6) {
        memmove(h->log + 6, h->log + off, strlen(h->log + off) + 1);
        memcpy(h->log, "bind: ", 6);
    }
    tool_http_seterr(err, cap, "cannot listen on %s: %s", h->addr,
                     h->log[0] ? h->log
                     : e       ? strerror(e)
                               : "libmicrohttpd could not start");
}

/* The port the daemon listens on (asked: port, 0 for an ephemeral one). */
static int bound_port(tool_http *h, int port)
{
    const union MHD_DaemonInfo *i = mhd.get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = i && i->port ? i->port : port;
    if (bound == 0) { /* ephemeral and MHD did not say: ask the socket */
        i = mhd.get_daemon_info(h->d, MHD_DAEMON_INFO_LISTEN_FD);
        struct sockaddr_storage b;
        socklen_t bl = sizeof(b);
        if (i && getsockname(i->listen_fd, (struct sockaddr *)&b, &bl) == 0)
            bound = ntohs(b.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&b)->sin6_port
                                                  : ((struct sockaddr_in *)&b)->sin_port);
    }
    return bound;
}

tool_http *tool_http_start(const char *addr, tool_view_fn fn, void *ud, char *err,
                           size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    int port;
    if (tool_http_parse_addr(addr, &ss, &sslen, &port, err, cap) != 0) return NULL;
    if (mhd_load(err, cap) != 0) return NULL;
    tool_http *h = calloc(1, sizeof(*h));
    if (!h) {
        tool_http_seterr(err, cap, "cannot listen on %s: out of memory", addr);
        return NULL;
    }
    h->fn = fn;
    h->ud = ud;
    tool_http_show_addr((struct sockaddr *)&ss, sslen, port, h->addr, sizeof(h->addr));
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->starting = 1;
    errno = 0;
    /* Slow clients must not starve the probes (a client that sends one header
     * line every few seconds holds its connection): an idle connection is cut
     * after HTTP_IDLE_S, and one address may hold at most HTTP_PER_IP of the
     * HTTP_MAX_CONNS connections, so others (the prober) always find room. */
    h->d = mhd.start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
        on_log, h, /* must come first */
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)HTTP_MAX_CONNS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)HTTP_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEM, MHD_OPTION_END);
    int e = errno;
    h->starting = 0;
    if (!h->d) {
        start_error(h, e, err, cap);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *i = mhd.get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
    h->fd = i ? i->epoll_fd : -1;
    h->port = bound_port(h, port);
    if (h->fd < 0 || h->port <= 0) {
        tool_http_seterr(err, cap,
                         "cannot listen on %s: libmicrohttpd gave no epoll fd or port",
                         h->addr);
        mhd.stop_daemon(h->d);
        free(h);
        return NULL;
    }
    tool_http_show_addr((struct sockaddr *)&ss, sslen, h->port, h->addr, sizeof(h->addr));
    return h;
}

int tool_http_fd(const tool_http *h)
{
    return h->fd;
}

int tool_http_port(const tool_http *h)
{
    return h->port;
}

const char *tool_http_addr(const tool_http *h)
{
    return h->addr;
}

int64_t tool_http_timeout(tool_http *h)
{
    MHD_UNSIGNED_LONG_LONG ms;
    if (mhd.get_timeout(h->d, &ms) != MHD_YES) return -1;
    return ms > (MHD_UNSIGNED_LONG_LONG)INT64_MAX ? INT64_MAX : (int64_t)ms;
}

void tool_http_process(tool_http *h)
{
    mhd.run(h->d);
}

static int watch_fd(void *ud, short *events)
{
    *events = POLLIN;
    return tool_http_fd(ud);
}

static int64_t watch_timeout(void *ud)
{
    return tool_http_timeout(ud);
}

static void watch_process(void *ud, short revents)
{
    (void)revents; /* libmicrohttpd looks at its sockets itself */
    tool_http_process(ud);
}

tool_watcher tool_http_watcher(tool_http *h)
{
    return (tool_watcher){h, watch_fd, watch_timeout, watch_process};
}

void tool_http_stop(tool_http *h)
{
    if (!h) return;
    mhd.stop_daemon(h->d);
    free(h);
}
