#!/usr/bin/env bash
# The chart against a real Kubernetes API server (v1.37, etcd embedded; no controllers, so nothing
# rolls out and hooks are skipped): the monitoring CRDs installed, then `helm install` with every
# toggle on (server-side dry run first, then for real), `helm upgrade` to the defaults, the GitOps
# render, `helm uninstall`. Catches what schemas miss (e.g. a PDB with both min and max).
# Builds the server once into $HOOKBAY_DEPLOY_CACHE/deploy-tools/bin (apiserver/, ~15 min cold).
# Ports on 127.0.0.1: HOOKBAY_APISERVER_PORT (26443), etcd 22379/22380.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${HOOKBAY_DEPLOY_CACHE:-$ROOT/.cache}
CHART="$ROOT/deploy/helm/hookbay"
BIN="$CACHE/deploy-tools/bin"
PORT=${HOOKBAY_APISERVER_PORT:-26443}
RUN="$CACHE/deploy-check-apiserver"
K8S_VERSION=v$(sed -n 's/^\t*k8s.io\/kubernetes v\([0-9.]*\)$/\1/p' "$HERE/apiserver/go.mod")
OPERATOR_VERSION=$(sed -n 's/^OPERATOR_VERSION=\([^ ]*\).*/\1/p' "$HERE/crd-schemas.sh")
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
say() { printf 'apiserver: %s\n' "$*"; }

if [ ! -x "$BIN/apiserver" ] || [ "$HERE/apiserver/go.sum" -nt "$BIN/apiserver" ] || [ "$0" -nt "$BIN/apiserver" ]; then
  say "building kube-apiserver with embedded etcd (once; ~15 min)"
  # the version it reports (helm checks the chart's kubeVersion against it)
  (cd "$HERE/apiserver" && go build -trimpath -o "$BIN/apiserver.tmp" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 \
    -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) \
    -X k8s.io/component-base/version.gitTreeState=clean" .)
  mv "$BIN/apiserver.tmp" "$BIN/apiserver"
fi
export PATH="$BIN:$PATH"
export HELM_CACHE_HOME="$CACHE/deploy-tools/helm/cache" HELM_CONFIG_HOME="$CACHE/deploy-tools/helm/config" \
       HELM_DATA_HOME="$CACHE/deploy-tools/helm/data" HELM_PLUGINS="$CACHE/deploy-tools/helm-plugins"

rm -rf "$RUN" && mkdir -p "$RUN/etcd" "$RUN/certs"
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
echo "$token,admin,admin,system:masters" >"$RUN/tokens.csv"
openssl genrsa -out "$RUN/sa.key" 2048 2>/dev/null
openssl rsa -in "$RUN/sa.key" -pubout -out "$RUN/sa.pub" 2>/dev/null
cat >"$RUN/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:$PORT", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: "$token"}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
YAML
export KUBECONFIG="$RUN/kubeconfig"

apiserver "$RUN/etcd" 22379 22380 -- --etcd-servers=http://127.0.0.1:22379 \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none --secure-port="$PORT" --cert-dir="$RUN/certs" \
  --token-auth-file="$RUN/tokens.csv" --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$RUN/sa.pub" \
  --service-account-signing-key-file="$RUN/sa.key" --service-cluster-ip-range=10.96.0.0/24 \
  >"$RUN/apiserver.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
started=$SECONDS
until curl -fsk -H "Authorization: Bearer $token" "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; do
  kill -0 $pid 2>/dev/null || { tail -n 30 "$RUN/apiserver.log"; exit 1; }
  [ $((SECONDS - started)) -lt 120 ] || { tail -n 30 "$RUN/apiserver.log"; say "not ready in 120 s"; exit 1; }
  sleep 0.5
done
say "ready on 127.0.0.1:$PORT in $((SECONDS - started)) s"

# the Prometheus Operator CRDs, from the same pinned module as the committed schemas
operator=$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$OPERATOR_VERSION" |
  sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
mkdir -p "$RUN/crds/crds"
printf 'apiVersion: v2\nname: monitoring-crds\nversion: 0.0.0\n' >"$RUN/crds/Chart.yaml"
for kind in servicemonitors podmonitors prometheusrules; do
  cp "$operator/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$RUN/crds/crds/"
done
helm install monitoring-crds "$RUN/crds" >/dev/null
say "monitoring CRDs installed"

ALL_ON=(-f "$CHART/ci/all-on-values.yaml")
helm install hookbay "$CHART" -n hookbay --create-namespace "${ALL_ON[@]}" --dry-run=server --no-hooks >/dev/null
say "server-side dry run of the install (every toggle on): accepted"
helm install hookbay "$CHART" -n hookbay --create-namespace "${ALL_ON[@]}" --no-hooks >/dev/null
say "install (every toggle on): $(helm get manifest hookbay -n hookbay | grep -c '^kind:') objects created"
helm upgrade hookbay "$CHART" -n hookbay -f "$CHART/ci/defaults-values.yaml" --no-hooks >/dev/null
say "upgrade to the defaults: $(helm get manifest hookbay -n hookbay | grep -c '^kind:') objects"
helm install gitops "$CHART" -n gitops --create-namespace -f "$CHART/ci/gitops-values.yaml" >/dev/null
say "GitOps render (migration as a plain Job, chart-made Secret) installed"
helm uninstall hookbay -n hookbay >/dev/null && helm uninstall gitops -n gitops >/dev/null
say "uninstalled; passed in $((SECONDS - started)) s"
