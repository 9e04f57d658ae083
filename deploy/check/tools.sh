#!/usr/bin/env bash
# Builds the chart-verification tools from pinned Go modules into $HOOKBAY_DEPLOY_CACHE/deploy-tools/bin (default .cache/)
# (idempotent: a tool whose versioned binary exists is not rebuilt). Prints the bin directory.
#
# Why build: no tool download site is reachable here, only the Go module proxy (which answers 403
# for modules it does not serve: kube-linter, chart-testing are among them, so they are not used).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${HOOKBAY_DEPLOY_CACHE:-$ROOT/.cache}
TOOLS="$CACHE/deploy-tools"
BIN="$TOOLS/bin"

HELM_VERSION=v3.22.0          # its client-go is v0.37: Kubernetes 1.37 is what it assumes
HELM_K8S_MINOR=37
KUBECONFORM_VERSION=v0.8.0
KUBE_SCORE_VERSION=v1.20.0
PROMETHEUS_VERSION=v0.316.0   # promtool (Prometheus 3.16)
UNITTEST_VERSION=v1.1.2       # helm-unittest, built through ./unittest-wrapper (its go.mod has a replace)

say() { printf 'deploy-tools: %s\n' "$*" >&2; }

export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$BIN"

stamp() { echo "$TOOLS/.$1-$2"; }

build() { # name version command...
  local name=$1 version=$2; shift 2
  [ -x "$BIN/$name" ] && [ -f "$(stamp "$name" "$version")" ] && return 0
  say "building $name $version (once)"
  rm -f "$TOOLS/.$name-"*
  "$@" >&2
  touch "$(stamp "$name" "$version")"
}

go_install() { # target...: go install into $BIN
  GOBIN="$BIN" go install -trimpath "$@"
}

build_helm() {
  go_install -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_K8S_MINOR \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_K8S_MINOR" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

build_unittest() {
  local plugin="$TOOLS/helm-plugins/helm-unittest"
  (cd "$HERE/unittest-wrapper" && go build -trimpath -ldflags "-s -w" -o "$BIN/untt" github.com/helm-unittest/helm-unittest/cmd/helm-unittest)
  # the plugin without its download hook: plugin.yaml pointing at the binary built above
  rm -rf "$plugin" && mkdir -p "$plugin"
  cat >"$plugin/plugin.yaml" <<YAML
name: "unittest"
version: "${UNITTEST_VERSION#v}"
usage: "unittest for helm charts"
description: "helm-unittest, built from its Go module by deploy/check/tools.sh"
ignoreFlags: false
command: "$BIN/untt"
YAML
}

build helm "$HELM_VERSION" build_helm
build kubeconform "$KUBECONFORM_VERSION" go_install -ldflags "-s -w" "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
build kube-score "$KUBE_SCORE_VERSION" go_install -ldflags "-s -w" "github.com/zegl/kube-score/cmd/kube-score@$KUBE_SCORE_VERSION"
build promtool "$PROMETHEUS_VERSION" go_install -tags remove_all_sd -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
build untt "$UNITTEST_VERSION" build_unittest
echo "$BIN"
