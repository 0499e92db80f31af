#!/usr/bin/env bash
# Runs the two example processes end to end against a nats-server of their
# own on a free loopback port, as README.md's commands do by hand: the
# controller subscribes, the sensor node sends its readings and the stop,
# and the controller must receive the stop at HIGH and exit.
# Usage: run_example.sh <nats-server> <controller> <sensor> <readings>
set -euo pipefail
server=$1 controller=$2 sensor=$3 readings=$4
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="nats://127.0.0.1:$port"
"$server" -a 127.0.0.1 -p "$port" >"$work/server.log" 2>&1 &
pids+=($!)
# A minute for each wait: only a hang lasts that long.
for _ in $(seq 600); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

"$controller" "$url" >"$work/controller.log" 2>&1 &
controller_pid=$!
pids+=("$controller_pid")
for _ in $(seq 600); do
  grep -q "controller: waiting on" "$work/controller.log" && break
  sleep 0.1
done

"$sensor" "$url" "$readings"
for _ in $(seq 600); do
  kill -0 "$controller_pid" 2>/dev/null || break
  sleep 0.1
done
wait "$controller_pid"
cat "$work/controller.log"
grep -q "HIGH delivered 1, dropped 0" "$work/controller.log"
