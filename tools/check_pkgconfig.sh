#!/usr/bin/env bash
# sluice.pc after `cmake --install --prefix X`: pkg-config finds it through
# PKG_CONFIG_PATH, its Cflags point into X, and a consumer built with nothing
# but those flags (plus -std=c++17) compiles and runs.
# Usage: tools/check_pkgconfig.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build-pkgconfig}
cxx=${CXX:-c++}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

rm -rf "$build"
cmake -S . -B "$build" -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCHMARKS=OFF \
  -DSLUICE_BUILD_EXAMPLES=OFF -DSLUICE_INSTALL=ON
# The prefix given at install time, not the configured one, must be the one used.
cmake --install "$build" --prefix "$prefix"

# Only this prefix's .pc files: a system-wide sluice.pc must not answer.
export PKG_CONFIG_LIBDIR=$prefix/share/pkgconfig PKG_CONFIG_PATH=
cflags=$(pkg-config --cflags sluice)
echo "pkg-config --cflags sluice: $cflags"
[[ "$(pkg-config --modversion sluice)" == "$(sed -n 's/^ *VERSION \([0-9.]*\)$/\1/p' CMakeLists.txt)" ]] \
  || { echo "error: sluice.pc has the wrong version" >&2; exit 1; }
include_dir=$(pkg-config --variable=includedir sluice)
if [[ ! -f "$include_dir/sluice/sluice.hpp" || "$(cd "$include_dir" && pwd -P)" != "$(cd "$prefix/include" && pwd -P)" ]]; then
  echo "error: includedir $include_dir is not $prefix/include" >&2
  exit 1
fi

# shellcheck disable=SC2086  # cflags are words
"$cxx" -std=c++17 $cflags "$root/tests/packaging/consumer.cpp" -o "$work/consumer"
"$work/consumer"
echo "pkg-config consumer against cmake --install: ok"
