#!/usr/bin/env bash
# A Docker engine for `make images` / `make compose-check` that leaves the host as it found it.
#
#   deploy/docker/engine.sh install   apt-get the engine when missing (docker.io, containerd, runc, iptables)
#   deploy/docker/engine.sh up        use the running engine, or start a private dockerd; prints DOCKER_HOST
#   deploy/docker/engine.sh down      stop the dockerd that `up` started and undo what it changed on the host
#
# The private dockerd keeps everything under $HOOKBAY_DEPLOY_CACHE/docker (data root, exec root,
# socket, pid, log) and is started with --iptables=false --ip-forward=false --ip-masq=false: it
# never touches the host's packet filter or IP forwarding. Containers still reach each other on
# their bridge networks and published 127.0.0.1 ports (docker-proxy); they get no way out, which
# nothing here needs: images are built from rootfs tarballs made on the host (images.sh). `down`
# still compares iptables rules, ip_forward and the network links with what `up` recorded, removes
# the bridges the engine created and fails loudly if anything else differs.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${HOOKBAY_DEPLOY_CACHE:-$ROOT/.cache}
DIR="$CACHE/docker"
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
STATE="$DIR/host-before"

say() { printf 'engine: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

install() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io containerd runc)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "need root to apt-get install ${missing[*]}"
  say "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
}

snapshot() { # dir: what `down` must find again
  mkdir -p "$1"
  { iptables-save 2>/dev/null || true; } | sed -e '/^#/d' -e 's/\[[0-9]*:[0-9]*\]//' >"$1/iptables"
  { ip6tables-save 2>/dev/null || true; } | sed -e '/^#/d' -e 's/\[[0-9]*:[0-9]*\]//' >"$1/ip6tables"
  cat /proc/sys/net/ipv4/ip_forward >"$1/ip_forward"
  local f
  for f in /proc/sys/net/bridge/bridge-nf-call-*; do
    [ -f "$f" ] && echo "$f=$(cat "$f")"
  done >"$1/bridge"
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort >"$1/links"
}

ours() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

up() {
  if ours; then echo "unix://$SOCK"; return; fi
  if [ -z "${DOCKER_HOST:-}" ] && docker -H unix:///var/run/docker.sock version >/dev/null 2>&1; then
    say "using the engine already running at /var/run/docker.sock"
    echo "unix:///var/run/docker.sock"; return
  fi
  install
  mkdir -p "$DIR/data" "$DIR/exec"
  snapshot "$STATE"
  say "starting a private dockerd (data root $DIR/data)"
  # containerd is started by dockerd itself (its own state under the exec root)
  setsid nohup dockerd --data-root "$DIR/data" --exec-root "$DIR/exec" --pidfile "$PIDFILE" \
    -H "unix://$SOCK" --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
    --bip 10.213.0.1/24 --default-address-pool base=10.214.0.0/16,size=24 \
    --storage-driver overlay2 --log-level warn >"$DIR/dockerd.log" 2>&1 </dev/null &
  local deadline=$((SECONDS + 60))
  until docker -H "unix://$SOCK" version >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { tail -n 20 "$DIR/dockerd.log" >&2; die "dockerd did not start"; }
    sleep 0.5
  done
  echo "unix://$SOCK"
}

down() {
  ours || { say "no private dockerd running"; return 0; }
  local pid; pid=$(cat "$PIDFILE")
  kill -TERM "$pid"
  local deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { kill -KILL "$pid"; break; }
    sleep 0.5
  done
  rm -f "$PIDFILE"
  # the bridges the engine made (docker0, br-<network id>), none that were there before
  local link
  for link in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//'); do
    case "$link" in docker0|br-*|veth*) grep -qx "$link" "$STATE/links" || ip link del "$link" 2>/dev/null || true ;; esac
  done
  [ -f "$STATE/ip_forward" ] && cat "$STATE/ip_forward" >/proc/sys/net/ipv4/ip_forward
  local line
  while IFS= read -r line; do  # bridge netfilter switches, where the kernel has them
    [ -w "${line%%=*}" ] && echo "${line#*=}" >"${line%%=*}" 2>/dev/null || true
  done <"$STATE/bridge"
  local now="$DIR/host-after"
  snapshot "$now"
  if ! diff -u "$STATE/iptables" "$now/iptables" >&2 || ! diff -u "$STATE/ip6tables" "$now/ip6tables" >&2 ||
     ! diff -u "$STATE/ip_forward" "$now/ip_forward" >&2 || ! diff -u "$STATE/links" "$now/links" >&2 ||
     ! diff -u "$STATE/bridge" "$now/bridge" >&2; then
    die "the host differs from before the engine started (diff above)"
  fi
  say "dockerd stopped; iptables, ip_forward, bridge netfilter and links are as before"
}

case "${1:-}" in
  install) install ;;
  up) up ;;
  down) down ;;
  *) echo "usage: $0 install|up|down" >&2; exit 2 ;;
esac
