#!/usr/bin/env bash
# Instructions per message from callgrind (deterministic): for each feature of
# the bus, publish and dispatch apart; then for every row of the one-core
# table (table 14: the bare queues in their fastest usage and Sluice, one
# thread pushing 1,024 then popping 1,024), publish plus dispatch together.
# Usage: benchmarks/breakdown/run_breakdown.sh build-release/benchmarks/sluice_instruction_breakdown
set -euo pipefail
binary=${1:?path to sluice_instruction_breakdown}
[[ -x "$binary" ]] || { echo "not an executable: $binary" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Inclusive instructions of the functions whose names match the last
# argument, per message: the program's arguments come first, and it prints
# how many messages it ran ("N messages").
count() {
  local pattern=${*: -1}
  local args=("${@:1:$#-1}")
  # The program's status: a row that lost a message fails the script.
  if ! valgrind --tool=callgrind --callgrind-out-file="$work/out" --toggle-collect="$pattern" \
    "$binary" "${args[@]}" </dev/null >"$work/stdout" 2>/dev/null; then
    echo "sluice_instruction_breakdown ${args[*]} failed" >&2
    exit 1
  fi
  local total messages
  total=$(callgrind_annotate "$work/out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  messages=$(awk '/ messages$/ {print $1}' "$work/stdout")
  if [[ -z "$total" || "$total" == 0 || -z "$messages" ]]; then
    echo "callgrind counted nothing for ${args[*]} ($pattern)" >&2
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

# Table 14's rows, in its order: a round's instructions (push 1,024, pop them
# all) over 1,024. Peers not installed are not built, so not listed.
printf '\n| one-core row (table 14) | instructions per message, push + pop |\n|---|---|\n'
while IFS=$'\t' read -r index name; do
  per_message=$(count onecore "$index" '*OneCoreRounds*')
  printf '| %s | %s |\n' "$name" "$per_message"
done < <("$binary" onecore list)
