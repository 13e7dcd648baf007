# SPDX-License-Identifier: MIT
"""Builds elector._elector against the installed libelector (pkg-config elector;
PKG_CONFIG_PATH finds one installed under a prefix)."""

import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "elector"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("elector: libelector not found by pkg-config "
                         "(install libelector-dev, or set PKG_CONFIG_PATH): " + str(e))
    return shlex.split(out)


cflags = pkg_config("--cflags")
libs = pkg_config("--libs")

setup(ext_modules=[Extension(
    "elector._elector",
    sources=["elector/_elector.c"],
    include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
    library_dirs=[f[2:] for f in libs if f.startswith("-L")],
    libraries=[f[2:] for f in libs if f.startswith("-l")],
    runtime_library_dirs=[f[2:] for f in libs if f.startswith("-L")
                          and not f[2:].startswith("/usr/lib")],
    extra_compile_args=["-std=c11"],
)])
