/* SPDX-License-Identifier: MIT */
/* lock -n N: a semaphore of N slots, each an election of its own
 * (__elector/semaphore/NAME/<slot>/), campaigned for at once on one session.
 * decide.c decides what a slot's event means (slot_event). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include "app/app.h"

void app_free_slots(struct app_slots *sl, const elector_election *won)
{
    for (int i = 0; i < sl->n; i++) {
        if (sl->els[i] != won) elector_election_free(sl->els[i]);
        free(sl->names[i]);
    }
    free(sl->els);
    free(sl->names);
    *sl = (struct app_slots){0};
}

/* lock -n N: campaign for every slot at once; the first won is the lock. Each
 * slot's events go to on_event (decide.c's, which calls this). */
void app_campaign_slots(struct app *a, elector_election_cb on_event)
{
    struct app_slots *sl = &a->slots;
    int n = a->o->limit;
    sl->els = calloc((size_t)n, sizeof(*sl->els));
    sl->names = calloc((size_t)n, sizeof(*sl->names));
    if (!sl->els || !sl->names) {
        free(sl->els); /* the one made: cleanup frees only a full set */
        free(sl->names);
        *sl = (struct app_slots){0};
        app_fatal_etcd(a, ELECTOR_ENOMEM, "cannot campaign");
        return;
    }
    sl->n = n;
    tool_log(LOG_DEBUG, "semaphore %s: campaigning for %d slots", a->o->name, n);
    for (int i = 0; i < n; i++) {
        int rc = ELECTOR_ENOMEM;
        if (asprintf(&sl->names[i], "__elector/semaphore/%s/%d", a->o->name, i) >= 0 &&
            (sl->els[i] = elector_election_new(a->s, sl->names[i], on_event, a)) != NULL)
            rc = elector_campaign(sl->els[i], a->value, a->vlen);
        if (rc) {
            app_fatal_etcd(a, rc, "cannot campaign");
            return;
        }
    }
}
