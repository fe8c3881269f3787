#!/usr/bin/env bash
# Regenerates the upgrade test's fixture, management/server/testdata/upgrade/<release>/:
# a data directory written by a previous tagged release. The release's source comes
# from `git archive` (the working tree is not touched), its netbird-server is built and
# run on a fresh data directory by management/server/testdata/upgrade/gen, which sets it
# up through the API and registers peers.
#
#   bash scripts/upgrade-fixture.sh [v0.1.0]
set -euo pipefail

release=${1:-v0.1.0}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/management/server/testdata/upgrade/$release"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git -C "$root" archive "$release" | tar -x -C "$work"
mkdir -p "$work/cmd/upgrade-fixture-gen"
cp "$root/management/server/testdata/upgrade/gen/main.go" "$work/cmd/upgrade-fixture-gen/main.go"
(
	cd "$work"
	go build -ldflags "-X github.com/wiremesh/wiremesh/internal/version.Version=${release#v}" -o "$work/netbird-server" ./cmd/netbird-server
	go run ./cmd/upgrade-fixture-gen -server "$work/netbird-server" -out "$out" -release "$release"
)
echo "wrote $out"
