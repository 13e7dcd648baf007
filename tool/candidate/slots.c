/* SPDX-License-Identifier: MIT */
/* lock -n N: a semaphore of N slots, each an election of its own
 * (__elector/semaphore/NAME/<slot>/), campaigned for at once on one session.
 * decide.c decides what a slot's event means (slot_event). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include "app/app.h"

void app_free_slots(struct app *a)
{
    for (int i = 0; i < a->nslots; i++) {
        if (a->slots[i] != a->el) elector_election_free(a->slots[i]);
        free(a->slot_names[i]);
    }
    free(a->slots);
    free(a->slot_names);
    a->slots = NULL;
    a->slot_names = NULL;
    a->nslots = a->slots_waiting = a->slots_failed = 0;
}

/* lock -n N: campaign for every slot at once; the first won is the lock. Each
 * slot's events go to on_event (decide.c's, which calls this). */
void app_campaign_slots(struct app *a, elector_election_cb on_event)
{
    int n = a->o->limit;
    a->slots = calloc((size_t)n, sizeof(*a->slots));
    a->slot_names = calloc((size_t)n, sizeof(*a->slot_names));
    if (!a->slots || !a->slot_names) {
        free(a->slots); /* the one made: cleanup frees only a full set */
        free(a->slot_names);
        a->slots = NULL;
        a->slot_names = NULL;
        app_fatal_etcd(a, ELECTOR_ENOMEM, "cannot campaign");
        return;
    }
    a->nslots = n;
    tool_log(LOG_DEBUG, "semaphore %s: campaigning for %d slots", a->o->name, n);
    for (int i = 0; i < n; i++) {
        int rc = ELECTOR_ENOMEM;
        if (asprintf(&a->slot_names[i], "__elector/semaphore/%s/%d", a->o->name, i) >=
                0 &&
            (a->slots[i] = elector_election_new(a->s, a->slot_names[i], on_event, a)) !=
                NULL)
            rc = elector_campaign(a->slots[i], a->value, a->vlen);
        if (rc) {
            app_fatal_etcd(a, rc, "cannot campaign");
            return;
        }
    }
}
