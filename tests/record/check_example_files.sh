#!/usr/bin/env bash
# Runs examples/robot_run.cpp into a directory of its own and reads every
# MCAP file it wrote (the run's recording and the e-stop dump) with MCAP's
# own readers and, for its named fields, Foxglove's ROS 1 readers
# (check_mcap.cjs). Exits 77 (CTest: skipped), saying why, without node or
# the npm packages.
# Usage: check_example_files.sh EXAMPLE NODE NODE_MODULES CHECK_SCRIPT
set -euo pipefail
example=$1 node=$2 modules=$3 check=$4
if [[ -z "$node" || ! -f "$modules/@mcap/core/package.json" ||
      ! -f "$modules/@foxglove/rosmsg-serialization/package.json" ]]; then
  echo "skipped: node or the npm packages @mcap/core and @foxglove/rosmsg-serialization not found"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$example" "$dir" | grep -q PASS
files=("$dir"/*.mcap)
if ((${#files[@]} != 2)); then
  echo "expected the run's recording and one dump, found: ${files[*]}"
  exit 1
fi
for file in "${files[@]}"; do
  output=$(NODE_PATH="$modules" "$node" "$check" "$file")
  # Every topic decoded by field name (no "ros1 unchecked").
  if grep -q '^ros1 unchecked' <<<"$output" || ! grep -q '^field ' <<<"$output"; then
    echo "$file: its fields were not decoded"
    echo "$output"
    exit 1
  fi
  echo "$(basename "$file"): $(grep -c '^field ' <<<"$output") fields decoded, $(grep '^messages ' <<<"$output")"
done
