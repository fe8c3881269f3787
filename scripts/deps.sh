#!/usr/bin/env bash
# Installs the system packages tests need (Debian), once. Safe to re-run.
set -euo pipefail
need=()
command -v protoc >/dev/null || need+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/timestamp.proto ] || need+=(libprotobuf-dev)
# network-namespace tests: routers with NAT, ping through the tunnels
command -v ip >/dev/null || need+=(iproute2)
command -v iptables >/dev/null || need+=(iptables)
command -v ping >/dev/null || need+=(iputils-ping)
# fault tests flush a NAT router's connection table
command -v conntrack >/dev/null || need+=(conntrack)
# the routing tests' TCP streams through a routing peer (internal/e2e TestRoutesHA)
command -v iperf3 >/dev/null || need+=(iperf3)
# internal/e2e TestSSH: plain OpenSSH (ssh, sftp) through `netbird ssh-config`'s Host blocks
command -v ssh >/dev/null || need+=(openssh-client)
# store tests run a private PostgreSQL server (internal/pgtest)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v runuser >/dev/null || need+=(util-linux)
# the dashboard's browser tests (dashboard/e2e/run.mjs, internal/e2e TestDashboard)
[ -x /usr/bin/chromium ] || need+=(chromium)
# client/hostdns TestResolvedReal runs systemd-resolved inside a namespace with a
# private bus: the package is downloaded and extracted into .cache, never
# installed (installing it would take over the host's /etc/resolv.conf).
command -v dbus-daemon >/dev/null || need+=(dbus)
# internal/e2e DNS tests query the agents' resolvers with dig
command -v dig >/dev/null || need+=(bind9-dnsutils)
# every shell script is checked (internal/agentinstall, infrastructure_files tests)
command -v shellcheck >/dev/null || need+=(shellcheck)
# docs/operations.md's nginx and Caddy configurations run in front of a server
# (management/server TestNginxSnippet, TestCaddySnippet)
# (their packages' own services, started where systemd runs, would hold port 80: stopped below)
services=()
[ -x /usr/sbin/nginx ] || { need+=(nginx-light); services+=(nginx); }
command -v caddy >/dev/null || { need+=(caddy); services+=(caddy); }
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then echo "need root to install: ${need[*]}" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  if [ ${#services[@]} -gt 0 ] && [ -d /run/systemd/system ]; then
    systemctl disable --now "${services[@]}" >/dev/null 2>&1 || true
  fi
fi
root=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$root/.cache/resolved/root/lib/systemd/systemd-resolved" ]; then
  mkdir -p "$root/.cache/resolved"
  (cd "$root/.cache/resolved" && apt-get download systemd-resolved >/dev/null 2>&1 && dpkg -x systemd-resolved_*.deb root) ||
    echo "systemd-resolved not extracted: client/hostdns TestResolvedReal will skip" >&2
fi
# ACME tests (internal/testacme: cmd/netbird-server TestACME, internal/acmecert) run a
# real ACME CA, letsencrypt/pebble, with pebble-challtestsrv as its DNS server.
if [ ! -x "$root/.cache/bin/pebble" ] || [ ! -x "$root/.cache/bin/pebble-challtestsrv" ]; then
  GOBIN="$root/.cache/bin" go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3 \
    github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv@v2.10.3
fi
