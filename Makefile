# Build outputs go to bin/ (never committed).
GO ?= go
LDFLAGS ?= -s -w

.PHONY: build test proto clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird-server ./cmd/netbird-server
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird-mgmt ./management/cmd/netbird-mgmt
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird-signal ./signal/cmd/netbird-signal
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird-relay ./relay/cmd/netbird-relay
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird ./client/cmd/netbird
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird-loadgen ./cmd/netbird-loadgen

test:
	bash scripts/test.sh

proto:
	bash proto/gen.sh

clean:
	rm -rf bin .cache
