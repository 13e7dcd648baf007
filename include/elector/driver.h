/* SPDX-License-Identifier: MIT */
/**
 * @file
 * elector — the driver's names, deprecated. The driver is now a way to drive
 * the one client (elector/etcd.h): a client made with own_thread runs its loop
 * on a thread of its own, runs callbacks on another, and takes every call of
 * etcd.h and election.h from any thread. These names map onto that API (the
 * handle types are the same types), for code written against the driver;
 * they will go. New code: elector_etcd_config.own_thread and the functions of
 * etcd.h and election.h.
 */
#ifndef ELECTOR_DRIVER_H
#define ELECTOR_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "elector/election.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef elector_etcd elector_driver;              /**< a client with own_thread */
typedef elector_session elector_driver_session;   /**< a session */
typedef elector_election elector_driver_election; /**< an election */
typedef elector_observer elector_driver_observer; /**< an observer */

/** elector_etcd_config's own_thread settings, as the driver took them. */
typedef struct elector_driver_config {
    int64_t stall_ms; /**< elector_etcd_config.stall_ms */
    /** elector_etcd_config.on_stall */
    void (*on_stall)(elector_driver *d, int64_t running_ms, void *ud);
    void *ud; /**< elector_etcd_config.stall_ud */
} elector_driver_config;

/** The defaults (stall_ms 1000). */
static inline void elector_driver_config_init(elector_driver_config *cfg)
{
    cfg->stall_ms = 1000;
    cfg->on_stall = NULL;
    cfg->ud = NULL;
}

/** elector_etcd_new() with own_thread: 0 and *out, or the client's error (the
 * client freed). */
static inline int elector_driver_new(const elector_etcd_config *etcd_cfg,
                                     const elector_driver_config *cfg,
                                     elector_driver **out)
{
    elector_etcd_config c;
    if (etcd_cfg)
        c = *etcd_cfg;
    else
        elector_etcd_config_init(&c);
    c.own_thread = true;
    c.stall_ms = cfg ? cfg->stall_ms : 1000;
    c.on_stall = cfg ? cfg->on_stall : NULL;
    c.stall_ud = cfg ? cfg->ud : NULL;
    *out = NULL;
    elector_etcd *e = elector_etcd_new(&c);
    if (!e) return ELECTOR_ENOMEM;
    int rc = elector_etcd_err(e);
    if (rc) {
        elector_etcd_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

/** elector_etcd_free(). */
static inline void elector_driver_free(elector_driver *d)
{
    elector_etcd_free(d);
}

/** elector_etcd_exec(). */
static inline int elector_driver_exec(elector_driver *d,
                                      void (*fn)(elector_etcd *etcd, void *arg),
                                      void *arg)
{
    return elector_etcd_exec(d, fn, arg);
}

/** elector_etcd_stalls(). */
static inline uint64_t elector_driver_stalls(const elector_driver *d)
{
    return elector_etcd_stalls(d);
}

/** elector_etcd_in_callback(). */
static inline bool elector_driver_in_callback(const elector_driver *d)
{
    return elector_etcd_in_callback(d);
}

/** elector_etcd_errstr() on the callback thread (the failure's text in the
 * callback of a call that failed); "" elsewhere. */
static inline const char *elector_driver_cb_detail(const elector_driver *d)
{
    return d && elector_etcd_in_callback(d) ? elector_etcd_errstr(d) : "";
}

/** @{ */
/** The callback types and the key of the one API, under the driver's names. */
typedef elector_session_cb elector_driver_session_cb;
typedef elector_election_cb elector_driver_election_cb;
typedef elector_guarded_cb elector_driver_guarded_cb;
typedef elector_observe_cb elector_driver_observe_cb;
typedef elector_leader_cb elector_driver_leader_cb;
typedef elector_revoke_cb elector_driver_revoke_cb;
typedef elector_kv_cb elector_driver_kv_cb;
typedef elector_kv elector_driver_kv;
#define ELECTOR_DRIVER_PUT_IF_ABSENT ELECTOR_KV_PUT_IF_ABSENT
/** @} */

/** @{ */
/** The functions of the one API, under the driver's names. */
#define elector_driver_session_new elector_session_new
#define elector_driver_session_wait elector_session_wait
#define elector_driver_session_close elector_session_close
#define elector_driver_revoke elector_lease_revoke
#define elector_driver_session_lease elector_session_lease
#define elector_driver_session_alive elector_session_alive
#define elector_driver_session_helper elector_session_helper
#define elector_driver_election_new elector_election_new
#define elector_driver_election_free elector_election_free
#define elector_driver_campaign elector_campaign
#define elector_driver_proclaim elector_proclaim
#define elector_driver_resign elector_resign
#define elector_driver_campaign_sync elector_campaign_sync
#define elector_driver_resign_sync elector_resign_sync
#define elector_driver_is_leader elector_is_leader
#define elector_driver_token elector_election_token
#define elector_driver_guarded_put elector_guarded_put
#define elector_driver_guarded_delete elector_guarded_delete
#define elector_driver_guarded_put_sync elector_guarded_put_sync
#define elector_driver_guarded_delete_sync elector_guarded_delete_sync
#define elector_driver_leader_sync elector_leader_sync
#define elector_driver_leader elector_leader
#define elector_driver_observe elector_observe
#define elector_driver_observer_free elector_observer_free
#define elector_driver_put_sync elector_kv_put_sync
#define elector_driver_get_sync elector_kv_get_sync
#define elector_driver_kvs_free elector_kvs_free
#define elector_driver_delete_sync elector_kv_delete_sync
#define elector_driver_put elector_kv_put
#define elector_driver_get elector_kv_get
#define elector_driver_delete elector_kv_delete
/** @} */

#ifdef __cplusplus
}
#endif
#endif
