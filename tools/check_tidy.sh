#!/usr/bin/env bash
# clang-tidy (.clang-tidy: bugprone-*, performance-*, concurrency-*) on every
# public header, warnings as errors; the core once more as the freestanding
# build (-DSLUICE_FREESTANDING=1).
# The public headers are checked together, in one translation unit per core
# (clang-tidy's checks look at each declaration and function once, whatever
# else the unit holds; a unit per header parsed the shared headers 103 times:
# 125 s against 9). That each header compiles alone is checked elsewhere
# (no_exceptions_every_public_header, in the README's test command).
# Usage: tools/check_tidy.sh  (CLANG_TIDY: the binary; CI_JOBS: parallelism)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${CI_JOBS:-2}
((jobs >= 1)) || jobs=1

if [[ -z "${CLANG_TIDY:-}" ]]; then
  if command -v clang-tidy-14 >/dev/null; then
    CLANG_TIDY=clang-tidy-14
  else
    CLANG_TIDY=clang-tidy
  fi
fi
"$CLANG_TIDY" --version | grep -i version

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The public headers: sluice/*.hpp and sluice/extras/*.hpp (detail/ headers
# are checked through them), dealt round-robin into one TU per job. The flags
# travel in each TU's first line.
mapfile -t headers < <(cd include && git ls-files -- 'sluice/*.hpp' 'sluice/extras/*.hpp' \
  | grep -v '^sluice/detail/')
for ((unit = 0; unit < jobs; ++unit)); do
  printf '// -std=c++17\n' >"$work/public_headers_$unit.cpp"
done
for index in "${!headers[@]}"; do
  printf '#include "%s"\n' "${headers[$index]}" >>"$work/public_headers_$((index % jobs)).cpp"
done
printf '// -std=c++17 -DSLUICE_FREESTANDING=1\n#include "sluice/sluice.hpp"\n' \
  >"$work/freestanding_sluice.cpp"

# Each TU's output goes to a log of its own; failures are printed together.
export CLANG_TIDY root
run_one() {
  local tu=$1 flags
  flags=$(head -n1 "$tu" | sed 's|^// ||')
  # shellcheck disable=SC2086  # flags are words
  if ! "$CLANG_TIDY" --quiet "--config-file=$root/.clang-tidy" "$tu" -- \
      -x c++ $flags "-I$root/include" >"$tu.log" 2>&1; then
    echo "FAIL $(basename "$tu")"
    return 1
  fi
  echo "ok   $(basename "$tu")"
}
export -f run_one
status=0
find "$work" -name '*.cpp' | sort | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} || status=1

if ((status)); then
  # The same finding reached through several TUs is printed once.
  cat "$work"/*.log | grep -E '(warning|error): ' | sort -u
  echo "clang-tidy found problems (above)" >&2
  exit 1
fi
echo "clang-tidy: ${#headers[@]} public headers and the freestanding core are clean"
