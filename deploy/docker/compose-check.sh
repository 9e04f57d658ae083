#!/usr/bin/env bash
# `make compose-check`: the whole compose stack from a clean state, end to end, then everything
# down and the host as it was.
#   engine (a private dockerd if none runs) -> images -> compose up --wait (migrations once) ->
#   compose_check.py (a signed webhook forwarded to the receiver and listed by the dashboard API,
#   a service restarted with events in flight and nothing lost, /metrics of every service saved
#   to deploy/check/metrics/) -> compose down -v -> engine down (host state compared).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${HOOKBAY_DEPLOY_CACHE:-$ROOT/.cache}
PROJECT=hookbay-check
started=$SECONDS
say() { printf '\ncompose-check: %s (%d s)\n' "$*" $((SECONDS - started)); }

engine_started=0
if [ -z "${DOCKER_HOST:-}" ]; then
  [ -f "$CACHE/docker/dockerd.pid" ] && kill -0 "$(cat "$CACHE/docker/dockerd.pid")" 2>/dev/null || engine_started=1
  DOCKER_HOST=$("$HERE/engine.sh" up)
  export DOCKER_HOST
fi
DOCKER_CONFIG=$("$HERE/cli-plugins.sh")
export DOCKER_CONFIG
compose() { docker compose -p "$PROJECT" -f "$ROOT/docker-compose.yml" --profile check "$@"; }

cleanup() {
  local status=$?
  say "bringing everything down"
  if [ $status -ne 0 ]; then compose logs --no-color --tail 40 >&2 || true; fi
  compose --profile jobs down -v --remove-orphans --timeout 40 >&2 || status=1
  if [ $engine_started = 1 ]; then "$HERE/engine.sh" down || status=1; fi
  if [ $status -eq 0 ]; then say "PASSED in $((SECONDS - started)) s"; else say "FAILED"; fi
  exit $status
}
trap cleanup EXIT

say "images"
"$HERE/images.sh"

say "clean state"
compose --profile jobs down -v --remove-orphans >/dev/null 2>&1 || true
HOOKBAY_SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
export HOOKBAY_SECRET_KEY HOOKBAY_RETRY_SCHEDULE=0,1s,2s
export HOOKBAY_INGEST_HOST_PORT=${HOOKBAY_CHECK_INGEST_PORT:-28080} HOOKBAY_DASHBOARD_HOST_PORT=${HOOKBAY_CHECK_DASHBOARD_PORT:-28081}

say "compose up (build, health-checked start order, migrations once)"
compose up -d --wait --wait-timeout 300
compose ps --format 'table {{.Service}}\t{{.Status}}' -a

say "end to end"
python3 "$HERE/compose_check.py" --project "$PROJECT" --compose-file "$ROOT/docker-compose.yml" \
  --ingest "http://127.0.0.1:$HOOKBAY_INGEST_HOST_PORT" --dashboard "http://127.0.0.1:$HOOKBAY_DASHBOARD_HOST_PORT" \
  --metrics-dir "$ROOT/deploy/check/metrics"
