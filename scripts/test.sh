#!/usr/bin/env bash
# The project's full test run (what CI runs through .ci/run): installs what
# the tests need, checks generated code, vets, and runs every test with -race.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
export PATH=$PATH:/usr/local/go/bin
# Store tests must run on Postgres too, not skip it.
export WIREMESH_REQUIRE_POSTGRES=1
export WIREMESH_REQUIRE_IPERF3=1
echo "== generated protobuf code"
bash proto/gen.sh --check
echo "== gofmt"
unformatted=$(git ls-files -z '*.go' | grep -zv '\.pb\.go$' | xargs -0 gofmt -l 2>/dev/null || true)
[ -z "$unformatted" ] || { echo "not gofmt-formatted:"; echo "$unformatted"; exit 1; }
echo "== dashboard (Node.js and npm are the machine's own)"
# Node.js 20.19 or later; the build goes into the servers (-tags dashboard,
# see internal/proctest) and TestDashboard drives it in Chromium.
# shellcheck disable=SC2016 # JavaScript, not shell
node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<19)) { console.error(`Node.js ${process.versions.node}: the dashboard needs 20.19 or later`); process.exit(1) }'
(cd dashboard && npm ci --no-audit --no-fund && npm run gen:check && npm run typecheck && npm test && npm run build)
export WIREMESH_REQUIRE_DASHBOARD=1
echo "== go vet"
go vet ./...
go vet -tags dashboard ./dashboard/ ./cmd/netbird-server ./management/cmd/netbird-mgmt
echo "== cross-compile the agent and servers"
for target in linux/amd64 linux/arm64 darwin/arm64 windows/amd64; do
  GOOS=${target%/*} GOARCH=${target#*/} go build -o /dev/null ./client/cmd/netbird
  GOOS=${target%/*} GOARCH=${target#*/} go build ./client/...
done
GOOS=linux GOARCH=arm64 go build -o /dev/null ./cmd/netbird-server ./relay/cmd/netbird-relay ./management/cmd/netbird-mgmt ./signal/cmd/netbird-signal
echo "== NetBird's official client and server (for the interop tests)"
if nb=$(bash scripts/netbird-official.sh); then
  eval "$nb"
else
  echo "WARNING: NetBird's client and server could not be built (see above): TestOfficialClient, TestSSHOfficial and TestJoinNetBirdServer will skip"
fi
echo "== go test -race"
go test -race -timeout 20m -count=1 ./...
go test -race -count=1 -tags dashboard ./dashboard/   # the embedded build itself
echo "== fuzz (short runs of every fuzz target)"
# shellcheck disable=SC2013 # paths and Fuzz names hold no spaces
for target in $(grep -rl --exclude-dir=.cache --exclude-dir=node_modules --include='*_test.go' '^func Fuzz' . | sort); do
  pkg=./$(dirname "$target")
  for f in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$target" | sed 's/^func //'); do
    # Go's fuzz coordinator sometimes reports "context deadline exceeded"
    # when a worker is slow to stop at the end of -fuzztime on a loaded
    # machine; that is not a finding (a finding prints "Failing input"), so
    # such a run is repeated once.
    if ! out=$(go test -run '^$' -fuzz "^$f\$" -fuzztime 5s "$pkg" 2>&1); then
      echo "$out"
      if echo "$out" | grep -q "context deadline exceeded" && ! echo "$out" | grep -q "Failing input"; then
        echo "== $f: fuzz engine timeout at shutdown, running it again"
        go test -run '^$' -fuzz "^$f\$" -fuzztime 5s "$pkg"
      else
        exit 1
      fi
    else
      echo "$out" | tail -1
    fi
  done
done
echo "== all tests passed"
