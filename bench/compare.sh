#!/usr/bin/env bash
# courier beside River on PostgreSQL, in one run on one machine: each round
# drains the same jobs (one HTTP POST of a 1 KiB JSON payload each, to a
# receiver in a process of its own) with River, courier on SQLite and
# courier on PostgreSQL, one after another, so that they share whatever
# the machine does meanwhile. Prints each system's ingest and delivery
# rates and its CPU per delivered message, and for courier its floor
# (bench deliver --floor: sending and the store each alone, same run).
#
#   bench/compare.sh [MESSAGES] [ROUNDS]        # default 100000 messages, 3 rounds
#
# PostgreSQL is COURIER_BENCH_POSTGRES (default: the local server's database
# test); River and courier each work in a fresh schema that they drop.
# Run from the repository's root.
set -euo pipefail
messages=${1:-100000}
rounds=${2:-3}
dsn=${COURIER_BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
cd "$(dirname "$0")/.."

work=$(mktemp -d)
go build -o "$work/courier" ./cmd/courier
(cd bench/river && go build -o "$work/river" .)
pids=()
cleanup() {
  exec 3>&- 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# River's receiver: courier's own bench receiver, which ends when its
# standard input closes (this script holds a pipe to it open).
mkfifo "$work/hold"
"$work/courier" bench sink --listen 127.0.0.1:18427 <"$work/hold" >/dev/null &
pids+=($!)
exec 3>"$work/hold"
for _ in $(seq 100); do
  curl -fsS http://127.0.0.1:18427/_bench/stats >/dev/null 2>&1 && break
  sleep 0.1
done

for round in $(seq "$rounds"); do
  echo "== round $round"
  "$work/river" --dsn "$dsn" --sink http://127.0.0.1:18427 --messages "$messages"
  "$work/courier" bench deliver --messages "$messages" --floor 2>/dev/null | grep -v '^ *[0-9]*s '
  "$work/courier" bench deliver --messages "$messages" --postgres "$dsn" --floor 2>/dev/null | grep -v '^ *[0-9]*s '
done
