#!/usr/bin/env bash
# One-command install of a wiremesh server on a host with a public DNS name.
#
#   sudo NB_DOMAIN=vpn.example.com NB_ACME_EMAIL=admin@example.com \
#     infrastructure_files/getting-started.sh
#
# Run from a checkout (or a release tarball) of this repository. Two modes:
#   NB_MODE=compose  docker compose: the server on PostgreSQL with Caddy in
#                    front (Caddy gets the certificate); the default when
#                    `docker compose` works.
#   NB_MODE=binary   the netbird-server binary as a systemd service that
#                    gets its own certificate (--domain); NB_BINARY=PATH
#                    installs that binary instead of building one.
# It checks the ports it will use (80/443 or NB_LISTEN/NB_ACME_HTTP_LISTEN
# on tcp, NB_STUN_PORT or 3478 on udp, Postgres' 5432 in compose mode),
# refuses to start over a v0.1.0 compose deployment whose data has not
# moved (NB_OLD_DEPLOYMENT_MOVED=1 once it has), generates the secrets once
# (kept in NB_PREFIX/etc/wiremesh/secrets.env, 0600, reused on every rerun),
# writes the config, starts the server and prints the dashboard URL and the
# owner's first login. Rerunning upgrades (rebuild, restart) and keeps the
# secrets and the data.
#
# Other settings (environment):
#   NB_ACME_DIRECTORY, NB_ACME_CA_FILE  another ACME CA (Let's Encrypt staging, a private CA)
#   NB_OWNER_EMAIL   the owner created at first start (default admin@NB_DOMAIN)
#   NB_INIT=none     write everything, start nothing, print the command to run
#   NB_PREFIX=DIR    write below DIR instead of / (tests, staging)
#   NB_LISTEN, NB_ACME_HTTP_LISTEN, NB_STUN_PORT  written to the config when set
set -euo pipefail

die() {
	echo "getting-started: $*" >&2
	exit 1
}
say() { echo "==> $*"; }

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${NB_PREFIX:-}
ETC=$PREFIX/etc/wiremesh
CONFIG=$ETC/config.yaml
SECRETS=$ETC/secrets.env
INIT=${NB_INIT:-}

# --- inputs -----------------------------------------------------------------

ask() { # ask VAR PROMPT: read VAR from the terminal when unset
	local var=$1 prompt=$2
	if [ -z "${!var:-}" ] && [ -t 0 ]; then
		read -r -p "$prompt" "${var?}"
	fi
}
ask NB_DOMAIN "DNS name of this server (e.g. vpn.example.com): "
[ -n "${NB_DOMAIN:-}" ] || die "set NB_DOMAIN to the DNS name clients reach this server at (its A/AAAA record must point here)"
DOMAIN=$(printf '%s' "$NB_DOMAIN" | tr '[:upper:]' '[:lower:]')
[[ $DOMAIN =~ ^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$ ]] ||
	die "NB_DOMAIN=$NB_DOMAIN is not a DNS name (a certificate needs one; an IP address will not do)"
ask NB_ACME_EMAIL "E-mail for Let's Encrypt expiry notices (optional, Enter to skip): "
EMAIL=${NB_ACME_EMAIL:-}
if [ -n "$EMAIL" ] && ! [[ $EMAIL =~ ^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+$ ]]; then
	die "NB_ACME_EMAIL=$EMAIL is not an e-mail address"
