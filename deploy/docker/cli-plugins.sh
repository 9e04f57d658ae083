#!/usr/bin/env bash
# Builds the Docker CLI plugins compose needs from pinned Go modules into
# $HOOKBAY_DEPLOY_CACHE/docker/config/cli-plugins (use with DOCKER_CONFIG=$HOOKBAY_DEPLOY_CACHE/docker/config,
# which keeps the host's ~/.docker untouched). Idempotent; prints the DOCKER_CONFIG directory.
#   compose v5 (Debian's docker-compose 1.29 has no `pull_policy: build` nor `--wait`)
#   buildx (compose builds through it), with its version set: compose refuses an unversioned one
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${HOOKBAY_DEPLOY_CACHE:-$ROOT/.cache}
COMPOSE_VERSION=v5.0.2
BUILDX_VERSION=v0.38.2
CONFIG="$CACHE/docker/config"
PLUGINS="$CONFIG/cli-plugins"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$PLUGINS"
build() { # name version module ldflags
  local name=$1 version=$2 module=$3 ldflags=$4 gobin="$CACHE/docker/gobin-$1"
  [ -x "$PLUGINS/docker-$name" ] && [ -f "$PLUGINS/.$name-$version" ] && return 0
  printf 'cli-plugins: building docker-%s %s (once, a few minutes)\n' "$name" "$version" >&2
  rm -rf "$gobin" && mkdir -p "$gobin"
  GOBIN="$gobin" go install -trimpath -ldflags "-s -w $ldflags" "$module@$version" >&2
  mv "$gobin"/* "$PLUGINS/docker-$name" && rm -rf "$gobin" "$PLUGINS/.$name-"*
  touch "$PLUGINS/.$name-$version"
}
build compose "$COMPOSE_VERSION" github.com/docker/compose/v5/cmd \
  "-X github.com/docker/compose/v5/internal.Version=$COMPOSE_VERSION"
build buildx "$BUILDX_VERSION" github.com/docker/buildx/cmd/buildx \
  "-X github.com/docker/buildx/version.Version=$BUILDX_VERSION -X github.com/docker/buildx/version.Package=github.com/docker/buildx"
echo "$CONFIG"
