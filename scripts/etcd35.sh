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

# The mirror of the machine's main Debian archive: the first URI whose suites
# are not "-security" ones, from deb822 .sources files or one-line sources.list.
mirror=""
keyring=""
for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    # deb822: paragraphs separated by blank lines.
    read -r mirror keyring < <(awk '
        BEGIN { RS = ""; FS = "\n" }
        {
            uri = ""; suites = ""; key = ""; types = ""
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^URIs:/) { uri = $i; sub(/^URIs:[ \t]*/, "", uri); sub(/[ \t].*/, "", uri) }
                if ($i ~ /^Suites:/) { suites = $i }
                if ($i ~ /^Types:/) { types = $i }
                if ($i ~ /^Signed-By:/) { key = $i; sub(/^Signed-By:[ \t]*/, "", key) }
            }
            if (uri != "" && types ~ /(^|[ \t])deb([ \t]|$)/ && suites !~ /-security/ &&
                uri ~ /\/debian\/?$/) { print uri, key; exit }
        }' "$f") || true
    [ -n "$mirror" ] && break
done
if [ -z "$mirror" ]; then
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        mirror=$(awk '$1 == "deb" {
                i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i+1) !~ /-security/ && $i ~ /\/debian\/?$/) { print $i; exit } }' "$f")
        [ -n "$mirror" ] && break
    done
fi
[ -n "$mirror" ] || die "no Debian mirror found in the machine's apt sources"
if [ -z "$keyring" ] || [ ! -r "$keyring" ]; then
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
fi
[ -r "$keyring" ] || die "no archive keyring ($keyring): install debian-archive-keyring"

state=$CACHE/apt-$SUITE
rm -rf "$state" "$DEST"
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/etc" "$DEST/debs"
cat > "$state/etc/sources.list" <<EOT
deb [signed-by=$keyring] $mirror $SUITE main
EOT
APT=(apt-get -q
    -o "Dir::Etc::sourcelist=$state/etc/sources.list"
    -o Dir::Etc::sourceparts=/dev/null
    -o "Dir::State::Lists=$state/lists"
    -o "Dir::State::status=/dev/null"
    -o "Dir::Cache=$state/cache"
    -o "Debug::NoLocking=1"
    -o "APT::Get::List-Cleanup=0")
# As root apt drops to user _apt, which cannot write into a private directory.
[ "$(id -u)" -ne 0 ] || APT+=(-o APT::Sandbox::User=root)
echo "etcd35.sh: fetching the package lists of '$SUITE' from $mirror" >&2
"${APT[@]}" update >"$state/update.log" 2>&1 ||
    die "apt-get update of suite '$SUITE' failed (see $state/update.log)"
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
