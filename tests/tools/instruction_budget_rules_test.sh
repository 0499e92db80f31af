#!/usr/bin/env bash
# The instruction budget's rules (tools/check_instruction_budget.sh), fed
# made-up counts through its --compare mode: a row more than 3 % over its
# budget fails, one more than 20 % under fails, a Sluice, feature or shm row
# of the budget that was not measured fails, a measured row without a budget
# fails; a peer's row that was not built, and rows within the bounds, pass.
# Usage: instruction_budget_rules_test.sh [PATH_TO_CHECK_SCRIPT]
set -uo pipefail
# The cases below pipe into expect, whose counts must stay in this shell.
shopt -s lastpipe
check=${1:-"$(dirname "$0")/../../tools/check_instruction_budget.sh"}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
cases=0

# budget: three rows, one of each kind the rules tell apart.
write_budget() {
  {
    printf '# Instructions per message (made up for this test)\n'
    printf '# compiler\tnone\n# section\trow\tinstructions\n'
    printf 'feature\tspsc: publish\t100.0\n'
    printf 'one-file\tboost::lockfree::spsc_queue, push\t25.0\n'
    printf 'one-file\tSluice SPSC row\t50.0\n'
  } >"$scratch/budget"
}

# expect NAME STATUS TEXT: the measured rows are on stdin; the check must
# exit with STATUS and print a line containing TEXT.
expect() {
  local name=$1 want_status=$2 want_text=$3
  cat >"$scratch/measured"
  cases=$((cases + 1))
  local out status
  out=$(bash "$check" --compare "$scratch/budget" "$scratch/measured" 2>&1)
  status=$?
  if [[ "$status" != "$want_status" || "$out" != *"$want_text"* ]]; then
    failures=$((failures + 1))
    printf 'FAIL %s: exit %s (want %s), output:\n%s\n(want a line with "%s")\n' \
      "$name" "$status" "$want_status" "$out" "$want_text"
  else
    printf 'ok   %s (exit %s, "%s")\n' "$name" "$status" "$want_text"
  fi
}

write_budget
rows() {  # rows FEATURE BOOST SLUICE: measured counts; "-" leaves the row out
  [[ "$1" == - ]] || printf 'feature\tspsc: publish\t%s\n' "$1"
  [[ "$2" == - ]] || printf 'one-file\tboost::lockfree::spsc_queue, push\t%s\n' "$2"
  [[ "$3" == - ]] || printf 'one-file\tSluice SPSC row\t%s\n' "$3"
}

rows 100.0 25.0 50.0 | expect "every row at its budget" 0 "every row within +3 %"
rows 103.0 25.0 50.0 | expect "exactly 3 % over passes" 0 "every row within +3 %"
rows 103.1 25.0 50.0 | expect "just over 3 % fails" 1 "OVER BUDGET"
rows 100.0 25.0 51.6 | expect "a Sluice row 3.2 % over fails" 1 "OVER BUDGET"
rows 100.0 26.0 50.0 | expect "a peer's row 4 % over fails" 1 "OVER BUDGET"
rows 90.0 25.0 50.0 | expect "10 % under passes, asking for --update" 0 "below: lower the budget with --update"
rows 80.0 25.0 50.0 | expect "exactly 20 % under passes" 0 "below: lower the budget"
rows 79.9 25.0 50.0 | expect "just over 20 % under fails" 1 "FAR BELOW"
rows 100.0 25.0 0.3 | expect "a count that missed the code fails" 1 "FAR BELOW"
rows 100.0 25.0 - | expect "a Sluice row not measured fails" 1 "MISSING"
rows - 25.0 50.0 | expect "a feature row not measured fails" 1 "MISSING"
rows 100.0 - 50.0 | expect "a peer not built here passes" 0 "not built here"
{
  rows 100.0 25.0 50.0
  printf 'one-file\tSluice new row\t60.0\n'
} | expect "a measured row without a budget fails" 1 "NO BUDGET"
: | expect "nothing measured fails" 1 "MISSING"

# Bad invocations are usage errors, not passes.
cases=$((cases + 1))
if bash "$check" --compare "$scratch/budget" >/dev/null 2>&1; then
  failures=$((failures + 1))
  echo "FAIL --compare with one file passed"
fi
cases=$((cases + 1))
if bash "$check" --compare "$scratch/budget" "$scratch/no-such-file" >/dev/null 2>&1; then
  failures=$((failures + 1))
  echo "FAIL --compare with a missing file passed"
fi

echo "$((cases - failures)) of $cases cases as the rules say"
((failures == 0))
