#!/usr/bin/env bash
# Cross-compiles the core's standalone checks for aarch64 and armhf and runs
# them under qemu-user: the no-exceptions/no-RTTI program, the quick start,
# and the fuzz model replaying the committed corpus. Needs Debian's
# g++-aarch64-linux-gnu, g++-arm-linux-gnueabihf and qemu-user.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(-std=c++17 -O2 -Wall -Wextra -Wpedantic -Werror -Iinclude -static -pthread)

for target in aarch64-linux-gnu arm-linux-gnueabihf; do
  case $target in
    aarch64-linux-gnu) qemu=qemu-aarch64 ;;
    arm-linux-gnueabihf) qemu=qemu-arm ;;
  esac
  echo "-- $target"
  "$target-g++" "${common[@]}" -fno-exceptions -fno-rtti tests/no_exceptions_check.cpp \
    -o "$out/no_exceptions_check"
  "$target-g++" "${common[@]}" examples/quickstart.cpp -o "$out/quickstart"
  "$target-g++" "${common[@]}" tests/fuzz/bus_model_fuzzer.cpp -o "$out/fuzz_replay"
  "$qemu" "$out/no_exceptions_check"
  "$qemu" "$out/quickstart" >/dev/null && echo "quickstart: ok"
  "$qemu" "$out/fuzz_replay" tests/fuzz/corpus/*
done
