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
        lb.release()
    finally:
        a.stop()
        b.stop()
    assert etcd.keys(name + "/") == []


def test_tooz_groups(etcd):
    """tooz's group semantics, members on the coordinators' session leases."""
    C = tooz_coordination
    g = f"grp/{uuid.uuid4().hex[:8]}".encode()  # a "/" in the ID, on purpose
    a, b = coord(etcd, b"m-a"), coord(etcd, b"m/b")
    try:
        with pytest.raises(C.GroupNotCreated):
            a.join_group(g).get()
        with pytest.raises(C.GroupNotCreated):
            a.get_members(g).get()
        with pytest.raises(C.GroupNotCreated):
            a.delete_group(g).get()
        a.create_group(g).get()
        with pytest.raises(C.GroupAlreadyExist):
            b.create_group(g).get()
        assert g in a.get_groups().get()
        assert a.get_members(g).get() == set()
        a.join_group(g, b"cap-a").get()
        with pytest.raises(C.MemberAlreadyExist):
            a.join_group(g).get()
        b.join_group(g, {"x": 1}).get()
        assert b.get_members(g).get() == {b"m-a", b"m/b"}
        assert b.get_member_capabilities(g, b"m-a").get() == b"cap-a"
        assert a.get_member_capabilities(g, b"m/b").get() == {"x": 1}
        with pytest.raises(C.MemberNotJoined):
            a.get_member_capabilities(g, b"nobody").get()
        a.update_capabilities(g, b"cap-a2").get()
        assert b.get_member_capabilities(g, b"m-a").get() == b"cap-a2"
        with pytest.raises(C.GroupNotEmpty):
            a.delete_group(g).get()
        # the member keys are bound to the coordinators' leases
        leases = set(etcd.leases())
        for lease_hex in [a._session.lease, b._session.lease]:
            assert lease_hex in leases
        r = etcd.ctl("get", "--prefix", "tooz-elector/members/", "-w", "json")
        import json
        kvs = json.loads(r.stdout)["kvs"]
        assert sorted(kv["lease"] for kv in kvs) == sorted(
            [a._session.lease, b._session.lease])
        b.leave_group(g).get()
        with pytest.raises(C.MemberNotJoined):
            b.leave_group(g).get()
        with pytest.raises(C.MemberNotJoined):
            b.update_capabilities(g, b"x").get()
        assert a.get_members(g).get() == {b"m-a"}
        # another group whose ID starts with this one's sees none of its members
        a.create_group(g + b"/sub").get()
        assert a.get_members(g + b"/sub").get() == set()
        a.delete_group(g + b"/sub").get()
    finally:
        b.stop()
        a.stop()  # leaves its joined groups (tooz's stop())
    # a stopped member is gone; then the group can be deleted
    c = coord(etcd, b"m-c")
    try:
        assert c.get_members(g).get() == set()
        c.delete_group(g).get()
        assert g not in c.get_groups().get()
    finally:
        c.stop()
    assert etcd.keys("tooz-elector/") == []


def test_tooz_group_member_leaves_with_its_lease(etcd):
    """A member whose lease is revoked (its process died) leaves the group."""
    g = f"grp-{uuid.uuid4().hex[:8]}".encode()
    a, b = coord(etcd, b"a"), coord(etcd, b"b")
    try:
        a.create_group(g).get()
        a.join_group(g).get()
        b.join_group(g).get()
        etcd.ctl("lease", "revoke", format(b._session.lease, "x"))
        assert a.get_members(g).get() == {b"a"}
        a.leave_group(g).get()
        a.delete_group(g).get()
    finally:
        a.stop()
        try:
            b.stop()
        except Exception:
            pass
    assert etcd.keys("tooz-elector/") == []


def test_tooz_group_watchers(etcd):
    group = f"tooz-watch-{uuid.uuid4().hex[:8]}".encode()
    a, b = coord(etcd, b"wa"), coord(etcd, b"wb")
    try:
        a.create_group(group).get()
        joined, left = [], []
        a.watch_join_group(group, lambda ev: joined.append(ev.member_id))
        a.watch_leave_group(group, lambda ev: left.append(ev.member_id))
        assert a.run_watchers() == []
        b.join_group(group, b"caps").get()
        a.join_group(group).get()
        a.run_watchers()
        assert sorted(joined) == [b"wa", b"wb"] and left == []
        a.run_watchers()  # no change: nothing fires again
        assert sorted(joined) == [b"wa", b"wb"] and left == []
        b.leave_group(group).get()
        a.run_watchers()
        assert left == [b"wb"]
        # a member whose coordinator stops leaves with its lease
        b.join_group(group).get()
        a.run_watchers()
        b.stop()
        b = None
        a.run_watchers()
        assert sorted(joined) == [b"wa", b"wb", b"wb"] and left == [b"wb", b"wb"]
        a.unwatch_join_group(group, a._hooks_join_group[group][0])
        a.unwatch_leave_group(group, a._hooks_leave_group[group][0])
        a.leave_group(group).get()
        assert a.run_watchers() == []
        assert len(joined) == 3 and len(left) == 2
    finally:
        a.stop()
        if b is not None:
            b.stop()
