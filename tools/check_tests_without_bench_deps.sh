#!/usr/bin/env bash
# The tests need neither nlohmann-json nor CLI11 (only sluice_bench and its
# report library do): configure with the README's test command's flags, with
# both packages hidden and the network left as it is, check that nothing was
# fetched, then build and run every test.
# Usage: tools/check_tests_without_bench_deps.sh [build-dir [extra cmake args]]
#   (CI_JOBS: parallelism; e.g. -DSLUICE_SPIN_MODELS=OFF where CI checks them elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-no-bench-deps}
shift || true
jobs=${CI_JOBS:-2}

rm -rf "$build"
log=$(mktemp)
# The README's test command's configure flags, taken from the README itself.
readme_flags=$(grep -m1 '^cmake -S \. -B build ' README.md | sed 's/ &&.*//; s/^cmake -S \. -B build //')
read -r -a flags <<<"$readme_flags"
cmake -S . -B "$build" "${flags[@]}" \
  -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON "$@" 2>&1 | tee "$log"

# Nothing was fetched, and the targets that need the packages are gone.
for dep in nlohmann_json cli11; do
  if [[ -e "$build/_deps/$dep-src" ]]; then
    echo "error: $dep was fetched" >&2
    exit 1
  fi
done
# CMake wraps the warning; join its lines before matching.
if ! tr -s '\n ' '  ' <"$log" | grep -q "sluice_bench, its report library and their tests are skipped"; then
  echo "error: the configure step did not report the benchmark report as skipped" >&2
  exit 1
fi

cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" -j"$jobs" --output-on-failure
# Some tests must have run: an empty test list is not a pass.
count=$(ctest --test-dir "$build" -N | sed -n 's/^Total Tests: //p')
if [[ -z "$count" || "$count" -eq 0 ]]; then
  echo "error: no tests were registered" >&2
  exit 1
fi
echo "tests without the benchmark's libraries: $count tests passed"
