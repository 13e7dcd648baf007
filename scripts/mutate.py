#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A small mutation tester (docs/COVERAGE.md). Run it through scripts/mutate.sh.

For each line of the chosen files it makes mutants with the usual operators,
each built and tested in a copy of the tree (never in the checkout):

  rel     relational flip: < <=, > >=, == != (each way)
  logic   && into ||, || into &&
  const   an integer constant plus or minus 1
  negate  the condition of an if/while negated
  delete  an expression statement deleted
  return  `return X;` into `return 0;`, and an early return at a function's start

A mutant that does not compile counts as build-failed; one whose tests fail is
killed; one whose tests pass survived; one that runs past the timeout timed out.
Which tests run for a file: the table TESTS below (a test program, optionally
with name substrings that select its cases), or --tests.
"""
import argparse
import fnmatch
import glob
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# file pattern (fnmatch, relative to the root; * also matches /, so the tool's
# files are found in subfolders too) -> test programs of test/, each "program"
# or "program:case-substring". The first match wins.
TESTS = [
    ("src/election/session.c", ["test_etcd_election", "test_etcd_election_safety",
                                "test_etcd_fast_check", "test_etcd_sessions",
                                "test_etcd_release",
                                "test_driver:revoked_lease_is_noticed_within_one_keepalive",
                                "test_hostile:lib_late_grant,lib_session_stalled",
                                "test_oom:oom_grant_retry,oom_close"]),
    ("src/election/leader.c", ["test_etcd_election", "test_etcd_election_safety"]),
    ("src/election/election.c", ["test_etcd_election", "test_etcd_election_safety"]),
    ("src/election/observe.c", ["test_etcd_election"]),
    ("src/election/txn.c", ["test_etcd_election", "test_etcd_election_safety"]),
    ("src/election/release.c", ["test_etcd_release"]),
    ("src/election/delete.c", ["test_etcd_election", "test_hostile:lib_stray_delete"]),
    ("src/election/*", ["test_etcd_election"]),
    ("src/etcd/lease.c", ["test_etcd_lease_watch", "test_etcd_fast_check",
                          "test_hostile:lib_keepalive", "test_unit_misc:lease_calls"]),
    ("src/etcd/*", ["test_etcd_lease_watch", "test_etcd_kv"]),
    ("src/transport/h2.c", ["test_unit_grpc", "test_etcd_kv",
                            "test_hostile:lib_keepalive_token,lib_watch"]),
    ("src/transport/*", ["test_unit_grpc", "test_etcd_kv"]),
    ("tool/*healthcheck*", ["test_unit_tool_health", "test_tool_health"]),
    ("tool/supervise/*", ["test_tool_run", "test_unit_tool"]),
    ("tool/*child*", ["test_tool_run"]),
    ("tool/*", ["test_unit_tool", "test_tool"]),
]

# With --select the test programs are the wide ones below (every program whose
# cases may run the file's lines): each mutant runs only the cases that run its
# line, so a wide table costs the map's time once, not each mutant's.
_ELECTION = ["test_etcd_election", "test_etcd_election_safety", "test_etcd_fast_check",
             "test_etcd_sessions", "test_etcd_release", "test_etcd_lease_watch", "test_driver",
             "test_driver_kv", "test_oom", "test_hostile", "test_etcd_failover",
             "test_etcd_election_cluster", "test_etcd_day2", "test_unit_misc"]
_TOOL = ["test_unit_tool", "test_unit_tool_health", "test_unit_tool_ops", "test_tool",
         "test_tool_run", "test_tool_health", "test_tool_ops"]
SELECT_TESTS = [
    ("src/election/*", _ELECTION),
    ("src/etcd/*", _ELECTION + ["test_etcd_kv"]),
    ("src/*", _ELECTION + ["test_etcd_kv", "test_unit_grpc", "test_etcd_tls_auth"]),
    ("tool/*", _TOOL),
]

DEFAULT_FILES = ["src/election/*.c", "src/etcd/lease.c", "tool/supervise/*.c",
                 "tool/candidate/leader_cmd.c"]

# Targets every run builds besides the test programs: programs the tests exec.
ALWAYS_TARGETS = ["elector_tool", "elector_release", "elector_test_release_owner",
                  "elector_test_reset_delay"]

REL = [(r"(?<![<>=!-])<=(?!=)", "<"), (r"(?<![<>=!-])<(?![<=])", "<="),
       (r"(?<![<>=-])>=", ">"), (r"(?<![-<>=])>(?![>=])", ">="),
       (r"==", "!="), (r"!=", "==")]
DECL = re.compile(r"^\s*(static\s+|const\s+|volatile\s+|unsigned\s+|signed\s+|struct\s+|enum\s+|union\s+)*"
                  r"[A-Za-z_]\w*[\s\*]+\**[A-Za-z_]\w*\s*(\[[^\]]*\])?\s*(=|;|,)")
KEYWORDS = ("return", "break", "continue", "goto", "case", "default", "else", "do", "if",
            "for", "while", "switch")


def strip_strings(line):
    """The line with string and char literals blanked (same length)."""
    return re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', lambda m: " " * len(m.group(0)), line)


def code_lines(text):
    """(index, line) of lines with code: not in comments, not preprocessor."""
    out = []
    in_comment = False
    cont = False
    for i, line in enumerate(text.split("\n")):
        s = line.strip()
        if cont:  # preprocessor continuation
            cont = s.endswith("\\")
            continue
        if in_comment:
            if "*/" in s:
                in_comment = False
                s = s[s.index("*/") + 2:].strip()
                if not s:
                    continue
            else:
                continue
        if s.startswith("#"):
            cont = s.endswith("\\")
            continue
        if s.startswith("/*") and "*/" not in s:
            in_comment = True
            continue
        if not s or s.startswith("//") or s.startswith("*") or (s.startswith("/*") and s.endswith("*/")):
            continue
        out.append((i, line))
    return out


def match_paren(s, start):
    depth = 0
    for j in range(start, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def function_kind(lines, i):
    """For a line '{' at column 0: 'void', 'value' or None (not a function)."""
    sig = []
    for k in range(i - 1, max(-1, i - 8), -1):
        sig.insert(0, lines[k])
        if lines[k] and not lines[k][0].isspace():
            break
    sig = " ".join(x.strip() for x in sig)
    if "(" not in sig or sig.startswith(("struct", "enum", "union", "typedef")) or "=" in sig.split("(")[0]:
        return None
    head = sig.split("(")[0].split()
    if len(head) < 2:
        return None
    return "void" if "void" in head[:-1] and "*" not in " ".join(head) else "value"


def mutants_of(text):
    """Yield (line_no, operator, new_line) for one file."""
    lines = text.split("\n")
    prev_end = ";"
    for i, line in code_lines(text):
        code = strip_strings(line)
        s = code.strip()
        stmt_start = prev_end and prev_end[-1] in ";{}:"
        prev_end = s.split("//")[0].rstrip() if s else prev_end
        # early return at a function's start
        if line == "{":
            kind = function_kind(lines, i)
            if kind:
                yield i, "return", "{ return" + ("" if kind == "void" else " 0") + ";"
            continue
        for pat, rep in REL:
            for m in re.finditer(pat, code):
                yield i, "rel", line[:m.start()] + rep + line[m.end():]
        for m in re.finditer(r"&&|\|\|", code):
            yield i, "logic", line[:m.start()] + ("||" if m.group(0) == "&&" else "&&") + line[m.end():]
        for m in re.finditer(r"(?<![\w.])(\d+)(?![\w.])", code):
            n = int(m.group(1))
            for v in (n + 1, n - 1):
                if v >= 0:
                    yield i, "const", line[:m.start()] + str(v) + line[m.end():]
        m = re.search(r"\b(if|while)\s*\(", code)
        if m:
            open_at = code.index("(", m.start())
            close = match_paren(code, open_at)
            if close > 0:
                yield i, "negate", (line[:open_at + 1] + "!(" + line[open_at + 1:close] + ")" +
                                    line[close:])
        m = re.match(r"\s*return\s+(.+);\s*$", code)
        if m and m.group(1).strip() not in ("0", "NULL", "false"):
            yield i, "return", line[:line.index("return")] + "return 0;"
        if (stmt_start and s.endswith(";") and not s.startswith(KEYWORDS) and not DECL.match(code)
                and not s.startswith(("}", "{"))):
            yield i, "delete", line[:len(line) - len(line.lstrip())] + ";"


def tests_for(path, override, select=False):
    if override:
        return override
    for pattern, tests in (SELECT_TESTS if select else TESTS):
        if fnmatch.fnmatchcase(path, pattern):
            return tests
    return ["test_etcd_election"]


def copy_tree(root, dest):
    files = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], check=True, capture_output=True).stdout
    for f in files.decode().split("\0"):
        if not f or not os.path.isfile(os.path.join(root, f)):
            continue
        d = os.path.join(dest, f)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy2(os.path.join(root, f), d)


def test_env(build):
    env = dict(os.environ)
    env.pop("ELECTOR_ETCD_DIR", None)
    env["ELECTOR_RELEASE_HELPER"] = os.path.join(build, "helper", "elector-release")
    return env


def gcov_lines(cov, relpath):
    """{line: count} of relpath from the counters in the coverage build cov."""
    res = {}
    for gcda in glob.glob(os.path.join(cov, "**", os.path.basename(relpath) + ".gcda"), recursive=True):
        out = subprocess.run(["gcov", "--json-format", "--stdout", gcda], capture_output=True,
                             cwd=os.path.dirname(gcda)).stdout.decode(errors="replace")
        for doc in out.splitlines():
            if not doc.strip():
                continue
            for fj in json.loads(doc)["files"]:
                if fj["file"].endswith("/" + relpath):
                    for ln in fj["lines"]:
                        n = ln["line_number"]
                        res[n] = res.get(n, 0) + ln["count"]
    return res


def tree_hash(root, files, table):
    """What a coverage map depends on: the sources and tests, the files and their tests."""
    h = hashlib.sha256(repr((sorted(files), table)).encode())
    out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                          "src", "tool", "test", "include", "helper", "CMakeLists.txt", "cmake"],
                         check=True, capture_output=True).stdout
    for f in sorted(x for x in out.decode().split("\0") if x):
        fp = os.path.join(root, f)
        if os.path.isfile(fp):
            h.update(f.encode() + b"\0")
            with open(fp, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def build_map(src, work, jobs, file_tests):
    """Which test cases run each line: {file: {line: [program:case, ...]}}, lines that no case
    runs with []. Made in a coverage build of the unmutated copy (-DELECTOR_COVERAGE=ON),
    one run per test case with the counters cleared before it."""
    cov = os.path.join(work, "cov")
    subprocess.run(["cmake", "-S", src, "-B", cov, "-DCMAKE_BUILD_TYPE=Debug", "-DELECTOR_COVERAGE=ON",
                    "-DELECTOR_BENCH=OFF", "-DELECTOR_FAULT=OFF", "-DELECTOR_PYTHON=OFF",
                    "-DELECTOR_EXAMPLES=OFF", "-DELECTOR_SHARED=OFF"], check=True, stdout=subprocess.DEVNULL)
    progs = sorted({t.split(":")[0] for ts in file_tests.values() for t in ts})
    rc, out, _ = run_group(["cmake", "--build", cov, "-j", str(jobs), "--target"] + ALWAYS_TARGETS +
                           ["elector_" + p for p in progs], 3600)
    if rc != 0:
        sys.exit(f"mutate: the coverage build failed:\n{out[-3000:]}")
    cmap = {"lines": {f: {} for f in file_tests}, "time": {}, "failed": []}
    env = test_env(cov)
    for prog in progs:
        exe = os.path.join(cov, "test", prog)
        names = subprocess.run([exe, "--list"], capture_output=True, env=env).stdout.decode().split()
        for case in names:
            users = [f for f, ts in file_tests.items()
                     if any(t == prog or (t.startswith(prog + ":") and
                                          any(c and c in case for c in t.split(":", 1)[1].split(",")))
                            for t in ts)]
            if not users:
                continue
            for g in glob.glob(os.path.join(cov, "**", "*.gcda"), recursive=True):
                os.unlink(g)
            t0 = time.monotonic()
            rc, _, to = run_group([exe, case], 600, env=env, cwd=cov)
            took = time.monotonic() - t0
            cmap["time"][f"{prog}:{case}"] = took
            if rc != 0 or to:  # never selected: a failure would not be the mutant's
                cmap["failed"].append(f"{prog}:{case}")
            print(f"  map: {prog} {case}: {'timeout' if to else 'rc ' + str(rc)}, {took:.1f} s", flush=True)
            for f in users:
                for n, c in gcov_lines(cov, f).items():
                    lst = cmap["lines"][f].setdefault(str(n), [])
                    if c > 0:
                        lst.append(f"{prog}:{case}")
    shutil.rmtree(cov, ignore_errors=True)
    return cmap


def line_cases(fmap, n, failed):
    """The cases that run line n (a list, [] for a line no case runs), or None when
    the map has no record of it (a line without code of its own, say the second
    line of a statement): then those of the nearest lines with a record, at most
    three lines up and one down, together."""
    if str(n) in fmap:
        got = fmap[str(n)]
    else:
        near = [fmap[str(k)] for k in (n - 1, n - 2, n - 3, n + 1) if str(k) in fmap]
        if not near:
            return None
        got = sorted(set(c for cs in near[:2] for c in cs))
    return [c for c in got if c not in failed]


def selected_tests(cases, times, budget):
    """["prog:case", ...] -> one "prog:case,case" entry per program: the fastest
    cases (by their time in the map's coverage build) up to budget seconds, at
    least one. Programs with the fastest cases first."""
    by = {}
    spent = 0.0
    for c in sorted(cases, key=lambda c: times.get(c, 60.0)):
        if by and spent + times.get(c, 60.0) > budget:
            break
        spent += times.get(c, 60.0)
        prog, _, case = c.partition(":")
        by.setdefault(prog, []).append(case)
    return [p + ":" + ",".join(cs) for p, cs in by.items()]


def run_group(cmd, timeout, env=None, cwd=None):
    """Runs cmd in a process group of its own; (rc, output, timed_out)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode(errors="replace"), False
    except BaseException as e:  # the timeout, or mutate itself interrupted: the group goes
        # (SIGTERM first: the test programs then kill their running case's own group)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                pass
        if not isinstance(e, subprocess.TimeoutExpired):
            raise
        out = p.stdout.read() if p.stdout else b""
        p.wait()
        return -1, out.decode(errors="replace"), True


class Tree:
    def __init__(self, root, work, jobs, cmake_args):
        self.src = os.path.join(work, "src-copy")
        self.build = os.path.join(work, "build")
        self.jobs = jobs
        copy_tree(root, self.src)
        subprocess.run(["cmake", "-S", self.src, "-B", self.build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DELECTOR_BENCH=OFF", "-DELECTOR_FAULT=OFF", "-DELECTOR_PYTHON=OFF",
                        "-DELECTOR_EXAMPLES=OFF", "-DELECTOR_SHARED=OFF"] + cmake_args,
                       check=True, stdout=subprocess.DEVNULL)

    def build_targets(self, programs):
        targets = ALWAYS_TARGETS + ["elector_" + p for p in programs]
        rc, out, _ = run_group(["cmake", "--build", self.build, "-j", str(self.jobs), "--target"] +
                               targets, 1800)
        return rc == 0, out

    def run_tests(self, tests, timeout):
        env = test_env(self.build)
        deadline = time.monotonic() + timeout
        for t in tests:
            prog, _, cases = t.partition(":")
            cmd = [os.path.join(self.build, "test", prog)] + [c for c in cases.split(",") if c]
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", ""
            rc, out, timed_out = run_group(cmd, left, env=env, cwd=self.build)
            if timed_out:
                return "timeout", out
            if rc != 0:
                return "killed", out
        return "survived", ""


def on_term(signum, frame):
    raise KeyboardInterrupt  # the running test's group is killed, the work directory removed


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, on_term)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="source files (default: %s)" % " ".join(DEFAULT_FILES))
    ap.add_argument("--max", "--sample", type=int, default=0, dest="max",
                    help="at most N mutants per file, a random sample (default: all)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the sample (default 1)")
    ap.add_argument("--lines", help="only line N, or lines A-B (1-based, inclusive)")
    ap.add_argument("--ops", help="only these operators, comma-separated (rel,logic,const,negate,delete,return)")
    ap.add_argument("--tests", help="test programs to run for every file, comma-separated "
                    "(program or program:case,case); default: the table in scripts/mutate.py")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds per mutant's tests (default: 3x the unmutated run, at least 60)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs")
    ap.add_argument("--cmake-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for the copy's cmake configure, e.g. "
                    "-DELECTOR_SANITIZE=ON (ASan+UBSan: mutants that only corrupt memory)")
    ap.add_argument("--redo", metavar="REPORT",
                    help="run again only the survivors listed in an earlier report (after new tests)")
    ap.add_argument("--select", action="store_true",
                    help="coverage-guided: run each mutant only against the test cases that run its "
                    "line (a per-case coverage map, made first in a coverage build); a mutant on a line "
                    "no case runs is 'not covered' without being built; a mutant those cases do not "
                    "kill runs against the file's whole test table before it counts as survived")
    ap.add_argument("--map", metavar="FILE",
                    help="with --select: keep the coverage map in FILE and reuse it while the sources, "
                    "tests and test table are unchanged")
    ap.add_argument("--budget", type=float, default=30.0,
                    help="with --select: seconds of test cases per mutant, the fastest cases that run "
                    "its line first (times from the map's coverage build; default 30)")
    ap.add_argument("--confirm", action="store_true",
                    help="with --select: a mutant the selected cases do not kill runs against the file's "
                    "whole test table before it counts as survived")
    ap.add_argument("--list", action="store_true", help="list the mutants only")
    ap.add_argument("--out", help="report file (Markdown; default: the work directory's report.md)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()

    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True,
                          cwd=os.path.dirname(os.path.abspath(__file__))).stdout.decode().strip()
    import glob
    files = []
    for pat in a.files or DEFAULT_FILES:
        hits = sorted(glob.glob(os.path.join(root, pat), recursive=True)) if not os.path.isabs(pat) \
            else [pat]
        if not hits and a.files:
            sys.exit(f"mutate: no such file: {pat}")
        files += [os.path.relpath(h, root) for h in hits]
    ops = set(a.ops.split(",")) if a.ops else None
    lo, hi = (0, 1 << 30)
    if a.lines:
        lo, _, hi = a.lines.partition("-")
        lo, hi = int(lo), int(hi or lo)
    override = a.tests.split(",") if a.tests else None

    redo = None
    if a.redo:
        redo = set()
        for line in open(a.redo):
            m = re.match(r"- `([^`:]+):(\d+)` (\w+): `(.*)`$", line.rstrip("\n"))
            if m:
                redo.add((m.group(1), int(m.group(2)), m.group(3), m.group(4)))
        if not a.files:
            files = sorted({r[0] for r in redo})
    plan = []
    for f in files:
        text = open(os.path.join(root, f)).read()
        ms = [m for m in mutants_of(text) if (ops is None or m[1] in ops) and lo <= m[0] + 1 <= hi]
        if redo is not None:
            # the same change on the same line, or, when lines moved since the
            # report (an edit above), on the nearest line within 30 that has it
            want = [r for r in redo if r[0] == f]
            keep = []
            for r in want:
                same = [m for m in ms if m[1] == r[2] and m[2].strip() == r[3]]
                if same:
                    best = min(same, key=lambda m: abs(m[0] + 1 - r[1]))
                    if abs(best[0] + 1 - r[1]) <= 30 and best not in keep:
                        keep.append(best)
            ms = sorted(keep)
        total = len(ms)
        if a.max and len(ms) > a.max:
            ms = sorted(random.Random(f"{a.seed}:{f}").sample(ms, a.max))
        plan.append((f, text, ms, total))
    if a.list:
        for f, _, ms, total in plan:
            print(f"# {f}: {total} mutants, {len(ms)} chosen; tests {' '.join(tests_for(f, override))}")
            for ln, op, new in ms:
                print(f"{f}:{ln + 1}: {op}: {new.strip()}")
        return 0

    work = tempfile.mkdtemp(prefix="elector-mutate.")
    out_path = a.out or os.path.join(work, "report.md")
    t_start = time.monotonic()
    print(f"mutate: work directory {work}", flush=True)
    tree = Tree(root, work, a.jobs, a.cmake_arg)
    cmap = None
    if a.select:
        file_tests = {f: tests_for(f, override, True) for f, _, ms, _ in plan if ms}
        key = tree_hash(root, [], repr(SELECT_TESTS) + repr(override))
        if a.map and os.path.exists(a.map):
            with open(a.map) as fh:
                saved = json.load(fh)
            if saved.get("key") == key and all(f in saved["map"]["lines"] for f in file_tests):
                cmap = saved["map"]
                print(f"mutate: coverage map from {a.map}", flush=True)
        if cmap is None:
            t0 = time.monotonic()
            print("mutate: making the coverage map (one run per test case)", flush=True)
            cmap = build_map(tree.src, work, a.jobs, file_tests)
            print(f"mutate: coverage map made in {time.monotonic() - t0:.0f} s", flush=True)
            if a.map:
                with open(a.map, "w") as fh:
                    json.dump({"key": key, "map": cmap}, fh)
    results = []  # (file, line, op, new, status)
    summary = []
    try:
        for f, text, ms, total in plan:
            tests = tests_for(f, override, a.select)
            progs = sorted({t.split(":")[0] for t in tests})
            target = os.path.join(tree.src, f)
            ok, out = tree.build_targets(progs)
            if not ok:
                sys.exit(f"mutate: the unmutated tree does not build:\n{out[-3000:]}")
            t0 = time.monotonic()
            # With --select the map's runs were the unmutated run (cases that failed
            # there are never selected); the whole wide table is not run here.
            status, out = tree.run_tests(tests, 3600) if not a.select else ("survived", "")
            base = time.monotonic() - t0
            if status != "survived":
                print(f"mutate: {f}: the tests fail without a mutant ({status}); skipped\n{out[-2000:]}",
                      flush=True)
                summary.append((f, total, len(ms), None, base))
                continue
            timeout = a.timeout or max(60.0, 3 * base)
            if a.select:  # the whole table's time in the map (for --confirm)
                timeout = a.timeout or max(60.0, 3 * sum(cmap["time"].values()))
                print(f"mutate: {f}: {total} mutants, {len(ms)} chosen; the cases of "
                      f"{' '.join(tests)} that run each line, up to {a.budget:.0f} s each", flush=True)
            else:
                print(f"mutate: {f}: {total} mutants, {len(ms)} chosen; tests {' '.join(tests)} "
                      f"({base:.0f} s unmutated, timeout {timeout:.0f} s)", flush=True)
            lines = text.split("\n")
            counts = {"killed": 0, "survived": 0, "timeout": 0, "build-failed": 0, "not-covered": 0}
            for k, (ln, op, new) in enumerate(ms):
                t0 = time.monotonic()
                how = ""
                sel = None
                fmap = cmap["lines"].get(f, {}) if cmap is not None else {}
                cases = line_cases(fmap, ln + 1, cmap["failed"]) if cmap is not None else None
                if cases is not None:
                    sel = selected_tests(cases, cmap["time"], a.budget)
                if sel == []:
                    status = "not-covered"
                else:
                    mutated = lines[:ln] + [new] + lines[ln + 1:]
                    with open(target, "w") as fh:
                        fh.write("\n".join(mutated))
                    # only what the mutant runs is built (the other programs are
                    # relinked when a later mutant runs them)
                    ok, _ = tree.build_targets(sorted({x.split(":")[0] for x in sel}) if sel else progs)
                    if not ok:
                        status = "build-failed"
                    elif sel:
                        took = sum(cmap["time"].get(p + ":" + c, 60.0) for x in sel
                                   for p, cs in [x.split(":", 1)] for c in cs.split(","))
                        status = tree.run_tests(sel, a.timeout or max(60.0, 3 * took))[0]
                        how = f"{sum(len(x.split(':', 1)[1].split(',')) for x in sel)} of {len(cases)} cases"
                        if status == "survived" and a.confirm:
                            tree.build_targets(progs)
                            status = tree.run_tests(tests, timeout)[0]
                            how += ", then all" + (" (killed by the whole table)" if status != "survived" else "")
                    else:
                        status = tree.run_tests(tests, timeout)[0]
                        how = "all" if cmap is None else "all (no line in the map)"
                counts[status] += 1
                results.append((f, ln + 1, op, new.strip(), status))
                print(f"  [{k + 1}/{len(ms)}] {f}:{ln + 1} {op:<6} {status:<12} {new.strip()[:80]}  "
                      f"[{how}{', ' if how else ''}{time.monotonic() - t0:.0f} s]", flush=True)
                with open(target, "w") as fh:
                    fh.write(text)
            summary.append((f, total, len(ms), counts, base))
    finally:
        elapsed = time.monotonic() - t_start
        rep = ["| file | mutants | run | killed | survived | not covered | timed out | build failed | score |",
               "|---|---|---|---|---|---|---|---|---|"]
        for f, total, n, c, base in summary:
            if c is None:
                rep.append(f"| {f} | {total} | 0 | tests fail unmutated | | | | | |")
                continue
            judged = c["killed"] + c["survived"] + c["timeout"] + c["not-covered"]
            score = f"{100.0 * (c['killed'] + c['timeout']) / judged:.0f}%" if judged else "-"
            rep.append(f"| {f} | {total} | {n} | {c['killed']} | {c['survived']} | {c['not-covered']} | "
                       f"{c['timeout']} | {c['build-failed']} | {score} |")
        rep.append("")
        rep.append(f"Time: {elapsed:.0f} s.")
        for st, title in (("survived", "Survivors"), ("not-covered", "Not covered (no test case runs the line)")):
            surv = [r for r in results if r[4] == st]
            if surv:
                rep += ["", title + ":", ""]
                rep += [f"- `{f}:{ln}` {op}: `{new}`" for f, ln, op, new, _ in surv]
        text = "\n".join(rep) + "\n"
        with open(out_path, "w") as fh:
            fh.write(text)
        print(text)
        print(f"mutate: report in {out_path}")
        if not a.keep:  # the report stays (in the work directory unless --out)
            shutil.rmtree(os.path.join(work, "build"), ignore_errors=True)
            shutil.rmtree(os.path.join(work, "src-copy"), ignore_errors=True)
            if a.out:
                shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
