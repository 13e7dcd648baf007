/* SPDX-License-Identifier: MIT */
/**
 * @file
 * elector — error codes.
 *
 * Every function in libelector that can fail returns one of these negative codes
 * (0 is success). They come from the one list below, which also yields
 * elector_strerror() and elector_err_name(), so names, values and texts cannot drift.
 * The handle that failed keeps a detail text (for example the endpoint and etcd's
 * own message); see elector_etcd_errstr().
 */
#ifndef ELECTOR_ERROR_H
#define ELECTOR_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/** The list of error codes: X(name, value, text) for each. It yields enum
 * elector_errno (ELECTOR_<name> = value), elector_strerror() (text) and
 * elector_err_name() ("<name>"). The codes (scripts/check-docs.sh checks that
 * this table names every code of the list):
 *
 * | Code | Value | elector_strerror() (in short) |
 * |------|-------|-------------------------------|
 * | ELECTOR_EINVAL | -1 | invalid argument |
 * | ELECTOR_ENOMEM | -2 | out of memory |
 * | ELECTOR_EUNAVAILABLE | -3 | etcd unavailable |
 * | ELECTOR_ETIMEDOUT | -4 | deadline exceeded |
 * | ELECTOR_ECANCELED | -5 | canceled |
 * | ELECTOR_ECONNECT | -6 | cannot connect to etcd |
 * | ELECTOR_ETLS | -7 | TLS error |
 * | ELECTOR_EPROTO | -8 | protocol error |
 * | ELECTOR_ENOLEADER | -9 | etcd cluster has no leader |
 * | ELECTOR_ECOMPACTED | -10 | revision has been compacted |
 * | ELECTOR_ELEASE | -11 | lease not found or expired |
 * | ELECTOR_EAUTH | -12 | authentication failed |
 * | ELECTOR_EPERM | -13 | permission denied |
 * | ELECTOR_ETOOLARGE | -14 | request too large |
 * | ELECTOR_ETOKEN | -15 | invalid auth token |
 * | ELECTOR_EFUTUREREV | -16 | revision is in the future |
 * | ELECTOR_EGRPC | -17 | etcd returned an error |
 * | ELECTOR_ECLOSED | -18 | handle closed |
 * | ELECTOR_ENOTLEADER | -19 | not the leader |
 * | ELECTOR_ESESSION | -20 | session expired |
 * | ELECTOR_EBUSY | -21 | operation already in progress |
 * | ELECTOR_EFORKED | -22 | handle used in a forked child |
 * | ELECTOR_ENOSPACE | -23 | etcd's database is full (the text says what to do) |
 * | ELECTOR_EALARM | -24 | an etcd alarm is raised (`etcdctl alarm list`) |
 * | ELECTOR_ERESTORED | -25 | etcd's revision went back or its cluster ID changed |
 * | ELECTOR_EBLOCKED | -26 | a key without a lease blocks the election: delete it |
 */
#define ELECTOR_ERRNO_MAP(X)                                                             \
    X(EINVAL, -1, "invalid argument")                                                    \
    X(ENOMEM, -2, "out of memory")                                                       \
    X(EUNAVAILABLE, -3, "etcd unavailable")                                              \
    X(ETIMEDOUT, -4, "deadline exceeded")                                                \
    X(ECANCELED, -5, "canceled")                                                         \
    X(ECONNECT, -6, "cannot connect to etcd")                                            \
    X(ETLS, -7, "TLS error")                                                             \
    X(EPROTO, -8, "protocol error")                                                      \
    X(ENOLEADER, -9, "etcd cluster has no leader")                                       \
    X(ECOMPACTED, -10, "revision has been compacted")                                    \
    X(ELEASE, -11, "lease not found or expired")                                         \
    X(EAUTH, -12, "authentication failed")                                               \
    X(EPERM, -13, "permission denied")                                                   \
    X(ETOOLARGE, -14, "request too large")                                               \
    X(ETOKEN, -15, "invalid auth token")                                                 \
    X(EFUTUREREV, -16, "revision is in the future")                                      \
    X(EGRPC, -17, "etcd returned an error")                                              \
    X(ECLOSED, -18, "handle closed")                                                     \
    X(ENOTLEADER, -19, "not the leader")                                                 \
    X(ESESSION, -20, "session expired")                                                  \
    X(EBUSY, -21, "operation already in progress")                                       \
    X(EFORKED, -22, "handle used in a forked child")                                     \
    X(ENOSPACE, -23,                                                                     \
      "etcd's database is full: compact and defragment, then `etcdctl alarm disarm`")    \
    X(EALARM, -24, "an etcd alarm is raised (`etcdctl alarm list`)")                     \
    X(ERESTORED, -25,                                                                    \
      "etcd's revision went back or its cluster ID changed: restored from a snapshot?")  \
    X(EBLOCKED, -26, "a key without a lease blocks the election: delete it")

/** Error codes: ELECTOR_OK (0) and the negative ELECTOR_E* codes of
 * ELECTOR_ERRNO_MAP (the table there gives each one's value and text). */
enum elector_errno {
    ELECTOR_OK = 0, /**< success */
#define ELECTOR_ERR_ENUM_(name, value, text) ELECTOR_##name = value,
    ELECTOR_ERRNO_MAP(ELECTOR_ERR_ENUM_)
#undef ELECTOR_ERR_ENUM_
};

/** Human text for an error code ("deadline exceeded"); "unknown error" otherwise. */
const char *elector_strerror(int err);

/** Symbolic name without prefix ("ETIMEDOUT"); "UNKNOWN" for codes not in the list. */
const char *elector_err_name(int err);

#ifdef __cplusplus
}
#endif
#endif
