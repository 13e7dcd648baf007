/* SPDX-License-Identifier: MIT */
/* test_unit_tls's stand-in for libssl.so.3: a shared object that loads but
 * has none of OpenSSL's functions. */
int elector_test_fake_ssl;
