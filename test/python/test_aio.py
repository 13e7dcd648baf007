# SPDX-License-Identifier: MIT
"""elector.aio: campaign, guard, guarded writes, timeouts, and 200 cycles on an
asyncio loop with no thread."""

import asyncio
import gc
import os
import threading
import time
import uuid

import pytest

import elector
import elector.aio


def uniq(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_aio_campaign_and_timeout(etcd, client):
    name = uniq("aio")

    async def main():
        async with elector.aio.Client([etcd.endpoint]) as c:
            async with c.session(ttl=5) as s1, c.session(ttl=5) as s2:
                assert s1.lease > 0
                async with s1.campaign(name, b"aio-a") as lead:
                    assert lead.is_leader()
                    assert client.leader(name).value == b"aio-a"  # sync client
                    assert client.leader(name).token == lead.token
                    await lead.put("aio/" + name, "v")
                    with pytest.raises(elector.Timeout):
                        await s2.campaign(name, b"b", timeout=0.2)
                    assert etcd.keys(name + "/") == [f"{name}/{s1.lease:x}"]
                assert client.leader(name) is None
    asyncio.run(main())


def test_aio_session_close_revokes_again_once_etcd_is_back():
    """As the sync API's: etcd killed under a session, close() makes the
    failed revoke again until etcd is back; the lease is gone then."""
    from conftest import Etcd
    e = Etcd()

    async def main():
        c = elector.aio.Client([e.endpoint], dial_timeout=1.0)
        s = await c.session(ttl=60)
        lease = s.lease
        e.kill()
        assert await s.close(timeout=15) is True
        assert lease not in e.leases()
        await c.close()

    # the loop in a thread: etcd is started again from this one (a member
    # dies with the thread that started it)
    done = []

    def run():
        asyncio.run(main())
        done.append(True)

    th = threading.Thread(target=run)
    try:
        th.start()
        time.sleep(0.8)
        e.restart()
        th.join()
    finally:
        e.stop()
    assert done == [True]


def test_aio_guard_cancels_on_revoke(etcd):
    name = uniq("aioguard")

    async def main():
        async with elector.aio.Client([etcd.endpoint]) as c:
            async with c.session(ttl=6) as s:
                lead = await s.campaign(name, b"x")
                calls = []
                lead.on_lost(lambda l: calls.append(1))
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                await asyncio.sleep(0.1)
                revoke = asyncio.create_task(asyncio.to_thread(
                    etcd.ctl, "lease", "revoke", f"{s.lease:x}"))
                with pytest.raises(elector.LeadershipLost):
                    async with lead.guard():
                        await asyncio.sleep(60)  # cancelled by the loss
                noticed = loop.time() - t0
                await revoke
                print(f"aio: revoke noticed after {noticed * 1000:.0f} ms")
                assert noticed < 2.0 + 0.1
                assert lead.lost.is_set()
                assert calls == [1]
                with pytest.raises(elector.NotLeader):
                    await lead.put("aio/" + name, "v")
                await lead.resign()
    asyncio.run(main())


def test_aio_cycles_leak_nothing(etcd):
    name = uniq("aiocycles")

    async def main():
        c = elector.aio.Client([etcd.endpoint])
        async with c.session(ttl=5) as s:
            async with s.campaign(name, b"warm"):
                pass
        gc.collect()
        fd0 = len(os.listdir("/proc/self/fd"))
        t0 = len(os.listdir("/proc/self/task"))
        async with c.session(ttl=5) as s:
            for i in range(200):
                async with s.campaign(name, f"c{i}".encode()) as lead:
                    assert lead.is_leader()
        gc.collect()
        assert etcd.keys(name + "/") == []
        assert len(os.listdir("/proc/self/fd")) == fd0
        assert len(os.listdir("/proc/self/task")) == t0
        await c.close()
    asyncio.run(main())


def test_aio_leader_and_observe(etcd):
    name = uniq("aioobs")

    async def main():
        async with elector.aio.Client([etcd.endpoint]) as c:
            assert await c.leader(name, timeout=10) is None
            seen = []
            async with c.observe(name) as obs:
                seen.append(await obs.next(timeout=10))
                async with c.session(ttl=5) as s:
                    lease = s.lease
                    async with s.campaign(name, b"v1") as lead:
                        seen.append(await obs.next(timeout=10))
                        ldr = await c.leader(name, timeout=10)
                        assert ldr.value == b"v1" and ldr.token == lead.token
                    seen.append(await obs.next(timeout=10))
            assert seen[0] is None and seen[2] is None
            assert seen[1].value == b"v1" and seen[1].lease == lease
    asyncio.run(main())


def test_aio_session_close_waits_for_the_revoke(etcd, client):
    """Leaving ``async with c.session()`` returns once etcd revoked the lease
    (the loop keeps running meanwhile); against a frozen etcd, close(timeout)
    gives up and says so; Client.close() waits for its sessions' revokes."""
    import signal
    import time

    async def main():
        async with elector.aio.Client([etcd.endpoint]) as c:
            for _ in range(3):
                async with c.session(ttl=30) as s:
                    lease = s.lease
                assert lease not in etcd.leases()
            assert await s.close() is True  # again: nothing to do
            s = await c.session(ttl=30)
            with pytest.raises(TypeError, match="timeout must be a number of seconds"):
                await s.close(timeout="0.3")
            assert s.lease in etcd.leases()  # nothing closed
            etcd.pause()
            try:
                t0 = time.monotonic()
                assert await s.close(timeout=0.3) is False
                assert time.monotonic() - t0 < 10
            finally:
                etcd.resume()
        c = elector.aio.Client([etcd.endpoint])
        leases = [(await c.session(ttl=30)).lease for _ in range(3)]
        await c.close()
        left = set(leases) & set(etcd.leases())
        assert not left, f"still granted after Client.close(): {left}"
    asyncio.run(main())
