#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every fenced block of README.md, python/README.md and docs/*.md is checked:
the line before it names how, in an HTML comment.

    <!-- snippet: examples/threaded.c#threaded -->
        the block is the region "threaded" of that file, exactly: the lines
        between a line containing "snippet: threaded" and the next line
        containing "end snippet" (regions may nest; marker lines are never
        part of one; the common indentation is removed). FILE alone: the whole
        file. The file is an example or script that the tests run.
    <!-- commands -->
        shell commands, checked without running them: ./scripts/X must exist
        and name every --option given to it (in itself or in scripts/X.py);
        elector's options must be in its man page (docs/elector.1); a
        build/DIR/PROG must be named in DIR/CMakeLists.txt; cmake's -DNAME= must
        be named in a CMake file; an ELECTOR_* variable must be read somewhere
        in the tree; any other command must be one of KNOWN (system commands).
    <!-- transcript: scripts/demo.sh -->
        what that script prints: each line not from a candidate ("[...] ...")
        must match one of the script's echo or printf lines.
    <!-- illustration: REASON -->
        not run, for the reason given (a diagram, a live cluster's output, a
        procedure on other machines); counted and listed.

A block with no such line, or one that does not pass, is printed; exit 1.

    scripts/check-snippets.py [ROOT]
    scripts/check-snippets.py --self-test   a tree that passes, then each fault
"""
import os
import re
import shlex
import sys

MARK = re.compile(r"<!--\s*(snippet|commands|transcript|illustration)\b:?\s*(.*?)\s*-->")
FENCE = re.compile(r"^```\s*([A-Za-z+]*)\s*$")
# Commands whose options are not checked here: the system's, and other projects'.
KNOWN = {"cmake", "ctest", "cc", "c++", "gcc", "make", "find", "mkdir", "cd", "less",
         "curl", "etcdctl", "etcdutl", "spin", "gcovr", "dpkg-buildpackage", "apt",
         "apt-get", "export", "pkg-config", "sed", "ldconfig", "git", "systemctl",
         "promtool", "cat", "/usr/bin/python3"}


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
    """(line number, language, marker match or None, [lines]) of each fenced block."""
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


def read(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def check_region(root, arg, body):
    """None when the block is the region FILE#NAME, else why not."""
    file, _, name = arg.partition("#")
    text = read(root, file)
    if text is None:
        return f"{file}: no such file"
    want = regions(os.path.join(root, file)).get(name) if name else \
        text.rstrip("\n").split("\n")
    if want is None:
        return f"{file} has no region {name!r}"
    while want and not want[-1].strip():
        want = want[:-1]
    if body == want:
        return None
    k = next((k for k, (a, b) in enumerate(zip(body, want)) if a != b), min(len(body), len(want)))
    got = body[k] if k < len(body) else "(end of block)"
    exp = want[k] if k < len(want) else "(end of region)"
    return f"differs from {arg} at its line {k + 1}:\n    doc:  {got}\n    file: {exp}"


