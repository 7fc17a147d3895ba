#!/usr/bin/env bash
# Start a throwaway OpenID Connect provider on loopback: a small Django project (provider/) running
# django-oauth-toolkit's OIDC provider, with an RS256 key generated now, a registered confidential client
# and users whose `groups` claim lists their groups (seed.py). Own port ($OIDC_PORT, 26080), own state.
#   PYTHON              an interpreter with django-oauth-toolkit (the project's .venv: its dev lock has it)
#   OIDC_REDIRECT_URIS  the client's allowed callbacks (default: the test client's and a loopback portal's on
#                       any port, RFC 8252)
# Prints KEY=VALUE lines (also written to $STATE/env): OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET and
# the endpoints (OIDC_AUTHORIZATION_ENDPOINT, OIDC_TOKEN_ENDPOINT, OIDC_USERINFO_ENDPOINT, OIDC_JWKS_ENDPOINT).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${OIDC_STATE_DIR:-/tmp/gpuportal-oidc}
PORT=${OIDC_PORT:-26080}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
export OIDC_STATE_DIR=$STATE
export OIDC_CLIENT_ID=${OIDC_CLIENT_ID:-gpuportal}
export OIDC_CLIENT_SECRET=${OIDC_CLIENT_SECRET:-$(openssl rand -hex 24)}
export OIDC_REDIRECT_URIS=${OIDC_REDIRECT_URIS:-http://testserver/oidc/callback/ http://127.0.0.1/oidc/callback/}

die() { echo "start.sh: $*" >&2; exit 1; }
"$PYTHON" -c "import oauth2_provider" 2>/dev/null || die "$PYTHON has no django-oauth-toolkit (make install)"

OIDC_STATE_DIR=$STATE "$HERE/stop.sh" >/dev/null 2>&1 || true
rm -rf "$STATE"
mkdir -p "$STATE"
openssl genrsa -out "$STATE/rs256.pem" 2048 2>/dev/null
openssl rand -hex 32 >"$STATE/django-secret"

cd "$HERE"
"$PYTHON" manage.py migrate --noinput >"$STATE/migrate.log" 2>&1 || die "migrate: $(tail -5 "$STATE/migrate.log")"
"$PYTHON" seed.py >"$STATE/seed.log" 2>&1 || die "seed: $(tail -5 "$STATE/seed.log")"
"$PYTHON" manage.py runserver "127.0.0.1:$PORT" --noreload >"$STATE/provider.log" 2>&1 &
echo $! >"$STATE/provider.pid"

URL="http://127.0.0.1:$PORT"
for _ in $(seq 1 100); do
    curl -sf "$URL/o/.well-known/openid-configuration" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -sf "$URL/o/.well-known/openid-configuration" >/dev/null || die "provider did not answer: $(tail -5 "$STATE/provider.log")"

{
    echo "OIDC_ISSUER=$URL/o"
    echo "OIDC_CLIENT_ID=$OIDC_CLIENT_ID"
    echo "OIDC_CLIENT_SECRET=$OIDC_CLIENT_SECRET"
    echo "OIDC_AUTHORIZATION_ENDPOINT=$URL/o/authorize/"
    echo "OIDC_TOKEN_ENDPOINT=$URL/o/token/"
    echo "OIDC_USERINFO_ENDPOINT=$URL/o/userinfo/"
    echo "OIDC_JWKS_ENDPOINT=$URL/o/.well-known/jwks.json"
    echo "OIDC_LOGIN_URL=$URL/accounts/login/"
} | tee "$STATE/env"
