# SPDX-License-Identifier: MIT
"""pytest harness for the Python package: a real etcd on free loopback ports in
a temporary directory, always reaped. $ETCD_BIN / $ETCDCTL_BIN override the
binaries; else $ELECTOR_ETCD_DIR's (the etcd version scripts/test.sh selects, as
test/etcd_harness.c does), else those found on PATH."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest


def _bin(env, name):
    if os.environ.get(env):
        return os.environ[env]
    d = os.environ.get("ELECTOR_ETCD_DIR")
    if d:
        p = os.path.join(d, name)
        if not os.access(p, os.X_OK):
            raise RuntimeError(f"ELECTOR_ETCD_DIR={d} has no executable {name}")
        return p
    return shutil.which(name) or f"/usr/bin/{name}"


def _die_with_parent():
    # etcd gets SIGKILL when pytest dies (killed by a ctest timeout, say), so no
    # etcd outlives the tests even when the fixture's finalizer cannot run
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_stopped(pid, timeout=2.0):
    """Waits until every thread of pid is stopped (state T or t)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        try:
            for t in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{t}/stat") as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except (OSError, IndexError):
                    pass
        except OSError:
            return
        if all(st in ("T", "t") for st in states):
            return
        time.sleep(0.01)


class Etcd:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="elector-py-")
        self.client_port = _free_port()
        self.peer_port = _free_port()
        self.endpoint = f"127.0.0.1:{self.client_port}"
        self.log = open(os.path.join(self.dir, "etcd.log"), "w")
        self._start()

    def _start(self):
        self.proc = subprocess.Popen(
            [_bin("ETCD_BIN", "etcd"), "--name=m0", f"--data-dir={self.dir}/m0.etcd",
             f"--listen-client-urls=http://{self.endpoint}",
             f"--advertise-client-urls=http://{self.endpoint}",
             f"--listen-peer-urls=http://127.0.0.1:{self.peer_port}",
             f"--initial-advertise-peer-urls=http://127.0.0.1:{self.peer_port}",
             f"--initial-cluster=m0=http://127.0.0.1:{self.peer_port}",
             "--log-level=warn", "--logger=zap"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("etcd exited: " + self.tail())
            r = self.ctl("endpoint", "health", check=False)
            if r.returncode == 0:
                break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("etcd not healthy in 30 s: " + self.tail())
            time.sleep(0.1)

    def kill(self):
        """SIGKILL; the data stays for restart()."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def restart(self):
        """The same member again (ports, data), once healthy."""
        self._start()

    def tail(self):
        try:
            with open(os.path.join(self.dir, "etcd.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def ctl(self, *args, check=True):
        env = dict(os.environ, ETCDCTL_API="3")
        r = subprocess.run([_bin("ETCDCTL_BIN", "etcdctl"), f"--endpoints={self.endpoint}",
                            "--dial-timeout=2s", "--command-timeout=5s", *args],
                           env=env, capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError(f"etcdctl {args}: {r.stderr}")
        return r

    def keys(self, prefix):
        r = self.ctl("get", "--prefix", "--keys-only", prefix)
        return [k for k in r.stdout.split("\n") if k]

    def leases(self):
        r = self.ctl("lease", "list")
        # "found N leases" then one lease ID (hex) a line
        return [int(ln, 16) for ln in r.stdout.split("\n")[1:] if ln.strip()]

    def pause(self):
        """SIGSTOP, and wait (up to 2 s) until every thread of etcd has stopped:
        the signal takes effect asynchronously, and until then a request sent
        now can still be answered."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        wait_stopped(self.proc.pid)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def etcd():
    e = Etcd()
    try:
        yield e
    finally:
        e.stop()


@pytest.fixture
def client(etcd):
    import elector
    c = elector.Client([etcd.endpoint])
    try:
        yield c
    finally:
        c.close()
