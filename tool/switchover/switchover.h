/* SPDX-License-Identifier: MIT */
/* Private to switchover/: the keys of the protocol (protocol_keys.c), shared by the
 * candidates' side (handover.c) and the requester (request.c).
 *
 * Switchover: `elector switchover NAME --to VALUE` (the requester) and the part
 * every elector candidate of run and campaign plays (docs/DESIGN.md,
 * "Switchover").
 *
 * Keys, beside the election's NAME/<lease hex>, under a root of their own: not
 * under NAME/ (so that `etcdctl elect` and etcd's Go client see an ordinary
 * election) nor under any other election's prefix (a name-derived key such as
 * NAME:x would sit in the queue of an election that is a prefix of NAME):
 *   __elector/candidates/NAME/<lease hex>  "this candidate takes switchover
 *                             requests": put by each elector candidate with its
 *                             session's lease
 *   __elector/switchover/NAME  the request: "<create revision> <key>" of the
 *                             target, put by the requester with its own lease
 * A candidate whose key was created before the target's steps back: if it
 * waits, it leaves the queue and campaigns again (to the back); if it leads, it
 * waits until the target is next in line and then steps down as on any loss
 * (run: the command's tree is gone before the key is deleted). The successor is
 * elected by the usual protocol. */
#ifndef ELECTOR_TOOL_SWITCHOVER_H
#define ELECTOR_TOOL_SWITCHOVER_H

#include <stddef.h>
#include "app/app.h"

/* a and b in one malloc'd string; NULL when out of memory. */
char *sw_cat(const char *a, const char *b);

/* __elector/switchover/NAME (malloc'd). */
char *sw_request_key(const char *name);

/* __elector/candidates/NAME/ (malloc'd). */
char *sw_member_prefix(const char *name);

/* What an etcd user needs for switchover, for messages about EPERM: the
 * candidates' and the requester's needs are the same two grants. */
void sw_perm_hint(char *buf, size_t cap, const char *user, const char *name);

#endif
