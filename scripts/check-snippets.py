#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every C, C++ and Python block of the README and docs/ is run by a test: it
must be a region of an example the tests build and run, named on the line
before the block:

    <!-- snippet: examples/threaded.c#threaded -->
    ```c
    ...the lines between "snippet: threaded" and "end snippet" in that file...
    ```

In the file, a region starts after a line containing "snippet: NAME" and ends
before the next line containing "end snippet" (regions may nest; marker lines
are never part of one); its common indentation is removed. The block must be
the region exactly. Prints every block that is not, and exits 1.

    scripts/check-snippets.py [ROOT]
    scripts/check-snippets.py --self-test   a tree that passes, then each fault
"""
import os
import re
import sys

LANGS = {"c", "cpp", "c++", "python"}
MARK = re.compile(r"<!--\s*snippet:\s*(\S+?)(?:#(\S+))?\s*-->")
FENCE = re.compile(r"^```\s*([A-Za-z+]*)\s*$")


def regions(path):
    """{name: [lines]} of the file's snippet regions, dedented."""
    out, open_ = {}, []
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            m = re.search(r"\bsnippet: ([A-Za-z0-9_-]+)", line)
            if "end snippet" in line:
                if open_:
                    open_.pop()
                continue
            if m:
                open_.append(m.group(1))
                out.setdefault(m.group(1), [])
                continue
            for name in open_:
                out[name].append(line)
    for name, lines in out.items():
        ind = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
        out[name] = [ln[ind:] for ln in lines]
    return out


def blocks(md):
    """(line number, language, marker or None, [lines]) of each fenced block."""
    with open(md, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i, prev = 0, ""
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                prev = lines[i]
            i += 1
            continue
        start, lang, body = i + 1, m.group(1).lower(), []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        yield start, lang, MARK.search(prev), body
        i += 1
        prev = ""


def self_test():
    """A block equal to its region passes; a changed line, an unmarked block,
    a missing region and a missing file each fail."""
    import subprocess
    import tempfile
    ex = "x\n    /* snippet: a */\n    int x = 1;\n\n    int y = 2;\n    /* end snippet */\n"
    good = "<!-- snippet: ex.c#a -->\n```c\nint x = 1;\n\nint y = 2;\n```\n"
    cases = [(good, 0), (good.replace("y = 2", "y = 3"), 1), ("```c\nint z;\n```\n", 1),
             (good.replace("#a", "#b"), 1), (good.replace("ex.c", "no.c"), 1),
             ("```sh\necho not checked\n```\n", 0)]
    for md, want in cases:
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "docs"))
            with open(os.path.join(d, "ex.c"), "w") as f:
                f.write(ex)
            with open(os.path.join(d, "README.md"), "w") as f:
                f.write(md)
            rc = subprocess.run([sys.executable, __file__, d], capture_output=True).returncode
            if rc != want:
                print(f"check-snippets --self-test: exit {rc}, not {want}, for:\n{md}")
                return 1
    print(f"check-snippets --self-test: {len(cases)} cases ok")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    docs = ["README.md", "python/README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs"))
        if f.endswith(".md"))
    bad, checked = [], 0
    for md in docs:
        path = os.path.join(root, md)
        if not os.path.exists(path):
            continue
        for line, lang, mark, body in blocks(path):
            if lang not in LANGS:
                continue
            where = f"{md}:{line}"
            if not mark:
                bad.append(f"{where}: a {lang} block that no test runs: make it a region of "
                           "an example the tests run, and name it on the line before "
                           "(<!-- snippet: FILE#NAME -->)")
                continue
            src = os.path.join(root, mark.group(1))
            if not os.path.exists(src):
                bad.append(f"{where}: {mark.group(1)}: no such file")
                continue
            want = (regions(src).get(mark.group(2)) if mark.group(2) else
                    open(src, encoding="utf-8").read().rstrip("\n").split("\n"))
            if want is None:
                bad.append(f"{where}: {mark.group(1)} has no region {mark.group(2)!r}")
                continue
            while want and not want[-1].strip():
                want = want[:-1]
            if body != want:
                diff = next((k for k, (a, b) in enumerate(zip(body, want)) if a != b),
                            min(len(body), len(want)))
                got = body[diff] if diff < len(body) else "(end of block)"
                exp = want[diff] if diff < len(want) else "(end of region)"
                bad.append(f"{where}: differs from {mark.group(1)}#{mark.group(2)} at its "
                           f"line {diff + 1}:\n    README: {got}\n    file:   {exp}")
                continue
            checked += 1
    for b in bad:
        print(f"check-snippets: {b}", file=sys.stderr)
    print(f"check-snippets: {checked} blocks are regions of tested examples, "
          f"{len(bad)} are not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
