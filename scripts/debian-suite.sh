# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034 # the variables set here are for the caller
# Sourced (not run) by scripts/etcd35.sh and scripts/python313.sh: apt for
# another Debian suite without touching the system. The mirror is the one of
# this machine's own apt sources; apt's lists and caches go to a private
# directory; nothing is installed (the callers run `apt-get download` and
# unpack with `dpkg-deb -x`).
#
#   debian_suite_mirror        sets DEBIAN_MIRROR and DEBIAN_KEYRING, or returns
#                              1 with the reason in DEBIAN_SUITE_ERROR
#   debian_suite_apt STATE SUITE
#                              writes STATE/etc/sources.list for SUITE (main),
#                              sets the array DEBIAN_APT_OPTS (apt-get and
#                              apt-cache options for that state) and runs
#                              `apt-get update` (log: STATE/update.log); 1 on
#                              failure with DEBIAN_SUITE_ERROR set

# The mirror of the machine's main Debian archive: the first URI whose suites
# are not "-security" ones, from deb822 .sources files or one-line sources.list.
debian_suite_mirror() {
    DEBIAN_MIRROR=""
    DEBIAN_KEYRING=""
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        # deb822: paragraphs separated by blank lines.
        read -r DEBIAN_MIRROR DEBIAN_KEYRING < <(awk '
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
        [ -n "$DEBIAN_MIRROR" ] && break
    done
    if [ -z "$DEBIAN_MIRROR" ]; then
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -r "$f" ] || continue
            DEBIAN_MIRROR=$(awk '$1 == "deb" {
                    i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                    if ($(i+1) !~ /-security/ && $i ~ /\/debian\/?$/) { print $i; exit } }' "$f")
            [ -n "$DEBIAN_MIRROR" ] && break
        done
    fi
    if [ -z "$DEBIAN_MIRROR" ]; then
        DEBIAN_SUITE_ERROR="no Debian mirror found in the machine's apt sources"
        return 1
    fi
    if [ -z "$DEBIAN_KEYRING" ] || [ ! -r "$DEBIAN_KEYRING" ]; then
        DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
    fi
    if [ ! -r "$DEBIAN_KEYRING" ]; then
        DEBIAN_SUITE_ERROR="no archive keyring ($DEBIAN_KEYRING): install debian-archive-keyring"
        return 1
    fi
}

debian_suite_apt() {
    local state=$1 suite=$2
    debian_suite_mirror || return 1
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/etc"
    cat >"$state/etc/sources.list" <<EOT
deb [signed-by=$DEBIAN_KEYRING] $DEBIAN_MIRROR $suite main
EOT
    DEBIAN_APT_OPTS=(
        -o "Dir::Etc::sourcelist=$state/etc/sources.list"
        -o Dir::Etc::sourceparts=/dev/null
        -o "Dir::State::Lists=$state/lists"
        -o "Dir::State::status=/dev/null"
        -o "Dir::Cache=$state/cache"
        -o "Debug::NoLocking=1"
        -o "APT::Get::List-Cleanup=0")
    # As root apt drops to user _apt, which cannot write into a private directory.
    [ "$(id -u)" -ne 0 ] || DEBIAN_APT_OPTS+=(-o APT::Sandbox::User=root)
    if ! apt-get -q "${DEBIAN_APT_OPTS[@]}" update >"$state/update.log" 2>&1; then
        DEBIAN_SUITE_ERROR="apt-get update of suite '$suite' failed (see $state/update.log)"
        return 1
    fi
}
