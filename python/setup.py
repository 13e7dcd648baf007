# SPDX-License-Identifier: MIT
"""Builds elector._elector against the installed libelector (pkg-config elector;
PKG_CONFIG_PATH finds one installed under a prefix).

`pip install --no-build-isolation .` asks setuptools for a wheel: its
bdist_wheel command comes from the `wheel` package (setuptools < 70.1) or from
setuptools itself (>= 70.1). Without either (pyenv's Python, offline), the
bdist_wheel below builds the wheel: a zip of the built package and its
NAME-VERSION.dist-info, tagged for the running interpreter.
"""

import base64
import glob
import hashlib
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile

from setuptools import Command, Extension, setup


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


def _have_bdist_wheel():
    """True when setuptools has a bdist_wheel of its own or the wheel package's.
    ELECTOR_BDIST_WHEEL=builtin uses the one below anyway (the tests do)."""
    if os.environ.get("ELECTOR_BDIST_WHEEL") == "builtin":
        return False
    for mod in ("setuptools.command.bdist_wheel", "wheel.bdist_wheel"):
        try:
            if importlib.util.find_spec(mod) is not None:
                return True
        except ImportError:  # the parent package is missing
            pass
    return False


def _tag():
    """The running interpreter's wheel tag: cp311-cp311-linux_x86_64."""
    impl = {"cpython": "cp"}.get(sys.implementation.name)
    if impl is None:
        raise SystemExit(f"elector: building a wheel for {sys.implementation.name} needs "
                         "the `wheel` package (pip install wheel, or python3-wheel)")
    py = f"{impl}{sys.version_info[0]}{sys.version_info[1]}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{py}-{py}{getattr(sys, 'abiflags', '')}-{plat}"


class bdist_wheel(Command):
    """A minimal bdist_wheel for this package (a C extension, no dependencies):
    what setuptools' PEP 517 backend calls (`bdist_wheel --dist-dir D`, and
    egg2dist() from its dist_info command)."""

    description = "build a wheel (elector's own; the `wheel` package is not installed)"
    user_options = [("dist-dir=", "d", "directory for the wheel"),
                    ("bdist-dir=", "b", "staging directory"),
                    ("keep-temp", "k", "keep the staging directory")]
    boolean_options = ["keep-temp"]

    def initialize_options(self):
        self.dist_dir = None
        self.bdist_dir = None
        self.keep_temp = False

    def finalize_options(self):
        if self.dist_dir is None:
            self.dist_dir = "dist"
        if self.bdist_dir is None:
            base = self.get_finalized_command("bdist").bdist_base
            self.bdist_dir = os.path.join(base, "wheel")

    def egg2dist(self, egginfo_path, distinfo_path):
        """NAME.egg-info (made by egg_info) -> NAME-VERSION.dist-info."""
        if os.path.exists(distinfo_path):
            shutil.rmtree(distinfo_path)
        os.makedirs(distinfo_path)
        requires = os.path.join(egginfo_path, "requires.txt")
        if os.path.exists(requires) and open(requires).read().strip():
            raise SystemExit("elector: a package with dependencies needs the `wheel` "
                             "package to be built (pip install wheel, or python3-wheel)")
        shutil.copyfile(os.path.join(egginfo_path, "PKG-INFO"),
                        os.path.join(distinfo_path, "METADATA"))
        for name in ("entry_points.txt", "top_level.txt"):
            src = os.path.join(egginfo_path, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(distinfo_path, name))
        shutil.rmtree(egginfo_path)

    def run(self):
        dist = self.distribution
        name = dist.get_name().replace("-", "_")
        version = dist.get_version()
        self.run_command("build")
        build = self.get_finalized_command("build")
        if os.path.exists(self.bdist_dir):
            shutil.rmtree(self.bdist_dir)
        shutil.copytree(build.build_platlib if dist.has_ext_modules() else build.build_lib,
                        self.bdist_dir)
        egg_info = self.get_finalized_command("egg_info")
        egg_info.egg_base = self.bdist_dir
        egg_info.finalize_options()
        egg_info.run()
        distinfo = os.path.join(self.bdist_dir, f"{name}-{version}.dist-info")
        self.egg2dist(egg_info.egg_info, distinfo)
        tag = _tag()
        with open(os.path.join(distinfo, "WHEEL"), "w") as f:
            f.write("Wheel-Version: 1.0\nGenerator: elector setup.py\n"
                    f"Root-Is-Purelib: {'false' if dist.has_ext_modules() else 'true'}\n"
                    f"Tag: {tag}\n")
        os.makedirs(self.dist_dir, exist_ok=True)
        wheel = os.path.join(self.dist_dir, f"{name}-{version}-{tag}.whl")
        record_name = f"{name}-{version}.dist-info/RECORD"
        records = []
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
            files = []
            for root, dirs, names in os.walk(self.bdist_dir):
                dirs.sort()
                for n in sorted(names):
                    files.append(os.path.join(root, n))
            # the .dist-info last, as the wheel format recommends
            files.sort(key=lambda p: ".dist-info" in os.path.relpath(p, self.bdist_dir))
            for path in files:
                arc = os.path.relpath(path, self.bdist_dir).replace(os.sep, "/")
                with open(path, "rb") as f:
                    data = f.read()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
                records.append(f"{arc},sha256={digest.rstrip(b'=').decode()},{len(data)}")
                z.write(path, arc)
            records.append(f"{record_name},,")
            z.writestr(record_name, "\n".join(records) + "\n")
        if not self.keep_temp:
            shutil.rmtree(self.bdist_dir)
        dist.dist_files.append(("bdist_wheel", "", wheel))


