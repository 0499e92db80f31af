#!/usr/bin/env bash
# The Debian package: build sluice-dev_<version>_all.deb with CPack from a fresh
# build directory, check its control fields and files, install it, build and
# run tests/packaging/consumer.cpp with find_package(sluice) and with
# pkg-config, then remove the package. Needs root (or sudo), dpkg and apt-get;
# refuses to run where sluice-dev is already installed.
# Usage: tools/check_deb.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build-deb}
cxx=${CXX:-c++}
sudo=""
if ((EUID != 0)); then sudo=sudo; fi

if dpkg -s sluice-dev >/dev/null 2>&1; then
  echo "error: sluice-dev is already installed; remove it first" >&2
  exit 1
fi

work=$(mktemp -d)
installed=0
cleanup() {
  if ((installed)); then $sudo apt-get remove -y -qq sluice-dev >/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

rm -rf "$build"
cmake -S . -B "$build" -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCHMARKS=OFF \
  -DSLUICE_BUILD_EXAMPLES=OFF -DSLUICE_INSTALL=ON
(cd "$build" && cpack -G DEB)
version=$(sed -n 's/^ *VERSION \([0-9.]*\)$/\1/p' CMakeLists.txt)
deb=$build/sluice-dev_${version}_all.deb
[[ -f "$deb" ]] || { echo "error: $deb was not made" >&2; exit 1; }

dpkg-deb --info "$deb"
expect_field() {
  local value
  value=$(dpkg-deb --field "$deb" "$1")
  if [[ ! "$value" =~ $2 ]]; then
    echo "error: $1 is '$value', expected /$2/" >&2
    exit 1
  fi
}
expect_field Package '^sluice-dev$'
expect_field Version "^${version//./\\.}$"
expect_field Architecture '^all$'
expect_field Maintainer '.'
expect_field Description 'License: MIT'
contents=$(dpkg-deb --contents "$deb")
for file in ./usr/include/sluice/sluice.hpp ./usr/include/sluice/all.hpp \
    ./usr/share/cmake/sluice/sluiceConfig.cmake ./usr/share/pkgconfig/sluice.pc \
    ./usr/share/doc/sluice-dev/copyright; do
  grep -q " $file\$" <<<"$contents" || { echo "error: the package lacks $file" >&2; exit 1; }
done

$sudo apt-get install -y -qq "./$deb"
installed=1

# find_package(sluice) with no hint: the package's /usr/share/cmake/sluice.
cmake -S tests/packaging/find_package_consumer -B "$work/find_package"
found=$(sed -n 's/^sluice_DIR:PATH=//p' "$work/find_package/CMakeCache.txt")
[[ "$found" == /usr/share/cmake/sluice ]] \
  || { echo "error: find_package found sluice in '$found'" >&2; exit 1; }
cmake --build "$work/find_package"
"$work/find_package/consumer"

# pkg-config from the system path, plain compiler call.
cflags=$(pkg-config --cflags sluice)
echo "pkg-config --cflags sluice: $cflags"
# /usr/include is searched anyway, so the compile alone would not catch a wrong path.
include_dir=$(pkg-config --variable=includedir sluice)
if [[ ! -f "$include_dir/sluice/sluice.hpp" || "$(cd "$include_dir" && pwd -P)" != /usr/include ]]; then
  echo "error: sluice.pc's includedir $include_dir is not /usr/include" >&2
  exit 1
fi
# shellcheck disable=SC2086  # cflags are words
"$cxx" -std=c++17 $cflags "$root/tests/packaging/consumer.cpp" -o "$work/pkgconfig_consumer"
"$work/pkgconfig_consumer"

$sudo apt-get remove -y -qq sluice-dev
installed=0
if dpkg -s sluice-dev >/dev/null 2>&1 || [[ -e /usr/include/sluice/sluice.hpp ]]; then
  echo "error: sluice-dev was not removed" >&2
  exit 1
fi
echo "Debian package $deb: ok"
