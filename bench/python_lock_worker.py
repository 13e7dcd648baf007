#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""One candidate of bench/python_locks.py: takes the lock with one library,
says "acquired <CLOCK_MONOTONIC ns>", then obeys release / belief / exit
lines on stdin.

    /usr/bin/python3 bench/python_lock_worker.py LIB ENDPOINT NAME TTL

A file of its own, importing nothing beyond os, sys and time before the
library: the benchmark's idle RSS is the candidate's library and Python, not
the harness's modules (argparse, subprocess, socket, statistics, tempfile...:
3.5 MB when the worker was python_locks.py itself; bench/RESULTS.md
section 7a).
"""

import os
import sys
import time


def _out(*words):
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


def worker(lib, endpoint, name, ttl):
    host, port = endpoint.rsplit(":", 1)
    local = io = None
    if lib.startswith("elector"):
        import elector
        client = elector.Client([endpoint])
        lock = client.lock(name, ttl=ttl, release_on_exit=(lib == "elector"))
        _out("ready")
        lead = lock.acquire()
        _out("acquired", time.monotonic_ns())

        def release():
            lock.release()

        def local():
            return lead.is_leader()
    elif lib == "etcd3":
        import etcd3
        client = etcd3.client(host=host, port=int(port))
        lock = client.lock(name, ttl=ttl)
        _out("ready")
        while True:  # Lock.acquire()'s algorithm, with the client's calls
            lock.lease = client.lease(ttl)
            ok, _ = client.transaction(
                compare=[client.transactions.create(lock.key) == 0],
                success=[client.transactions.put(lock.key, lock.uuid, lease=lock.lease)],
                failure=[client.transactions.get(lock.key)])
            if ok:
                break
            lock.lease = None
            try:
                client.watch_once(lock.key, 30)
            except etcd3.exceptions.WatchTimedOut:
                pass
        _out("acquired", time.monotonic_ns())

        def refresher():
            while True:
                time.sleep(ttl / 3)
                lease = lock.lease
                if lease is None:
                    return
                try:
                    lease.refresh()
                except Exception:
                    pass
        import threading
        threading.Thread(target=refresher, daemon=True).start()

        def release():
            lock.release()
            lock.lease = None

        def local():
            return lock.lease is not None

        def io():
            return lock.is_acquired()
    else:
        import etcd3gw
        from tooz import coordination
        # Debian 12's tooz 3.1 passes api_path= to etcd3gw.client(), which
        # etcd3gw 2.0's factory does not take (TypeError): build the client
        # class directly, as the factory would with that argument
        etcd3gw.client = lambda **kw: sys.modules["etcd3gw.client"].Etcd3Client(**kw)
        coord = coordination.get_coordinator(
            f"etcd3+http://{endpoint}?api_version=v3&lock_timeout={ttl}&timeout=5",
            f"m{os.getpid()}".encode())
        coord.start(start_heart=True)
        lock = coord.get_lock(name.encode())
        _out("ready")
        lock.acquire(blocking=True)
        _out("acquired", time.monotonic_ns())

        def release():
            lock.release()

        def local():
            return lock.acquired
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "release":
            _out("releasing", time.monotonic_ns())
            release()
            _out("released", time.monotonic_ns())
        elif cmd[0] == "belief":
            # local first (no I/O), then the I/O check if the library has one
            lo = local()
            try:
                i = io() if io else "-"
            except Exception as e:  # noqa: BLE001
                i = f"error:{type(e).__name__}"
            _out("belief", int(bool(lo)), i if i == "-" or isinstance(i, str) else int(bool(i)))
        elif cmd[0] == "exit":
            break
    os._exit(0)


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
