# SPDX-License-Identifier: MIT
"""Builds elector._elector against the installed libelector (pkg-config elector;
PKG_CONFIG_PATH finds one installed under a prefix)."""

import os
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


def _unrooted(path):
    root = os.environ.get("PKG_CONFIG_SYSROOT_DIR", "").rstrip("/")
    return path[len(root):] if root and path.startswith(root + "/") else path


cflags = pkg_config("--cflags")
libs = pkg_config("--libs")

setup(ext_modules=[Extension(
    "elector._elector",
    sources=["elector/_elector.c"],
    include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
    library_dirs=[f[2:] for f in libs if f.startswith("-L")],
    libraries=[f[2:] for f in libs if f.startswith("-l")],
    # an rpath only for a library outside the system's directories; under
    # PKG_CONFIG_SYSROOT_DIR (a package build: debian/rules) the paths are
    # judged without that root, and no rpath points into it
    runtime_library_dirs=[d for d in (_unrooted(f[2:]) for f in libs if f.startswith("-L"))
                          if not d.startswith("/usr/lib")],
    extra_compile_args=["-std=c11"],
)])
