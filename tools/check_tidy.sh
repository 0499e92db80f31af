#!/usr/bin/env bash
# clang-tidy (.clang-tidy: bugprone-*, performance-*, concurrency-*) on every
# public header, each in a translation unit of its own, warnings as errors;
# the core once more as the freestanding build (-DSLUICE_FREESTANDING=1).
# Usage: tools/check_tidy.sh  (CLANG_TIDY: the binary; CI_JOBS: parallelism)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${CI_JOBS:-2}

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

# One TU per public header: sluice/*.hpp and sluice/extras/*.hpp (detail/
# headers are checked through them). The flags travel in each TU's first line.
mapfile -t headers < <(cd include && git ls-files -- 'sluice/*.hpp' 'sluice/extras/*.hpp' \
  | grep -v '^sluice/detail/')
for header in "${headers[@]}"; do
  name=${header//\//_}
  printf '// -std=c++17\n#include "%s"\n' "$header" >"$work/${name%.hpp}.cpp"
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