def _legacy_metadata():
    """What pyproject.toml's [project] says, for setuptools < 61 (Python 3.9's
    58 under pyenv), which does not read that table; nothing for a newer one."""
    import setuptools
    try:
        major = int(setuptools.__version__.split(".")[0])
    except ValueError:
        major = 0
    if major >= 61:
        return {}
    here = os.path.dirname(os.path.abspath(__file__))
    version = {}
    with open(os.path.join(here, "elector", "_version.py")) as f:
        exec(f.read(), version)
    with open(os.path.join(here, "README.md")) as f:
        readme = f.read()
    return dict(
        name="elector", version=version["__version__"],
        description="Leader election and locks on etcd v3, over libelector",
        long_description=readme, long_description_content_type="text/markdown",
        license="MIT", python_requires=">=3.9", packages=["elector"],
        package_data={"elector": ["py.typed", "*.pyi"]},
        exclude_package_data={"elector": ["*.c"]},
        entry_points={"tooz.backends": ["elector = elector.tooz_driver:ElectorDriver"]},
        classifiers=["Programming Language :: Python :: 3",
                     "Programming Language :: C",
                     "Operating System :: POSIX :: Linux"])


cflags = pkg_config("--cflags")
libs = pkg_config("--libs")

setup(
    **_legacy_metadata(),
    cmdclass={} if _have_bdist_wheel() else {"bdist_wheel": bdist_wheel},
    ext_modules=[Extension(
        "elector._elector",
        # one file per type over a shared handle base (elector/_ext/ext.h)
        sources=sorted(glob.glob("elector/_ext/*.c")),
        depends=["elector/_ext/ext.h"],
        include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
        library_dirs=[f[2:] for f in libs if f.startswith("-L")],
        libraries=[f[2:] for f in libs if f.startswith("-l")],
        # an rpath only for a library outside the system's directories; under
        # PKG_CONFIG_SYSROOT_DIR (a package build: debian/rules) the paths are
        # judged without that root, and no rpath points into it
        runtime_library_dirs=[d for d in (_unrooted(f[2:]) for f in libs
                                          if f.startswith("-L"))
                              if not d.startswith("/usr/lib")],
        extra_compile_args=["-std=c11"],
    )])
