#!/usr/bin/env bash
# Control-plane benchmark: runs netbird-loadgen against a fresh all-in-one
# server (embedded SQLite) on loopback for each N in $PEERS (default
# "1000 2000"), prints a table and writes bench/controlplane.json (not
# committed). Point LOADGEN_URL/LOADGEN_KEY/LOADGEN_PID at another server
# of the protocol (NetBird's own management, say) to measure that instead.
# ACCOUNTS=K spreads the peers over K accounts (the join is measured in
# one of them; nothing may reach the others). LOADGEN_ARGS adds loadgen flags: "--deltas" makes the simulated peers ask
# for network map deltas as the wiremesh agent does.
set -euo pipefail
cd "$(dirname "$0")/.."
make build >/dev/null
PEERS=${PEERS:-"1000 2000"}
out=bench/controlplane.json
echo "[" > "$out"
first=1
printf '%-7s %10s %12s %12s %12s %14s %10s %10s %10s\n' peers logins/s first-maps-s fanout-p50ms fanout-p99ms bytes/update rss-MB cpu-s join-cpu-s
for n in $PEERS; do
  if [ -n "${LOADGEN_URL:-}" ]; then
    url=$LOADGEN_URL key=$LOADGEN_KEY pid=${LOADGEN_PID:-0}
  else
    dir=$(mktemp -d)
    port=$((39100 + RANDOM % 500))
    bin/netbird-server --datadir "$dir" --listen 127.0.0.1:$port --stun-port 0 --disable-relay --builtin-idp=false >"$dir/log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
    for _ in $(seq 50); do grep -q "setup-keys create" "$dir/log" && break; sleep 0.1; done
    key=$(bin/netbird-server admin --datadir "$dir" setup-keys create --reusable | tail -1)
    for _ in $(seq 2 "${ACCOUNTS:-1}"); do
      acc=$(bin/netbird-server admin --datadir "$dir" accounts create)
      key="$key,$(bin/netbird-server admin --datadir "$dir" --account "$acc" setup-keys create --reusable | tail -1)"
    done
    url=http://127.0.0.1:$port
  fi
  ulimit -n 65536 2>/dev/null || true
  # shellcheck disable=SC2086 # LOADGEN_ARGS holds several words
  r=$(bin/netbird-loadgen -m "$url" -k "$key" --peers "$n" --server-pid "$pid" --json --row --timeout 20m ${LOADGEN_ARGS:-})
  [ "$first" = 1 ] || echo "," >> "$out"
  first=0
  echo "$r" >> "$out"
  if [ -z "${LOADGEN_URL:-}" ]; then kill "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; trap - EXIT; fi
done
echo "]" >> "$out"