class Tree:
    """What the commands check reads of the tree, read once."""

    def __init__(self, root):
        self.root = root
        self.man = read(root, "docs/elector.1") or ""
        self.cmake = ""
        self.sources = ""
        for top in ("CMakeLists.txt", "cmake", "scripts", "src", "tool", "test", "python",
                    "examples", "bench", "fault"):
            path = os.path.join(root, top)
            files = [path] if os.path.isfile(path) else [
                os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
            for p in files:
                if not p.endswith((".txt", ".cmake", ".sh", ".py", ".c", ".h", ".cpp")):
                    continue
                text = read(root, os.path.relpath(p, root)) or ""
                self.sources += text
                if p.endswith((".txt", ".cmake")):
                    self.cmake += text

    def command(self, words):
        """Why the command (a list of words) is wrong, or None."""
        while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or
                         words[0] in ("sudo", "env")):
            var = words.pop(0).split("=")[0]
            if var.startswith("ELECTOR_") and var not in self.sources:
                return f"{var}: no file of the tree reads it"
        if not words:
            return None
        prog, opts = words[0], [w.split("=")[0] for w in words[1:] if w.startswith("-")]
        rel = prog[2:] if prog.startswith("./") else prog
        if rel.startswith("scripts/"):
            text = read(self.root, rel)
            if text is None:
                return f"{rel}: no such script"
            text += read(self.root, re.sub(r"\.sh$", ".py", rel)) or ""
            bad = [o for o in opts if o.startswith("--") and o not in text]
            return f"{rel} does not know {', '.join(bad)}" if bad else None
        if rel in ("elector", "build/tool/elector"):
            bad = [o for o in opts if o.replace("-", "\\-") not in self.man]
            return f"elector(1) has no {', '.join(bad)}" if bad else None
        if rel.startswith("build/"):
            parts = rel.split("/")
            lists = read(self.root, "/".join(parts[1:-1] + ["CMakeLists.txt"])) or ""
            return None if parts[-1] in lists else f"{rel}: no such program in the build"
        if prog == "cmake":
            bad = [w[2:].split("=")[0] for w in words if w.startswith("-D")]
            bad = [v for v in bad if not v.startswith("CMAKE_") and v not in self.cmake]
            return f"cmake: no CMake file has {', '.join(bad)}" if bad else None
        if prog in KNOWN or re.search(r"/bin/(pip|python)3?$", prog):
            return None
        return f"{prog}: not a command the check knows (a script, elector, build/..., " \
            "or one of KNOWN)"

    def commands(self, body):
        """The problems of a block of shell commands."""
        text = "\n".join(body).replace("\\\n", " ")
        bad = []
        for line in text.split("\n"):
            lex = shlex.shlex(line, posix=True, punctuation_chars=True)
            lex.whitespace_split, lex.commenters = True, "#"
            try:
                toks = list(lex)
            except ValueError as e:
                bad.append(f"{line.strip()}: {e}")
                continue
            words, outer, skip = [], [], False
            for t in toks + [";"]:
                if skip:  # the file of a redirection
                    skip = False
                elif t and all(c in "();<>|&" for c in t):
                    if t != "(":
                        bad.append(self.command(words) if words else None)
                    if t == "(":  # $( ... ): a command inside the outer one
                        outer.append(words)
                    words = outer.pop() if t == ")" and outer else []
                    skip = t[-1] in "<>"
                elif t != "$":
                    words.append(t)
        return [b for b in bad if b]


def expansion_free(s):
    """s with shell expansions and printf conversions turned into \\0."""
    out, i = "", 0
    while i < len(s):
        if s.startswith("$(", i):
            depth, j = 0, i + 1
            while j < len(s):
                depth += {"(": 1, ")": -1}.get(s[j], 0)
                if depth == 0:
                    break
                j += 1
            out, i = out + "\0", j + 1
        elif s.startswith("${", i):
            j = s.find("}", i)
            out, i = out + "\0", (j if j >= 0 else len(s)) + 1
        elif re.match(r"\$[A-Za-z_0-9]", s[i:]):
            out, i = out + "\0", i + len(re.match(r"\$[A-Za-z_0-9]+", s[i:]).group(0))
        elif re.match(r"%[0-9]*[sd]", s[i:]):
            out, i = out + "\0", i + len(re.match(r"%[0-9]*[sd]", s[i:]).group(0))
        else:
            out, i = out + s[i], i + 1
    return out


def transcript(root, script, body):
    """The transcript's lines that no echo or printf of the script prints."""
    text = read(root, script)
    if text is None:
        return [f"{script}: no such file"]
    pats = []
    for m in re.finditer(r"\b(?:echo|printf)\s+(['\"])(.*?)(?<!\\)\1", text):
        s = expansion_free(m.group(2).replace("\\n", ""))
        pats.append(re.compile(".*".join(re.escape(p) for p in s.split("\0"))))
    return [f"{script} prints no line like: {ln}" for ln in body
            if ln.strip() and not ln.startswith("[") and
            not any(p.fullmatch(ln) for p in pats)]


