#!/usr/bin/env bash
# Regenerates the Go code for proto/*.proto with pinned generator versions.
#   bash proto/gen.sh           write proto/mgmtpb and proto/signalpb
#   bash proto/gen.sh --check   fail if the committed code is not what the generators produce
set -euo pipefail
PROTOC_GEN_GO=v1.36.12       # google.golang.org/protobuf/cmd/protoc-gen-go
PROTOC_GEN_GO_GRPC=v1.6.2    # google.golang.org/grpc/cmd/protoc-gen-go-grpc
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y --no-install-recommends protobuf-compiler" >&2; exit 1; }
bin="$root/.cache/protoc-bin"
mkdir -p "$bin"
[ -x "$bin/protoc-gen-go-$PROTOC_GEN_GO" ] || { GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO" && mv "$bin/protoc-gen-go" "$bin/protoc-gen-go-$PROTOC_GEN_GO"; }
[ -x "$bin/protoc-gen-go-grpc-$PROTOC_GEN_GO_GRPC" ] || { GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC" && mv "$bin/protoc-gen-go-grpc" "$bin/protoc-gen-go-grpc-$PROTOC_GEN_GO_GRPC"; }
out="$root/proto"
if [ "${1:-}" = "--check" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
gen() { # $1 proto file, $2 go package dir
  mkdir -p "$out/$2"
  protoc -I proto -I /usr/include \
    --plugin=protoc-gen-go="$bin/protoc-gen-go-$PROTOC_GEN_GO" \
    --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc-$PROTOC_GEN_GO_GRPC" \
    --go_out="$out/$2" --go_opt=paths=source_relative \
    --go-grpc_out="$out/$2" --go-grpc_opt=paths=source_relative \
    "$1"
}
gen management.proto mgmtpb
gen signal.proto signalpb
gen daemon.proto daemonpb
if [ "${1:-}" = "--check" ]; then
  for d in mgmtpb signalpb daemonpb; do
    diff -r "$out/$d" "$root/proto/$d" || { echo "generated code in proto/$d is stale: run bash proto/gen.sh" >&2; exit 1; }
  done
  echo "generated protobuf code is up to date"
fi
