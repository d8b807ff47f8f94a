#!/usr/bin/env bash
# Property-based API testing of `canopy serve` against its own OpenAPI
# document (issue 15): schemathesis generates requests from
# /openapi.json, valid and invalid, and the run fails on any 5xx, any
# response that violates the document's schemas or status codes, or a
# wrong content type. Bounded: a fixed number of examples per operation
# and a time cap, a few minutes on 2 cores.
#
# Usage: .ci/schemathesis.sh [path/to/canopy]   (default target/debug/canopy)
# Installs schemathesis into target/ci-venv (PyPI) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$(realpath "${1:-$ROOT/target/debug/canopy}")
VENV=${SCHEMATHESIS_VENV:-$ROOT/target/ci-venv}
SCHEMATHESIS_VERSION=4.32.5
MAX_EXAMPLES=${SCHEMATHESIS_MAX_EXAMPLES:-40}
MAX_TIME=${SCHEMATHESIS_MAX_TIME:-150}

if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
    echo "installing schemathesis $SCHEMATHESIS_VERSION into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

WORK=$(mktemp -d)
SERVE_PID=
cleanup() {
    if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# A small git repository for the service to serve.
mkdir -p "$WORK/repos"
cp -r "$ROOT/tests/fixtures/python" "$WORK/repos/app"
git -C "$WORK/repos/app" init -q
git -C "$WORK/repos/app" -c user.name=ci -c user.email=ci@example.com add -A
git -C "$WORK/repos/app" -c user.name=ci -c user.email=ci@example.com commit -qm fixture

(cd "$WORK/repos" && exec "$BIN" serve --bind 127.0.0.1:0 --data-dir "$WORK/data" --request-timeout-secs 20) \
    2>"$WORK/serve.log" &
SERVE_PID=$!
URL=
for _ in $(seq 1 200); do
    URL=$(grep -o 'listening on http://[0-9.:]*' "$WORK/serve.log" | head -1 | sed 's/listening on //') || true
    [ -n "$URL" ] && break
    sleep 0.05
done
if [ -z "$URL" ]; then
    echo "canopy serve did not start:" >&2
    cat "$WORK/serve.log" >&2
    exit 1
fi
echo "canopy serve at $URL"
# The token the service generated on its first start (no --token given).
AUTH="Authorization: Bearer $(cat "$WORK/data/token")"
curl -fsS -X POST "$URL/repos/add" -H 'content-type: application/json' -H "$AUTH" \
    -d "{\"path\": \"$WORK/repos/app\"}" >/dev/null
curl -fsS -X POST "$URL/reindex" -H 'content-type: application/json' -H "$AUTH" \
    -d '{"repo": "app"}' >/dev/null || true

status=0
# Through a small runner that guards against a CPython 3.11 bug in the
# tool itself (see .ci/schemathesis_main.py); checks are unchanged.
"$VENV/bin/python" "$ROOT/.ci/schemathesis_main.py" --config-file "$ROOT/.ci/schemathesis.toml" run "$URL/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$MAX_EXAMPLES" \
    --max-time "$MAX_TIME" \
    --workers 2 \
    --request-timeout 75 \
    --seed 15 \
    --header "$AUTH" \
    --no-color || status=$?
if ! kill -0 "$SERVE_PID" 2>/dev/null; then
    echo "canopy serve died during the run:" >&2
    tail -50 "$WORK/serve.log" >&2
    exit 1
fi
if grep -q "panicked" "$WORK/serve.log"; then
    echo "canopy serve panicked:" >&2
    grep -A5 "panicked" "$WORK/serve.log" >&2
    exit 1
fi
exit $status
