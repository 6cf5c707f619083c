#!/bin/sh
# install-peers.sh - install the allocators HAKMEM is compared with, and the
# tools the benchmark runner (scripts/bench.py) uses, from Debian packages.
#
#   mimalloc  libmimalloc-dev   (libmimalloc.so.2)
#   jemalloc  libjemalloc-dev   (libjemalloc.so.2)
#   tcmalloc  libtcmalloc-minimal4 (libtcmalloc_minimal.so.4)
#   gnuplot-nox (charts), valgrind (--instructions), strace (syscall counts)
#
# Idempotent: installs only what is missing, and runs `apt-get update` at most
# once.  Uses sudo when not run as root.
set -eu

PACKAGES="libmimalloc-dev libjemalloc-dev libtcmalloc-minimal4 gnuplot-nox valgrind strace"

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-peers.sh: this script needs a Debian-based system (apt-get, dpkg-query)." >&2
    echo "Install mimalloc, jemalloc, tcmalloc (minimal), gnuplot, valgrind and strace" >&2
    echo "with your package manager; scripts/bench.py looks for the libraries in" >&2
    echo "/usr/lib/<multiarch>, /usr/lib64, /usr/lib and /usr/local/lib." >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-peers.sh: not root and sudo is not available" >&2
        exit 1
    fi
fi

missing=""
for p in $PACKAGES; do
    # gnuplot: any flavour (gnuplot-nox, gnuplot-qt, gnuplot-x11) will do.
    if [ "$p" = gnuplot-nox ] && command -v gnuplot >/dev/null 2>&1; then
        continue
    fi
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    echo "install-peers.sh: everything is installed already"
else
    echo "install-peers.sh: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update
    # shellcheck disable=SC2086
    $SUDO apt-get install -y --no-install-recommends $missing
fi

for lib in libmimalloc.so.2 libjemalloc.so.2 libtcmalloc_minimal.so.4; do
    found=""
    for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
        if [ -e "$d/$lib" ]; then found="$d/$lib"; break; fi
    done
    echo "  ${found:-$lib: NOT FOUND}"
done
