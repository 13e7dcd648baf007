#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The `debian` test: builds the Debian packages (libelector1, libelector-dev,
# elector, python3-elector) with `dpkg-buildpackage -us -uc -b` from a copy of the source tree
# (the tree itself is never written to), runs lintian on them (no errors
# allowed) and checks what each package holds with `dpkg-deb -c`.
#
#   scripts/check-debian.sh [OUTDIR]   keep the .deb files in OUTDIR
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/elector-deb.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "check-debian: FAIL: $*" >&2; exit 1; }

for p in dpkg-buildpackage dh lintian; do
    command -v $p >/dev/null || fail "$p missing (scripts/deps.sh installs it)"
done
version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
src=$T/elector-$version
mkdir -p "$src"
# The files of the checkout (tracked and new ones, not ignored ones such as
# build*/), or everything but build directories outside git.
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$root" && git ls-files -z -co --exclude-standard | xargs -0 cp --parents -t "$src")
else
    (cd "$root" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -C "$src" -xf -
fi

echo "== dpkg-buildpackage -us -uc -b (elector $version)"
(cd "$src" && dpkg-buildpackage -us -uc -b -j"$(nproc)") >"$T/build.log" 2>&1 || {
    tail -40 "$T/build.log" >&2
    fail "dpkg-buildpackage"
}
grep -E '^dpkg-gensymbols|^dpkg-shlibdeps: (warning|error)' "$T/build.log" || true
changes=$(ls "$T"/elector_"${version}"_*.changes)

echo "== lintian"
lintian --fail-on error "$changes" | tee "$T/lintian.log" ||
    fail "lintian reports errors"
echo "lintian: $(grep -c '^E:' "$T/lintian.log" || true) errors, $(grep -c '^W:' "$T/lintian.log" || true) warnings"

echo "== contents (dpkg-deb -c)"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
contents() { dpkg-deb -c "$T/$1_${version}_$arch.deb" | awk '{print $6}' | sed 's@^\./@/@'; }
expect() { # PACKAGE PATH...
    local pkg=$1 f list
    shift
    list=$(contents "$pkg")
    for f in "$@"; do
        grep -qx -- "$f" <<<"$list" || fail "$pkg lacks $f"
    done
    echo "$pkg: $(grep -vc '/$' <<<"$list") files, the expected ones among them"
}
expect libelector1 "/usr/lib/$ma/libelector.so.1" "/usr/share/doc/libelector1/copyright" \
    "/usr/lib/$ma/elector/elector-release"
ls "$T"/libelector1_* >/dev/null
dpkg-deb -c "$T/libelector1_${version}_$arch.deb" | grep "/usr/lib/$ma/libelector.so.1 -> libelector.so.1" >/dev/null ||
    fail "libelector1: libelector.so.1 is not a link to the versioned file"
contents libelector1 | grep -E '\.h$|\.a$|\.pc$|/libelector\.so$' && fail "libelector1 holds development files"
expect libelector-dev /usr/include/elector/election.h /usr/include/elector/etcd.h \
    /usr/include/elector/error.h /usr/include/elector/version.h \
    "/usr/lib/$ma/libelector.so" "/usr/lib/$ma/libelector.a" "/usr/lib/$ma/pkgconfig/elector.pc" \
    "/usr/lib/$ma/cmake/elector/elector-config.cmake" \
    "/usr/lib/$ma/cmake/elector/elector-config-version.cmake" \
    "/usr/lib/$ma/cmake/elector/elector-targets.cmake"
contents libelector-dev | grep etcd_rpc.h >/dev/null && fail "libelector-dev installs elector/etcd_rpc.h"
expect elector /usr/bin/elector /usr/share/man/man1/elector.1.gz \
    /usr/share/bash-completion/completions/elector
dpkg-deb -f "$T/libelector-dev_${version}_$arch.deb" Depends | grep "libelector1 (= $version)" >/dev/null ||
    fail "libelector-dev does not depend on libelector1 (= $version)"
# The Python module: the extension for each supported python3, the package's
# files, the tooz entry point; it depends on libelector1 and imports (below).
pyext=$(contents python3-elector | grep -E '^/usr/lib/python3/dist-packages/elector/_elector\.cpython-[0-9]+-.*\.so$' || true)
[ -n "$pyext" ] || fail "python3-elector lacks elector/_elector.cpython-*.so"
expect python3-elector /usr/lib/python3/dist-packages/elector/__init__.py \
    /usr/lib/python3/dist-packages/elector/aio.py \
    /usr/lib/python3/dist-packages/elector/tooz_driver.py \
    /usr/lib/python3/dist-packages/elector/_elector.pyi \
    /usr/lib/python3/dist-packages/elector/py.typed
contents python3-elector | grep '/entry_points.txt$' >/dev/null || fail "python3-elector: no entry_points.txt (tooz backend)"
dpkg-deb -f "$T/python3-elector_${version}_$arch.deb" Depends | grep "libelector1 (= $version)" >/dev/null ||
    fail "python3-elector does not depend on libelector1 (= $version)"

# The release helper, unpacked: it runs, and the library (and the tool, linked
# statically) look for it where the package puts it.
dpkg-deb -x "$T/libelector1_${version}_$arch.deb" "$T/libroot"
"$T/libroot/usr/lib/$ma/elector/elector-release" --version
grep -qaF "/usr/lib/$ma/elector/elector-release" "$(readlink -f "$T/libroot/usr/lib/$ma/libelector.so.1")" ||
    fail "libelector.so.1 does not look for its helper at /usr/lib/$ma/elector/elector-release"

# The tool, unpacked into a throwaway root, runs and prints the version.
dpkg-deb -x "$T/elector_${version}_$arch.deb" "$T/root"
grep -qaF "/usr/lib/$ma/elector/elector-release" "$T/root/usr/bin/elector" ||
    fail "the packaged elector does not look for the helper at /usr/lib/$ma/elector/elector-release"
v=$("$T/root/usr/bin/elector" --version)
[ "$v" = "elector ${version%%-*}" ] || fail "packaged elector --version: '$v'"
echo "$v"

# The module, unpacked beside the library, imports under /usr/bin/python3 and
# finds the tooz backend's entry point.
dpkg-deb -x "$T/python3-elector_${version}_$arch.deb" "$T/pyroot"
LD_LIBRARY_PATH="$T/libroot/usr/lib/$ma" PYTHONPATH="$T/pyroot/usr/lib/python3/dist-packages" \
    /usr/bin/python3 -c 'import elector, importlib.metadata as m
assert elector._elector.strerror(-4), "no strerror"
eps = [e for e in m.entry_points(group="tooz.backends") if e.name == "elector"]
assert eps, "no tooz.backends entry point"
print("python3-elector imports:", elector.__file__)' || fail "the packaged module does not import"

if [ -n "$out" ]; then
    mkdir -p "$out"
    cp "$T"/*.deb "$out"/
    echo "packages in $out"
fi
echo "check-debian: ok"
