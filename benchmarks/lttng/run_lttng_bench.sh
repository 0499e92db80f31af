#!/usr/bin/env bash
# Runs sluice_lttng_bench twice: with no LTTng session (the tracepoints
# compiled in, disabled), then inside a session that records every
# sluice:event, unfiltered (a filter would be evaluated for every event),
# in a per-user channel of 4 x 8 MB buffers in discard mode: an event that
# finds the buffers full is dropped by LTTng and counted, which `lttng
# stop` reports and this script prints. Needs lttng-tools; starts
# a session daemon if none answers (and leaves it, as `lttng` would).
# Usage: benchmarks/lttng/run_lttng_bench.sh BUILD_DIR [ROUNDS]
set -euo pipefail
build=${1:?usage: benchmarks/lttng/run_lttng_bench.sh BUILD_DIR [ROUNDS]}
rounds=${2:-2000}
bench="$build/benchmarks/lttng/sluice_lttng_bench"
[[ -x "$bench" ]] || { echo "not built: $bench (cmake --build $build --target sluice_lttng_bench)" >&2; exit 2; }
command -v lttng >/dev/null || { echo "lttng is not installed (Debian: lttng-tools)" >&2; exit 2; }

"$bench" --rounds "$rounds" --label "no LTTng session (tracepoints disabled)"
echo

if ! lttng list >/dev/null 2>&1; then
  lttng-sessiond --daemonize >/dev/null 2>&1
fi
session="sluice_bench_$$"
output=$(mktemp -d)
trap 'lttng destroy "$session" >/dev/null 2>&1 || true; rm -rf "$output"' EXIT
lttng create "$session" --output="$output/trace" >/dev/null
lttng enable-channel -u -s "$session" --subbuf-size=8M --num-subbuf=4 sluice_channel >/dev/null
lttng enable-event -u -s "$session" -c sluice_channel 'sluice:event' >/dev/null
lttng start "$session" >/dev/null
"$bench" --rounds "$rounds" --label "LTTng session recording sluice:event"
stopped=$(lttng stop "$session" 2>&1)
discarded=$(grep -oE '[0-9]+ events? (were )?discarded' <<<"$stopped" | grep -oE '^[0-9]+' | head -1 || true)
echo "  events LTTng discarded (buffers full): ${discarded:-0}; trace on disk: $(du -sh "$output/trace" | cut -f1)"
