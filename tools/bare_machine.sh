#!/usr/bin/env bash
# A bare Debian 12 machine for the README's commands: a minimal root made
# with debootstrap (a compiler, CMake, make, GoogleTest, and the report's two
# libraries), cached on this machine, and a way to run a command in it with
# no network and with only the packages the README names.
#
# Usage:
#   tools/bare_machine.sh make
#       Makes the root once (about 150 MB downloaded from deb.debian.org):
#       debootstrap --variant=minbase with the packages below, in ROOT.tmp,
#       then moved to ROOT, so a killed run never leaves a half root that is
#       later trusted. ROOT holds a stamp of what it was made from; when that
#       changes (the package list below), the root is made again. Prints how
#       long it took and the root's size.
#   tools/bare_machine.sh run [--with-report-libs] SRC -- COMMAND
#       Runs COMMAND (a bash -c string) in the root, in /src, which is SRC
#       (read-write). The root is seen through an overlay on a tmpfs, dropped
#       at the end: the cached root never changes. Without --with-report-libs,
#       nlohmann-json3-dev and libcli11-dev are purged (dpkg --purge) in the
#       overlay first, so the machine has only a compiler, CMake, make and
#       GoogleTest. Fresh mount, network and PID namespaces: no network but a
#       loopback interface (lo, up), /proc, /dev (with a /dev/shm of its
#       own), /sys read-only, a tmpfs at /tmp, the root's own /etc, and an
#       environment of PATH, HOME and LANG only (no CMAKE_GENERATOR, no
#       CXX). Exits with COMMAND's status. Every mount lives in the private
#       mount namespace and goes with it, on success or failure.
#
# ROOT is $SLUICE_BARE_ROOT, else /var/cache/sluice-ci/bookworm-bare.
# Needs root, debootstrap, util-linux's unshare and iproute2's ip.
set -euo pipefail

root_dir=${SLUICE_BARE_ROOT:-/var/cache/sluice-ci/bookworm-bare}
suite=bookworm
mirror=http://deb.debian.org/debian
# What the README's two commands need on a machine of their own. make, not
# ninja: with no CMAKE_GENERATOR, CMake uses Unix Makefiles.
packages=(g++ cmake make libgtest-dev nlohmann-json3-dev libcli11-dev)
# What `run` purges unless --with-report-libs (the report's libraries).
report_packages=(nlohmann-json3-dev libcli11-dev)
stamp_name=.sluice-bare-stamp
run_path=/usr/sbin:/usr/bin:/sbin:/bin
self=$(readlink -f "$0")

usage() {
  echo "usage: tools/bare_machine.sh make" >&2
  echo "       tools/bare_machine.sh run [--with-report-libs] SRC -- COMMAND" >&2
  exit 2
}

die() {
  echo "bare_machine: $*" >&2
  exit 1
}

# What the root is made from; a root whose stamp differs is made again.
stamp() {
  printf 'suite %s\nmirror %s\nvariant minbase\npackages %s\n' \
    "$suite" "$mirror" "$(printf '%s\n' "${packages[@]}" | sort | paste -sd, -)"
}

root_is_current() {
  [[ -f "$root_dir/$stamp_name" ]] && [[ "$(cat "$root_dir/$stamp_name")" == "$(stamp)" ]]
}

make_root() {
  ((EUID == 0)) || die "make needs root"
  command -v debootstrap >/dev/null || die "no debootstrap (apt-get install debootstrap)"
  mkdir -p "$(dirname "$root_dir")"
  # One maker at a time; a second waits and then finds the root made.
  exec 9>"$root_dir.lock"
  flock 9
  if root_is_current; then
    echo "bare root: $root_dir is current ($(du -sh "$root_dir" | cut -f1)); packages: ${packages[*]}"
    return 0
  fi
  local start tmp="$root_dir.tmp" attempt include
  start=$(date +%s)
  include=$(IFS=,; echo "${packages[*]}")
  for attempt in 1 2 3; do
    rm -rf "$tmp"
    echo "bare root: debootstrap --variant=minbase --include=$include $suite (attempt $attempt of 3)"
    # In a mount namespace of its own: whatever debootstrap mounts in the
    # target (/proc, /sys) goes with it, even when it fails, before the rm.
    if unshare --mount --fork --kill-child sh -c 'mount --make-rprivate / && exec "$@"' sh \
      debootstrap --variant=minbase --include="$include" "$suite" "$tmp" "$mirror" \
      >"$tmp.log" 2>&1; then
      break
    fi
    tail -n 20 "$tmp.log" >&2
    if ((attempt == 3)); then
      rm -rf "$tmp"
      die "debootstrap failed 3 times (log: $tmp.log)"
    fi
    sleep $((attempt * 10))
  done
  # The root's own names: localhost on the loopback, nothing of this host's.
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
  echo bare >"$tmp/etc/hostname"
  : >"$tmp/etc/resolv.conf"
  rm -f "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*_Packages
  stamp >"$tmp/$stamp_name"
  # The swap: the old root (if any) is set aside, then removed; the stamp is
  # only ever read in a complete root.
  rm -rf "$root_dir.old"
  if [[ -e "$root_dir" ]]; then mv "$root_dir" "$root_dir.old"; fi
  mv "$tmp" "$root_dir"
  rm -rf "$root_dir.old" "$tmp.log"
  echo "bare root: made $root_dir in $(($(date +%s) - start)) s, $(du -sh "$root_dir" | cut -f1)"
}

