# SPDX-License-Identifier: MIT
"""The type stubs: mypy --strict over the package, stubtest of the extension."""

import os
import subprocess
import sys

import pytest

import elector

pytest.importorskip("mypy")
PKG_PARENT = os.path.dirname(os.path.dirname(elector.__file__))


def run(tmp_path, *args):
    # stubtest has no --cache-dir: a cache_dir in the config file serves both
    cfg = tmp_path / "mypy.ini"
    cfg.write_text(f"[mypy]\ncache_dir = {tmp_path}/cache\n"
                   "[mypy-tooz.*]\nignore_missing_imports = True\n"
                   "[mypy-elector.tooz_driver]\ndisallow_subclassing_any = False\n"
                   "disallow_any_unimported = False\nwarn_return_any = False\n")
    r = subprocess.run([sys.executable, "-m", *args, "--config-file" if args[0] == "mypy"
                        else "--mypy-config-file", str(cfg)],
                       cwd=PKG_PARENT, capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr)
    return r


def test_mypy_strict(tmp_path):
    assert run(tmp_path, "mypy", "--strict", "-p", "elector").returncode == 0


def test_stubtest(tmp_path):
    r = run(tmp_path, "mypy.stubtest", "elector._elector")
    assert r.returncode == 0


def test_help_shows_docstrings():
    import pydoc
    text = pydoc.render_doc(elector.Client, renderer=pydoc.plaintext)
    assert "release_on_exit" in text and "kept alive by the driver thread" in text
    assert "Campaigns for" in pydoc.render_doc(elector.Session.campaign,
                                               renderer=pydoc.plaintext)
