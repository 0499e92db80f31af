#!/usr/bin/env bash
# Model-checks Sluice's concurrency protocols with SPIN (see
# docs/reliability.md, "Model checking with SPIN").
#
# For every model in this directory:
#  - the model as written must verify: pan reports "errors: 0" for the safety
#    properties (assertions and invalid end states, i.e. deadlocks), without
#    hitting the depth limit;
#  - the same model must have no non-progress cycle (pan -l): every loop in it
#    (CAS retries, version re-checks) terminates;
#  - each planted bug (spin -DPLANTED_BUG=n) must make pan report the error
#    expected of it and write a trail.
# Prints each run's state count and result, and the total time; exits non-zero
# on any unexpected result. SPIN_SHOW_TRAILS=1 also prints each planted bug's
# counterexample (spin -t -p).
#
# Usage: bash tests/spin/check_models.sh [RUN...]   (needs spin and a C
# compiler). A RUN is a model (its file name without .pml: every run of it)
# or part of one: MODEL:safety, MODEL:cycles, MODEL:bugs (every planted bug)
# or MODEL:bugN. With none, every run of every model. --list prints each
# model's safety, cycles and bugs parts, one a line: CTest makes each a test
# of its own, so they check in parallel and each stays short.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-gcc}
spin=${SPIN:-spin}
work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-spin.XXXXXX")
trap 'rm -rf "$work"' EXIT

# model | planted bugs (n:text of the error pan must report, comma-separated;
# "assertion violated" where several assertions catch the bug, whichever the
# search meets first) |
# extra spin flags for the non-progress run | extra pan compile flags |
# hash table size (pan -wN)
models=(
  "ring|1:(fill_at_read>=L),2:assertion violated,3:assertion violated,4:assertion violated,5:assertion violated|-DNMSG=2|-O2 -DCOLLAPSE|24"
  "spsc_ring|1:assertion violated,2:assertion violated,3:assertion violated,4:assertion violated,5:assertion violated||-O2|20"
  "priority_queue|1:((rtail[r]-rreleased[r])<cap),2:((tail-released)<L),3:(pend>>(cur+1))==0,4:(chosen==1),5:(chosen==0),6:((tail-released)>=L),7:(pend>>(cur+1))==0,8:(pend>>(cur+1))==0|-DNMSG_LOW=0|-DCOLLAPSE|22"
  "dispatch_epoch|1:assertion violated,2:assertion violated|||18"
  "error_reporter|1:invalid end state,2:(c==x)|||18"
  "freestanding_thresholds|1:invalid end state|||12"
  "freestanding_unsubscribe|1:assertion violated|||14"
  "freestanding_error_reporter|1:!(retired[c]),2:(c==x)|||14"
  "consumer_wakeup|1:invalid end state,2:invalid end state,3:invalid end state|||14"
  "wait_set_wakeup|1:invalid end state,2:invalid end state,3:invalid end state,4:invalid end state|||18"
  "wait_set_two_signals|1:invalid end state,2:invalid end state,3:invalid end state,4:invalid end state|||18"
  "shutdown|1:!(drained),2:!(started_after_close)|||16"
  "room_wakeup|1:!(sleeper_with_room),2:invalid end state,3:!(sleeper_with_room),4:!(sleeper_after_close),5:!(sleeper_after_close),6:!(sleeper_after_close)|||22"
  "ipc_wakeup|1:(consumed==published),2:(consumed==published),3:(consumed==published),4:(consumed==published),5:!(consumer_dead),6:!(consumer_dead)|||22"
  "lane_close|1:(dispatched==admitted),2:(dispatched==admitted),3:(dispatched==admitted),4:(dispatched==admitted),5:(dispatched==admitted)|||18"
  "loan_blocks|1:assertion violated,2:assertion violated,3:assertion violated,4:assertion violated,5:assertion violated|||20"
  "in_hand|1:assertion violated,2:assertion violated,3:assertion violated,4:assertion violated|||14"
  "segment_create|1:(owners==0),2:(owners==0),3:(result<=2),4:(owners==0),5:(owners==0),6:(owners==0),7:(owners==0)|||22"
  "lane_handout|1:assertion violated,2:assertion violated F[l],3:assertion violated,4:(S[o]==0),5:assertion violated F[l],6:assertion violated,7:(S[o]==0),8:&&handed[cur[l]]),9:(owner[0]==3))))||-O2|22"
)

# Every model in this directory has an entry above, and every name asked
# for is a model.
listed=" ${models[*]%%|*} "
for file in "$here"/*.pml; do
  name=${file##*/}
  name=${name%.pml}
  [[ "$listed" == *" $name "* ]] || {
    echo "tests/spin/$name.pml has no entry in check_models.sh" >&2
    exit 1
  }
done
if [[ "${1:-}" == --list ]]; then
  for entry in "${models[@]}"; do
    IFS='|' read -r model bugs _ <<<"$entry"
    printf '%s\n' "$model:safety" "$model:cycles" "$model:bugs"
  done
  exit 0
fi
selected=("$@")
for name in "${selected[@]}"; do
  [[ -f "$here/${name%%:*}.pml" ]] || {
    echo "no model tests/spin/${name%%:*}.pml" >&2
    exit 1
  }
