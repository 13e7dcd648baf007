/* SPDX-License-Identifier: MIT */
/**
 * @file
 * elector — the library's version.
 *
 * ELECTOR_VERSION_* are the version of the headers an application was compiled
 * with; elector_version() is the version of the library it runs with. The
 * shared library's SONAME (libelector.so.1) changes only with its ABI (see
 * docs/DESIGN.md, "Public API and ABI"). CMakeLists.txt reads the version from
 * this file, so there is one place to change it.
 */
#ifndef ELECTOR_VERSION_H
#define ELECTOR_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define ELECTOR_VERSION_MAJOR 0 /**< the headers' major version */
#define ELECTOR_VERSION_MINOR 1 /**< their minor version */
#define ELECTOR_VERSION_PATCH 0 /**< their patch level */
/** The headers' version, "MAJOR.MINOR.PATCH" (CMakeLists.txt reads it here). */
#define ELECTOR_VERSION_STRING "0.1.0"
/** One number that grows with each release: 0x00MMmmpp. */
#define ELECTOR_VERSION_NUMBER                                                           \
    ((ELECTOR_VERSION_MAJOR << 16) | (ELECTOR_VERSION_MINOR << 8) | ELECTOR_VERSION_PATCH)

/** The version of the running library, "MAJOR.MINOR.PATCH". */
const char *elector_version(void);

/** The same as ELECTOR_VERSION_NUMBER, for the running library. */
int elector_version_number(void);

#ifdef __cplusplus
}
#endif
#endif