fi
OWNER=${NB_OWNER_EMAIL:-admin@$DOMAIN}
[[ $OWNER =~ ^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+$ ]] || die "NB_OWNER_EMAIL=$OWNER is not an e-mail address"
ACME_DIRECTORY=${NB_ACME_DIRECTORY:-}
if [ -n "$ACME_DIRECTORY" ] && ! [[ $ACME_DIRECTORY =~ ^https://[^[:space:]\"\\]+$ ]]; then
	die "NB_ACME_DIRECTORY=$ACME_DIRECTORY is not an https URL"
fi
ACME_CA_FILE=${NB_ACME_CA_FILE:-}
if [ -n "$ACME_CA_FILE" ]; then
	[ -r "$ACME_CA_FILE" ] || die "NB_ACME_CA_FILE=$ACME_CA_FILE is not a readable file"
	ACME_CA_FILE=$(cd "$(dirname "$ACME_CA_FILE")" && pwd)/$(basename "$ACME_CA_FILE")
	[[ $ACME_CA_FILE != *[\"\\$'\n']* ]] || die "NB_ACME_CA_FILE: the path may not hold quotes, backslashes or newlines"
fi
for v in NB_LISTEN NB_ACME_HTTP_LISTEN; do
	if [ -n "${!v:-}" ] && ! [[ ${!v} =~ ^[][A-Za-z0-9.:-]*$ ]]; then
		die "$v=${!v} is not a host:port address"
	fi
done
if [ -n "${NB_STUN_PORT:-}" ] && ! [[ $NB_STUN_PORT =~ ^[0-9]{1,5}$ ]]; then
	die "NB_STUN_PORT=$NB_STUN_PORT is not a port number"
fi

MODE=${NB_MODE:-}
if [ -z "$MODE" ]; then
	if command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
		MODE=compose
	else
		MODE=binary
	fi
fi
case "$MODE" in
binary) INIT=${INIT:-systemd} ;;
compose) INIT=${INIT:-docker} ;;
*) die "NB_MODE=$MODE: want binary or compose" ;;
esac
case "$INIT" in
systemd | docker | none) ;;
*) die "NB_INIT=$INIT: want none (or leave it unset)" ;;
esac
if [ "$MODE" = binary ] && [ -n "${NB_BINARY:-}" ] && ! [ -x "$NB_BINARY" ]; then
	die "NB_BINARY=$NB_BINARY is not an executable file"
fi
if [ "$MODE" = compose ]; then
	# Caddy gets the certificate and owns 80/443; the server stays on
	# loopback behind it: these settings of the binary mode would be
	# ignored, so say so instead.
	[ -z "$ACME_CA_FILE" ] || die "NB_ACME_CA_FILE is for NB_MODE=binary (the server's own ACME client); in compose mode Caddy talks to the CA: use NB_MODE=binary for a private CA"
	[ -z "${NB_LISTEN:-}" ] || die "NB_LISTEN is for NB_MODE=binary; in compose mode Caddy listens on 80/443 and the server on 127.0.0.1:33073"
	[ -z "${NB_ACME_HTTP_LISTEN+x}" ] || die "NB_ACME_HTTP_LISTEN is for NB_MODE=binary; in compose mode Caddy answers the ACME challenges on 80/443"
fi
if [ -n "${NB_POSTGRES_PORT:-}" ] && ! [[ $NB_POSTGRES_PORT =~ ^[0-9]{1,5}$ ]]; then
	die "NB_POSTGRES_PORT=$NB_POSTGRES_PORT is not a port number"
fi

# --- prerequisites ----------------------------------------------------------

if [ "$INIT" != none ]; then
	[ "$(id -u)" -eq 0 ] || die "run as root (sudo): it installs a service and binds ports 80 and 443"
	if [ "$MODE" = compose ]; then
		command -v docker >/dev/null 2>&1 || die "docker is not installed (https://docs.docker.com/engine/install/), or use NB_MODE=binary"
		docker compose version >/dev/null 2>&1 || die "the docker compose plugin is missing (apt install docker-compose-plugin), or use NB_MODE=binary"
	else
		command -v systemctl >/dev/null 2>&1 || die "systemd is required for NB_MODE=binary (or NB_INIT=none to only write the files)"
	fi
fi

