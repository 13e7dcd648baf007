#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the Python package's tests (test/python) under Python 3.13 as Debian 13
# (trixie) ships it, on a machine that has another Python (Debian 12's 3.11),
# installing nothing: opt-in, not part of scripts/test.sh.
#
#   scripts/python313.sh [BUILD_DIR [PYTEST_ARGS...]]
#                      BUILD_DIR: default build/, configured and built by cmake;
#                      PYTEST_ARGS go to pytest (-k NAME, -x, ...)
#
# 1. Fetches trixie's python3.13, its standard library and headers, the shared
#    libraries they use (trixie's glibc among them: 3.13 needs a newer one than
#    Debian 12's) and the Python packages the tests use, the way
#    scripts/etcd35.sh fetches etcd 3.5 (scripts/debian-suite.sh: mirror of this
#    machine's apt sources, private apt state, `apt-get download`, `dpkg-deb -x`)
#    into a cache: ELECTOR_PY313_CACHE (default ~/.cache/elector/python313);
#    ELECTOR_PY313_REFRESH=1 downloads again.
# 2. Writes CACHE/root/usr/bin/python3.13-elector, which runs trixie's
#    python3.13 with trixie's own dynamic loader and libraries
#    (ld-linux-x86-64.so.2 --library-path ... --argv0 WRAPPER), so sys.executable
#    is the wrapper and subprocesses of the tests get the same interpreter; the
#    programs Python starts (etcd, cmake, ...) use the system's libraries.
# 3. Builds python/elector/_ext/*.c (the extension) with the flags and libraries CMake uses
#    for build/python (from its flags.make and link.txt) against trixie's
#    headers into BUILD_DIR/python313/elector/ (with the package's .py files).
# 4. Runs pytest over test/python with the environment of the ctest case
#    test_python (PYTHONPATH, ELECTOR_RELEASE_HELPER, ELECTOR_BUILD_DIR):
#    eventlet, gevent, mypy, tooz, venv, pip and setuptools are trixie's too.
#
# Exit status: pytest's; 2 when the interpreter cannot be fetched or built for.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd) || {
    echo "python313.sh: no build directory ${1:-$SRC/build}" >&2
    exit 2
}
[ $# -eq 0 ] || shift
SUITE=trixie
CACHE=${ELECTOR_PY313_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elector/python313}
ROOT=$CACHE/root
PY=$ROOT/usr/bin/python3.13-elector
LIBDIR=$ROOT/usr/lib/x86_64-linux-gnu

die() {
    echo "python313.sh: $*" >&2
    exit 2
}

# Trixie's interpreter (python3.13-minimal, libpython3.13-*), its headers,
# ensurepip (python3.13-venv) with the pip and setuptools wheels, and the shared
# libraries of the interpreter, of its standard library's extension modules
# and of the extension modules of the Python packages below (readelf -d over
# them: NEEDED).
PACKAGES=(python3.13-minimal libpython3.13-minimal libpython3.13-stdlib
    libpython3.13-dev python3.13-venv python3-pip-whl python3-setuptools-whl
    libc6 libgcc-s1 libstdc++6 libexpat1 zlib1g libssl3t64 libzstd1
    libbz2-1.0 libffi8 liblzma5 libsqlite3-0 libmpdec4 libuuid1 libncursesw6
    libtinfo6 libreadline8t64 libdb5.3t64 libcares2 libev4t64 libyaml-0-2
    libabsl20240722 libre2-11 libprotobuf32t64)
# The Python packages the tests use (pytest; setuptools and wheel for
# test_pip_install; eventlet, gevent, mypy, tooz), with every python3-*
# package they depend on (apt-cache depends --recurse).
PYROOTS=(python3-pytest python3-pygments python3-setuptools python3-wheel
    python3-eventlet python3-gevent python3-mypy python3-tooz)

# Fetched once; again with ELECTOR_PY313_REFRESH=1 or when the list changed.
stamp=$ROOT/.elector-packages
if [ "${ELECTOR_PY313_REFRESH:-0}" = 1 ] || [ ! -x "$PY" ] || [ ! -r "$stamp" ] ||
    [ "$(cat "$stamp")" != "${PACKAGES[*]} ${PYROOTS[*]}" ]; then
    command -v apt-get >/dev/null || die "apt-get not found (Debian package apt)"
    command -v dpkg-deb >/dev/null || die "dpkg-deb not found (Debian package dpkg)"
    # shellcheck source=scripts/debian-suite.sh
    . "$SRC/scripts/debian-suite.sh"
    debian_suite_mirror || die "$DEBIAN_SUITE_ERROR"
    state=$CACHE/apt-$SUITE
    rm -rf "$state" "$ROOT" "$CACHE/debs"
    mkdir -p "$CACHE/debs"
    echo "python313.sh: fetching the package lists of '$SUITE' from $DEBIAN_MIRROR" >&2
    debian_suite_apt "$state" "$SUITE" || die "$DEBIAN_SUITE_ERROR"
    mapfile -t pydeps < <(apt-cache "${DEBIAN_APT_OPTS[@]}" depends --recurse \
        --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
        --no-enhances "${PYROOTS[@]}" | grep -E '^python3-' | sort -u)
    [ "${#pydeps[@]}" -ge "${#PYROOTS[@]}" ] ||
        die "apt-cache depends found no python3-* packages for ${PYROOTS[*]}"
    echo "python313.sh: downloading $((${#PACKAGES[@]} + ${#pydeps[@]})) packages of '$SUITE'" >&2
    (cd "$CACHE/debs" && apt-get -q "${DEBIAN_APT_OPTS[@]}" download "${PACKAGES[@]}" "${pydeps[@]}" \
        >"$state/download.log" 2>&1) ||
        die "apt-get download failed (see $state/download.log)"
    for d in "$CACHE"/debs/*.deb; do
        dpkg-deb -x "$d" "$ROOT" || die "dpkg-deb -x $d failed"
    done
    [ -x "$ROOT/usr/bin/python3.13" ] || die "no usr/bin/python3.13 in $ROOT"
    [ -x "$LIBDIR/ld-linux-x86-64.so.2" ] || die "no trixie ld-linux-x86-64.so.2 in $LIBDIR"
    # Paths that Debian's build fixed to /usr and that lead out of the root:
    # ensurepip's wheels (WHEEL_PKG_DIR, in the build-time sysconfig data),
    # and the multiarch pyconfig.h that python3.13/pyconfig.h includes as
    # <x86_64-linux-gnu/python3.13/pyconfig.h> (found through a link in the
    # one include directory an extension's build gets).
    sed -i "s#'WHEEL_PKG_DIR': '/usr/share/python-wheels/'#'WHEEL_PKG_DIR': '$ROOT/usr/share/python-wheels/'#" \
        "$ROOT"/usr/lib/python3.13/_sysconfigdata_*.py
    grep -q "'WHEEL_PKG_DIR': '$ROOT/" "$ROOT"/usr/lib/python3.13/_sysconfigdata__x86_64-linux-gnu.py ||
        die "no WHEEL_PKG_DIR to point into $ROOT in trixie's sysconfig data"
    ln -s ../x86_64-linux-gnu "$ROOT/usr/include/python3.13/x86_64-linux-gnu"
    # The wrapper: the interpreter under trixie's loader and libraries, with
    # argv[0] the wrapper itself (sys.executable; a venv's bin/python symlink
    # to it finds its pyvenv.cfg). The prefix (PYTHONHOME) is the unpacked
    # root's usr, found from the wrapper's real place.
    cat >"$PY.tmp" <<'EOT'
#!/bin/sh
# SPDX-License-Identifier: MIT
# Written by scripts/python313.sh: Debian 13's python3.13, unpacked here, under
# its own dynamic loader and libraries (nothing of it is installed).
self=$(readlink -f "$0")
usr=${self%/bin/*}
lib=$usr/lib/x86_64-linux-gnu
PYTHONHOME=$usr
export PYTHONHOME
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib:${usr%/usr}/lib/x86_64-linux-gnu" \
    --argv0 "$0" "$usr/bin/python3.13" "$@"
EOT
    chmod +x "$PY.tmp"
    mv "$PY.tmp" "$PY"
    echo "${PACKAGES[*]} ${PYROOTS[*]}" >"$stamp"
fi

"$PY" -c 'import sys; print("python313.sh: Python", sys.version.replace("\n", " "))' ||
    die "the unpacked python3.13 does not run ($PY)"
"$PY" -c 'import ssl, sqlite3, ctypes, json, asyncio, select, decimal, lzma, bz2, zlib, uuid, readline' ||
    die "a standard library module does not import under $PY"

# The extension, built as CMake builds build/python's (same flags and
# libraries) but against trixie's headers, next to a copy of the package.
flags=$BUILD/python/CMakeFiles/elector_python.dir/flags.make
link=$BUILD/python/CMakeFiles/elector_python.dir/link.txt
if [ ! -r "$flags" ] || [ ! -r "$link" ]; then
    die "$BUILD has no Python package build (cmake -S . -B $BUILD and cmake --build $BUILD first)"
fi
val() { sed -n "s/^$1 = //p" "$flags"; }
inc=$ROOT/usr/include
cflags="$(val C_DEFINES) $(val C_INCLUDES) $(val C_FLAGS)"
# Debian 12's Python include directory -> trixie's (its pyconfig.h includes
# <x86_64-linux-gnu/python3.13/pyconfig.h>, so usr/include goes too).
cflags=$(printf '%s' "$cflags" | sed -E "s#-isystem /[^ ]*/include/python3\.[0-9]+#-isystem $inc/python3.13 -isystem $inc#")
# CMake's compiler (the link line's first word) and the libraries of the link
# line (relative paths are from $BUILD/python).
libs=()
ldflags=()
read -ra words <"$link"
for w in "${words[@]}"; do
    case $w in
        -Wl,*) ldflags+=("$w") ;;
        -l*) libs+=("$w") ;;
        *.a | *.so)
            case $w in
                /*) libs+=("$w") ;;
                *) libs+=("$BUILD/python/$w") ;;
            esac
            ;;
    esac
done
out=$BUILD/python313/elector
mkdir -p "$out"
cp "$SRC"/python/elector/*.py "$SRC"/python/elector/*.pyi "$SRC"/python/elector/py.typed "$out/"
cp -r "$BUILD"/python/elector-*.dist-info "$BUILD/python313/" 2>/dev/null || true
so=$out/_elector.cpython-313-x86_64-linux-gnu.so
# shellcheck disable=SC2086 # cflags: words from CMake's flags.make
"${words[0]}" $cflags -shared "${ldflags[@]}" -o "$so.tmp" "$SRC"/python/elector/_ext/*.c "${libs[@]}" ||
    die "building _elector for 3.13 failed"
mv "$so.tmp" "$so"

helper=$BUILD/lib/elector/elector-release
[ -x "$helper" ] || die "no $helper (cmake --build $BUILD)"
export PYTHONPATH=$BUILD/python313
export ELECTOR_RELEASE_HELPER=$helper
export ELECTOR_BUILD_DIR=$BUILD
echo "python313.sh: pytest with $PY, PYTHONPATH=$PYTHONPATH" >&2
set +e
"$PY" -m pytest -q -p no:cacheprovider -o faulthandler_timeout=180 -rs "$SRC/test/python" "$@"
rc=$?
set -e
exit "$rc"
