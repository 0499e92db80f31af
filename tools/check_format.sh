#!/usr/bin/env bash
# Every tracked C/C++ file must already be formatted as .clang-format says.
# Prints the files that are not and exits 1; exits 0 when none differ.
# Usage: tools/check_format.sh  (CLANG_FORMAT: the binary to use)
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian 12's clang-format is 14; another major version formats differently.
if [[ -z "${CLANG_FORMAT:-}" ]]; then
  if command -v clang-format-14 >/dev/null; then
    CLANG_FORMAT=clang-format-14
  else
    CLANG_FORMAT=clang-format
  fi
fi
"$CLANG_FORMAT" --version

# Nothing is vendored today; a third_party/ or vendor/ folder would be skipped.
mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.cpp' '*.cxx' '*.h' '*.hh' '*.hpp' '*.hxx' \
  '*.ipp' '*.inc' ':!:third_party/**' ':!:vendor/**')
if ((${#files[@]} == 0)); then
  echo "error: no C/C++ files found" >&2
  exit 1
fi

# One clang-format process per batch of files, one batch per core (a process
# a file spent most of its time starting). A file that differs gets
# "FILE:LINE:COL: error: code should be clang-formatted" lines.
report=$(mktemp)
trap 'rm -f "$report"' EXIT
status=0
printf '%s\0' "${files[@]}" |
  xargs -0 -P "$(nproc 2>/dev/null || echo 1)" -n 64 \
    "$CLANG_FORMAT" --dry-run -Werror --style=file >/dev/null 2>"$report" || status=$?
mapfile -t unformatted < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
  "$report" | sort -u)
# Any other failure (a file clang-format cannot read or parse, a crash) is
# not a format verdict: say it and fail.
if ((status != 0 && ${#unformatted[@]} == 0)); then
  echo "error: $CLANG_FORMAT failed (exit $status):" >&2
  cat "$report" >&2
  exit 1
fi

if ((${#unformatted[@]})); then
  echo "Not formatted (${#unformatted[@]} of ${#files[@]} files; fix with $CLANG_FORMAT -i FILE):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "All ${#files[@]} C/C++ files are formatted."
