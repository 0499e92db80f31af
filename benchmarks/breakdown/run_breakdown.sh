#!/usr/bin/env bash
# Instructions per message from callgrind (deterministic): for each feature of
# the bus, publish and dispatch apart; then for every row of the one-core
# table (table 14: the bare queues in their fastest usage and Sluice, one
# thread pushing 1,024 then popping 1,024), publish plus dispatch together,
# built in one file as sluice_bench builds them and, given the row programs,
# each built alone.
# Usage: benchmarks/breakdown/run_breakdown.sh [--tsv FILE] [--shm SHM] BREAKDOWN [ROW_PROGRAM...]
#   BREAKDOWN: build-release/benchmarks/sluice_instruction_breakdown
#   ROW_PROGRAM: build-release/benchmarks/sluice_instruction_row_* (target
#   sluice_instruction_rows)
#   --tsv FILE: also writes "section<TAB>row<TAB>instructions" lines to FILE
#   (sections: feature, shm, one-file, per-row), as
#   tools/check_instruction_budget.sh reads them.
#   --shm SHM: build-release/benchmarks/sluice_instruction_shm (Linux): the
#   shared-memory bus's publish and dispatch rows (section shm).
set -euo pipefail
tsv=/dev/null
if [[ "${1:-}" == "--tsv" ]]; then
  tsv=${2:?--tsv needs a file}
  shift 2
fi
shm=""
if [[ "${1:-}" == "--shm" ]]; then
  shm=${2:?--shm needs a program}
  shift 2
  [[ -x "$shm" ]] || { echo "not an executable: $shm" >&2; exit 2; }
fi
binary=${1:?path to sluice_instruction_breakdown}
shift
[[ -x "$binary" ]] || { echo "not an executable: $binary" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$tsv"

# Inclusive instructions of the functions whose names match the last
# argument, per message: the first argument is the program, its arguments
# follow, and it prints how many messages it ran ("N messages").
count() {
  local program=$1
  shift
  local pattern=${*: -1}
  local args=("${@:1:$#-1}")
  # The program's status: a row that lost a message fails the script.
  if ! valgrind --tool=callgrind --callgrind-out-file="$work/out" --toggle-collect="$pattern" \
    "$program" "${args[@]}" </dev/null >"$work/stdout" 2>/dev/null; then
    echo "$program ${args[*]} failed" >&2
    exit 1
  fi
  local total messages
  total=$(callgrind_annotate "$work/out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  messages=$(awk '/ messages$/ {print $1}' "$work/stdout")
  if [[ -z "$total" || "$total" == 0 || -z "$messages" ]]; then
    echo "callgrind counted nothing for $program ${args[*]} ($pattern)" >&2
    exit 1
  fi
  awk -v t="$total" -v n="$messages" 'BEGIN { printf "%.1f", t / n }'
}

# row SECTION NAME VALUE: a table row and a TSV line.
row() {
  printf '| %s | %s |\n' "$2" "$3"
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$tsv"
}

printf '| bus: step | instructions per message |\n|---|---|\n'
for model in spsc mpsc spsc_priority mpsc_priority; do
  row feature "$model: publish, BARE_METAL (claim + construct + publish)" \
    "$(count "$binary" "$model" publish_fast bare '*PublishLoop*')"
  row feature "$model: publish, NO_STATS, caller timestamp" \
    "$(count "$binary" "$model" publish_fast no_stats '*PublishLoop*')"
  row feature "$model: publish, FULL_FEATURED, caller timestamp" \
    "$(count "$binary" "$model" publish_fast full '*PublishLoop*')"
  row feature "$model: publish, FULL_FEATURED, bus clock" \
    "$(count "$binary" "$model" publish full '*PublishLoop*')"
  # BARE_METAL keeps no latency histograms: the difference is their cost.
  row feature "$model: dispatch, visitor (ProcessBatchWith), BARE_METAL" \
    "$(count "$binary" "$model" visitor bare '*DispatchVisitor*')"
  row feature "$model: dispatch, one callback (ProcessBatch), BARE_METAL" \
    "$(count "$binary" "$model" callbacks bare '*DispatchCallbacks*')"
  row feature "$model: dispatch, visitor, FULL_FEATURED (latency histograms)" \
    "$(count "$binary" "$model" visitor full '*DispatchVisitor*')"
  row feature "$model: dispatch, one callback, FULL_FEATURED (latency histograms)" \
    "$(count "$binary" "$model" callbacks full '*DispatchCallbacks*')"
done

# The shared-memory bus: a producer and the consumer, each with its own
# mapping, in one process; every message HIGH, stamped by the bus clock.
if [[ -n "$shm" ]]; then
  printf '\n| shared-memory bus: step | instructions per message |\n|---|---|\n'
  row shm "shm: publish (PublishWithPriority, bus clock)" "$(count "$shm" callbacks '*PublishLoop*')"
  row shm "shm: dispatch, one callback (ProcessBatch)" "$(count "$shm" callbacks '*DispatchCallbacks*')"
  row shm "shm: dispatch, visitor (ProcessBatchWith)" "$(count "$shm" visitor '*DispatchVisitor*')"
fi

# Table 14's rows, in its order: a round's instructions (push 1,024, pop them
# all) over 1,024. Peers not installed are not built, so not listed.
printf '\n| one-core row (table 14), every row in one file | instructions per message, push + pop |\n|---|---|\n'
while IFS=$'\t' read -r index name; do
  row one-file "$name" "$(count "$binary" onecore "$index" '*OneCoreRounds*')"
done < <("$binary" onecore list)

if (($#)); then
  printf '\n| one-core row (table 14), each row built alone | instructions per message, push + pop |\n|---|---|\n'
  for program in "$@"; do
    [[ -x "$program" ]] || { echo "not an executable: $program" >&2; exit 2; }
    "$program" onecore list | awk -v p="$program" '{ print $0 "\t" p }'
  done | sort -n >"$work/rows"
  while IFS=$'\t' read -r index name program; do
    row per-row "$name" "$(count "$program" onecore "$index" '*OneCoreRounds*')"
  done <"$work/rows"
fi