done
# wanted MODEL PART: whether the command line asks for that run (no
# subprocesses: CTest starts this script once per part of every model).
wanted() {
  ((${#selected[@]} == 0)) && return 0
  local run
  for run in "${selected[@]}"; do
    [[ "$run" == "$1" || "$run" == "$1:$2" ]] && return 0
    [[ "$2" == bug* && "$run" == "$1:bugs" ]] && return 0
  done
  return 1
}
# wanted_any MODEL: whether any run of the model is asked for.
wanted_any() {
  ((${#selected[@]} == 0)) && return 0
  local run
  for run in "${selected[@]}"; do
    [[ "${run%%:*}" == "$1" ]] && return 0
  done
  return 1
}

failures=0
checked=0
start=$(date +%s)

# run NAME MODEL PAN_CFLAGS PAN_ARGS SPIN_FLAGS...: builds and runs pan in its
# own directory; leaves the output in $work/NAME/out.
run() {
  local name=$1 model=$2 cflags=$3 panargs=$4
  shift 4
  local dir="$work/$name"
  mkdir -p "$dir"
  cp "$here/$model.pml" "$dir/"
  (
    cd "$dir"
    "$spin" "$@" -a "$model.pml" >spin.log 2>&1 || {
      cat spin.log
      exit 1
    }
    # pan.c draws compiler warnings that are SPIN's, not the model's. Small
    # models run fastest unoptimised (the compile dominates).
    # shellcheck disable=SC2086
    "$cc" -O0 -w -DVECTORSZ=1024 $cflags -o pan pan.c
    # shellcheck disable=SC2086
    ./pan -m100000 $panargs >out 2>&1 || true
  )
}

states_of() { sed -n 's/^ *\([0-9][0-9e+.]*\) states, stored.*/\1/p' "$1" | head -n 1; }
errors_of() { sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$1" | head -n 1; }

report() {
  printf '%-44s %12s states  %s\n' "$1" "$2" "$3"
}

for entry in "${models[@]}"; do
  IFS='|' read -r model bugs np_flags pan_flags hash <<<"$entry"
  wanted_any "$model" || continue
  checked=$((checked + 1))

  # The model as written: safety (assertions, deadlocks).
  if wanted "$model" safety; then
    name="$model"
    read -r -a spin_flags <<<"-DPLANTED_BUG=0"
    run "$name" "$model" "-DSAFETY $pan_flags" "-w$hash" "${spin_flags[@]}"
    out="$work/$name/out"
    errors=$(errors_of "$out")
    if [[ "$errors" == 0 ]] && ! grep -q "max search depth too small" "$out"; then
      report "$name (safety)" "$(states_of "$out")" "ok: errors: 0"
    else
      report "$name (safety)" "$(states_of "$out")" "FAILED"
      cat "$out"
      failures=$((failures + 1))
    fi
  fi

  # The model as written: no non-progress cycle.
  if wanted "$model" cycles; then
    name="$model-np"
    read -r -a spin_flags <<<"-DPLANTED_BUG=0 $np_flags"
    run "$name" "$model" "-DNP $pan_flags" "-l -w$hash" "${spin_flags[@]}"
    out="$work/$name/out"
    errors=$(errors_of "$out")
    label="$model (no cycles${np_flags:+, $np_flags})"
    if [[ "$errors" == 0 ]] && ! grep -q "max search depth too small" "$out"; then
      report "$label" "$(states_of "$out")" "ok: errors: 0"
    else
      report "$label" "$(states_of "$out")" "FAILED"
      cat "$out"
      failures=$((failures + 1))
    fi
  fi

  # Each planted bug must be caught.
  IFS=',' read -r -a planted <<<"$bugs"
  for case in "${planted[@]}"; do
    bug=${case%%:*}
    expected=${case#*:}
    wanted "$model" "bug$bug" || continue
    name="$model-bug$bug"
    # A planted bug is met within some ten thousand states: a small hash
    # table (-w18, 2 MiB) saves allocating the model's large one each time.
    run "$name" "$model" "-DSAFETY $pan_flags" "-w18" "-DPLANTED_BUG=$bug"
    out="$work/$name/out"
    errors=$(errors_of "$out")
    label="$model PLANTED_BUG=$bug"
    if [[ -n "$errors" && "$errors" -gt 0 && -f "$work/$name/$model.pml.trail" ]] &&
      grep '^pan:1: ' "$out" | grep -qF -- "$expected"; then
      what=$(grep -m 1 '^pan:1: ' "$out" | sed 's/^pan:1: //; s/ (at depth [0-9]*)//')
      report "$label" "$(states_of "$out")" "caught: $what"
      if [[ "${SPIN_SHOW_TRAILS:-0}" == 1 ]]; then
        (cd "$work/$name" && "$spin" -DPLANTED_BUG="$bug" -t -p "$model.pml") || true
      fi
    else
      report "$label" "$(states_of "$out")" "NOT CAUGHT"
      cat "$out"
      failures=$((failures + 1))
    fi
  done
done

echo "SPIN model checks: $checked models, $failures unexpected results," \
  "$(($(date +%s) - start)) s"
[[ "$failures" == 0 ]]
