/* SPDX-License-Identifier: MIT */
/* Deleting our key: by a resign (leader.c), after a refused check (wait.c),
 * after a campaign Txn that a resign or free overtook and when the handle is
 * freed (campaign.c). Deletes are paced and sent by pacer.c; a campaign that
 * waits for them goes once the last is answered, through el->steps. */
#include "election_private.h"

int elector__delete_key(elector_election *el, int64_t rev, struct op *o,
                        elector_etcd_cb done)
{
    o->del_rev = rev;
    o->done = done;
    if (!elector__pace_delete(o)) {
        int rc = elector__send_delete(o);
        if (rc) {
            elector__op_end(o);
            return rc;
        }
    }
    el->deletes++; /* o holds el */
    return 0;
}

/* A delete of our key was answered. A campaign that waits for it goes now. */
void elector__delete_over(elector_election *el)
{
    el->deletes--;
    if (!el->deletes && el->state == E_CAMPAIGN && el->campaign_waits &&
        !el->life.closed && el->s && elector__session_phase(el->s) == ELECTOR__S_ALIVE)
        el->steps->campaign(el);
}

void elector__stray_deleted(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    struct op *o = ud;
    elector_election *el = o->el; /* the op holds the election */
    elector__delete_over(el);
    /* A delete guarded by our key's create revision is sent again after a
     * transient failure (it waits for the next connection): the key would make
     * every later candidate wait for our whole session. So for a freed
     * election, and for one that is idle (a resign overtook the campaign Txn
     * that made the key): nothing else would delete that key, and a free
     * later deletes nothing, the election holding no key. Not once it
     * campaigns again: the new campaign takes the key over (same name, same
     * lease). Never a delete guarded by the lease alone: a new election
     * object with the same name on this session may have made that key again
     * meanwhile. */
    bool owner_done =
        el->life.closed || (el->state == E_IDLE && !el->keep_key && elector__el_live(el));
    if (elector__transient(err) && owner_done && o->del_rev > 0 &&
        o->tries < RESIGN_TRIES) {
        struct op *d = elector__op_new(el);
        if (d) {
            d->tries = o->tries + 1;
            el->checks.retries++;
            elector__delete_key(el, o->del_rev, d, elector__stray_deleted);
        }
    }
    elector__op_end(o);
}