# Inside the namespaces (called as: bare_machine.sh __inside ROOT PURGE SRC COMMAND).
inside() {
  local lower=$1 purge=$2 src=$3 command=$4 scratch=$5 new
  mount --make-rprivate /
  ip link set lo up
  mount -t tmpfs -o mode=0755 sluice-bare "$scratch"
  mkdir "$scratch/upper" "$scratch/work" "$scratch/root"
  new=$scratch/root
  mount -t overlay sluice-bare -o "lowerdir=$lower,upperdir=$scratch/upper,workdir=$scratch/work" "$new"
  mount -t proc proc "$new/proc"
  mount --rbind /dev "$new/dev"
  # A /dev/shm of its own (POSIX shared memory), not this host's.
  mount -t tmpfs -o mode=1777,nosuid,nodev sluice-shm "$new/dev/shm"
  # A sysfs of this network namespace (its /sys/class/net shows lo only),
  # read-only; a read-only bind of this host's where that is refused.
  if ! mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$new/sys" 2>/dev/null; then
    mount --rbind /sys "$new/sys"
    mount -o remount,bind,ro "$new/sys"
  fi
  mount -t tmpfs -o mode=1777,nosuid,nodev sluice-tmp "$new/tmp"
  mkdir -p "$new/src"
  mount --bind "$src" "$new/src"

  local -a clean_env=(env -i PATH="$run_path" HOME=/root LANG=C.UTF-8)
  if ((purge)); then
    "${clean_env[@]}" DEBIAN_FRONTEND=noninteractive chroot "$new" \
      dpkg --purge "${report_packages[@]}" >/dev/null
  fi
  # What this machine has, in one line (on stderr: stdout is COMMAND's).
  # shellcheck disable=SC2016
  "${clean_env[@]}" chroot "$new" /bin/bash -c '
    have() { if [[ -e $2 ]]; then echo "$1 present"; else echo "$1 absent"; fi; }
    nets=$(ls /sys/class/net | paste -sd, -)
    echo "bare machine: $(g++ --version | head -n1); $(cmake --version | head -n1);" \
      "$(make --version | head -n1); ninja $(command -v ninja >/dev/null && echo present || echo absent);" \
      "$(have GoogleTest /usr/include/gtest/gtest.h); $(have nlohmann-json /usr/include/nlohmann/json.hpp);" \
      "$(have CLI11 /usr/include/CLI/CLI.hpp); network interfaces: $nets" >&2
    [[ $nets == lo ]] || { echo "bare machine: a network interface other than lo" >&2; exit 1; }
  '
  # shellcheck disable=SC2016
  "${clean_env[@]}" chroot "$new" /bin/bash -c 'cd /src && exec /bin/bash -c "$1"' bare "$command"
}

run_in_root() {
  local purge=1
  if [[ "${1:-}" == --with-report-libs ]]; then
    purge=0
    shift
  fi
  if (($# < 3)) || [[ "$2" != -- ]]; then usage; fi
  local src command status
  src=$(cd "$1" && pwd) || die "no source tree: $1"
  shift 2
  command="$*"
  ((EUID == 0)) || die "run needs root"
  root_is_current || die "no current root at $root_dir: run tools/bare_machine.sh make"
  scratch=$(mktemp -d /tmp/sluice-bare.XXXXXX)
  # The namespaces' mounts go with them; the empty mount point is left here.
  trap 'rmdir "$scratch" 2>/dev/null || true' EXIT
  set +e
  unshare --mount --net --pid --fork --kill-child \
    "$self" __inside "$root_dir" "$purge" "$src" "$command" "$scratch"
  status=$?
  set -e
  return "$status"
}

case "${1:-}" in
  make)
    (($# == 1)) || usage
    make_root
    ;;
  run)
    shift
    run_in_root "$@"
    ;;
  __inside)
    shift
    inside "$@"
    ;;
  *) usage ;;
esac
