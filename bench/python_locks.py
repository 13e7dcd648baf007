#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Side-by-side benchmark of Python locks on etcd (issue 22): elector's Python
package (elector.Client.lock), python3-etcd3's Lock algorithm and tooz's
etcd3gw driver lock, on the same private etcd.

    /usr/bin/python3 bench/python_locks.py [--rounds N] [--ttl S] [--members 1|3]
                                     [--libs elector,elector-nohelper,etcd3,tooz]

Libraries: elector (client.lock(name, ttl) with its defaults: release_on_exit,
i.e. a helper process revokes the lease when the holder dies), elector-nohelper
(release_on_exit=False: the successor waits for the TTL like the others),
etcd3 (python3-etcd3 0.12), tooz (python3-tooz 3.1, etcd3gw driver).

Needs the extension built (PYTHONPATH=build/python, or scripts/bench-python.sh
which sets it and ELECTOR_RELEASE_HELPER) and Debian's python3-etcd3,
python3-etcd3gw, python3-tooz (scripts/deps.sh bench installs them). Prints
a markdown table; --out FILE writes it too. The exit status says only whether the
benchmark ran: figures are reported, never asserted.

Debian 12's tooz 3.1 calls etcd3gw.client(api_path=...), which etcd3gw 2.0's
factory does not accept (TypeError at get_coordinator): the tooz candidate
replaces that factory by the Etcd3Client class it wraps, and uses
api_version=v3 (etcd 3.4 serves /v3/).

Every candidate is its own process (bench/python_lock_worker.py), so that it can be
SIGKILLed, SIGSTOPped and measured. Times are taken with CLOCK_MONOTONIC in the
processes themselves (one clock for the whole machine):
  graceful  holder's release() called -> the waiting candidate's acquire() returns
  crash     SIGKILL of the holder sent -> the waiting candidate's acquire() returns
  idle      VmRSS and Threads of a candidate blocked in acquire() (and of its
            child processes: elector's release helper), after 2 s of waiting
  pause     the holder is SIGSTOPped for TTL + 3 s while a candidate waits, then
            SIGCONTed; at once it is asked what it believes:
              local: the library's own answer without I/O (elector:
                     lead.is_leader(); tooz: lock.acquired after the
                     heartbeat that tooz's heart thread runs; etcd3: the lock
                     object has a lease, i.e. the body of `with lock:` runs on)
              io:    an answer that asks etcd (etcd3: lock.is_acquired();
                     elector and tooz have none beyond the above: "-")
            a belief is wrong when it says "held" while another candidate holds
            the lock (which it does: the successor acquired during the pause).

python3-etcd3 0.12's Lock.acquire() raises TypeError when contended on Debian 12
(its tenacity wait callback predates tenacity 8), so its candidate runs the same
algorithm with the client's own calls: lease(ttl), the create-revision
transaction, watch_once(key) on failure; release() is the library's. It never
refreshes its lease by itself: the holder refreshes it every TTL/3 from a thread,
as its documentation asks.
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

LIBS = ("elector", "elector-nohelper", "etcd3", "tooz")

# ------------------------------------------------------------------ etcd


