/* SPDX-License-Identifier: MIT */
/* What the election layer (src/election/) offers the layer above it, beside
 * the public API of <elector/election.h>.
 *
 * The public functions of election.h whose behaviour depends on how the
 * client is driven (the caller's loop, or its own thread: own_thread) are
 * defined by the top layer (src/driver/), which calls these on the thread
 * that drives the client. They are the core: what the public functions of
 * the same name say, from the loop. The core calls these, never the public
 * names. */
#ifndef ELECTOR_ELECTION_INTERNAL_H
#define ELECTOR_ELECTION_INTERNAL_H

#include "elector/election.h"

int elector__campaign(elector_election *el, const void *value, size_t len);
int elector__campaign_sync(elector_election *el, const void *value, size_t len,
                           int64_t timeout_ms);
elector_election *elector__election_new(elector_session *s, const char *name,
                                        elector_election_cb cb, void *ud);
void elector__election_free(elector_election *el);
void elector__election_get_stats(const elector_election *el, elector_election_stats *out);
void elector__election_set_log(elector_election *el, elector_election_cb log, void *ud);
const uint8_t *elector__election_key(const elector_election *el, size_t *key_len);
int64_t elector__election_token(const elector_election *el);
elector_session *elector__election_session(const elector_election *el);
bool elector__is_leader(const elector_election *el);
int elector__proclaim(elector_election *el, const void *value, size_t len);
int elector__resign(elector_election *el);
int elector__resign_sync(elector_election *el, int64_t timeout_ms);
#ifdef ELECTOR_RPC_API
int elector__guarded_txn(elector_election *el, const Etcdserverpb__TxnRequest *txn,
                         elector_txn_cb cb, void *ud);
#endif
int elector__guarded_put(elector_election *el, const void *key, size_t key_len,
                         const void *value, size_t value_len, elector_guarded_cb cb,
                         void *ud);
int elector__guarded_delete(elector_election *el, const void *key, size_t key_len,
                            elector_guarded_cb cb, void *ud);
int elector__guarded_put_sync(elector_election *el, const void *key, size_t key_len,
                              const void *value, size_t value_len, int64_t timeout_ms);
int elector__guarded_delete_sync(elector_election *el, const void *key, size_t key_len,
                                 int64_t timeout_ms);
elector_observer *elector__observe(elector_etcd *etcd, const char *name,
                                   elector_observe_cb cb, void *ud);
void elector__observer_free(elector_observer *o);
int elector__leader_sync(elector_etcd *etcd, const char *name, int64_t timeout_ms,
                         elector_leader_info *info);
elector_session *elector__session_new(elector_etcd *etcd,
                                      const elector_session_config *cfg,
                                      elector_session_cb cb, void *ud);
int elector__session_wait(elector_session *s, int64_t timeout_ms);
void elector__session_close(elector_session *s);
int elector__session_close_async(elector_session *s, int64_t timeout_ms,
                                 elector_session_closed_cb cb, void *ud);
int elector__session_close_sync(elector_session *s, int64_t timeout_ms);
int elector__session_helper(const elector_session *s);
int64_t elector__session_lease(const elector_session *s);
int64_t elector__session_ttl(const elector_session *s);
int64_t elector__session_deadline_ns(const elector_session *s);
bool elector__session_alive(const elector_session *s);
void elector__session_get_stats(const elector_session *s, elector_session_stats *out);

/* Owner slots: data of the layer that drives a client from its own thread,
 * set once on the loop thread before the handle is handed out; never read
 * here. NULL for a client driven by the caller's loop. */
void *elector__session_owner(const elector_session *s);
void elector__session_set_owner(elector_session *s, void *owner);
void *elector__election_owner(const elector_election *el);
void elector__election_set_owner(elector_election *el, void *owner);
void *elector__observer_owner(const elector_observer *o);
void elector__observer_set_owner(elector_observer *o, void *owner);
/* The client of a session, election, observer. */
elector_etcd *elector__session_etcd(const elector_session *s);
elector_etcd *elector__election_etcd(const elector_election *el);
elector_etcd *elector__observer_etcd(const elector_observer *o);

#endif
