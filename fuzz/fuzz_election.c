/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the election, observe and session layers (src/election/session.c,
 * election.c, observe.c over the real client engine) against a server whose
 * every answer comes from the fuzz input.
 *
 * The server is in this process: nghttp2's server side on the other end of a
 * loopback TCP connection, pumped in the same loop as the client. It decodes each
 * request message it receives (LeaseGrant, LeaseKeepAlive, Txn, Range, Watch,
 * LeaseRevoke, ...) and answers it with the next directive of the input, so the
 * fuzzer can play a plausible etcd (SANE replies shaped by knobs) and break it
 * anywhere (raw protobuf, wrong kinds, errors, resets, broken framing, huge
 * announced sizes, GOAWAY, unsolicited watch events).
 *
 * Input: [0] flags, then directives until the input ends:
 *   [op] [len] [len bytes of payload]
 *   op & 0x0f: 0 SANE  a well-formed reply built from the request and knobs
 *                      (payload bytes read one by one; 0 when used up)
 *              1 RAW   the payload as the reply message
 *              2 STATUS grpc-status knob % 17, grpc-message from the payload
 *              3 RST   RST_STREAM with code knob % 14
 *              4 DATA  the payload as raw DATA bytes (framing left to the fuzzer)
 *              5 HOLD  no answer
 *              6 GOAWAY (knob bit 0: then close the connection)
 *              7 BIG   a prefix announcing knob32 bytes, then up to
 *                      knob * 16 KiB of them
 *   op & 0x80: unsolicited: a WatchResponse (events from knobs) on the latest
 *              watch stream instead of answering the oldest request.
 * flags: bit 0 campaign (a session and an election), bit 1 observe, bit 2 a
 *   second election on the same session, bit 3 proclaim when elected, bit 4
 *   guarded Txn when elected, bit 5 resign at the first event, bit 6 free the
 *   election from its own callback at LOST/FAILED, bit 7 close the session from
 *   the observer's callback.
 *
 * Oracle, besides ASan/UBSan/LSan and libFuzzer's memory limits: the callback
 * contracts. Election events follow WAITING* (ELECTED PROCLAIMED* (LOST |
 * RESIGNED) | FAILED); ELECTED only while elector_is_leader() holds, with a
 * token > 0; LOST/FAILED carry a negative reason; nothing after the end of a
 * campaign. Observer: no two identical reports in a row, a LEADER has a key,
 * nothing after FAILED. Session: at most one SESSION_LOST. Unary callbacks: err
 * 0 exactly when a reply is given. */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <nghttp2/nghttp2.h>
#include "elector/election.h"
#include "transport_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int lfd = -1;
static char endpoint[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    signal(SIGPIPE, SIG_IGN);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 64) ||
        getsockname(lfd, (struct sockaddr *)&a, &al))
        abort();
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", ntohs(a.sin_port));
    return 0;
}

/* ---------------------------------------------------------------- input */

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

typedef struct knobs {
    const uint8_t *p;
    size_t n, i;
} knobs;

static unsigned k8(knobs *k)
{
    return k->i < k->n ? k->p[k->i++] : 0;
}

static uint32_t k32(knobs *k)
{
    uint32_t v = k8(k);
    v = v << 8 | k8(k);
    v = v << 8 | k8(k);
    return v << 8 | k8(k);
}

/* ---------------------------------------------------------------- server */

typedef struct sbuf {
    uint8_t *p;
    size_t len, off, cap;
} sbuf;

static void sb_put(sbuf *b, const void *p, size_t n)
{
    if (!n) return;
    if (b->off && b->off == b->len) b->off = b->len = 0;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) abort();
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void sb_prefix(sbuf *b, uint32_t n)
{
    uint8_t p[5] = {0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
                    (uint8_t)n};
    sb_put(b, p, 5);
}

