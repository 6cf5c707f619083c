#!/usr/bin/env bash
# Cross-build HAKMEM for aarch64 and run the tests that work under qemu-user
# emulation (the API, C++, foreign-pointer, early-allocation, double-free and
# differential tests). test_fork and the RSS checks of the thread tests are
# left out: under qemu-user they fail on plain glibc too (qemu's own fork
# handling and per-thread memory), so they say nothing about HAKMEM.
# The build must be warning-free (-Wall -Wextra, as on x86_64). JOBS=N limits
# the parallel build. Installs the Debian cross toolchain and qemu-user if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-aarch64}

need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[ -d /usr/aarch64-linux-gnu/lib ] || need+=(libc6-arm64-cross)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
  -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ >/dev/null
# -Wall -Wextra clean on aarch64 too: any compiler or linker warning fails the check.
log=$(mktemp)
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" 2>&1 | tee "$log"
if grep -q "warning:" "$log"; then
  echo "aarch64: the build printed warnings:"; grep "warning:" "$log" | sort | uniq -c
  rm -f "$log"; exit 1
fi
rm -f "$log"

lib=$(realpath "$BUILD/libhakmem.so")
run() { qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_PRELOAD="$lib" "$@"; }
passed=0 failed=0
for t in test_api test_cxx test_foreign "test_early $(realpath "$BUILD/tests/libearly_dlopen.so")" test_double_free test_differential; do
  set -- $t
  if out=$(cd "$BUILD/tests" && run "./$1" "${@:2}" 2>&1); then
    passed=$((passed + 1)); echo "PASS $1"
  else
    failed=$((failed + 1)); echo "FAIL $1"; echo "$out" | tail -5
  fi
done
echo "aarch64 (qemu-user): $passed passed, $failed failed"
[ "$failed" -eq 0 ]
