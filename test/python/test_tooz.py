# SPDX-License-Identifier: MIT
"""The tooz backend (Debian's python3-tooz): get_coordinator("elector://...")."""

import threading
import time
import uuid

import pytest

tooz_coordination = pytest.importorskip("tooz.coordination")


def coord(etcd, member):
    c = tooz_coordination.get_coordinator(f"elector://{etcd.endpoint}?ttl=5", member)
    c.start(start_heart=True)
    return c


def test_tooz_leader_election(etcd, client):
    group = f"tooz-{uuid.uuid4().hex[:8]}".encode()
    a, b = coord(etcd, b"member-a"), coord(etcd, b"member-b")
    try:
        elected = []
        a.watch_elected_as_leader(group, lambda ev: elected.append((b"a", ev.member_id)))
        b.watch_elected_as_leader(group, lambda ev: elected.append((b"b", ev.member_id)))
        a.run_watchers()
        deadline = time.monotonic() + 10
        while not elected and time.monotonic() < deadline:
            a.run_watchers()
            time.sleep(0.01)
        assert elected == [(b"a", b"member-a")]
        b.run_watchers()
        b.run_watchers()
        assert elected == [(b"a", b"member-a")]
        assert a.get_leader(group).get() == b"member-a"
        assert b.get_leader(group).get() == b"member-a"
        a.stand_down_group_leader(group)
        while len(elected) < 2 and time.monotonic() < deadline + 10:
            b.run_watchers()
            time.sleep(0.01)
        assert elected[1] == (b"b", b"member-b")
        assert a.get_leader(group).get() == b"member-b"
        assert a.heartbeat() > 0
    finally:
        a.stop()
        b.stop()
    assert client.leader(group) is None


def test_tooz_lock(etcd):
    name = f"tooz-lock-{uuid.uuid4().hex[:8]}"
    a, b = coord(etcd, b"a"), coord(etcd, b"b")
    try:
        la, lb = a.get_lock(name), b.get_lock(name)
        assert la.acquire()
        assert la.is_still_owner()
        assert not lb.acquire(blocking=False)
        assert not lb.acquire(blocking=0.2)
        got = []
        t = threading.Thread(target=lambda: got.append(lb.acquire(blocking=10)))
        t.start()
        time.sleep(0.2)
        assert la.release()
        t.join(20)
        assert got == [True]
        assert lb.is_still_owner() and not la.is_still_owner()
        assert etcd.keys(name + "/") and len(etcd.keys(name + "/")) == 1
        import tooz
        with pytest.raises(tooz.NotImplemented):  # groups: not yet
            a.join_group(b"g")
        lb.release()
    finally:
        a.stop()
        b.stop()
    assert etcd.keys(name + "/") == []
