#!/usr/bin/env bash
# Dashboard benchmark (issue 19's limits): the first page's gzipped bundle,
# a cold load to a usable Peers page with 1,000 peers on loopback, and
# filtering a 5,000-peer list in the browser. Builds the app and a
# netbird-server embedding it, seeds the peers with the Go seeder of
# bench/restapi (TestSeedPeers), and prints each figure beside its limit.
# Needs Node.js, npm, Go and Debian's chromium. See dashboard/bench/run.mjs.
set -euo pipefail
cd "$(dirname "$0")/../dashboard"
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run bench
