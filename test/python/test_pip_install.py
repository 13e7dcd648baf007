# SPDX-License-Identifier: MIT
"""`pip install --no-build-isolation .` of python/, offline, into venvs, against
libelector installed into a temporary prefix and found by pkg-config; then a
campaign against the test's etcd with the installed package:
  - over Debian's /usr/bin/python3 (`-m venv --system-site-packages`, so that
    Debian's setuptools and wheel are seen): setup.py's builds as the README says;
  - the same with setup.py's own bdist_wheel forced (ELECTOR_BDIST_WHEEL=builtin):
    the fallback under setuptools 66;
  - over pyenv's CPythons when present (3.11.7: setuptools 65, pip 23.2, no
    `wheel`: the fallback is what makes it work; 3.9.18: setuptools 58, which
    does not read pyproject.toml's [project]: setup.py says it)."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from test_examples import kill_handover

BUILD = os.environ.get("ELECTOR_BUILD_DIR")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SRC = os.path.join(ROOT, "python")
# The venv's pip comes from ensurepip (Debian's python3.X-venv), the build from
# setuptools: an interpreter without them skips.
MISSING = [m for m in ("ensurepip", "setuptools") if importlib.util.find_spec(m) is None]
PYENV = "/root/.pyenv/versions"

SCRIPT = """\
import importlib.metadata, sys, elector
assert '/venv/' in elector.__file__, elector.__file__
dist = importlib.metadata.distribution('elector')
assert dist.version == elector.__version__, (dist.version, elector.__version__)
eps = [e for e in dist.entry_points if e.group == 'tooz.backends']
assert [e.value for e in eps] == ['elector.tooz_driver:ElectorDriver'], eps
c = elector.Client([sys.argv[1]])
with c.session(ttl=5) as s:
    with s.campaign('pip-install', b'ok') as lead:
        assert c.leader('pip-install').value == b'ok'
c.close()
print('INSTALLED OK', sys.version.split()[0], elector.__version__)
"""

pytestmark = pytest.mark.skipif(not BUILD, reason="needs ELECTOR_BUILD_DIR (set by ctest)")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("prefix")
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(p)], check=True,
                   capture_output=True)
    return p


def install_and_run(python, tmp_path, prefix, etcd, venv_args=(), extra_env=None,
                    no_wheel=False):
    venv, src = tmp_path / "venv", tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([python, "-m", "venv", *venv_args, str(venv)], check=True)
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"),
               PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **(extra_env or {}))
    env.pop("PYTHONPATH", None)
    if no_wheel:  # what the fallback is for: no `wheel` in that interpreter
        r = subprocess.run([str(venv / "bin" / "python"), "-c", "import wheel"],
                           env=env, capture_output=True)
        assert r.returncode != 0, "wheel is importable: the fallback is not exercised"
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation",
                        "."], cwd=src, env=env, capture_output=True, text=True)
    print(r.stdout[-3000:], r.stderr[-3000:])
    assert r.returncode == 0
    r = subprocess.run([str(venv / "bin" / "python"), "-c", SCRIPT, etcd.endpoint],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr)
    assert r.returncode == 0 and "INSTALLED OK" in r.stdout
    return venv


@pytest.mark.skipif(bool(MISSING), reason=f"no module {', '.join(MISSING)} in this Python")
def test_pip_install_offline(tmp_path, prefix, etcd):
    venv = install_and_run(sys.executable, tmp_path, prefix, etcd, ["--system-site-packages"])
    # The README's Python examples on the installed package: the leader
    # SIGKILLed hands over through the release helper found beside the
    # prefix's libelector (no $ELECTOR_RELEASE_HELPER, no build tree).
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ELECTOR_RELEASE_HELPER", "ELECTOR_BUILD_DIR")}
    for ex in ("sync_example", "aio_example"):
        script = os.path.join(ROOT, "examples", "python", ex + ".py")
        kill_handover(etcd, "pip-" + ex, [str(venv / "bin" / "python"), script],
                      "elected", "resigned", env)


@pytest.mark.skipif(bool(MISSING), reason=f"no module {', '.join(MISSING)} in this Python")
def test_pip_install_offline_own_bdist_wheel(tmp_path, prefix, etcd):
    venv = install_and_run(sys.executable, tmp_path, prefix, etcd,
                           ["--system-site-packages"], {"ELECTOR_BDIST_WHEEL": "builtin"})
    wheel = list(venv.glob("lib/python3*/site-packages/elector-*.dist-info/WHEEL"))
    assert wheel and "Generator: elector setup.py" in wheel[0].read_text()


@pytest.mark.parametrize("version", ["3.11.7", "3.9.18"])
def test_pip_install_offline_pyenv(tmp_path, prefix, etcd, version):
    python = f"{PYENV}/{version}/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip(f"no pyenv CPython {version} at {python}")
    r = subprocess.run([python, "-c", "import ensurepip, setuptools"], capture_output=True)
    if r.returncode:
        pytest.skip(f"{python} has no ensurepip or setuptools")
    install_and_run(python, tmp_path, prefix, etcd, no_wheel=True)
