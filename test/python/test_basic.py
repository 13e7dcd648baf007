# SPDX-License-Identifier: MIT
"""The sync API against a real etcd: campaign, resign, leader, observe, lock,
guarded writes, timeouts, exceptions."""

import threading
import time
import uuid

import pytest

import elector


def uniq(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_campaign_resign_leader(client, etcd):
    name = uniq("basic")
    assert client.leader(name) is None
    with client.session(ttl=5) as s:
        assert s.lease > 0
        with s.campaign(name, b"host-a") as lead:
            assert lead.is_leader()
            assert lead.token > 0
            assert not lead.lost.is_set()
            ldr = client.leader(name)
            assert ldr is not None
            assert ldr.value == b"host-a"
            assert ldr.token == lead.token
            assert ldr.lease == s.lease
            assert ldr.key == f"{name}/{s.lease:x}".encode()
            assert etcd.keys(name + "/") == [ldr.key.decode()]
        assert not lead.is_leader()
        assert client.leader(name) is None
        assert etcd.keys(name + "/") == []


def test_second_candidate_waits_and_times_out(client, etcd):
    name = uniq("wait")
    with client.session(ttl=5) as s1, client.session(ttl=5) as s2:
        with s1.campaign(name, b"a"):
            t0 = time.monotonic()
            with pytest.raises(elector.Timeout):
                s2.campaign(name, b"b", timeout=0.3)
            assert time.monotonic() - t0 >= 0.29
            # the timed-out candidate left no key
            assert etcd.keys(name + "/") == [f"{name}/{s1.lease:x}"]


def test_handover_and_observe(client, etcd):
    name = uniq("obs")
    seen = []
    with client.observe(name) as obs:
        assert obs.next(timeout=10) is None  # nobody leads
        with client.session(ttl=5) as s1, client.session(ttl=5) as s2:
            lead1 = s1.campaign(name, b"one")
            got = {}

            def second():
                with s2.campaign(name, b"two", timeout=20) as l2:
                    got["token"] = l2.token
            t = threading.Thread(target=second)
            t.start()
            seen.append(obs.next(timeout=10))
            time.sleep(0.2)
            lead1.resign()
            t.join(30)
            assert not t.is_alive()
            seen.append(obs.next(timeout=10))
            assert seen[0].value == b"one"
            assert seen[1].value == b"two"
            assert seen[1].token == got["token"] > seen[0].token
            assert obs.next(timeout=10) is None  # the second resigned


def test_guarded_put_delete(client, etcd):
    name = uniq("guard")
    with client.session(ttl=5) as s:
        with s.campaign(name, b"x") as lead:
            lead.put("guarded/" + name, "v1")
            assert etcd.ctl("get", "--print-value-only", "guarded/" + name).stdout.strip() == "v1"
            lead.delete("guarded/" + name)
            assert etcd.ctl("get", "--print-value-only", "guarded/" + name).stdout.strip() == ""
        with pytest.raises(elector.NotLeader):
            lead.put("guarded/" + name, "v2")


def test_guarded_write_under_the_elections_own_prefix_is_refused(client, etcd):
    # The README's example once wrote NAME/state: a key without a lease under
    # the election's prefix, which blocked the election for good.
    name = uniq("own")
    with client.session(ttl=5) as s:
        with s.campaign(name, b"x") as lead:
            with pytest.raises(elector.InvalidArgument) as ei:
                lead.put(f"{name}/state", "v")
            assert (f"the key is under the election's own prefix '{name}/'"
                    in str(ei.value))
            assert f"such as '{name}-state'" in str(ei.value)
            with pytest.raises(elector.InvalidArgument):
                lead.delete(f"{name}/other")
            lead.put(f"{name}-state", "v")
            assert etcd.keys(name + "/") == [f"{name}/{s.lease:x}"]


def test_a_key_without_a_lease_is_reported_as_blocking(client, etcd):
    name = uniq("blk")
    etcd.ctl("put", f"{name}/state", "x")
    with pytest.raises(elector.Blocked) as ei:
        client.leader(name)
    assert ei.value.key == f"{name}/state".encode()
    assert (f"a key without a lease, {name}/state, blocks election {name}"
            in str(ei.value))
    assert f"etcdctl del {name}/state" in str(ei.value)
    with client.observe(name) as obs:
        assert obs.next(timeout=10) is None  # nobody leads (logged why)
    etcd.ctl("del", f"{name}/state")
    assert client.leader(name) is None


def test_lock_uses_etcdctl_keys(client, etcd):
    name = uniq("lock")
    with client.lock(name, ttl=5, timeout=10) as held:
        keys = etcd.keys(name + "/")
        assert len(keys) == 1
        # etcdctl lock on the same name waits for us
        assert held.is_leader()
        with pytest.raises(elector.Timeout):
            client.lock(name, ttl=5, timeout=0.3).acquire()
    assert etcd.keys(name + "/") == []


def test_errors(client, etcd):
    with pytest.raises(elector.InvalidArgument):
        client.leader("")
    with pytest.raises(elector.InvalidArgument):
        client.session(ttl=0)
    assert issubclass(elector.Timeout, elector.Error)
    assert issubclass(elector.NotLeader, elector.Error)
    assert elector.Timeout().code == -4
    bad = elector.Client(["127.0.0.1:1"], dial_timeout=0.5)
    try:
        with pytest.raises(elector.Unavailable):
            bad.session(ttl=5, timeout=10)
    finally:
        bad.close()


def test_on_lost_and_revoke(client, etcd):
    name = uniq("revoke")
    ttl = 6
    calls = []
    with client.session(ttl=ttl) as s:
        with pytest.raises(elector.LeadershipLost):
            with s.campaign(name, b"x") as lead:
                lead.on_lost(lambda l: calls.append(time.monotonic()))
                t0 = time.monotonic()
                etcd.ctl("lease", "revoke", f"{s.lease:x}")
                assert lead.lost.wait(ttl)
                noticed = time.monotonic() - t0
                print(f"revoke noticed after {noticed * 1000:.0f} ms (ttl {ttl} s)")
                assert noticed < ttl / 3
                assert not lead.is_leader()
                with pytest.raises(elector.NotLeader):
                    lead.put("guarded/" + name, "v")
                deadline = time.monotonic() + 5
                while not calls and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert len(calls) == 1
    assert etcd.ctl("get", "--print-value-only", "guarded/" + name).stdout.strip() == ""


def test_lock_excludes_etcdctl_lock(client, etcd):
    import subprocess
    from conftest import _bin
    name = uniq("ctl-lock")
    with client.lock(name, ttl=5, timeout=10):
        p = subprocess.Popen([_bin("ETCDCTL_BIN", "etcdctl"), f"--endpoints={etcd.endpoint}",
                              "lock", name, "echo", "etcdctl-got-it"],
                             stdout=subprocess.PIPE, text=True,
                             env=dict(__import__("os").environ, ETCDCTL_API="3"))
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                p.wait(1.0)  # it waits behind our key
            assert len(etcd.keys(name + "/")) == 2
        except BaseException:
            p.kill()
            p.wait()
            raise
    out, _ = p.communicate(timeout=30)
    assert "etcdctl-got-it" in out
    assert etcd.keys(name + "/") == []
    # and ours waits behind etcdctl's
    p = subprocess.Popen([_bin("ETCDCTL_BIN", "etcdctl"), f"--endpoints={etcd.endpoint}",
                          "lock", name, "sleep", "1"],
                         env=dict(__import__("os").environ, ETCDCTL_API="3"))
    try:
        deadline = time.monotonic() + 10
        while not etcd.keys(name + "/") and time.monotonic() < deadline:
            time.sleep(0.02)
        t0 = time.monotonic()
        with client.lock(name, ttl=5, timeout=30) as held:
            # etcdctl held it for its `sleep 1`, then deleted its key
            assert time.monotonic() - t0 > 0.3
            assert etcd.keys(name + "/") == [f"{name}/{held.lease:x}"]
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_session_close_waits_for_the_revoke(client, etcd):
    """Leaving ``with client.session()`` returns once etcd revoked the lease:
    a key on it is gone at the next read, and so is the lease."""
    import os
    import signal
    key = ("closed/" + uuid.uuid4().hex[:8]).encode()
    for _ in range(3):
        with client.session(ttl=30) as s:
            lease = s.lease
            assert client._handle.put(key, b"v", lease, False, 3000) == 0
        assert client._handle.get(key, False, 3000) == []
        assert lease not in etcd.leases()
    assert s.close() is True  # again: nothing to do
    # etcd frozen: close() gives up after its timeout and says so
    s = client.session(ttl=30)
    # a timeout of the wrong type: a clear TypeError, and nothing closed
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        s.close(timeout="0.3")
    assert s.lease in etcd.leases()
    etcd.pause()
    try:
        t0 = time.monotonic()
        assert s.close(timeout=0.3) is False
        assert time.monotonic() - t0 < 10
    finally:
        os.kill(etcd.proc.pid, signal.SIGCONT)


def test_session_close_revokes_again_once_etcd_is_back():
    """etcd killed under a session: the revoke fails on the way (the
    connection refused); close() makes it again until its timeout, as
    elector_session_close_sync() does, so once etcd is back the lease is gone
    when close() returns True (not left to its TTL)."""
    from conftest import Etcd
    e = Etcd()
    try:
        c = elector.Client([e.endpoint], dial_timeout=1.0)
        s = c.session(ttl=60)
        lease = s.lease
        e.kill()
        # close() in a thread: etcd is started again from this one (a member
        # dies with the thread that started it)
        res = []
        t0 = time.monotonic()
        th = threading.Thread(target=lambda: res.append(s.close(timeout=15)))
        th.start()
        time.sleep(0.8)
        e.restart()
        th.join()
        took = time.monotonic() - t0
        assert res == [True]
        assert took > 0.5, took  # it did wait for etcd
        assert lease not in e.leases()
        c.close()
    finally:
        e.stop()


def test_wrong_types_are_clear_type_errors():
    c = elector.Client(["127.0.0.1:1"], dial_timeout=0.3)
    try:
        with pytest.raises(TypeError, match="timeout must be a number of seconds"):
            c.leader("x", timeout="1")
        with pytest.raises(TypeError, match="election name must be str or bytes, not int"):
            c.leader(123)
        with pytest.raises(elector.InvalidArgument, match="NaN"):
            c.leader("x", timeout=float("nan"))
        with pytest.raises(TypeError, match="dial_timeout must be"):
            elector.Client(["127.0.0.1:1"], dial_timeout="2")
    finally:
        c.close()