static void sb_msg(sbuf *b, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *t = malloc(n ? n : 1);
    protobuf_c_message_pack(m, t);
    sb_prefix(b, (uint32_t)n);
    sb_put(b, t, n);
    free(t);
}

typedef struct sstream {
    struct sstream *next;
    int32_t id;
    char method[32];
    sbuf req, out;
    bool responded, end, deferred, closed, is_watch;
} sstream;

/* A request message waiting for its directive. */
typedef struct pending {
    struct pending *next;
    sstream *st;
    uint8_t *msg;
    size_t len;
} pending;

typedef struct server {
    int fd;
    nghttp2_session *h2;
    sbuf wout;
    sstream *streams;
    pending *head, *tail;
    sstream *watch; /* latest watch stream */
    int64_t watch_id;
    bool dead;
    /* Keys seen in requests, for plausible replies. */
    uint8_t keys[4][64];
    size_t klen[4];
    int nkeys;
} server;

static sstream *stream_get(server *s, int32_t id, bool create)
{
    for (sstream *x = s->streams; x; x = x->next)
        if (x->id == id) return x;
    if (!create) return NULL;
    sstream *x = calloc(1, sizeof(*x));
    x->id = id;
    x->next = s->streams;
    s->streams = x;
    return x;
}

static ssize_t s_read_cb(nghttp2_session *h2, int32_t sid, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)ud;
    sstream *st = src->ptr;
    size_t avail = st->out.len - st->out.off;
    if (!avail) {
        if (st->end) {
            *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
            nghttp2_nv tr[] = {{(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, 0}};
            nghttp2_submit_trailer(h2, sid, tr, 1);
            return 0;
        }
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = avail < len ? avail : len;
    memcpy(buf, st->out.p + st->out.off, n);
    st->out.off += n;
    return (ssize_t)n;
}

static void kick(server *s, sstream *st)
{
    if (st->closed) return;
    if (!st->responded) {
        st->responded = true;
        nghttp2_nv hd[] = {
            {(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
            {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0}};
        nghttp2_data_provider dp = {.source.ptr = st, .read_callback = s_read_cb};
        nghttp2_submit_response(s->h2, st->id, hd, 2, &dp);
    } else if (st->deferred) {
        st->deferred = false;
        nghttp2_session_resume_data(s->h2, st->id);
    }
}

static void note_key(server *s, const ProtobufCBinaryData *k)
{
    if (!k->len || k->len > 64 || s->nkeys >= 4) return;
    for (int i = 0; i < s->nkeys; i++)
        if (s->klen[i] == k->len && !memcmp(s->keys[i], k->data, k->len)) return;
    memcpy(s->keys[s->nkeys], k->data, k->len);
    s->klen[s->nkeys++] = k->len;
}

static Etcdserverpb__ResponseHeader hdr = ETCDSERVERPB__RESPONSE_HEADER__INIT;

/* A KeyValue from knobs, its key one of those seen (or made up). */
static void make_kv(server *s, knobs *k, Mvccpb__KeyValue *kv, uint8_t *keybuf)
{
    mvccpb__key_value__init(kv);
    unsigned pick = k8(k);
    if (s->nkeys && pick % 5 != 4) {
        int i = (int)(pick % (unsigned)s->nkeys);
        memcpy(keybuf, s->keys[i], s->klen[i]);
        kv->key.len = s->klen[i];
    } else {
        int n = snprintf((char *)keybuf, 64, "e/%x", pick);
        kv->key.len = (size_t)n;
    }
    kv->key.data = keybuf;
    kv->create_revision = (int64_t)(k8(k) % 8) - 1;
    kv->mod_revision = kv->create_revision + (int64_t)(k8(k) % 3);
    kv->version = 1;
    kv->lease = (int64_t)k8(k);
    static uint8_t val[4] = "vvv";
    kv->value.data = val;
    kv->value.len = k8(k) % 4;
}

static void sane_reply(server *s, sstream *st, const uint8_t *msg, size_t len, knobs *k)
{
    hdr.revision = 90 + (int64_t)(k8(k) % 20);
    const char *m = st->method;
    if (!strcmp(m, "LeaseGrant")) {
        Etcdserverpb__LeaseGrantResponse r = ETCDSERVERPB__LEASE_GRANT_RESPONSE__INIT;
        r.header = &hdr;
        r.id = 0x694d0000 | (int64_t)k8(k);
        r.ttl = (int64_t)(k8(k) % 12) + 5 - (k8(k) == 0xfe ? 5 : 0);
        if (k8(k) == 0xff) r.error = "lease error";
        sb_msg(&st->out, &r.base);
        st->end = true;
    } else if (!strcmp(m, "LeaseKeepAlive")) {
        Etcdserverpb__LeaseKeepAliveRequest *q =
            etcdserverpb__lease_keep_alive_request__unpack(NULL, len, msg);
        Etcdserverpb__LeaseKeepAliveResponse r =
            ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
        r.header = &hdr;
        r.id = q ? q->id : 0;
        r.ttl = (int64_t)(k8(k) % 12) - 1;
        if (q) etcdserverpb__lease_keep_alive_request__free_unpacked(q, NULL);
        sb_msg(&st->out, &r.base);
    } else if (!strcmp(m, "Txn")) {
        Etcdserverpb__TxnRequest *q = etcdserverpb__txn_request__unpack(NULL, len, msg);
        Etcdserverpb__TxnResponse r = ETCDSERVERPB__TXN_RESPONSE__INIT;
        r.header = &hdr;
        r.succeeded = k8(k) & 1;
        Etcdserverpb__ResponseOp ops[8], *opp[8];
        Etcdserverpb__RangeResponse rr[8];
        Etcdserverpb__PutResponse pr = ETCDSERVERPB__PUT_RESPONSE__INIT;
        Etcdserverpb__DeleteRangeResponse dr = ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
        Mvccpb__KeyValue kvs[8], *kvp[8];
        uint8_t keybufs[8][64];
        size_t nops = 0;
        if (q) {
            for (size_t i = 0; i < q->n_compare; i++)
                note_key(s, &q->compare[i]->key);
            Etcdserverpb__RequestOp **req = r.succeeded ? q->success : q->failure;
            size_t nreq = r.succeeded ? q->n_success : q->n_failure;
            nops = nreq < 8 ? nreq : 8;
            for (size_t i = 0; i < nops; i++) {
                etcdserverpb__response_op__init(&ops[i]);
                opp[i] = &ops[i];
                int kind = (int)req[i]->request_case;
                unsigned twist = k8(k);
                if (twist >= 0xf0) kind = (int)(twist % 5); /* a wrong kind, or none */
                ops[i].response_case = (Etcdserverpb__ResponseOp__ResponseCase)kind;
                if (kind == 1) {
                    etcdserverpb__range_response__init(&rr[i]);
                    rr[i].header = &hdr;
                    if (k8(k) & 1) {
                        make_kv(s, k, &kvs[i], keybufs[i]);
                        kvp[i] = &kvs[i];
                        rr[i].kvs = &kvp[i];
                        rr[i].n_kvs = 1;
                    }
                    ops[i].response_range = &rr[i];
                } else if (kind == 2) {
                    ops[i].response_put = &pr;
                } else if (kind == 3) {
                    ops[i].response_delete_range = &dr;
                } else if (kind == 4) {
                    ops[i].response_case = 0; /* no nested Txn from here */
                }
            }
            if (k8(k) == 0xff && nops) nops--; /* a result missing */
        }
        r.n_responses = nops;
        r.responses = opp;
        sb_msg(&st->out, &r.base);
        st->end = true;
        if (q) etcdserverpb__txn_request__free_unpacked(q, NULL);
    } else if (!strcmp(m, "Range")) {
        Etcdserverpb__RangeRequest *q =
            etcdserverpb__range_request__unpack(NULL, len, msg);
        if (q) {
            note_key(s, &q->key);
            etcdserverpb__range_request__free_unpacked(q, NULL);
        }
        Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
        r.header = &hdr;
        Mvccpb__KeyValue kvs[2], *kvp[2];
        uint8_t keybufs[2][64];
        size_t n = k8(k) % 3;
        for (size_t i = 0; i < n; i++) {
            make_kv(s, k, &kvs[i], keybufs[i]);
            kvp[i] = &kvs[i];
        }
        r.kvs = kvp;
        r.n_kvs = n;
        r.count = (int64_t)n;
        sb_msg(&st->out, &r.base);
        st->end = true;
    } else if (!strcmp(m, "Watch")) {
        Etcdserverpb__WatchRequest *q =
            etcdserverpb__watch_request__unpack(NULL, len, msg);
        Etcdserverpb__WatchResponse r = ETCDSERVERPB__WATCH_RESPONSE__INIT;
        r.header = &hdr;
        if (q && q->request_union_case ==
                     ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST) {
            note_key(s, &q->create_request->key);
            unsigned how = k8(k);
            r.watch_id = how == 0xff ? -1 : q->create_request->watch_id;
            s->watch_id = q->create_request->watch_id;
            r.created = 1;
            if (how >= 0xf0 && how < 0xff) {
                r.canceled = 1;
                r.cancel_reason = "etcdserver: permission denied";
            } else if (how >= 0xe0 && how < 0xf0) {
                r.canceled = 1;
                r.compact_revision = 50;
            }
        } else if (q && q->request_union_case ==
                            ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST) {
            r.watch_id = q->cancel_request->watch_id;
            r.canceled = 1;
        }
        if (q) etcdserverpb__watch_request__free_unpacked(q, NULL);
        sb_msg(&st->out, &r.base);
    } else {
        /* LeaseRevoke, Authenticate, Put, DeleteRange...: a header. */
        Etcdserverpb__LeaseRevokeResponse r = ETCDSERVERPB__LEASE_REVOKE_RESPONSE__INIT;
        r.header = &hdr;
        sb_msg(&st->out, &r.base);
        st->end = true;
    }
    kick(s, st);
}

/* Events on the latest watch stream, not asked for by any request. */
static void watch_events(server *s, knobs *k)
{
    sstream *st = s->watch;
    if (!st || st->closed) return;
    hdr.revision = 100 + (int64_t)k8(k);
    Etcdserverpb__WatchResponse r = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    r.header = &hdr;
    r.watch_id = k8(k) == 0xff ? (int64_t)k8(k) : s->watch_id;
    Mvccpb__Event evs[3], *evp[3];
    Mvccpb__KeyValue kvs[3];
    uint8_t keybufs[3][64];
    size_t n = k8(k) % 4;
    if (n > 3) n = 3;
    for (size_t i = 0; i < n; i++) {
        mvccpb__event__init(&evs[i]);
        evp[i] = &evs[i];
        evs[i].type = k8(k) & 1 ? MVCCPB__EVENT__EVENT_TYPE__DELETE
                                : MVCCPB__EVENT__EVENT_TYPE__PUT;
        if (k8(k) != 0xff) {
            make_kv(s, k, &kvs[i], keybufs[i]);
            evs[i].kv = &kvs[i];
        }
    }
    r.events = evp;
    r.n_events = n;
    unsigned end = k8(k);
    if (end == 0xfe) r.canceled = 1;
    if (end == 0xff) {
        r.canceled = 1;
        r.compact_revision = 42;
    }
    sb_msg(&st->out, &r.base);
    kick(s, st);
}

static void apply(server *s, pending *pq, uint8_t op, const uint8_t *pl, size_t plen)
{
    knobs k = {pl, plen, 0};
    if (op & 0x80) {
        watch_events(s, &k);
        return;
    }
    if (!pq) return;
    sstream *st = pq->st;
    if (st->closed) return;
    switch (op & 0x0f) {
    case 0:
        sane_reply(s, st, pq->msg, pq->len, &k);
        break;
    case 1:
        sb_prefix(&st->out, (uint32_t)plen);
        sb_put(&st->out, pl, plen);
        if (!st->is_watch && strcmp(st->method, "LeaseKeepAlive")) st->end = true;
        kick(s, st);
        break;
    case 2: {
        if (st->responded) {
            nghttp2_submit_rst_stream(s->h2, 0, st->id, NGHTTP2_INTERNAL_ERROR);
            break;
        }
        char status[8], text[3 * 255 + 1];
        snprintf(status, sizeof(status), "%u", k8(&k) % 17);
        size_t t = 0;
        for (size_t i = 0; i < plen; i++)
            t += (size_t)sprintf(text + t, "%%%02X", pl[i]);
        text[t] = 0;
        nghttp2_nv hd[] = {
            {(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
            {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
            {(uint8_t *)"grpc-status", (uint8_t *)status, 11, strlen(status), 0},
            {(uint8_t *)"grpc-message", (uint8_t *)text, 12, t, 0}};
        st->responded = true;
        nghttp2_submit_response(s->h2, st->id, hd, 4, NULL);
        break;
    }
    case 3:
        nghttp2_submit_rst_stream(s->h2, 0, st->id, k8(&k) % 14);
        break;
    case 4:
        sb_put(&st->out, pl, plen);
        kick(s, st);
        break;
    case 6:
        nghttp2_submit_goaway(s->h2, 0, nghttp2_session_get_last_proc_stream_id(s->h2),
                              k8(&k) % 14, NULL, 0);
        if (k8(&k) & 1) s->dead = true;
        break;
    case 7: {
        uint32_t announced = k32(&k);
        size_t fill = (size_t)(k8(&k) % 64) * 16384;
        if (fill > announced) fill = announced;
        sb_prefix(&st->out, announced);
        uint8_t chunk[4096];
        memset(chunk, plen ? pl[plen - 1] : 0, sizeof(chunk));
        for (size_t i = 0; i < fill; i += sizeof(chunk))
            sb_put(&st->out, chunk, fill - i < sizeof(chunk) ? fill - i : sizeof(chunk));
        kick(s, st);
        break;
    }
    default: /* 5: hold */
        break;
    }
}

static int s_on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name,
                       size_t nl, const uint8_t *value, size_t vl, uint8_t flags,
                       void *ud)
{
    (void)h2, (void)flags;
    server *s = ud;
    if (f->hd.type != NGHTTP2_HEADERS) return 0;
    sstream *st = stream_get(s, f->hd.stream_id, true);
    if (nl == 5 && !memcmp(name, ":path", 5)) {
        const uint8_t *slash = value;
        for (size_t i = 0; i < vl; i++)
            if (value[i] == '/') slash = value + i + 1;
        size_t n = (size_t)(value + vl - slash);
        if (n >= sizeof(st->method)) n = sizeof(st->method) - 1;
        memcpy(st->method, slash, n);
        st->method[n] = 0;
        st->is_watch = !strcmp(st->method, "Watch");
        if (st->is_watch) s->watch = st;
    }
    return 0;
}

static int s_on_data(nghttp2_session *h2, uint8_t flags, int32_t sid, const uint8_t *data,
                     size_t len, void *ud)
{
    (void)h2, (void)flags;
    server *s = ud;
    sstream *st = stream_get(s, sid, false);
    if (!st) return 0;
    sb_put(&st->req, data, len);
    for (;;) {
        size_t avail = st->req.len - st->req.off;
        if (avail < 5) break;
        const uint8_t *p = st->req.p + st->req.off;
        uint32_t n =
            (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        if (avail - 5 < n) break;
        pending *pq = calloc(1, sizeof(*pq));
        pq->st = st;
        pq->msg = malloc(n ? n : 1);
        memcpy(pq->msg, p + 5, n);
        pq->len = n;
        if (s->tail)
            s->tail->next = pq;
        else
            s->head = pq;
        s->tail = pq;
        st->req.off += 5 + n;
    }
    return 0;
}

static int s_on_close(nghttp2_session *h2, int32_t sid, uint32_t code, void *ud)
{
    (void)h2, (void)code;
    server *s = ud;
    sstream *st = stream_get(s, sid, false);
    if (st) st->closed = true;
    if (st && s->watch == st) s->watch = NULL;
    return 0;
}

static void server_start(server *s, int fd)
{
    memset(s, 0, sizeof(*s));
    s->fd = fd;
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, s_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, s_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, s_on_close);
    nghttp2_session_server_new(&s->h2, cb, s);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, NULL, 0);
}

static void server_free(server *s)
{
    if (s->h2) nghttp2_session_del(s->h2);
    if (s->fd >= 0) {
        struct linger l = {1, 0};
        setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        close(s->fd);
    }
    for (sstream *x = s->streams, *n; x; x = n) {
        n = x->next;
        free(x->req.p);
        free(x->out.p);
        free(x);
    }
    for (pending *p = s->head, *n; p; p = n) {
        n = p->next;
        free(p->msg);
        free(p);
    }
    free(s->wout.p);
    s->h2 = NULL;
    s->fd = -1;
    s->streams = NULL;
    s->head = s->tail = NULL;
}

/* Reads, processes, writes what is ready; false once the connection is over. */
static bool server_step(server *s)
{
    if (!s->h2 || s->dead) return false;
    uint8_t buf[16384];
    for (int i = 0; i < 16; i++) {
        ssize_t n = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            s->dead = true;
            return false;
        }
        if (n < 0) break;
        if (nghttp2_session_mem_recv(s->h2, buf, (size_t)n) < 0) {
            s->dead = true;
            return false;
        }
    }
    for (;;) {
        while (s->wout.len - s->wout.off < 65536) {
            const uint8_t *d;
            ssize_t n = nghttp2_session_mem_send(s->h2, &d);
            if (n <= 0) break;
            sb_put(&s->wout, d, (size_t)n);
        }
        size_t avail = s->wout.len - s->wout.off;
        if (!avail) break;
        ssize_t w =
            send(s->fd, s->wout.p + s->wout.off, avail, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0) break;
        s->wout.off += (size_t)w;
    }
    return true;
}

/* ---------------------------------------------------------------- client side */

enum {
    F_CAMPAIGN = 1,
    F_OBSERVE = 2,
    F_TWO = 4,
    F_PROCLAIM = 8,
    F_GUARDED = 16,
    F_RESIGN = 32,
    F_FREE_IN_CB = 64,
    F_CLOSE_FROM_OBS = 128
};

typedef struct cand {
    elector_election *el;
    int phase; /* 0 idle, 1 campaigning, 2 leading, 3 over */
    int events;
    bool resigned; /* no WAITING or ELECTED may follow */
    struct run *r;
} cand;

typedef struct run {
    uint8_t flags;
    elector_etcd *e;
    elector_session *s;
    cand c[2];
    elector_observer *obs;
    int obs_last; /* 0 none, 1 leader, 2 no leader, 3 failed */
    int64_t obs_token;
    uint8_t obs_value[8];
    size_t obs_vlen;
    int session_lost;
} run;

static void txn_cb(elector_election *el, int err, const Etcdserverpb__TxnResponse *resp,
                   void *ud)
{
    (void)el, (void)ud;
    if (err > 0) abort();
    if (err == 0 && !resp) abort();
    if (err == ELECTOR_ENOTLEADER && !resp) abort(); /* documented: resp is set too */
}

static void el_cb(elector_election *el, const elector_event *ev, void *ud)
{
    cand *c = ud;
    run *r = c->r;
    c->events++;
    if (getenv("FUZZ_ELECTION_VERBOSE"))
        fprintf(stderr, "election: event %s reason %s: %s\n",
                elector_event_name(ev->type), elector_err_name(ev->reason), ev->detail);
    if (c->el != el) abort();
    switch (ev->type) {
    case ELECTOR_EV_WAITING:
        if (c->phase != 1 || !ev->key || c->resigned) abort();
        break;
    case ELECTOR_EV_ELECTED:
        if (c->phase != 1 || c->resigned) abort();
        if (!elector_is_leader(el) || ev->token <= 0) abort();
        c->phase = 2;
        if (r->flags & F_PROCLAIM) elector_proclaim(el, "p", 1);
        if (r->flags & F_GUARDED) {
            Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
            if (elector_guarded_txn(el, &t, txn_cb, NULL) > 0) abort();
        }
        break;
    case ELECTOR_EV_PROCLAIMED:
        if (c->phase != 2 || ev->reason > 0) abort();
        break;
    case ELECTOR_EV_LOST:
    case ELECTOR_EV_RESIGNED:
        if (c->phase != 2) abort();
        if (ev->type == ELECTOR_EV_LOST && ev->reason >= 0) abort();
        if (elector_is_leader(el)) abort();
        c->phase = 3;
        break;
    case ELECTOR_EV_FAILED:
        if (c->phase != 1 || ev->reason >= 0) abort();
        if (elector_is_leader(el)) abort();
        c->phase = 3;
        break;
    default:
        abort();
    }
    /* RESIGNED (if leading) or FAILED (if waiting) follows a resign. */
    if ((r->flags & F_RESIGN) && c->events == 1 && c->phase != 3 &&
        elector_resign(el) == 0)
        c->resigned = true;
    if ((r->flags & F_FREE_IN_CB) && c->phase == 3) {
        elector_election_free(el);
        c->el = NULL;
    }
}

static void obs_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    run *r = ud;
    if (o != r->obs || r->obs_last == 3) abort();
    if (ev->type == ELECTOR_EV_LEADER) {
        if (!ev->key) abort();
        bool same = r->obs_last == 1 && r->obs_token == ev->token &&
                    r->obs_vlen == ev->value_len &&
                    (ev->value_len > sizeof(r->obs_value) ||
                     !memcmp(r->obs_value, ev->value, ev->value_len));
        /* A repeat only after a restore: the observer read again (ERESTORED). */
        if (same && ev->value_len <= sizeof(r->obs_value) &&
            ev->reason != ELECTOR_ERESTORED)
            abort();
        r->obs_last = 1;
        r->obs_token = ev->token;
        r->obs_vlen = ev->value_len;
        if (ev->value_len <= sizeof(r->obs_value))
            memcpy(r->obs_value, ev->value, ev->value_len);
    } else if (ev->type == ELECTOR_EV_NO_LEADER) {
        if (r->obs_last == 2 && ev->reason != ELECTOR_ERESTORED) abort();
        r->obs_last = 2;
    } else if (ev->type == ELECTOR_EV_FAILED) {
        if (ev->reason != ELECTOR_EPROTO) abort();
        r->obs_last = 3;
    } else {
        abort();
    }
    if ((r->flags & F_CLOSE_FROM_OBS) && r->s) {
        elector_session_close(r->s);
        r->s = NULL;
    }
}

static void session_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s;
    run *r = ud;
    if (ev->type != ELECTOR_EV_SESSION_LOST || ev->reason >= 0) abort();
    if (r->session_lost++) abort();
}

static void pump_client(run *r, int passes)
{
    for (int i = 0; i < passes; i++)
        if (elector_etcd_run_once(r->e, 0) == ELECTOR_ECLOSED) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    run r;
    memset(&r, 0, sizeof(r));
    r.flags = data[0];
    if (!(r.flags & (F_CAMPAIGN | F_OBSERVE))) r.flags |= F_CAMPAIGN;
    input in = {data + 1, size - 1};

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoint;
    /* No timer may fire during a run: the outcome depends on the bytes only. */
    cfg.dial_timeout_ms = cfg.request_timeout_ms = 60000;
    cfg.keepalive_time_ms = cfg.keepalive_idle_ms = cfg.keepalive_timeout_ms = 60000;
    cfg.backoff_min_ms = cfg.backoff_max_ms = 60000;
    cfg.max_recv_msg_bytes = 256u << 10;
    cfg.max_decode_bytes = 2u << 20;
    r.e = elector_etcd_new(&cfg);
    if (!r.e || elector_etcd_err(r.e)) abort();
    if (r.flags & F_CAMPAIGN) {
        elector_session_config sc;
        elector_session_config_init(&sc);
        sc.ttl_s = 5; /* granted 5..16 s: the renew timer (TTL/3) stays out of a run */
        r.s = elector_session_new(r.e, &sc, session_cb, &r);
        if (!r.s) abort();
        int n = r.flags & F_TWO ? 2 : 1;
        for (int i = 0; i < n; i++) {
            r.c[i].r = &r;
            r.c[i].el = elector_election_new(r.s, i ? "f" : "e", el_cb, &r.c[i]);
            if (!r.c[i].el || elector_campaign(r.c[i].el, "v", 1)) abort();
            r.c[i].phase = 1;
        }
    }
    if (r.flags & F_OBSERVE) {
        r.obs = elector_observe(r.e, "e", obs_cb, &r);
        if (!r.obs) abort();
    }

    int sfd = -1;
    for (int i = 0; i < 50 && sfd < 0; i++) {
        if (elector_etcd_run_once(r.e, 20) == ELECTOR_ECLOSED) abort();
        sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    }
    if (sfd < 0) abort();
    int one = 1;
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    server s;
    server_start(&s, sfd);

    /* Directives, one per request (or unsolicited), with pumping in between. */
    size_t i = 0;
    int idle = 0;
    while (i < in.n && idle < 50) {
        server_step(&s);
        pump_client(&r, 2);
        server_step(&s);
        uint8_t op = in.p[i];
        bool unsolicited = op & 0x80;
        if (!unsolicited && !s.head) {
            if (s.dead) break;
            idle++;
            continue;
        }
        idle = 0;
        size_t plen = i + 1 < in.n ? in.p[i + 1] : 0;
        const uint8_t *pl = in.p + (i + 2 < in.n ? i + 2 : in.n);
        if (pl + plen > in.p + in.n) plen = (size_t)(in.p + in.n - pl);
        i += 2 + plen;
        pending *pq = NULL;
        if (!unsolicited) {
            pq = s.head;
            s.head = pq->next;
            if (!s.head) s.tail = NULL;
        }
        apply(&s, pq, op, pl, plen);
        if (pq) {
            free(pq->msg);
            free(pq);
        }
        if (s.dead) break;
    }
    for (int k = 0; k < 5; k++) {
        server_step(&s);
        pump_client(&r, 2);
    }

    if (getenv("FUZZ_ELECTION_VERBOSE"))
        fprintf(stderr,
                "election: flags %#x: candidates phase %d/%d (%d/%d events), observer "
                "%d, session lost %d, %zu of %zu input bytes used\n",
                r.flags, r.c[0].phase, r.c[1].phase, r.c[0].events, r.c[1].events,
                r.obs_last, r.session_lost, i, in.n);
    /* The end: the server goes away; every object is freed, some from the
     * loop's point of view mid-operation. */
    server_free(&s);
    pump_client(&r, 3);
    for (int k = 0; k < 2; k++)
        if (r.c[k].el) elector_election_free(r.c[k].el);
    if (r.obs) elector_observer_free(r.obs);
    if (r.s) elector_session_close(r.s);
    pump_client(&r, 2);
    elector_etcd_free(r.e);
    /* Reconnects the client made before it was freed. */
    int fd;
    while ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        close(fd);
    }
    return 0;
}
