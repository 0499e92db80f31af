#!/usr/bin/env bash
# Without the benchmark report's libraries and without a network, the
# README's commands must not wait on a download:
#  - the test configuration (Debug: fetching off) configures in seconds and
#    says that the report and its tests are skipped, having fetched nothing;
#  - the report configuration (Release: fetching on) fails in seconds with a
#    message that names the Debian packages and the option that skips the
#    report. "No network" is a download address that refuses at once
#    (127.0.0.1, port 9), so the check does not depend on this machine's.
# Both configure with no CMake developer warning.
# Usage: tools/check_offline_configure.sh [build-dir-prefix]
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-build-offline}
hide=(-DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON)
offline=(-DSLUICE_NLOHMANN_JSON_URL=http://127.0.0.1:9/json.tar.xz
  -DSLUICE_CLI11_URL=http://127.0.0.1:9/cli11.tar.gz)
fail() {
  echo "error: $*" >&2
  exit 1
}
seconds() { echo $(($(date +%s) - $1)); }

# The README's test configure flags, taken from the README itself.
test_flags=$(grep -m1 '^cmake -S \. -B build ' README.md | sed 's/ &&.*//; s/^cmake -S \. -B build //')
read -r -a test_flags <<<"$test_flags"
rm -rf "$prefix-tests"
start=$(date +%s)
log=$(cmake -S . -B "$prefix-tests" "${test_flags[@]}" "${hide[@]}" "${offline[@]}" 2>&1) ||
  { echo "$log"; fail "the test configuration failed without the report's libraries"; }
echo "test configuration: configured in $(seconds "$start") s"
tr -s '\n ' '  ' <<<"$log" | grep -q "sluice_bench, its report library and their tests are skipped" ||
  { echo "$log"; fail "the test configuration did not say that the report is skipped"; }
[[ ! -e "$prefix-tests/_sluice_downloads" && ! -e "$prefix-tests/_deps/nlohmann_json-src" ]] ||
  fail "the test configuration downloaded something"
! grep -q "CMake Warning (dev)" <<<"$log" || { echo "$log"; fail "a CMake developer warning"; }

# The README's report configure flags.
bench_flags=$(grep -m1 '^cmake -S \. -B build-release ' README.md |
  sed 's/ &&.*//; s/^cmake -S \. -B build-release //')
read -r -a bench_flags <<<"$bench_flags"
rm -rf "$prefix-release"
start=$(date +%s)
if log=$(cmake -S . -B "$prefix-release" "${bench_flags[@]}" "${hide[@]}" "${offline[@]}" 2>&1); then
  echo "$log"
  fail "the report configuration succeeded with neither the libraries nor a network"
fi
took=$(seconds "$start")
echo "report configuration: failed, as it must, in $took s"
((took < 30)) || fail "the failing configuration took $took s: it waited on a download"
joined=$(tr -s '\n ' '  ' <<<"$log")
for needed in "nlohmann-json3-dev libcli11-dev" "-DSLUICE_BUILD_BENCHMARKS=OFF" "downloading it failed"; do
  grep -qF -- "$needed" <<<"$joined" || { echo "$log"; fail "the message does not say '$needed'"; }
done
! grep -q "CMake Warning (dev)" <<<"$log" || { echo "$log"; fail "a CMake developer warning"; }
echo "offline configure: the test configuration skips the report, the report's fails at once"
