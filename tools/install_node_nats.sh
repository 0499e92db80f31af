#!/usr/bin/env bash
# Installs the official NATS client for Node (npm "nats" 2.29.3 and the two
# packages it needs) into DIR/node_modules, for the interoperability test
# (tests/nats/interop_test.cpp). Downloads the registry's tarballs with curl
# and checks each against its published sha512, so neither npm nor a
# package.json is needed. Then configure with
# -DSLUICE_NODE_MODULES=DIR/node_modules (or export SLUICE_NODE_MODULES).
# Usage: tools/install_node_nats.sh DIR
set -euo pipefail
dir=${1:?usage: tools/install_node_nats.sh DIR}
packages=(
  "nats|https://registry.npmjs.org/nats/-/nats-2.29.3.tgz|tOQCRCwC74DgBTk4pWZ9V45sk4d7peoE2njVprMRCBXrhJ5q5cYM7i6W+Uvw2qUrcfOSnuisrX7bEx3b3Wx4QA=="
  "nkeys.js|https://registry.npmjs.org/nkeys.js/-/nkeys.js-1.1.0.tgz|tB/a0shZL5UZWSwsoeyqfTszONTt4k2YS0tuQioMOD180+MbombYVgzDUYHlx+gejYK6rgf08n/2Df99WY0Sxg=="
  "tweetnacl|https://registry.npmjs.org/tweetnacl/-/tweetnacl-1.0.3.tgz|6rt+RN7aOi1nGMyC4Xa5DdYiukl2UWCbcJft7YhxReBGQD7OAM8Pbxw6YMo4r2diNEA8FEmu32YOn9rhaiE5yw=="
)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for entry in "${packages[@]}"; do
  IFS='|' read -r name url integrity <<<"$entry"
  target="$dir/node_modules/$name"
  if [[ -f "$target/package.json" ]]; then continue; fi
  curl --fail --silent --show-error --location --retry 3 --max-time 60 -o "$scratch/$name.tgz" "$url"
  actual=$(openssl dgst -sha512 -binary "$scratch/$name.tgz" | base64 -w0)
  if [[ "$actual" != "$integrity" ]]; then
    echo "error: $url does not match its published sha512" >&2
    exit 1
  fi
  mkdir -p "$target"
  tar -xzf "$scratch/$name.tgz" -C "$target" --strip-components=1
done
echo "the npm package nats is in $dir/node_modules"
