# SPDX-License-Identifier: MIT
"""What the Python binding must keep safe: the GIL held past the TTL, fork(),
green threads (eventlet, gevent), timed-out and cancelled campaigns, leaks."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

import elector
from elector import _elector


def uniq(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def lease_alive(etcd, lease):
    r = etcd.ctl("lease", "timetolive", f"{lease:x}")
    return "already expired" not in r.stdout and "remaining(-1" not in r.stdout


def test_gil_held_three_ttls(client, etcd):
    name = uniq("gil")
    ttl = 2
    with client.session(ttl=ttl) as s:
        with s.campaign(name, b"x") as lead:
            t0 = time.monotonic()
            _elector._hold_gil(3 * ttl * 1000 + 500)  # no Python runs meanwhile
            held = time.monotonic() - t0
            assert held >= 3 * ttl
            assert lead.is_leader()
            assert not lead.lost.is_set()
            assert lease_alive(etcd, s.lease)
            ldr = client.leader(name)
            assert ldr is not None and ldr.lease == s.lease
            lead.put("gil/" + name, "still-leader")


# Python 3.12+ warns on a fork() while other threads run: forking under the
# driver's threads is what this test is about.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_fork_while_leading(client, etcd):
    name = uniq("fork")
    with client.session(ttl=3) as s:
        with s.campaign(name, b"parent") as lead:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: every use raises ForkError
                os.close(r)
                code = 0
                for f in (lead.is_leader, lambda: s.lease, lambda: client.session(ttl=3),
                          lambda: lead.put("fork/" + name, "child"),
                          lambda: client.leader(name), s.close, lead.resign):
                    try:
                        f()
                        code |= 1
                    except elector.ForkError:
                        pass
                    except BaseException:
                        code |= 2
                del lead, s
                gc.collect()
                client.close()  # forgets the parent's driver, sends nothing
                os.write(w, bytes([code]))
                os._exit(0)
            os.close(w)
            code = os.read(r, 1)
            os.close(r)
            _, status = os.waitpid(pid, 0)
            assert status == 0
            assert code == b"\0", f"child result bits {code!r}"
            # the parent keeps leading past a TTL: the child renewed, revoked nothing
            time.sleep(3.5)
            assert lead.is_leader()
            assert lease_alive(etcd, s.lease)
            lead.put("fork/" + name, "parent")
            assert client.leader(name).lease == s.lease


GREEN = r"""
import sys, time
MODE = sys.argv[2]
if MODE == "eventlet":
    import eventlet
    eventlet.monkey_patch()
    spawn = eventlet.spawn
else:
    from gevent import monkey
    monkey.patch_all()
    import gevent
    spawn = gevent.spawn
import elector
c = elector.Client([sys.argv[1]])
name = "green-" + MODE + "-" + str(time.time())
ticks = []
stop = [False]
def ticker():
    while not stop[0]:
        ticks.append(time.monotonic())
        time.sleep(0.01)
with c.session(ttl=5) as s1, c.session(ttl=5) as s2:
    with s1.campaign(name, b"a"):
        g = spawn(ticker)
        time.sleep(0.05)
        t0 = time.monotonic()
        try:
            s2.campaign(name, b"b", timeout=1.0)
            print("ERROR: elected")
        except elector.Timeout:
            pass
        t1 = time.monotonic()
        stop[0] = True
        g.wait() if MODE == "eventlet" else g.join()
