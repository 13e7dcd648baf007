# SPDX-License-Identifier: MIT
"""`pip install --no-build-isolation .` of python/ into a venv over Debian's
/usr/bin/python3, offline, against libelector installed into a temporary prefix
and found by pkg-config; then a campaign with the installed package."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

BUILD = os.environ.get("ELECTOR_BUILD_DIR")
SRC = os.path.join(os.path.dirname(__file__), "..", "..", "python")
# The venv's pip comes from ensurepip (Debian's python3.X-venv), the build from
# setuptools: an interpreter without them skips.
MISSING = [m for m in ("ensurepip", "setuptools") if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(not BUILD, reason="needs ELECTOR_BUILD_DIR (set by ctest)")
@pytest.mark.skipif(bool(MISSING), reason=f"no module {', '.join(MISSING)} in this Python")
def test_pip_install_offline(tmp_path, etcd):
    prefix, venv, src = tmp_path / "prefix", tmp_path / "venv", tmp_path / "src"
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], check=True,
                   capture_output=True)
    shutil.copytree(SRC, src)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"),
               PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation",
                        "."], cwd=src, env=env, capture_output=True, text=True)
    print(r.stdout[-3000:], r.stderr[-3000:])
    assert r.returncode == 0
    script = ("import sys, elector\n"
              "assert '/venv/' in elector.__file__, elector.__file__\n"
              "c = elector.Client([sys.argv[1]])\n"
              "with c.session(ttl=5) as s:\n"
              "    with s.campaign('pip-install', b'ok') as lead:\n"
              "        assert c.leader('pip-install').value == b'ok'\n"
              "c.close()\n"
              "print('INSTALLED OK')\n")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", script, etcd.endpoint],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr)
    assert r.returncode == 0 and "INSTALLED OK" in r.stdout
