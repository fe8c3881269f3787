#!/usr/bin/env bash
# Runs the benchmarks (root; builds everything; installs iperf3) and prints
# the report, also written to bench/last-report.txt (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
command -v iperf3 >/dev/null || { apt-get update -qq; apt-get install -y -qq --no-install-recommends iperf3 >/dev/null; }
rm -f bench/last-report.txt
WIREMESH_BENCH=1 WIREMESH_BENCH_REPORT="$PWD/bench/last-report.txt" go test -count=1 -timeout 15m -v -run 'TestBench' ./bench/ 2>&1 | grep -v 'No Permission' | tail -40
echo "---- report"
cat bench/last-report.txt
