#!/usr/bin/env bash
# The cost check that asserts no time: instructions per message under
# callgrind (deterministic) for every row of benchmarks/breakdown/run_breakdown.sh
# against the committed budget, benchmarks/breakdown/instruction_budget.tsv.
# Fails when a row is more than 3 % over its budget or more than 20 % under
# it (more often a count that missed code than a saving), when a row of the
# budget that this build can measure is missing, or when a row has no budget.
# Usage: tools/check_instruction_budget.sh BUILD_DIR [--update]
#   BUILD_DIR: a Release build of this checkout (the README's report command
#   makes build-release); the breakdown programs are built in it.
#   --update: writes the measured counts as the new budget (commit it with
#   the change that moved them, saying why).
# Or: tools/check_instruction_budget.sh --compare BUDGET MEASURED
#   applies the rules above to two files (budget: "section<TAB>row<TAB>count"
#   lines after "#" comments; measured: the same lines, as run_breakdown.sh
#   --tsv writes them) and exits as the check would; the rules' own test
#   (tests/tools/instruction_budget_rules_test.sh) feeds it made-up counts.
set -euo pipefail
usage="usage: tools/check_instruction_budget.sh BUILD_DIR [--update] | --compare BUDGET MEASURED"
tolerance_percent=3
# A row this far under its budget fails too: see the awk below.
suspicious_percent=20

# Compares the measured counts with the budget, row by row; prints every row
# and a verdict, and fails when a rule above is broken.
compare() {
  local budget_file=$1 measured_file=$2
  awk -F'\t' -v tolerance="$tolerance_percent" -v suspicious="$suspicious_percent" '
  FNR == NR {
    if ($1 !~ /^#/) { limit[$1 "\t" $2] = $3; order[++rows] = $1 "\t" $2 }
    next
  }
  { seen[$1 "\t" $2] = $3; if (!(($1 "\t" $2) in limit)) order[++rows] = $1 "\t" $2 }
  END {
    failed = 0
    printf "%-9s %-80s %8s %8s %8s\n", "section", "row", "budget", "now", "change"
    for (i = 1; i <= rows; ++i) {
      key = order[i]
      split(key, part, "\t")
      has_budget = key in limit
      has_now = key in seen
      if (!has_now) {
        # A peer that is not installed is not built; a Sluice row always is.
        if (part[2] ~ /^Sluice / || part[1] == "feature" || part[1] == "shm") {
          printf "%-9s %-80s %8s %8s MISSING\n", part[1], part[2], limit[key], "-"
          failed = 1
        } else {
          printf "%-9s %-80s %8s %8s not built here\n", part[1], part[2], limit[key], "-"
        }
        continue
      }
      if (!has_budget) {
        printf "%-9s %-80s %8s %8s NO BUDGET (run with --update)\n", part[1], part[2], "-", seen[key]
        failed = 1
        continue
      }
      change = (seen[key] - limit[key]) * 100 / limit[key]
      verdict = ""
      if (change > tolerance) { verdict = "  OVER BUDGET"; failed = 1 }
      else if (change < -suspicious) {
        # Far below is more often a count that missed code (a measured
        # function whose callee matched the toggle pattern and switched
        # counting off) than a saving: look, then lower the budget.
        verdict = "  FAR BELOW: check the count, then --update"
        failed = 1
      }
      else if (change < -tolerance) verdict = "  below: lower the budget with --update"
      printf "%-9s %-80s %8s %8s %+7.1f%%%s\n", part[1], part[2], limit[key], seen[key], change, verdict
    }
    if (failed) print "instruction budget: FAILED (a row over +" tolerance " % or under -" suspicious " %, missing or without a budget)"
    else print "instruction budget: every row within +" tolerance " % of its budget"
    exit failed
  }' "$budget_file" "$measured_file"
}

if [[ "${1:-}" == --compare ]]; then
  (($# == 3)) || { echo "$usage" >&2; exit 2; }
  [[ -f "$2" && -f "$3" ]] || { echo "no such file: $2 or $3" >&2; exit 2; }
  compare "$2" "$3"
  exit
fi

cd "$(dirname "$0")/.."
build=${1:?$usage}
update=0
case "${2:-}" in
  "") ;;
  --update) update=1 ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
budget=benchmarks/breakdown/instruction_budget.tsv

cache="$build/CMakeCache.txt"
[[ -f "$cache" ]] || { echo "not a configured build: $build" >&2; exit 2; }
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
build_type=$(cache_value CMAKE_BUILD_TYPE)
[[ "$build_type" == Release ]] || { echo "$build is a '$build_type' build; counts need Release" >&2; exit 2; }
compiler_id=$(cache_value CMAKE_CXX_COMPILER)
compiler="$("$compiler_id" --version | head -n 1) $(uname -m)"

cmake --build "$build" --target sluice_instruction_breakdown sluice_instruction_rows
# The shared-memory rows where the bus is built (Linux).
shm_args=()
# (The list is read whole first: grep -q stopping early under pipefail
# would fail the pipe and, by chance, skip the rows.)
targets=$(cmake --build "$build" --target help)
if [[ "$targets" == *sluice_instruction_shm* ]]; then
  cmake --build "$build" --target sluice_instruction_shm
  shm_args=(--shm "$build/benchmarks/sluice_instruction_shm")
fi
measured=$(mktemp)
trap 'rm -f "$measured"' EXIT
benchmarks/breakdown/run_breakdown.sh --tsv "$measured" "${shm_args[@]}" \
  "$build/benchmarks/sluice_instruction_breakdown" "$build"/benchmarks/sluice_instruction_row_*

if ((update)); then
  {
    echo "# Instructions per message (callgrind) that tools/check_instruction_budget.sh"
    echo "# holds every row to (+${tolerance_percent} %); written by its --update."
    printf '# compiler\t%s\n' "$compiler"
    printf '# section\trow\tinstructions\n'
    cat "$measured"
  } >"$budget"
  echo "wrote $budget"
  exit 0
fi

[[ -f "$budget" ]] || { echo "no budget file: $budget (run with --update)" >&2; exit 1; }
budget_compiler=$(awk -F'\t' '$1 == "# compiler" { print $2 }' "$budget")
if [[ "$budget_compiler" != "$compiler" ]]; then
  echo "the budget was counted with '$budget_compiler', this build uses '$compiler':" >&2
  echo "counts differ between compilers; count with that compiler, or --update" >&2
  exit 1
fi

compare "$budget" "$measured"
