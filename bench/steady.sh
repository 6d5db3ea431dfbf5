#!/usr/bin/env bash
# Steady load, as a user deploys it: courier serve (SQLite, bench/courier-
# steady.yaml) in one process, its receiver (courier bench sink) in another
# and wrk offering single PUTs at a fixed rate in a third. Prints wrk's
# figures, what arrived at the receiver and the time from each message's
# time in wrk's schedule (bench/wrk-steady.lua) to its arrival (p50, p99,
# max).
#
#   bench/steady.sh [RATE] [SECONDS]      # default 10000 messages/s for 20 s
#
# On PostgreSQL, name an empty schema of its own in the DSN; courier makes
# its tables there, and the messages stay behind:
#
#   COURIER_STORE_DRIVER=postgres \
#   COURIER_STORE_DSN='postgres://postgres@127.0.0.1/test?search_path=steady' bench/steady.sh
#
# Needs wrk (apt-get install wrk) and is run from the repository's root.
set -euo pipefail
rate=${1:-10000}
secs=${2:-20}
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "steady.sh needs wrk: apt-get install wrk" >&2; exit 1; }

work=$(mktemp -d)
go build -o "$work/courier" ./cmd/courier
pids=()
cleanup() {
  exec 3>&- 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work" ./courier-steady-data
}
trap cleanup EXIT

# The receiver ends when its standard input closes: this script holds a
# pipe to it open until it exits.
mkfifo "$work/hold"
"$work/courier" bench sink --listen 127.0.0.1:18426 <"$work/hold" >/dev/null &
pids+=($!)
exec 3>"$work/hold"
rm -rf ./courier-steady-data
"$work/courier" serve --config bench/courier-steady.yaml ${COURIER_CPUPROFILE:+--cpuprofile "$COURIER_CPUPROFILE"} &
pids+=($!)
for _ in $(seq 100); do
  curl -fsS http://127.0.0.1:18425/readyz >/dev/null 2>&1 && curl -fsS http://127.0.0.1:18426/_bench/stats >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS -X POST "http://127.0.0.1:18426/_bench/reset" >/dev/null

wrk -t2 -c256 -d"${secs}s" --latency -s bench/wrk-steady.lua http://127.0.0.1:18425 -- "$rate" 2
# Let the last messages arrive, then ask the receiver.
sleep 2
echo "receiver: $(curl -fsS 'http://127.0.0.1:18426/_bench/stats?latency=1')"