def _die_with_parent():
    # SIGKILL when the benchmark dies (killed, say), so that no etcd or
    # candidate outlives it even when its finally: cannot run
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, members):
        self.dir = tempfile.mkdtemp(prefix="elector-pybench-")
        etcd = os.environ.get("ETCD_BIN") or shutil.which("etcd") or "/usr/bin/etcd"
        self.etcd = etcd
        ports = [(_free_port(), _free_port()) for _ in range(members)]
        cluster = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, (_, p) in enumerate(ports))
        self.endpoints = [f"127.0.0.1:{c}" for c, _ in ports]
        self.procs = []
        for i, (c, p) in enumerate(ports):
            log = open(os.path.join(self.dir, f"m{i}.log"), "w")
            self.procs.append(subprocess.Popen(
                [etcd, f"--name=m{i}", f"--data-dir={self.dir}/m{i}.etcd",
                 f"--listen-client-urls=http://127.0.0.1:{c}",
                 f"--advertise-client-urls=http://127.0.0.1:{c}",
                 f"--listen-peer-urls=http://127.0.0.1:{p}",
                 f"--initial-advertise-peer-urls=http://127.0.0.1:{p}",
                 f"--initial-cluster={cluster}", "--log-level=warn", "--logger=zap"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent))
        ctl = os.environ.get("ETCDCTL_BIN") or shutil.which("etcdctl") or "/usr/bin/etcdctl"
        self.ctl = ctl
        deadline = time.monotonic() + 60
        while True:
            r = subprocess.run([ctl, "--endpoints=" + ",".join(self.endpoints),
                                "endpoint", "health"], capture_output=True,
                               env=dict(os.environ, ETCDCTL_API="3"))
            if r.returncode == 0:
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.stop()
                raise RuntimeError("etcd did not start")
            time.sleep(0.2)
        self.version = subprocess.run([etcd, "--version"], capture_output=True,
                                      text=True).stdout.split("\n")[0]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# ------------------------------------------------------------------ driver


class Cand:
    def __init__(self, lib, endpoint, name, ttl, live):
        self.p = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "python_lock_worker.py"), lib, endpoint, name,
             str(ttl)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            stderr=None, preexec_fn=_die_with_parent)
        live.append(self)
        self.expect("ready")

    def line(self, timeout=60):
        import select
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise RuntimeError(f"candidate {self.p.pid}: no line in {timeout} s")
        ln = self.p.stdout.readline()
        if not ln:
            raise RuntimeError(f"candidate {self.p.pid} exited ({self.p.wait()})")
        return ln.split()

    def expect(self, word, timeout=60):
        w = self.line(timeout)
        if w[0] != word:
            raise RuntimeError(f"candidate {self.p.pid}: expected {word}, got {w}")
        return w

    def send(self, cmd):
        try:
            self.p.stdin.write(cmd + "\n")
            self.p.stdin.flush()
        except OSError:  # a killed candidate
            pass

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()

    def tree_status(self):
        """(rss_kb, threads, pss_kb) of the process, and of it plus its
        children. PSS divides each shared page among the processes mapping
        it: a helper that maps the same libraries as its parent adds less
        than its RSS says."""
        def st(pid):
            rss = thr = pss = 0
            with open(f"/proc/{pid}/status") as f:
                for ln in f:
                    if ln.startswith("VmRSS:"):
                        rss = int(ln.split()[1])
                    elif ln.startswith("Threads:"):
                        thr = int(ln.split()[1])
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for ln in f:
                        if ln.startswith("Pss:"):
                            pss = int(ln.split()[1])
            except OSError:
                pass
            return rss, thr, pss
        own = st(self.p.pid)
        tot = list(own)
        # children of every thread (elector's driver thread spawns the helper)
        kids = set()
        for tid in os.listdir(f"/proc/{self.p.pid}/task"):
            try:
                with open(f"/proc/{self.p.pid}/task/{tid}/children") as f:
                    kids.update(int(c) for c in f.read().split())
            except OSError:
                pass
        for c in kids:
            try:
                r = st(c)
            except OSError:
                continue
            tot[0] += r[0]
            tot[1] += r[1]
            tot[2] += r[2]
        return own, tuple(tot)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))]


def run(args):
    cl = Cluster(args.members)
    ep = cl.endpoints[0]
    res = {lib: {"graceful": [], "crash": [], "rss": [], "rss_tree": [], "pss": [], "pss_tree": [], "thr": [],
                 "thr_tree": [], "wrong_local": 0, "wrong_io": 0, "pause": 0, "failed": [],
                 "io_checks": 0}
           for lib in args.libs}
    live = []  # the candidates of the current round
    try:
        for rnd in range(args.rounds):
            for k, lib in enumerate(args.libs[rnd % len(args.libs):] +
                                    args.libs[:rnd % len(args.libs)]):
                name = f"pybench-{lib}-{rnd}"
                r = res[lib]
                try:
                    w, own = one_round(args, ep, lib, name, r, live)
                except RuntimeError as e:
                    # a candidate that says nothing in time: counted, reported
                    keys = subprocess.run(
                        [cl.ctl, "--endpoints=" + ",".join(cl.endpoints), "get", "--prefix",
                         "--keys-only", "", ], capture_output=True, text=True,
                        env=dict(os.environ, ETCDCTL_API="3")).stdout.split()
                    e = f"{e} (keys then: {' '.join(k for k in keys if name in k)})"
                    r["failed"].append(str(e))
                    print(f"round {rnd} {lib}: FAILED: {e}", flush=True)
                    for x in live:
                        x.kill()
                    live.clear()
                    continue
                for x in live:
                    x.send("exit")
                    x.kill()
                    try:
                        x.p.stdin.close()
                    except OSError:
                        pass
                live.clear()
                print(f"round {rnd} {lib}: graceful {r['graceful'][-1]:.1f} ms, crash "
                      f"{r['crash'][-1]:.0f} ms, idle {own[0]} kB {own[1]} threads, "
                      f"belief {w[1:]}", flush=True)
    finally:
        for x in live:
            x.kill()
        cl.stop()
    return cl, res


