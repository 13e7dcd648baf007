/* SPDX-License-Identifier: MIT */
/* The client's elections by name (campaign.c adds and asks, election.c removes
 * an election whose memory goes). */
#include <stdlib.h>
#include <string.h>
#include "election_private.h"

/* The client's elections by name, so that a campaign finds another election
 * object with its name without walking every election of its session (that
 * made setting up 100,000 elections quadratic: minutes of CPU with the loop
 * not running, and the session lost). */
typedef struct names {
    elector__ext ext; /* first */
    elector_election **tab;
    size_t cap, count;
} names;

static const char names_kind = 'N';

static void names_free(elector__ext *x)
{
    names *n = (names *)x;
    /* The client is being freed: a freed election still listed (its Txns
     * ended, a blocking call still holding it) must not look for the table
     * when its memory goes. */
    for (size_t i = 0; i < n->cap; i++)
        for (elector_election *o = n->tab[i]; o; o = o->name_next)
            o->named = false;
    free(n->tab);
    free(n);
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static names *names_of(elector_etcd *e)
{
    return (names *)elector__ext_get(e, &names_kind, sizeof(names), names_free);
}

/* Adds el; false when out of memory. */
bool elector__name_add(elector_election *el)
{
    names *n = names_of(el->etcd);
    if (!n) return false;
    if (n->count >= n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 64;
        elector_election **t = calloc(cap, sizeof(*t));
        if (!t) return false;
        for (size_t i = 0; i < n->cap; i++) {
            for (elector_election *o = n->tab[i], *nx; o; o = nx) {
                nx = o->name_next;
                o->name_next = t[o->name_hash & (cap - 1)];
                t[o->name_hash & (cap - 1)] = o;
            }
        }
        free(n->tab);
        n->tab = t;
        n->cap = cap;
    }
    el->name_hash = name_hash(el->name);
    elector_election **b = &n->tab[el->name_hash & (n->cap - 1)];
    el->name_next = *b;
    *b = el;
    n->count++;
    el->named = true;
    return true;
}

void elector__name_remove(elector_election *el)
{
    names *n = el->named ? (names *)elector__ext_find(el->etcd, &names_kind) : NULL;
    if (!n) return;
    elector_election **pp = &n->tab[el->name_hash & (n->cap - 1)];
    while (*pp && *pp != el)
        pp = &(*pp)->name_next;
    if (*pp) {
        *pp = el->name_next;
        n->count--;
    }
    el->named = false;
}

/* Another election object with el's name campaigns, leads or deletes our key
 * on this session (one key per name and session); or was freed while Txns on
 * the key our lease names were still out (a delete, or a campaign Txn whose
 * answer deletes the key it made): until they are answered. */
bool elector__name_busy(const elector_election *el, int64_t lease)
{
    names *n = (names *)elector__ext_find(el->etcd, &names_kind);
    if (!n || !n->cap) return false;
    for (const elector_election *o = n->tab[el->name_hash & (n->cap - 1)]; o;
         o = o->name_next) {
        if (o == el || strcmp(o->name, el->name)) continue;
        if (o->life.closed ? o->deletes && o->key_lease == lease
                           : o->s == el->s &&
                                 (o->state != E_IDLE || o->resign_pending || o->deletes))
            return true;
    }
    return false;
}
