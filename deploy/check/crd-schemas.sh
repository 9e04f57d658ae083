#!/usr/bin/env bash
# Regenerates schemas/crds/: JSON schemas of the Prometheus Operator CRDs the chart renders
# (ServiceMonitor, PodMonitor, PrometheusRule), converted from the pinned prometheus-operator Go
# module's CRDs with kubeconform's own openapi2jsonschema.py. Run by hand when either version
# changes; the output is committed, so deploy-check needs no network for it.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OPERATOR_VERSION=v0.85.0
KUBECONFORM_VERSION=$(sed -n 's/^KUBECONFORM_VERSION=\([^ ]*\).*/\1/p' "$HERE/tools.sh")
export GOFLAGS=-mod=mod
dir() { go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'; }
operator=$(dir "github.com/prometheus-operator/prometheus-operator@$OPERATOR_VERSION")
kubeconform=$(dir "github.com/yannh/kubeconform@$KUBECONFORM_VERSION")
out="$HERE/schemas/crds/monitoring.coreos.com"
rm -rf "$out" && mkdir -p "$out"
cd "$out"
for kind in servicemonitors podmonitors prometheusrules; do
  FILENAME_FORMAT='{kind}_{version}' python3 "$kubeconform/scripts/openapi2jsonschema.py" \
    "$operator/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" >/dev/null
done
echo "prometheus-operator $OPERATOR_VERSION, converted by kubeconform $KUBECONFORM_VERSION's openapi2jsonschema.py" >"$out/SOURCE"
ls "$out"
