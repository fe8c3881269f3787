# Build outputs go to bin/ (never committed).
GO ?= go
# VERSION is this project's version (scripts/version.sh): "0.2.0" on the
# v0.2.0 tag, "0.2.0+3.gabc1234.dirty" past it (build metadata, so a build
# past a release compares equal to it, not below it as a pre-release
# would); internal/version's Version plus the commit ("0.2.0+gabc1234")
# when no v* tag is in reach, and that Version alone outside a checkout.
VERSION ?= $(shell sh scripts/version.sh 2>/dev/null)
LDFLAGS ?= -s -w $(if $(VERSION),-X github.com/wiremesh/wiremesh/internal/version.Version=$(VERSION))

NPM ?= npm

.PHONY: build build-go dashboard test proto clean agents version

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

# The agent for every platform GET /install.sh serves, into bin/agents/
# (copy it to the server's --agent-dir, default /usr/share/wiremesh/agents).
AGENT_PLATFORMS ?= linux/amd64 linux/arm64 linux/arm darwin/amd64 darwin/arm64 windows/amd64
agents:
	@mkdir -p bin/agents
	@set -e; for p in $(AGENT_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
	  echo "agent $$os/$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=6 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/agents/netbird-$$os-$$arch$$ext ./client/cmd/netbird; \
	done
	cd bin/agents && sha256sum netbird-* > SHA256SUMS

test:
	bash scripts/test.sh

# For docker build --build-arg VERSION=$(make -s version).
version:
	@echo $(VERSION)

proto:
	bash proto/gen.sh

clean:
	rm -rf bin .cache dashboard/dist
