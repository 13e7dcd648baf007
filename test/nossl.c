/* SPDX-License-Identifier: MIT */
/* test_tool_newcomer's stand-in for a libssl.so.3 that is not OpenSSL 3: a
 * shared library found by the name the library dlopen()s (src/transport/ssl_lazy.c)
 * but without any of OpenSSL's functions. */
int elector_test_nossl(void);
int elector_test_nossl(void)
{
    return 0;
}