def one_round(args, ep, lib, name, r, live):
    # graceful, and the idle candidate's footprint
    a = Cand(lib, ep, name, args.ttl, live)
    a.expect("acquired")
    b = Cand(lib, ep, name, args.ttl, live)
    time.sleep(2)
    own, tree = b.tree_status()
    r["rss"].append(own[0])
    r["thr"].append(own[1])
    r["rss_tree"].append(tree[0])
    r["thr_tree"].append(tree[1])
    r["pss"].append(own[2])
    r["pss_tree"].append(tree[2])
    a.send("release")
    t0 = int(a.expect("releasing")[1])
    t1 = int(b.expect("acquired")[1])
    r["graceful"].append((t1 - t0) / 1e6)
    # crash: b holds; c waits; SIGKILL b
    c = Cand(lib, ep, name, args.ttl, live)
    time.sleep(0.5)
    t0 = time.monotonic_ns()
    b.p.send_signal(signal.SIGKILL)
    t1 = int(c.expect("acquired", timeout=args.ttl * 4 + 30)[1])
    r["crash"].append((t1 - t0) / 1e6)
    b.kill()
    # pause: c holds; d waits; SIGSTOP c past the TTL
    d = Cand(lib, ep, name, args.ttl, live)
    time.sleep(0.5)
    c.p.send_signal(signal.SIGSTOP)
    d.expect("acquired", timeout=args.ttl * 4 + 30)
    time.sleep(args.ttl + 3)  # well past the TTL
    c.p.send_signal(signal.SIGCONT)
    c.send("belief")
    w = c.expect("belief")
    r["pause"] += 1
    if w[1] == "1":
        r["wrong_local"] += 1
    if w[2] != "-":
        r["io_checks"] += 1
        if w[2] == "1":
            r["wrong_io"] += 1
    return w, own


def report(args, cl, res):
    import platform
    lines = []
    ncpu = os.cpu_count()
    lines.append(f"Measured {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} with "
                 f"`{' '.join(sys.argv)}`; {cl.version}, {args.members} member(s) on "
                 f"loopback; {ncpu} CPUs, Linux {platform.release()}; Python "
                 f"{platform.python_version()}; lock TTL {args.ttl} s; {args.rounds} rounds "
                 f"per library (order rotating); load average at end "
                 f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    lines.append("")
    lines.append("| library | graceful p50 | graceful p90 | crash p50 | crash p90 | "
                 "idle RSS p50 (kB) | + children (kB) | idle PSS p50 (kB) | + children (kB) | "
                 "threads | + children | "
                 "wrong beliefs after pause (local) | (asking etcd) | failed rounds |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for lib in args.libs:
        r = res[lib]
        io = f"{r['wrong_io']}/{r['io_checks']}" if r["io_checks"] else "—"
        lines.append(
            f"| {lib} | {pct(r['graceful'], 50):.1f} ms | {pct(r['graceful'], 90):.1f} ms | "
            f"{pct(r['crash'], 50):.0f} ms | {pct(r['crash'], 90):.0f} ms | "
            f"{int(statistics.median(r['rss']))} | {int(statistics.median(r['rss_tree']))} | "
            f"{int(statistics.median(r['pss']))} | {int(statistics.median(r['pss_tree']))} | "
            f"{int(statistics.median(r['thr']))} | {int(statistics.median(r['thr_tree']))} | "
            f"{r['wrong_local']}/{r['pause']} | {io} | {len(r['failed'])} |")
    for lib in args.libs:
        for f in res[lib]["failed"]:
            lines.append(f"\nfailed round, {lib}: {f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--ttl", type=int, default=2)
    ap.add_argument("--members", type=int, default=1, choices=(1, 3))
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--out", help="also write the table (markdown) to this file")
    args = ap.parse_args()
    args.libs = args.libs.split(",")
    for lib in args.libs:
        if lib not in LIBS:
            ap.error(f"unknown library {lib} (one of {', '.join(LIBS)})")
    cl, res = run(args)
    table = report(args, cl, res)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