# port_holder PROTO PORT: prints who listens there, empty when free.
port_holder() {
	command -v ss >/dev/null 2>&1 || return 0
	local flag=-Hltnp
	[ "$1" = udp ] && flag=-Hlunp
	local lines
	lines=$(ss "$flag" "sport = :$2" 2>/dev/null || true)
	[ -n "$lines" ] || return 0
	if [[ $lines == *users:* ]]; then
		printf '%s\n' "$lines" | sed -n 's/.*users:(("\([^"]*\)".*/\1/p' | sort -u | tr '\n' ' '
	else
		echo "a process of another user (run as root to see which)"
	fi
}
# port_of ADDR: the port of host:port (or :port).
port_of() { printf '%s' "${1##*:}"; }
# needed_ports: PROTO/PORT the server (and Caddy, Postgres) will bind.
needed_ports() {
	local stun=${NB_STUN_PORT:-3478}
	if [ "$MODE" = compose ]; then
		echo tcp/80 tcp/443 tcp/33073 "tcp/${NB_POSTGRES_PORT:-5432}"
	else
		echo "tcp/$(port_of "${NB_LISTEN:-:443}")"
		# NB_ACME_HTTP_LISTEN= (set, empty) turns the HTTP listener off.
		if [ -z "${NB_ACME_HTTP_LISTEN+x}" ]; then echo tcp/80; elif [ -n "$NB_ACME_HTTP_LISTEN" ]; then echo "tcp/$(port_of "$NB_ACME_HTTP_LISTEN")"; fi
	fi
	[ "$stun" = 0 ] || echo "udp/$stun"
}
check_ports() {
	local busy=() spec proto port who
	for spec in $(needed_ports); do
		proto=${spec%/*} port=${spec#*/}
		who=$(port_holder "$proto" "$port")
		who=${who% }
		case "$who" in
		"" | netbird-server | caddy | docker-proxy | postgres) ;; # free, or ours from an earlier run
		*) busy+=("$port/$proto is in use by $who") ;;
		esac
	done
	if [ ${#busy[@]} -gt 0 ]; then
		printf 'getting-started: %s\n' "${busy[@]}" >&2
		if [ "$INIT" = none ]; then
			echo "getting-started: (NB_INIT=none: continuing; free them before starting the server)" >&2
		else
			die "free these ports (HTTPS and certificates on tcp, STUN/TURN on udp, in compose mode Postgres on 127.0.0.1), or move them with NB_LISTEN, NB_ACME_HTTP_LISTEN, NB_STUN_PORT, NB_POSTGRES_PORT"
		fi
	fi
}
check_ports

# --- a v0.1.0 compose deployment ---------------------------------------------

# v0.1.0's docker-compose.yml ran one service `server` on SQLite in the
# volume <project>_netbird-server (the project named after the checkout's
# directory). This compose file runs `netbird-server` on Postgres: started
# over the old one it would remove the old container (--remove-orphans) and
# begin with an empty store. Refuse until the data has moved.
check_old_compose() {
	[ "$MODE" = compose ] && [ "$INIT" = docker ] || return 0
	[ -z "${NB_OLD_DEPLOYMENT_MOVED:-}" ] || return 0
	# Once the new Postgres volume exists, this layout ran before.
	! docker volume inspect wiremesh_postgres >/dev/null 2>&1 || return 0
	local old container
	old=$(basename "$SRC" | tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9_-')
	container=$(docker ps -aq --filter "label=com.docker.compose.service=server" --filter "label=com.docker.compose.project.working_dir=$SRC" 2>/dev/null | head -n 1)
	if [ -z "$container" ] && ! docker volume inspect "${old}_netbird-server" >/dev/null 2>&1; then
		return 0
	fi
	old_compose_message "$old" >&2
	exit 1
}
old_compose_message() {
	local old=$1
	cat <<MSG
getting-started: a v0.1.0 deployment of this checkout exists (service "server",
volume ${old}_netbird-server, SQLite). This version runs on Postgres and would start
with an empty store. Move the account first (docs/operations.md, "Upgrading from 0.1.0"):
  docker stop \$(docker ps -q --filter label=com.docker.compose.project=$old --filter label=com.docker.compose.service=server)
  docker run --rm -u 0 -v ${old}_netbird-server:/var/lib/netbird-server --entrypoint netbird-server \\
    ${old}-server admin --datadir /var/lib/netbird-server export --out /var/lib/netbird-server/account.json
then follow the document to import it into Postgres, and rerun with NB_OLD_DEPLOYMENT_MOVED=1.
To start empty instead (the old data stays in its volume): NB_OLD_DEPLOYMENT_MOVED=1 $0
MSG
}
check_old_compose

# --- secrets (generated once, reused) ---------------------------------------

mkdir -p "$ETC"
umask 077
gen() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
secret() { # secret NAME: the value in secrets.env, generated when missing
	local v=""
	[ -f "$SECRETS" ] && v=$(sed -n "s/^$1=//p" "$SECRETS" | tail -n 1)
	[ -n "$v" ] || v=$(gen)
	printf '%s' "$v"
}
RELAY_SECRET=$(secret NB_RELAY_AUTH_SECRET)
TURN_SECRET=$(secret NB_TURN_SECRET)
PG_PASSWORD=$(secret POSTGRES_PASSWORD)
{
	echo "# wiremesh secrets, written by getting-started.sh; kept across reruns. Mode 0600."
	echo "NB_RELAY_AUTH_SECRET=$RELAY_SECRET"
	echo "NB_TURN_SECRET=$TURN_SECRET"
	echo "POSTGRES_PASSWORD=$PG_PASSWORD"
	if [ "$MODE" = compose ]; then
		echo "NB_STORE_ENGINE_POSTGRES_DSN=postgres://netbird:$PG_PASSWORD@127.0.0.1:${NB_POSTGRES_PORT:-5432}/netbird?sslmode=disable"
	fi
} >"$SECRETS.new"
chmod 0600 "$SECRETS.new"
mv -f "$SECRETS.new" "$SECRETS"
umask 022

# --- config -----------------------------------------------------------------

# The config file's keys are netbird-server's long flag names; the
# environment (NB_*) and the command line override it.
write_config() {
	echo "# wiremesh server settings, written by getting-started.sh (rerun it to change NB_DOMAIN)."
	echo "# Keys are netbird-server's flag names: netbird-server --help"
	if [ "$MODE" = compose ]; then
		echo "# Caddy terminates TLS for $DOMAIN and proxies to this server on loopback."
		echo "public-url: \"https://$DOMAIN\""
		echo "listen: \"127.0.0.1:33073\""
		echo "stun-listen: \":${NB_STUN_PORT:-3478}\""
		echo "store: postgres"
		echo "trusted-proxies: [\"127.0.0.1/32\", \"::1/128\"]"
		echo "datadir: /var/lib/netbird-server"
	else
		echo "domain: \"$DOMAIN\""
		[ -z "$EMAIL" ] || echo "acme-email: \"$EMAIL\""
		[ -z "$ACME_DIRECTORY" ] || echo "acme-directory: \"$ACME_DIRECTORY\""
		[ -z "$ACME_CA_FILE" ] || echo "acme-ca-file: \"$ACME_CA_FILE\""
		[ -z "${NB_LISTEN:-}" ] || echo "listen: \"$NB_LISTEN\""
		[ -z "${NB_ACME_HTTP_LISTEN+x}" ] || echo "acme-http-listen: \"${NB_ACME_HTTP_LISTEN}\""
		[ -z "${NB_STUN_PORT:-}" ] || echo "stun-port: $NB_STUN_PORT"
		echo "datadir: \"$PREFIX/var/lib/netbird-server\""
		echo "agent-dir: \"$PREFIX/usr/share/wiremesh/agents\""
	fi
	echo "owner-email: \"$OWNER\""
}
write_config >"$CONFIG.new"
mv -f "$CONFIG.new" "$CONFIG"
say "wrote $CONFIG and $SECRETS"

# --- binary install ---------------------------------------------------------

install_binary() {
	local bindir=$PREFIX/usr/local/bin unit=$PREFIX/etc/systemd/system/netbird-server.service
	mkdir -p "$bindir" "$(dirname "$unit")" "$PREFIX/usr/share/wiremesh/agents"
	if [ -n "${NB_BINARY:-}" ]; then
		[ -x "$NB_BINARY" ] || die "NB_BINARY=$NB_BINARY is not an executable file"
		install -m 0755 "$NB_BINARY" "$bindir/netbird-server.new"
	elif command -v go >/dev/null 2>&1 && [ -f "$SRC/go.mod" ]; then
		local tags=""
		[ -f "$SRC/dashboard/dist/index.html" ] && tags=dashboard
		say "building netbird-server from $SRC${tags:+ (with the dashboard)}"
		(cd "$SRC" && CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "-s -w${VERSION:+ -X github.com/wiremesh/wiremesh/internal/version.Version=$VERSION}" \
			-o "$bindir/netbird-server.new" ./cmd/netbird-server) ||
			die "go build failed (or set NB_BINARY to a built netbird-server)"
	else
		die "no server binary: set NB_BINARY=/path/to/netbird-server (built with \`make build\`) or install Go to build it here"
	fi
	mv -f "$bindir/netbird-server.new" "$bindir/netbird-server"
	if [ -d "$SRC/bin/agents" ]; then
		cp -f "$SRC"/bin/agents/netbird-* "$PREFIX/usr/share/wiremesh/agents/" 2>/dev/null || true
	fi
	# The unit names /usr/local/bin, /etc/wiremesh: moved below PREFIX when set.
	sed -e "s#/usr/local/bin/#$bindir/#g" -e "s#/etc/wiremesh/#$ETC/#g" \
		"$SRC/infrastructure_files/netbird-server.service" >"$unit"
	say "installed $bindir/netbird-server and $unit"
	START_CMD="set -a; . $SECRETS; set +a; $bindir/netbird-server --config $CONFIG"
	if [ "$INIT" = systemd ]; then
		systemctl daemon-reload
		systemctl enable netbird-server >/dev/null
		systemctl restart netbird-server
	fi
}

# --- compose install --------------------------------------------------------

install_compose() {
	# Caddy refuses an empty `email` or `acme_ca`: drop the lines not set.
	cp "$SRC/infrastructure_files/Caddyfile" "$ETC/Caddyfile.new"
	[ -n "$EMAIL" ] || sed -i '/^[[:space:]]*email {/d' "$ETC/Caddyfile.new"
	[ -n "$ACME_DIRECTORY" ] || sed -i '/^[[:space:]]*acme_ca {/d' "$ETC/Caddyfile.new"
	mv -f "$ETC/Caddyfile.new" "$ETC/Caddyfile"
	# The agents /install.sh serves (make agents), mounted into the server.
	mkdir -p "$ETC/agents"
	if [ -d "$SRC/bin/agents" ]; then cp -f "$SRC"/bin/agents/netbird-* "$ETC/agents/" 2>/dev/null || true; fi
	{
		echo "# Read by docker compose --env-file (no secrets: those are in secrets.env)."
		echo "NB_DOMAIN=$DOMAIN"
		echo "NB_ETC=$ETC"
		echo "NB_ACME_EMAIL=$EMAIL"
		echo "NB_ACME_DIRECTORY=$ACME_DIRECTORY"
		echo "NB_VERSION=$VERSION"
	} >"$ETC/compose.env"
	COMPOSE=(docker compose --project-directory "$SRC" -f "$SRC/docker-compose.yml" --env-file "$ETC/compose.env")
	START_CMD="${COMPOSE[*]} up -d --build"
	say "wrote $ETC/Caddyfile and $ETC/compose.env"
	if [ "$INIT" = docker ]; then
		# An upgrade: newer Postgres/Caddy images of the same tags, the
		# server rebuilt from this checkout; the volumes keep the data.
		"${COMPOSE[@]}" pull postgres caddy
		"${COMPOSE[@]}" build --pull
		"${COMPOSE[@]}" up -d --remove-orphans
	fi
}

START_CMD=""
# The version built in: the checkout's (empty: the source's default).
VERSION=$(sh "$SRC/scripts/version.sh" "$SRC" 2>/dev/null || true)
[[ $VERSION =~ ^[0-9A-Za-z.+-]*$ ]] || VERSION=""
if [ "$MODE" = binary ]; then install_binary; else install_compose; fi

# --- first login ------------------------------------------------------------

server_logs() {
	if [ "$MODE" = compose ]; then "${COMPOSE[@]}" logs --no-color netbird-server 2>/dev/null; else journalctl -u netbird-server --no-pager -o cat 2>/dev/null; fi
}

echo
if [ "$INIT" = none ]; then
	say "files written; nothing started (NB_INIT=none). Start the server with:"
	echo "  $START_CMD"
	echo "Its output shows the owner's one-time initial password (\"Owner created: ...\"); the data directory's"
	echo "initial-password file keeps it until the owner logs in or changes it."
	exit 0
fi

say "waiting for https://$DOMAIN to answer"
owner=""
for _ in $(seq 1 60); do
	owner=$(server_logs | grep -m1 -o 'Owner created:.*' || true)
	[ -z "$owner" ] || break
	if command -v curl >/dev/null 2>&1 && curl -fsS -o /dev/null "https://$DOMAIN/healthz" 2>/dev/null; then break; fi
	sleep 2
done
echo
echo "Dashboard:  https://$DOMAIN/"
if [ -n "$owner" ]; then
	echo "First login: $owner"
elif server_logs | grep -q 'No owner yet'; then
	echo "First login: create the owner at https://$DOMAIN/ (POST /api/setup)"
else
	echo "First login: the owner exists already (an earlier run printed the initial password once)."
fi
echo "Agents:     curl -fsSL https://$DOMAIN/install.sh | sh    then    netbird up --management-url https://$DOMAIN"
