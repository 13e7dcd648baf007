# SPDX-License-Identifier: MIT
"""The README's examples, run as written (scripts/check-snippets.py checks that
each README block is a region of one of these files): two instances of each
against real etcd; the leader SIGKILLed hands over through the release helper,
found beside the library in the build tree (no $ELECTOR_RELEASE_HELPER); then
Ctrl-C on the new leader resigns, exits 0 and leaves no key. The handover
times are printed (pytest -s), not asserted finely: more than 3 s (about the
TTL's share) means the helper did not run."""

import importlib.util
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("ELECTOR_BUILD_DIR", os.path.join(ROOT, "build"))

EXAMPLES = [
    ("python-sync", [sys.executable, os.path.join(ROOT, "examples/python/sync_example.py")],
     "elected", "resigned"),
    ("python-aio", [sys.executable, os.path.join(ROOT, "examples/python/aio_example.py")],
     "elected", "resigned"),
    ("python-tooz", [sys.executable, os.path.join(ROOT, "examples/python/tooz_example.py")],
     "elected", "resigned"),
    ("c-threaded", [os.path.join(BUILD, "examples/threaded")], "elected", None),
    ("c-embedded", [os.path.join(BUILD, "examples/instance")], "I am the leader now", None),
    # its election is always "myapp-election"
    ("cpp-myapp", [os.path.join(BUILD, "examples/myapp")], "I am the leader now", "resigned"),
]


def _env():
    env = dict(os.environ)
    env.pop("ELECTOR_RELEASE_HELPER", None)  # found beside the library, or not at all
    return env


def _wait_line(p, text, timeout):
    end = time.monotonic() + timeout
    seen = []
    while time.monotonic() < end:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"no line with {text!r} in {timeout} s: {''.join(seen)!r}")


@pytest.mark.parametrize("label,cmd,elected,resigned", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_hands_over_on_sigkill_and_resigns_on_ctrl_c(etcd, label, cmd, elected,
                                                             resigned):
    if not os.access(cmd[-1], os.R_OK):
        pytest.skip(f"{cmd[-1]} is not built")
    if label == "python-tooz" and importlib.util.find_spec("tooz") is None:
        pytest.skip("no tooz in this Python (Debian's python3-tooz)")
    kill_handover(etcd, label, cmd, elected, resigned, _env())


def kill_handover(etcd, label, cmd, elected, resigned, env):
    """Two instances of CMD: a leads, b waits; SIGKILL of a -> b leads (the
    time printed; more than 3 s fails); Ctrl-C on b resigns, exits 0, leaves
    no key. test_pip_install runs it on the pip-installed package."""
    fixed = label == "cpp-myapp"
    name = "myapp-election" if fixed else f"ex-{label}-{uuid.uuid4().hex[:6]}"
    procs = []

    def start(node):
        args = [node, etcd.endpoint] + ([] if fixed else [name])
        p = subprocess.Popen(cmd + args, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env)
        procs.append(p)
        return p

    try:
        a = start("a")
        _wait_line(a, elected, 30)
        b = start("b")
        deadline = time.monotonic() + 10
        while len(etcd.keys(name + "/")) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # b's key is in: it waits behind a
        t0 = time.monotonic()
        a.kill()
        a.wait()
        _wait_line(b, elected, 30)
        ms = (time.monotonic() - t0) * 1000
        print(f"{label}: SIGKILL of the leader -> the next elected in {ms:.0f} ms")
        assert ms < 3000, f"{label}: the handover took {ms:.0f} ms: no release helper?"
        time.sleep(0.3)
        b.send_signal(signal.SIGINT)
        out, _ = b.communicate(timeout=20)
        assert b.returncode == 0, out
        if resigned:
            assert resigned in out
        assert etcd.keys(name + "/") == []
        if label == "python-tooz":
            # The group stays, as tooz groups do when a member leaves; the
            # session's etcd is shared with test_tooz, which counts groups.
            gkey = "tooz-elector/groups/" + name
            assert etcd.keys(gkey) == [gkey]
            etcd.ctl("del", gkey)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
