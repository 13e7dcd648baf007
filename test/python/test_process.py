# SPDX-License-Identifier: MIT
"""Whole-process behaviour: SIGSTOP past the TTL, a SIGKILLed leader handing
over through the release helper (on by default), callbacks that raise."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import elector

CHILD = r"""
import sys, time, elector
c = elector.Client([sys.argv[1]])
s = c.session(ttl=int(sys.argv[3]), release_on_exit=sys.argv[4] == "1")
lead = s.campaign(sys.argv[2], b"child")
print("LEADING", flush=True)
sys.stdin.readline()  # the parent stops us past the TTL, resumes us, then writes
print("RESUMED", "leader" if lead.is_leader() else "not-leader", flush=True)
"""


def start_child(etcd, name, ttl, roe):
    p = subprocess.Popen([sys.executable, "-c", CHILD, etcd.endpoint, name, str(ttl),
                          "1" if roe else "0"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "LEADING"
    return p


def test_sigstop_past_ttl_is_not_leader(etcd):
    name = f"stop-{uuid.uuid4().hex[:8]}"
    p = start_child(etcd, name, 2, False)
    try:
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(3.5)
        os.kill(p.pid, signal.SIGCONT)
        p.stdin.write("go\n")
        p.stdin.flush()
        out = p.stdout.readline().split()
        assert out == ["RESUMED", "not-leader"]
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_sigkilled_leader_hands_over_fast(etcd, client):
    name = f"kill-{uuid.uuid4().hex[:8]}"
    ttl = 10
    p = start_child(etcd, name, ttl, True)
    try:
        with client.session(ttl=ttl) as s:
            t0 = time.monotonic()
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            with s.campaign(name, b"successor", timeout=3 * ttl) as lead:
                took = time.monotonic() - t0
                print(f"successor leads {took * 1000:.0f} ms after SIGKILL (ttl {ttl} s)")
                assert lead.is_leader()
                assert took < ttl / 2
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_callback_that_raises_and_calls_the_api(etcd, client, monkeypatch):
    name = f"cb-{uuid.uuid4().hex[:8]}"
    hooked = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: hooked.append(u.exc_value))
    seen = []
    with client.session(ttl=6) as s, client.session(ttl=6) as s2:
        lead = s.campaign(name, b"x")

        def cb(l):
            seen.append(client.leader(name))  # the API from a callback
            raise RuntimeError("callback failure")
        lead.on_lost(cb)
        lead2 = s2.campaign(name + "-other", b"y")  # keeps running meanwhile
        etcd.ctl("lease", "revoke", f"{s.lease:x}")
        deadline = time.monotonic() + 10
        while not hooked and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(hooked) == 1 and isinstance(hooked[0], RuntimeError)
        assert seen == [None]
        assert lead2.is_leader()
        lead2.put("cb/" + name, "after")
        lead2.resign()
        try:
            lead.resign()
        except elector.Error:
            pass
