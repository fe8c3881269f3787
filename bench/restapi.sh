#!/usr/bin/env bash
# REST API benchmark: seeds one account of $PEERS peers (default 10000;
# a tenth as many groups and policies, 100 users and setup keys, one event
# per peer) into our server on SQLite and on Postgres and into NetBird's
# own management server (built by scripts/netbird-official.sh, the
# baseline), then times the list endpoints over HTTP with a personal access
# token: $CALLS calls each (default 50). Prints the table and writes
# bench/restapi.json (not committed). PEERS may list sizes: PEERS="500 10000".
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash scripts/netbird-official.sh)"
WIREMESH_BENCH=1 WIREMESH_BENCH_REST_PEERS="${PEERS:-10000}" WIREMESH_BENCH_REST_CALLS="${CALLS:-50}" \
  go test -count=1 -timeout 60m -v -run 'TestBenchRESTAPI' ./bench/restapi/ 2>&1 | grep -v '^=== ' | grep -E -v '^\s+restapi_test.go:[0-9]+: $'