during = [t for t in ticks if t0 <= t <= t1]
gaps = [b - a for a, b in zip(during, during[1:])] or [t1 - t0]
print("TICKS", len(during), "MAXGAP_MS", round(max(gaps) * 1000, 1))
# Client.close() with a session open while etcd is frozen: the revoke's wait
# (1 s) blocks only this green thread
import os, signal
s3 = c.session(ttl=5)
ticks.clear()
stop[0] = False
g = spawn(ticker)
time.sleep(0.05)
os.kill(int(sys.argv[3]), signal.SIGSTOP)
# stopped for real: every thread of etcd (the signal takes effect asynchronously)
for _ in range(200):
    tasks = os.listdir("/proc/%s/task" % sys.argv[3])
    states = []
    for t in tasks:
        try:
            with open("/proc/%s/task/%s/stat" % (sys.argv[3], t)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass
    if all(st in ("T", "t") for st in states):
        break
    time.sleep(0.01)
try:
    t0 = time.monotonic()
    c.close()
    t1 = time.monotonic()
finally:
    os.kill(int(sys.argv[3]), signal.SIGCONT)
stop[0] = True
g.wait() if MODE == "eventlet" else g.join()
during = [t for t in ticks if t0 <= t <= t1]
print("CLOSE", "TICKS", len(during), "WAITED_MS", round((t1 - t0) * 1000))
"""


@pytest.mark.parametrize("mode", ["eventlet", "gevent"])
def test_green_threads(etcd, mode):
    pytest.importorskip(mode)
    r = subprocess.run([sys.executable, "-c", GREEN, etcd.endpoint, mode,
                        str(etcd.proc.pid)],
                       capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0
    assert "ERROR" not in r.stdout
    words = r.stdout.split()
    ticks = int(words[words.index("TICKS") + 1])
    # about 100 expected; a campaign that blocked the hub would give 0 or 1
    assert ticks >= 20
    # Client.close() waited about 1 s for the frozen etcd: ~100 ticks meanwhile
    line = next(ln for ln in r.stdout.split("\n") if ln.startswith("CLOSE "))
    words = line.split()
    assert int(words[words.index("WAITED_MS") + 1]) >= 500, line
    assert int(words[words.index("TICKS") + 1]) >= 20, line


GREEN_SILENT = r"""
import sys, time
MODE = sys.argv[2]
if MODE == "eventlet":
    import eventlet
    eventlet.monkey_patch()
    spawn = eventlet.spawn
else:
    from gevent import monkey
    monkey.patch_all()
    import gevent
    spawn = gevent.spawn
import elector
ticks = []
stop = [False]
def ticker():
    while not stop[0]:
        ticks.append(time.monotonic())
        time.sleep(0.01)

def measure(what, fn, exc=elector.Timeout):
    t0 = time.monotonic()
    try:
        fn()
        print("ERROR:", what, "returned")
    except exc:
        pass
    t1 = time.monotonic()
    during = [t for t in ticks if t0 <= t <= t1]
    gaps = [b - a for a, b in zip(during, during[1:])] or [t1 - t0]
    print(what, "TICKS", len(during), "MAXGAP_MS", round(max(gaps) * 1000, 1),
          "WAITED_MS", round((t1 - t0) * 1000))

g = spawn(ticker)
time.sleep(0.05)
# etcd that never answers: a loopback listener that accepts nothing
c = elector.Client([sys.argv[1]])
measure("leader", lambda: c.leader("green-silent", timeout=0.5))
measure("session", lambda: c.session(ttl=5, timeout=0.5))
# the tooz backend's group key operations (the request timeout ends them)
from tooz import coordination
from elector.tooz_driver import ElectorDriver
c2 = elector.Client([sys.argv[1]], request_timeout=0.5)
d = ElectorDriver.__new__(ElectorDriver)
d._client = c2
measure("tooz", lambda: d.get_members(b"g").get(), coordination.ToozError)
c2.close()
stop[0] = True
g.wait() if MODE == "eventlet" else g.join()
c.close()
"""


@pytest.mark.parametrize("mode", ["eventlet", "gevent"])
def test_green_threads_silent_etcd(mode):
    """client.leader(), a session's grant and the tooz backend's group
    reads, waiting on an etcd that never answers, block only their own green
    thread."""
    pytest.importorskip(mode)
    pytest.importorskip("tooz")
    import socket
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        ep = "127.0.0.1:%d" % silent.getsockname()[1]
        r = subprocess.run([sys.executable, "-c", GREEN_SILENT, ep, mode],
                           capture_output=True, text=True, timeout=60)
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0
    assert "ERROR" not in r.stdout
    for what in ("leader", "session", "tooz"):
        line = next(ln for ln in r.stdout.split("\n") if ln.startswith(what + " "))
        words = line.split()
        ticks = int(words[words.index("TICKS") + 1])
        # about 50 expected in 0.5 s; a wait that blocked the hub gives 0 or 1
        assert ticks >= 10, line


def test_timed_out_and_cancelled_campaigns_leave_nothing(client, etcd):
    name = uniq("timeout")
    leases_before = set(etcd.leases())
    with client.session(ttl=5) as s1:
        with s1.campaign(name, b"a"):
            for _ in range(50):
                with client.session(ttl=5) as s:
                    with pytest.raises(elector.Timeout):
                        s.campaign(name, b"b", timeout=0.02)
            # cancelled by Ctrl-C (SIGINT raises KeyboardInterrupt in the wait)
            for _ in range(10):
                with client.session(ttl=5) as s:
                    signal.setitimer(signal.ITIMER_REAL, 0.03)
                    old = signal.signal(signal.SIGALRM, signal.default_int_handler)
                    try:
                        with pytest.raises(KeyboardInterrupt):
                            s.campaign(name, b"c")
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                        signal.signal(signal.SIGALRM, old)
            assert etcd.keys(name + "/") == [f"{name}/{s1.lease:x}"]
            assert set(etcd.leases()) - leases_before == {s1.lease}
    assert etcd.keys(name + "/") == []
    assert set(etcd.leases()) - leases_before == set()


def fds():
    return len(os.listdir("/proc/self/fd"))


def tasks():
    return len(os.listdir("/proc/self/task"))


def test_thread_cycles_leak_nothing(etcd):
    name = uniq("cycles")
    c = elector.Client([etcd.endpoint])
    # warm up: the first session starts a release helper and a connection
    with c.session(ttl=5) as s:
        s.campaign(name, b"w").resign()
    gc.collect()
    fd0, t0, th0 = fds(), tasks(), threading.active_count()
    errors = []

    def worker(i):
        try:
            with c.session(ttl=5) as s:
                for _ in range(50):
                    with s.campaign(name, f"w{i}".encode(), timeout=60) as lead:
                        assert lead.is_leader()
        except BaseException as e:
            errors.append(e)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors, errors
    gc.collect()
    assert etcd.keys(name + "/") == []
    assert fds() == fd0
    assert tasks() == t0
    assert threading.active_count() == th0
    c.close()


def test_ctrl_c_interrupts_leader_and_grant():
    """client.leader() and a session's grant against an etcd that never
    answers: SIGINT (KeyboardInterrupt) ends the wait at once."""
    import socket
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        c = elector.Client(["127.0.0.1:%d" % silent.getsockname()[1]])
        old = signal.signal(signal.SIGALRM, signal.default_int_handler)
        try:
            for call in (lambda: c.leader("ctrl-c", timeout=30),
                         lambda: c.session(ttl=5, timeout=30)):
                signal.setitimer(signal.ITIMER_REAL, 0.05)
                t0 = time.monotonic()
                with pytest.raises(KeyboardInterrupt):
                    call()
                assert time.monotonic() - t0 < 20
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            c.close()
