/* SPDX-License-Identifier: MIT */
/* The handles' owner slots (election_internal.h): data for the layer that
 * drives a client from its own thread, never read here. */
#include "session_private.h"

void *elector__session_owner(const elector_session *s)
{
    return s->owner;
}

void elector__session_set_owner(elector_session *s, void *owner)
{
    s->owner = owner;
}

void *elector__election_owner(const elector_election *el)
{
    return el->owner;
}

void elector__election_set_owner(elector_election *el, void *owner)
{
    el->owner = owner;
}

elector_etcd *elector__election_etcd(const elector_election *el)
{
    return el->etcd;
}
