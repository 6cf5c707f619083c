#!/bin/sh
# test_install: `cmake --install` into a temporary prefix, then build and run
# programs against the installed tree the three ways a user would: CMake's
# find_package (hakmem::hakmem and hakmem::hakmem_static) and pkg-config.
# usage: test_install.sh BUILD_DIR
set -eu
build=${1:?usage: test_install.sh BUILD_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/prefix" >/dev/null || fail "cmake --install"
for f in include/hakmem.h; do [ -f "$work/prefix/$f" ] || fail "$f not installed"; done
libdir=$(dirname "$(find "$work/prefix" -name 'libhakmem.so' | head -n 1)")
[ -n "$libdir" ] && [ -f "$libdir/libhakmem.a" ] || fail "libhakmem.so/.a not installed"

mkdir "$work/app"
cat > "$work/app/app.c" <<'C'
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  char *p = malloc(100);           /* the interposed malloc ... */
  char *q = hak_malloc(5000);      /* ... and the explicit API */
  if (!p || !q || !hak_owns(p) || !hak_owns(q) || hak_usable_size(q) < 5000) return 1;
  memset(q, 7, 5000);
  hak_free(q);
  free(p);
  puts("ok");
  return 0;
}
C
cat > "$work/app/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(hakmem REQUIRED)
add_executable(app_shared app.c)
target_link_libraries(app_shared PRIVATE hakmem::hakmem)
add_executable(app_static app.c)
target_link_libraries(app_static PRIVATE hakmem::hakmem_static)
C
cmake -S "$work/app" -B "$work/app/b" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null || fail "find_package(hakmem)"
cmake --build "$work/app/b" >/dev/null || fail "building against hakmem::hakmem / hakmem_static"
[ "$(LD_LIBRARY_PATH="$libdir" "$work/app/b/app_shared")" = ok ] || fail "app linked with hakmem::hakmem"
[ "$("$work/app/b/app_static")" = ok ] || fail "app linked with hakmem::hakmem_static"

if command -v pkg-config >/dev/null 2>&1; then
  pc=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs hakmem) || fail "pkg-config hakmem"
  # shellcheck disable=SC2086
  cc "$work/app/app.c" $pc -o "$work/app/app_pc" || fail "building with pkg-config flags ($pc)"
  [ "$(LD_LIBRARY_PATH="$libdir" "$work/app/app_pc")" = ok ] || fail "app built with pkg-config"
  how="find_package (shared, static) and pkg-config"
else
  how="find_package (shared, static); pkg-config not installed"
fi
echo "test_install: OK: installed to a temporary prefix, built and ran via $how"
