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
# The counts run side by side, one per core (each callgrind run is one
# thread); the tables are printed in order once all are in.
jobs=$(nproc 2>/dev/null || echo 1)

# Inclusive instructions of the functions whose names match the last
# argument, per message: the first argument is the program, its arguments
# follow, and it prints how many messages it ran ("N messages"). Prints the
# count, or a reason on stderr and fails.
count() {
  local program=$1
  shift
  local pattern=${*: -1}
  local args=("${@:1:$#-1}")
  local scratch
  scratch=$(mktemp -d "$work/count.XXXXXX")
  # The program's status: a row that lost a message fails the script.
  if ! valgrind --tool=callgrind --callgrind-out-file="$scratch/out" --toggle-collect="$pattern" \
    "$program" "${args[@]}" </dev/null >"$scratch/stdout" 2>/dev/null; then
    echo "$program ${args[*]} failed" >&2
    return 1
  fi
  local total messages
  total=$(callgrind_annotate "$scratch/out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  messages=$(awk '/ messages$/ {print $1}' "$scratch/stdout")
  if [[ -z "$total" || "$total" == 0 || -z "$messages" ]]; then
    echo "callgrind counted nothing for $program ${args[*]} ($pattern)" >&2
    return 1
  fi
  awk -v t="$total" -v n="$messages" 'BEGIN { printf "%.1f", t / n }'
}

# The tables, in order: "title TEXT" and "row SECTION NAME" lines in
# $work/order; each row's command (count's arguments, one a line) in
# $work/job.N.
rows=0
title() { printf 'title\t%s\n' "$1" >>"$work/order"; }
row() {  # row SECTION NAME PROGRAM ARGS... PATTERN
  rows=$((rows + 1))
  printf 'row\t%s\t%s\t%s\n' "$rows" "$1" "$2" >>"$work/order"
  shift 2
  printf '%s\n' "$@" >"$work/job.$rows"
}
: >"$work/order"

title '| bus: step | instructions per message |'
for model in spsc mpsc spsc_priority mpsc_priority; do
  row feature "$model: publish, BARE_METAL (claim + construct + publish)" \
    "$binary" "$model" publish_fast bare '*PublishLoop*'
  row feature "$model: publish, NO_STATS, caller timestamp" \
    "$binary" "$model" publish_fast no_stats '*PublishLoop*'
  row feature "$model: publish, FULL_FEATURED, caller timestamp" \
    "$binary" "$model" publish_fast full '*PublishLoop*'
  row feature "$model: publish, FULL_FEATURED, bus clock" \
    "$binary" "$model" publish full '*PublishLoop*'
  # BARE_METAL keeps no latency histograms: the difference is their cost.
  row feature "$model: dispatch, visitor (ProcessBatchWith), BARE_METAL" \
    "$binary" "$model" visitor bare '*DispatchVisitor*'
  row feature "$model: dispatch, one callback (ProcessBatch), BARE_METAL" \
    "$binary" "$model" callbacks bare '*DispatchCallbacks*'
  row feature "$model: dispatch, visitor, FULL_FEATURED (latency histograms)" \
    "$binary" "$model" visitor full '*DispatchVisitor*'
  row feature "$model: dispatch, one callback, FULL_FEATURED (latency histograms)" \
    "$binary" "$model" callbacks full '*DispatchCallbacks*'
done

# The shared-memory bus: a producer and the consumer, each with its own
# mapping, in one process; every message HIGH, stamped by the bus clock.
if [[ -n "$shm" ]]; then
  title ''
  title '| shared-memory bus: step | instructions per message |'
  row shm "shm: publish (PublishWithPriority, bus clock)" "$shm" callbacks '*PublishLoop*'
  row shm "shm: dispatch, one callback (ProcessBatch)" "$shm" callbacks '*DispatchCallbacks*'
  row shm "shm: dispatch, visitor (ProcessBatchWith)" "$shm" visitor '*DispatchVisitor*'
fi

# Table 14's rows, in its order: a round's instructions (push 1,024, pop them
# all) over 1,024. Peers not installed are not built, so not listed.
title ''
title '| one-core row (table 14), every row in one file | instructions per message, push + pop |'
while IFS=$'\t' read -r index name; do
  row one-file "$name" "$binary" onecore "$index" '*OneCoreRounds*'
done < <("$binary" onecore list)

if (($#)); then
  title ''
  title '| one-core row (table 14), each row built alone | instructions per message, push + pop |'
  for program in "$@"; do
    [[ -x "$program" ]] || { echo "not an executable: $program" >&2; exit 2; }
    "$program" onecore list | awk -v p="$program" '{ print $0 "\t" p }'
  done | sort -n >"$work/rows"
  while IFS=$'\t' read -r index name program; do
    row per-row "$name" "$program" onecore "$index" '*OneCoreRounds*'
  done <"$work/rows"
fi

# Every count, $jobs at a time; each writes $work/value.N or fails.
export -f count
export work
# shellcheck disable=SC2016  # expanded by the bash that xargs starts
seq 1 "$rows" | xargs -P "$jobs" -I{} bash -c \
  'mapfile -t args <"$work/job.$1" && count "${args[@]}" >"$work/value.$1"' _ {} ||
  { echo "a count failed (above)" >&2; exit 1; }

while IFS=$'\t' read -r kind index section name; do
  if [[ "$kind" == title ]]; then
    if [[ -z "$index" ]]; then echo; else printf '%s\n|---|---|\n' "$index"; fi
    continue
  fi
  value=$(cat "$work/value.$index")
  printf '| %s | %s |\n' "$name" "$value"
  printf '%s\t%s\t%s\n' "$section" "$name" "$value" >>"$tsv"
done <"$work/order"
