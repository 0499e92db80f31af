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

unformatted=()
for file in "${files[@]}"; do
  if ! "$CLANG_FORMAT" --dry-run -Werror --style=file "$file" >/dev/null 2>&1; then
    unformatted+=("$file")
  fi
done

if ((${#unformatted[@]})); then
  echo "Not formatted (${#unformatted[@]} of ${#files[@]} files; fix with $CLANG_FORMAT -i FILE):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "All ${#files[@]} C/C++ files are formatted."