def check(root):
    """(problems, blocks checked, illustrations) of the tree's documents."""
    docs = ["README.md", "python/README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs"))
        if f.endswith(".md"))
    tree, bad, checked, shown = Tree(root), [], 0, []
    for md in docs:
        path = os.path.join(root, md)
        if not os.path.exists(path):
            continue
        for line, lang, mark, body in blocks(path):
            where = f"{md}:{line}"
            kind, arg = (mark.group(1), mark.group(2)) if mark else (None, "")
            if kind == "snippet":
                why = [check_region(root, arg, body)] if arg else ["snippet: names no file"]
            elif kind == "commands":
                why = tree.commands(body)
            elif kind == "transcript":
                why = transcript(root, arg, body)
            elif kind == "illustration":
                why = [] if arg else ["illustration: give the reason it is not run"]
                if arg:
                    shown.append(f"{where}: {arg}")
            else:
                why = [f"a {lang or 'plain'} block with nothing to check it: name it on the "
                       "line before (<!-- snippet: FILE#NAME -->, <!-- commands -->, "
                       "<!-- transcript: SCRIPT -->, <!-- illustration: REASON -->)"]
            why = [w for w in why if w]
            bad += [f"{where}: {w}" for w in why]
            checked += not why and kind != "illustration"
    return bad, checked, shown


def self_test():
    """A tree whose blocks pass, then one fault of each kind planted in it."""
    import subprocess
    import tempfile
    files = {
        "ex.c": "x\n    /* snippet: a */\n    int x = 1;\n\n    int y = 2;\n    /* end snippet */\n",
        "scripts/s.sh": "#!/bin/sh\n: ${ELECTOR_GOOD:-}\ncase $1 in --ok) echo \"== hello $X\";; esac\n"
                        "printf '== took %d ms\\n' 5\n",
        "docs/elector.1": ".B \\-\\-ttl\n",
        "CMakeLists.txt": "option(ELECTOR_TOOL \"\" ON)\n",
    }
    good = ("<!-- snippet: ex.c#a -->\n```c\nint x = 1;\n\nint y = 2;\n```\n"
            "<!-- commands -->\n```sh\nELECTOR_GOOD=1 ./scripts/s.sh --ok   # a comment\n"
            "elector --ttl 2s run x -- ./job | cat\ncmake -S . -DELECTOR_TOOL=ON \\\n"
            "    -DCMAKE_BUILD_TYPE=Debug\n```\n"
            "<!-- transcript: scripts/s.sh -->\n```\n== hello world\n[cand] ok\n== took 7 ms\n```\n"
            "<!-- illustration: a diagram -->\n```\n a -> b\n```\n")
    cases = [(good, 0), (good.replace("y = 2", "y = 3"), 1), (good + "```c\nint z;\n```\n", 1),
             (good.replace("#a", "#b"), 1), (good.replace("ex.c", "no.c"), 1),
             (good + "```sh\necho not checked\n```\n", 1),
             (good.replace("s.sh --ok", "s.sh --nope"), 1),
             (good.replace("ELECTOR_GOOD=1", "ELECTOR_NOPE=1"), 1),
             (good.replace("--ttl 2s", "--tll 2s"), 1),
             (good.replace("-DELECTOR_TOOL", "-DELECTOR_TOLO"), 1),
             (good.replace("./job | cat", "./job | frobnicate"), 1),
             (good.replace("== hello world", "== goodbye"), 1),
             (good.replace("illustration: a diagram", "illustration:"), 1)]
    for md, want in cases:
        with tempfile.TemporaryDirectory() as d:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
                with open(os.path.join(d, rel), "w") as f:
                    f.write(text)
            with open(os.path.join(d, "README.md"), "w") as f:
                f.write(md)
            r = subprocess.run([sys.executable, __file__, d], capture_output=True, text=True)
            if r.returncode != want:
                print(f"check-snippets --self-test: exit {r.returncode}, not {want}, for:\n{md}"
                      f"\n{r.stderr}")
                return 1
    print(f"check-snippets --self-test: {len(cases)} cases ok")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    bad, checked, shown = check(root)
    for b in bad:
        print(f"check-snippets: {b}", file=sys.stderr)
    for s in shown:
        print(f"check-snippets: not run: {s}")
    print(f"check-snippets: {checked} blocks checked, {len(shown)} illustrations not run, "
          f"{len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
