#!/usr/bin/env bash
# Instructions per message for each feature, from callgrind (deterministic).
# Usage: benchmarks/breakdown/run_breakdown.sh build-release/benchmarks/sluice_instruction_breakdown
set -euo pipefail
binary=${1:?path to sluice_instruction_breakdown}
[[ -x "$binary" ]] || { echo "not an executable: $binary" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
messages=100000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Inclusive instructions of the functions whose names match $3, per message.
count() {
  local model=$1 what=$2 mode=$3 pattern=$4
  valgrind --tool=callgrind --callgrind-out-file="$work/out" --toggle-collect="$pattern" \
    "$binary" "$model" "$what" "$mode" >/dev/null 2>&1
  local total
  total=$(callgrind_annotate "$work/out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  if [[ -z "$total" || "$total" == 0 ]]; then
    echo "callgrind counted nothing for $model $what $mode ($pattern)" >&2
    exit 1
  fi
  awk -v t="$total" -v n="$messages" 'BEGIN { printf "%.1f", t / n }'
}

printf '| bus | step | instructions per message |\n|---|---|---|\n'
for model in spsc mpsc spsc_priority mpsc_priority; do
  bare_fast=$(count "$model" publish_fast bare '*PublishLoop*')
  nostats_fast=$(count "$model" publish_fast no_stats '*PublishLoop*')
  full_fast=$(count "$model" publish_fast full '*PublishLoop*')
  full=$(count "$model" publish full '*PublishLoop*')
  visitor=$(count "$model" visitor full '*DispatchVisitor*')
  callbacks=$(count "$model" callbacks full '*DispatchCallbacks*')
  # BARE_METAL keeps no latency histograms: the difference is their cost.
  visitor_bare=$(count "$model" visitor bare '*DispatchVisitor*')
  callbacks_bare=$(count "$model" callbacks bare '*DispatchCallbacks*')
  printf '| %s | publish, BARE_METAL (claim + construct + publish) | %s |\n' "$model" "$bare_fast"
  printf '| %s | publish, NO_STATS, caller timestamp | %s |\n' "$model" "$nostats_fast"
  printf '| %s | publish, FULL_FEATURED, caller timestamp | %s |\n' "$model" "$full_fast"
  printf '| %s | publish, FULL_FEATURED, bus clock | %s |\n' "$model" "$full"
  printf '| %s | dispatch, visitor (ProcessBatchWith), BARE_METAL | %s |\n' "$model" "$visitor_bare"
  printf '| %s | dispatch, one callback (ProcessBatch), BARE_METAL | %s |\n' "$model" "$callbacks_bare"
  printf '| %s | dispatch, visitor, FULL_FEATURED (latency histograms) | %s |\n' "$model" "$visitor"
  printf '| %s | dispatch, one callback, FULL_FEATURED (latency histograms) | %s |\n' "$model" "$callbacks"
done
