# Build outputs go to bin/ (never committed).
GO ?= go
LDFLAGS ?= -s -w

NPM ?= npm

.PHONY: build build-go dashboard test proto clean

# The servers embed the dashboard (dashboard/dist, built with Node.js and
# npm): `make build-go` builds them without it (they then serve a page
# saying how to build it).
build: dashboard
	$(MAKE) build-go TAGS=dashboard

dashboard:
	cd dashboard && $(NPM) ci --no-audit --no-fund && $(NPM) run build

build-go:
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o bin/netbird-server ./cmd/netbird-server
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o bin/netbird-mgmt ./management/cmd/netbird-mgmt
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird-signal ./signal/cmd/netbird-signal
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird-relay ./relay/cmd/netbird-relay
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird ./client/cmd/netbird
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/netbird-loadgen ./cmd/netbird-loadgen

test:
	bash scripts/test.sh

proto:
	bash proto/gen.sh

clean:
	rm -rf bin .cache dashboard/dist
