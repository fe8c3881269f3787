#!/usr/bin/env bash
# Control-plane benchmark: runs netbird-loadgen against a fresh all-in-one
# server (embedded SQLite) on loopback for each N in $PEERS (default
# "1000 2000"), prints a table and writes bench/controlplane.json (not
# committed). Point LOADGEN_URL/LOADGEN_KEY/LOADGEN_PID at another server
# of the protocol (NetBird's own management, say) to measure that instead.
# ACCOUNTS=K spreads the peers over K accounts (the join is measured in
# one of them; nothing may reach the others). LOADGEN_ARGS adds loadgen flags: "--deltas" makes the simulated peers ask
# for network map deltas as the wiremesh agent does. SERVER_ARGS adds flags
# to our server (e.g. "--memory-limit 400MiB"). NETBIRD=1 also runs NetBird's
# own management (the combined server scripts/netbird-official.sh builds, on
# NetBird's test store, whose reusable key the peers join with) for each N,
# right after ours, its row labeled "netbird". peak-MB is the server's
# VmHWM (highest RSS) over the whole run; rss-MB is its RSS at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
make build >/dev/null
PEERS=${PEERS:-"1000 2000"}
out=bench/controlplane.json
echo "[" > "$out"
first=1
if [ "${NETBIRD:-}" = 1 ]; then eval "$(bash scripts/netbird-official.sh)"; fi
printf '%-7s %10s %12s %12s %12s %14s %10s %10s %10s %8s %s\n' peers logins/s first-maps-s fanout-p50ms fanout-p99ms bytes/update rss-MB cpu-s join-cpu-s peak-MB server >&2

# row FILE PID NAME prints the load generator's row (or its error) with
# the server's peak RSS.
row() {
  printf '%s %8s %s\n' "$(tr -d '\n' <"$1")" "$(awk '/VmHWM/{printf "%d", $2/1024}' "/proc/$2/status" 2>/dev/null)" "$3" >&2
}

# netbird N: one run of the load generator against NetBird's management.
netbird() {
  local n=$1 dir port pid src=$NB_OFFICIAL_SRC/management/server/testdata
  dir=$(mktemp -d)
  python3 -c 'import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); d.executescript(open(sys.argv[2]).read()); d.commit()' "$dir/store.db" "$src/store.sql"
  cp "$src/GeoLite2-City_20240305.mmdb" "$src/geonames_20240305.db" "$dir/"
  port=$((40100 + RANDOM % 300))
  cat > "$dir/config.yaml" <<EOC
server:
  listenAddress: "127.0.0.1:$port"
  exposedAddress: "http://127.0.0.1:$port"
  stunPorts: [$((port + 400))]
  metricsPort: $((port + 800))
  healthcheckAddress: "127.0.0.1:$((port + 1200))"
  logLevel: "warn"
  logFile: "console"
  authSecret: "bench-relay-secret"
  dataDir: "$dir"
  disableAnonymousMetrics: true
  disableGeoliteUpdate: true
  auth:
    issuer: "http://127.0.0.1:$port/oauth2"
    cliRedirectURIs: ["http://localhost:53000/"]
  store:
    engine: "sqlite"
    encryptionKey: "$(head -c32 /dev/urandom | base64)"
EOC
  "$NB_OFFICIAL_SERVER" --config "$dir/config.yaml" >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/api/peers" && break; sleep 0.2; done
  # The reusable setup key of NetBird's test store.
  # shellcheck disable=SC2086 # LOADGEN_ARGS holds several words
  bin/netbird-loadgen -m "http://127.0.0.1:$port" -k A2C8E62B-38F5-4553-B31E-DD66C696CEBB --peers "$n" --server-pid "$pid" --json --row --timeout 20m ${LOADGEN_ARGS:-} 2>"$dir/row" >/dev/null || true
  row "$dir/row" "$pid" netbird
  kill "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$dir"
}

for n in $PEERS; do
  if [ -n "${LOADGEN_URL:-}" ]; then
    url=$LOADGEN_URL key=$LOADGEN_KEY pid=${LOADGEN_PID:-0}
  else
    dir=$(mktemp -d)
    port=$((39100 + RANDOM % 500))
    # shellcheck disable=SC2086 # SERVER_ARGS holds several words
    bin/netbird-server --datadir "$dir" --listen 127.0.0.1:$port --stun-port 0 --disable-relay --builtin-idp=false ${SERVER_ARGS:-} >"$dir/log" 2>&1 &
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
  rowf=$(mktemp)
  # shellcheck disable=SC2086 # LOADGEN_ARGS holds several words
  r=$(bin/netbird-loadgen -m "$url" -k "$key" --peers "$n" --server-pid "$pid" --json --row --timeout 20m ${LOADGEN_ARGS:-} 2>"$rowf")
  row "$rowf" "$pid" "$([ -n "${LOADGEN_URL:-}" ] && echo "$LOADGEN_URL" || echo wiremesh)"
  rm -f "$rowf"
  [ "$first" = 1 ] || echo "," >> "$out"
  first=0
  echo "$r" >> "$out"
  if [ -z "${LOADGEN_URL:-}" ]; then kill "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; trap - EXIT; fi
  if [ "${NETBIRD:-}" = 1 ]; then netbird "$n"; fi
done
echo "]" >> "$out"
