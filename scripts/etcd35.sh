#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fetches etcd 3.5 (Debian's etcd-server and etcd-client .debs of a newer
# suite) without installing it: an extra sources list with the mirror taken
# from this machine's own apt sources, a private apt state directory (the
# system's package lists are not touched), `apt-get download`, `dpkg-deb -x`
# into a cache. Prints the directory holding etcd, etcdctl (and etcdutl when
# the package ships it); the tests use it with ELECTOR_ETCD_DIR=that directory.
#
#   scripts/etcd35.sh                      suite "unstable" (newest 3.5.x)
#   ELECTOR_ETCD_SUITE=trixie scripts/etcd35.sh
#   ELECTOR_ETCD_CACHE=DIR                 cache (default ~/.cache/elector/etcd)
#
# Exit status 0 and the directory on stdout; 1 with the reason on stderr.
set -euo pipefail

SUITE=${ELECTOR_ETCD_SUITE:-unstable}
CACHE=${ELECTOR_ETCD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elector/etcd}
DEST=$CACHE/$SUITE

die() {
    echo "etcd35.sh: $*" >&2
    echo "etcd35.sh: needed: apt-get, dpkg-deb (Debian packages apt, dpkg), a Debian" \
        "mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources that" \
        "carries suite '$SUITE', or put etcd 3.5's etcd and etcdctl in a directory" \
        "and set ELECTOR_ETCD_DIR to it" >&2
    exit 1
}

# Already unpacked and a 3.5: done (a new download only with ELECTOR_ETCD_REFRESH=1).
if [ "${ELECTOR_ETCD_REFRESH:-0}" != 1 ] && [ -x "$DEST/root/usr/bin/etcd" ] &&
    [ -x "$DEST/root/usr/bin/etcdctl" ]; then
    echo "$DEST/root/usr/bin"
    exit 0
fi

command -v apt-get >/dev/null || die "apt-get not found"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found"

# The mirror and apt's private state: scripts/debian-suite.sh.
# shellcheck source=scripts/debian-suite.sh
. "$(dirname "$0")/debian-suite.sh"
debian_suite_mirror || die "$DEBIAN_SUITE_ERROR"
state=$CACHE/apt-$SUITE
rm -rf "$state" "$DEST"
mkdir -p "$DEST/debs"
echo "etcd35.sh: fetching the package lists of '$SUITE' from $DEBIAN_MIRROR" >&2
debian_suite_apt "$state" "$SUITE" || die "$DEBIAN_SUITE_ERROR"
APT=(apt-get -q "${DEBIAN_APT_OPTS[@]}")
ver=$(apt-cache "${APT[@]:2}" show etcd-server 2>/dev/null |
    awk '/^Version:/ { print $2; exit }') || true
[ -n "$ver" ] || die "suite '$SUITE' has no etcd-server package"
case $ver in
    3.5.*) ;;
    *) die "suite '$SUITE' has etcd-server $ver, not a 3.5.x (set ELECTOR_ETCD_SUITE)" ;;
esac
echo "etcd35.sh: downloading etcd-server and etcd-client $ver" >&2
(cd "$DEST/debs" && "${APT[@]}" download "etcd-server=$ver" "etcd-client=$ver" \
    >"$state/download.log" 2>&1) ||
    die "apt-get download etcd-server etcd-client $ver failed (see $state/download.log)"
for d in "$DEST"/debs/*.deb; do
    dpkg-deb -x "$d" "$DEST/root" || die "dpkg-deb -x $d failed"
done
[ -x "$DEST/root/usr/bin/etcd" ] || die "etcd-server $ver has no /usr/bin/etcd"
[ -x "$DEST/root/usr/bin/etcdctl" ] || die "etcd-client $ver has no /usr/bin/etcdctl"
"$DEST/root/usr/bin/etcd" --version >&2 || die "the unpacked etcd does not run"
echo "$DEST/root/usr/bin"
