#!/usr/bin/env bash
# Runs a command with DOCKER_HOST set: the engine already running, or a private dockerd started
# for it and stopped afterwards (engine.sh; the host left as it was).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${DOCKER_HOST:-}" ]; then exec "$@"; fi
CACHE=${HOOKBAY_DEPLOY_CACHE:-$(cd "$HERE/../.." && pwd)/.cache}
started=1
[ -f "$CACHE/docker/dockerd.pid" ] && kill -0 "$(cat "$CACHE/docker/dockerd.pid")" 2>/dev/null && started=0
DOCKER_HOST=$("$HERE/engine.sh" up)
export DOCKER_HOST
status=0
"$@" || status=$?
if [ $started = 1 ]; then "$HERE/engine.sh" down || status=1; fi
exit $status
