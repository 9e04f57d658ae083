#!/usr/bin/env bash
# `make images`: every image hookbay's compose stack runs, built here from package registries only.
#
#   1. two Debian bookworm root filesystems made with debootstrap (minbase) on the host and
#      imported (`docker import`): hookbay-base/python (python3) and hookbay-base/infra (Java 17,
#      Redis, PostgreSQL 15). Cached as tarballs under $HOOKBAY_DEPLOY_CACHE/images, keyed by
#      their package lists: made once (a few minutes each), loaded when the engine lacks them.
#   2. a relocatable virtualenv of every hookbay package (uv, from uv.lock, against Debian's
#      /usr/bin/python3: host and image share Debian 12's Python 3.11 and glibc), rebuilt only
#      when uv.lock or a source file changed.
#   3. `docker build` of hookbay/app and the infrastructure images (Kafka from the Maven
#      artifacts deploy/local/infra.sh fetches, FerretDB as infra.sh builds it, PostgreSQL with
#      the embedded store's indexes, Redis) and the compose check's receiver. The builds need no
#      network (nothing is downloaded inside a container); Docker's layer cache makes a warm run
#      rebuild only what changed.
# Needs a running engine: DOCKER_HOST from deploy/docker/engine.sh up.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${HOOKBAY_DEPLOY_CACHE:-$ROOT/.cache}
INFRA_CACHE=${HOOKBAY_CACHE:-$ROOT/.cache}   # where deploy/local/infra.sh keeps Kafka and FerretDB
IMAGES="$CACHE/images"
UV=${UV:-$ROOT/.cache/tools/bin/uv}
TAG=${HOOKBAY_IMAGE_TAG:-0.1.0}
SUITE=bookworm
MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
MIRROR=${MIRROR:-http://deb.debian.org/debian}

PYTHON_PACKAGES=python3,ca-certificates,tini
INFRA_PACKAGES=openjdk-17-jre-headless,redis-server,postgresql-15,ca-certificates,tini

say() { printf 'images: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }

base() { # flavour packages -> echoes the image name
  local flavour=$1 packages=$2 key image tarball
  key=$(printf '%s %s %s' "$SUITE" "$packages" v1 | sha256sum | cut -c1-12)
  image="hookbay-base/$flavour:$SUITE-$key"
  tarball="$IMAGES/base-$flavour-$key.tar"
  if ! has_image "$image"; then
    if [ ! -f "$tarball" ]; then
      say "debootstrap $SUITE ($flavour: $packages), once"
      local rootfs="$IMAGES/rootfs-$flavour"
      rm -rf "$rootfs" && mkdir -p "$rootfs"
      debootstrap --variant=minbase --include="$packages" "$SUITE" "$rootfs" "$MIRROR" \
        >"$IMAGES/debootstrap-$flavour.log" 2>&1 ||
        { tail -n 20 "$IMAGES/debootstrap-$flavour.log" >&2; die "debootstrap failed"; }
      # an image has no use for apt's lists and caches, nor for the docs
      rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
      chroot "$rootfs" groupadd --gid 10001 hookbay
      chroot "$rootfs" useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
        --shell /usr/sbin/nologin hookbay
      tar -C "$rootfs" --numeric-owner -cf "$tarball.tmp" .
      mv "$tarball.tmp" "$tarball"
      rm -rf "$rootfs"
    fi
    say "importing $image"
    docker import "$tarball" "$image" >/dev/null
  fi
  docker tag "$image" "hookbay-base/$flavour:$SUITE"  # the Dockerfiles' default BASE
  echo "$image"
}

source_key() { # hash of what the virtualenv is built from (the built SPA included: it is package data)
  (cd "$ROOT" && find uv.lock pyproject.toml libs services clients -type f \
      \( -name '*.py' -o -name '*.toml' -o -name '*.yaml' -o -name '*.lock' -o -name '*.typed' \
         -o -path '*/hookbay_dashboard/static/*' \) \
      -not -path '*/tests/*' -not -path '*/__pycache__/*' -not -path '*/node_modules/*' -print0 | sort -z | xargs -0 sha256sum) |
    sha256sum | cut -c1-16
}

venv() { # -> a relocatable virtualenv at $IMAGES/app/venv
  local key; key=$(source_key)
  local dir="$IMAGES/app/venv"
  [ -f "$dir/.key" ] && [ "$(cat "$dir/.key")" = "$key" ] && return 0
  [ -x "$UV" ] || make -C "$ROOT" -s "$UV" >&2
  say "building the application virtualenv (uv.lock or sources changed)"
  rm -rf "$dir"
  "$UV" venv -q --relocatable --python /usr/bin/python3 "$dir"
  # --refresh-package: uv caches the wheel it builds of a workspace member by its version and
  # pyproject.toml only, so without it a source change ships the old code (seen: an image whose
  # hookbay_common lacked a repository added since the last build)
  local members
  members=$(cd "$ROOT" && sed -n 's/^name = "\(hookbay-[a-z-]*\)"$/--refresh-package \1/p' \
    libs/*/pyproject.toml services/*/pyproject.toml clients/*/pyproject.toml)
  # shellcheck disable=SC2086  # one word per option
  (cd "$ROOT" && UV_PROJECT_ENVIRONMENT="$dir" "$UV" sync -q --frozen --no-dev --no-editable \
    --all-packages --compile-bytecode --python /usr/bin/python3 $members)
  echo "$key" >"$dir/.key"
}

build() { # name context [build-arg...]
  local name=$1 context=$2; shift 2
  say "docker build $name:$TAG"
  DOCKER_BUILDKIT=0 docker build -q --force-rm -t "$name:$TAG" "$@" "$context" >/dev/null
}

mkdir -p "$IMAGES"
PYTHON_BASE=$(base python "$PYTHON_PACKAGES")
INFRA_BASE=$(base infra "$INFRA_PACKAGES")

# application
venv
cp "$HERE/app/Dockerfile" "$HERE/app/hookbay-role" "$IMAGES/app/"
build hookbay/app "$IMAGES/app" --build-arg "BASE=$PYTHON_BASE"

# infrastructure: the artifacts deploy/local/infra.sh fetches and builds (cached there)
HOOKBAY_CACHE="$INFRA_CACHE" "$ROOT/deploy/local/infra.sh" install
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$ROOT/deploy/local/kafka/pom.xml")
FERRETDB_VERSION=$(sed -n 's:^require github.com/FerretDB/FerretDB \(v[0-9.]*\)$:\1:p' "$ROOT/deploy/local/ferretdb/go.mod")
ctx="$IMAGES/kafka" && mkdir -p "$ctx"
rm -rf "$ctx/libs" && cp -a "$INFRA_CACHE/kafka-$KAFKA_VERSION/libs" "$ctx/libs"
cp "$HERE/kafka/"* "$ROOT/deploy/local/kafka/log4j2.properties" "$ctx/"
build hookbay/kafka "$ctx" --build-arg "BASE=$INFRA_BASE"
ctx="$IMAGES/ferretdb" && mkdir -p "$ctx"
cp "$INFRA_CACHE/ferretdb-$FERRETDB_VERSION/ferretdb" "$HERE/ferretdb/"* "$ctx/"
build hookbay/ferretdb "$ctx" --build-arg "BASE=$INFRA_BASE"
ctx="$IMAGES/postgres" && mkdir -p "$ctx"
cp "$HERE/postgres/"* "$ROOT/deploy/local/ferretdb/indexes.sql" "$ctx/"
build hookbay/postgres "$ctx" --build-arg "BASE=$INFRA_BASE"
build hookbay/redis "$HERE/redis" --build-arg "BASE=$INFRA_BASE"
build hookbay/receiver "$HERE/receiver" --build-arg "BASE=$PYTHON_BASE"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep '^hookbay' >&2
