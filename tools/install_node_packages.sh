#!/usr/bin/env bash
# Installs the npm packages the tests run under Node into DIR/node_modules:
# the official NATS client ("nats" 2.29.3 and the two packages it needs), for
# the bridge's interoperability test (tests/nats/interop_test.cpp), and
# MCAP's own reader ("@mcap/core" 2.2.2 and the three packages it needs),
# which checks every MCAP file the tests write (tests/record), and
# Foxglove's ROS 1 readers ("@foxglove/rosmsg" 5.0.5,
# "@foxglove/rosmsg-serialization" 2.0.4 and the two packages they need),
# which decode the recordings' named fields. Downloads the
# registry's tarballs with curl and checks each against its published
# sha512, so neither npm nor a package.json is needed. Then configure with
# -DSLUICE_NODE_MODULES=DIR/node_modules (or export SLUICE_NODE_MODULES).
# Usage: tools/install_node_packages.sh DIR
set -euo pipefail
dir=${1:?usage: tools/install_node_packages.sh DIR}
packages=(
  "nats|https://registry.npmjs.org/nats/-/nats-2.29.3.tgz|tOQCRCwC74DgBTk4pWZ9V45sk4d7peoE2njVprMRCBXrhJ5q5cYM7i6W+Uvw2qUrcfOSnuisrX7bEx3b3Wx4QA=="
  "nkeys.js|https://registry.npmjs.org/nkeys.js/-/nkeys.js-1.1.0.tgz|tB/a0shZL5UZWSwsoeyqfTszONTt4k2YS0tuQioMOD180+MbombYVgzDUYHlx+gejYK6rgf08n/2Df99WY0Sxg=="
  "tweetnacl|https://registry.npmjs.org/tweetnacl/-/tweetnacl-1.0.3.tgz|6rt+RN7aOi1nGMyC4Xa5DdYiukl2UWCbcJft7YhxReBGQD7OAM8Pbxw6YMo4r2diNEA8FEmu32YOn9rhaiE5yw=="
  "@mcap/core|https://registry.npmjs.org/@mcap/core/-/core-2.2.2.tgz|W4NFiyqQlJsNjw8JxAAQ872u0xLWJy0GFC3YFm8bTLbNs+HdDWe8DwBqznr0MGYpWtw+AX8XzHWB5Y9rLEGJJg=="
  "@foxglove/crc|https://registry.npmjs.org/@foxglove/crc/-/crc-0.0.3.tgz|DjIZsnL3CyP/yQ/vUYA9cjrD0a/8YXejI5ZmsaOiT16cLfZcTwaCxIN01/ys4jsy+dZCQ/9DnWFn7AEFbiMDaA=="
  "heap-js|https://registry.npmjs.org/heap-js/-/heap-js-2.7.2.tgz|hl3ckmCs5hLAkk9YYqy0z6bqw78eZ4/JddC7mG7Xf/6heEb4v99EkO7sCJslxt62lmCMp+K47OWDKtSuUaqI+g=="
  "tslib|https://registry.npmjs.org/tslib/-/tslib-2.9.1.tgz|a4Ux9VKuIMHsOS7ENbEq6hK2ZGYIT27Rtl0E4eD9KqwxhKiQeMZE/9xb3IdYwWaSOyIBQLExhQgXDTYoiCxnWA=="
  "@foxglove/rosmsg|https://registry.npmjs.org/@foxglove/rosmsg/-/rosmsg-5.0.5.tgz|+qY6xW+4HdbPI3ItAlFFMjXgAiplXyRsv+kqdBk8OcWGH38BmEd7s6v/VnCkbYovAoB5rfR5giuKfmPRNzwbrA=="
  "@foxglove/rosmsg-serialization|https://registry.npmjs.org/@foxglove/rosmsg-serialization/-/rosmsg-serialization-2.0.4.tgz|Vbw9bZFoCi+tt6spWEbAuzdgIE2GhoHjFX/URJFlpv3Q90XvbbaJBhc7187ULZLVRbf4ARRFhUgzGY6B7bmGXw=="
  "@foxglove/message-definition|https://registry.npmjs.org/@foxglove/message-definition/-/message-definition-0.5.0.tgz|B/2GvWn4wRSsPDywcmy6uNXgAfZRhiOAnmy3qAaS6MHVqiHQqs/RoDsoW6Gw9sXSweJpeH5qAqAihvm1pR9Thg=="
  "md5-typescript|https://registry.npmjs.org/md5-typescript/-/md5-typescript-1.0.5.tgz|ovAc4EtiNt2dY8JPhPr/wkC9h4U5k/nuClNVcG0Ga3V1rMlYpAY24ZaaymFXJlz+ccJ6UMPo3FSaVKe7czBsXw=="
)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for entry in "${packages[@]}"; do
  IFS='|' read -r name url integrity <<<"$entry"
  target="$dir/node_modules/$name"
  if [[ -f "$target/package.json" ]]; then continue; fi
  tarball="$scratch/${name//\//_}.tgz"
  curl --fail --silent --show-error --location --retry 3 --max-time 60 -o "$tarball" "$url"
  actual=$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)
  if [[ "$actual" != "$integrity" ]]; then
    echo "error: $url does not match its published sha512" >&2
    exit 1
  fi
  mkdir -p "$target"
  tar -xzf "$tarball" -C "$target" --strip-components=1
done
echo "the npm packages nats, @mcap/core and @foxglove/rosmsg-serialization are in $dir/node_modules"
