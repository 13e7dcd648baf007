/* SPDX-License-Identifier: MIT */
/* elector_version(): the running library's version (elector/version.h). */
#include "elector/version.h"

const char *elector_version(void)
{
    return ELECTOR_VERSION_STRING;
}

int elector_version_number(void)
{
    return ELECTOR_VERSION_NUMBER;
}
