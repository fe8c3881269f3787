#!/bin/sh
# Writes /dashboard-config.json from the environment at container start
# (run by the nginx image's entrypoint). Without WIREMESH_ISSUER the file
# is left as mounted.
set -eu
out=/usr/share/nginx/html/dashboard-config.json
if [ -z "${WIREMESH_ISSUER:-}" ]; then
  [ -f "$out" ] || echo "dashboard: no $out: set WIREMESH_ISSUER (and WIREMESH_CLIENT_ID, WIREMESH_API_URL) or mount the file" >&2
  exit 0
fi
client=${WIREMESH_CLIENT_ID:-netbird-dashboard}
audience=${WIREMESH_AUDIENCE:-$client}
for v in "$WIREMESH_ISSUER" "$client" "$audience" "${WIREMESH_API_URL:-}" "${WIREMESH_SCOPE:-}"; do
  case $v in *'"'* | *\\*) echo "dashboard: quotes and backslashes are not allowed in WIREMESH_* values" >&2; exit 1 ;; esac
done
json="{\"issuer\":\"$WIREMESH_ISSUER\",\"client_id\":\"$client\",\"audience\":\"$audience\""
[ -z "${WIREMESH_API_URL:-}" ] || json="$json,\"api_url\":\"$WIREMESH_API_URL\""
[ -z "${WIREMESH_SCOPE:-}" ] || json="$json,\"scope\":\"$WIREMESH_SCOPE\""
printf '%s}\n' "$json" > "$out"
echo "dashboard: $out: $(cat "$out")"
