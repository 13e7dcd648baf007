/* SPDX-License-Identifier: MIT */
/* elector/driver.h's client functions, deprecated: a driver is a client made
 * with own_thread (elector_etcd_new()), and these call the client's. */
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

void elector_driver_config_init(elector_driver_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->stall_ms = 1000;
}

int elector_driver_new(const elector_etcd_config *etcd_cfg,
                       const elector_driver_config *cfg, elector_driver **out)
{
    *out = NULL;
    elector_etcd_config c;
    if (etcd_cfg)
        c = *etcd_cfg;
    else
        elector_etcd_config_init(&c);
    c.own_thread = true;
    c.on_stall = NULL;
    c.stall_ms = cfg ? cfg->stall_ms : 1000;
    elector_etcd *e = elector__etcd_new(&c);
    if (!e) return ELECTOR_ENOMEM;
    int rc = elector__etcd_err(e);
    if (!rc)
        rc = elector__drv_start(e, &c, cfg ? cfg->on_stall : NULL, cfg ? cfg->ud : NULL);
    if (rc) {
        elector__etcd_free(e);
        return rc;
    }
    *out = elector__drv_of(e);
    return 0;
}

void elector_driver_free(elector_driver *d)
{
    if (d) elector__drv_stop(d);
}

int elector_driver_exec(elector_driver *d, void (*fn)(elector_etcd *etcd, void *arg),
                        void *arg)
{
    if (!d) return ELECTOR_EINVAL;
    if (forked(d)) return ELECTOR_EFORKED;
    return elector_etcd_exec(d->etcd, fn, arg);
}

uint64_t elector_driver_stalls(const elector_driver *d)
{
    return d ? elector_etcd_stalls(d->etcd) : 0;
}

bool elector_driver_in_callback(const elector_driver *d)
{
    return d && !forked(d) && on_cb(d);
}

const char *elector_driver_cb_detail(const elector_driver *d)
{
    if (!d || forked(d) || !on_cb(d) || !d->cb_detail) return "";
    return d->cb_detail;
}
