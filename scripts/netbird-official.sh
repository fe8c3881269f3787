#!/usr/bin/env bash
# Builds NetBird's official client (netbird) and combined server
# (management, signal, relay, STUN) from NetBird's released source, as the
# Go module proxy serves github.com/netbirdio/netbird at $NETBIRD_VERSION,
# for the interop tests (internal/e2e: TestOfficialClient,
# TestJoinNetBirdServer). Nothing of NetBird enters this repository: its
# source and binaries stay under .cache/ (git-ignored). Progress goes to
# stderr; stdout is the environment the tests read, for eval.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
v=${NETBIRD_VERSION:-v0.77.1}
out=$PWD/.cache/netbird-$v
if [ ! -x "$out/netbird" ] || [ ! -x "$out/netbird-server" ]; then
  echo "building NetBird $v (client and combined server) in $out" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && go mod init fetch >/dev/null 2>&1)
  dir=$(cd "$tmp" && go mod download -json "github.com/netbirdio/netbird@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "go mod download gave no source directory for NetBird $v" >&2; exit 1; }
  rm -rf "$out"
  mkdir -p "$out"
  cp -r "$dir" "$out/src"
  chmod -R u+w "$out/src"
  cd "$out/src"
  # go.mod requires the desktop UI toolkit through a fork the proxy does
  # not serve; none of the binaries built here imports it.
  go mod edit -dropreplace github.com/wailsapp/wails/v3 -droprequire github.com/wailsapp/wails/v3
  go build -o "$out/netbird" ./client >&2
  go build -o "$out/netbird-server" ./combined >&2
  cd - >/dev/null
fi
echo "export NB_OFFICIAL_CLIENT=$out/netbird NB_OFFICIAL_SERVER=$out/netbird-server NB_OFFICIAL_SRC=$out/src"
