#!/usr/bin/env bash
# `make deploy-check`: verifies the Helm chart offline with tools built from pinned versions.
#   helm lint; renders (defaults, every toggle on, GitOps mode); refusals; kubeconform strict
#   against Kubernetes 1.27 and 1.37 and the Prometheus Operator CRDs; helm-unittest; promtool
#   (rules, rule unit tests, dashboard expressions, metric names against real scrapes); kube-score.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${HOOKBAY_DEPLOY_CACHE:-$ROOT/.cache}
CHART="$ROOT/deploy/helm/hookbay"
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
KUBERNETES_VALIDATE_VERSION=1.37.0   # PyPI wheel carrying the Kubernetes JSON schemas
K8S_VERSIONS=(1.27.0 1.37.0)         # the chart's kubeVersion floor and the newest
OUT="$CACHE/deploy-check"
started=$SECONDS

passed=0
step() { [ -z "${current:-}" ] || passed=$((passed + 1)); current=$*; printf '\n== %s\n' "$*"; }
die() { printf 'deploy-check: FAILED: %s\n' "$*" >&2; exit 1; }

BIN=$("$HERE/tools.sh")
export PATH="$BIN:$PATH"
export HELM_CACHE_HOME="$CACHE/deploy-tools/helm/cache" HELM_CONFIG_HOME="$CACHE/deploy-tools/helm/config" \
       HELM_DATA_HOME="$CACHE/deploy-tools/helm/data" HELM_PLUGINS="$CACHE/deploy-tools/helm-plugins"

SCHEMAS="$CACHE/deploy-tools/k8s-schemas-$KUBERNETES_VALIDATE_VERSION"
if [ ! -f "$SCHEMAS/.complete" ]; then
  step "Kubernetes JSON schemas from kubernetes-validate $KUBERNETES_VALIDATE_VERSION (once)"
  rm -rf "$SCHEMAS" && mkdir -p "$SCHEMAS/wheel"
  "$PYTHON" -m pip --version >/dev/null 2>&1 && PIP=("$PYTHON" -m pip) || PIP=(python3 -m pip)
  "${PIP[@]}" download -q --no-deps --disable-pip-version-check -d "$SCHEMAS/wheel" \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  python3 "$HERE/k8s_schemas.py" "$SCHEMAS"/wheel/*.whl "$SCHEMAS" "${K8S_VERSIONS[@]}"
  rm -rf "$SCHEMAS/wheel" && touch "$SCHEMAS/.complete"
fi

rm -rf "$OUT" && mkdir -p "$OUT"
cd "$ROOT"

step "helm lint"
for values in defaults all-on gitops; do
  helm lint --strict "$CHART" -f "$CHART/ci/$values-values.yaml" --namespace hookbay
done

step "render: defaults, every toggle on, GitOps"
for values in defaults all-on gitops; do
  helm template hookbay "$CHART" --namespace hookbay -f "$CHART/ci/$values-values.yaml" >"$OUT/$values.yaml"
  printf '%-9s %s\n' "$values" "$(grep '^kind:' "$OUT/$values.yaml" | sort | uniq -c | awk '{printf "%s %s, ", $1, $3}')"
done

step "refusals"
refuse() { # what pattern values...
  local what=$1 pattern=$2; shift 2
  if out=$(helm template hookbay "$CHART" "$@" 2>&1); then die "rendered $what"; fi
  grep -q -- "$pattern" <<<"$out" || die "$what: expected '$pattern', got: $out"
  echo "refused $what"
}
BASE=(--set kafka.bootstrap=k:9092 --set mongo.url=mongodb://m:27017/h --set redis.url=redis://r:6379/0)
refuse "without a secret" "no secret. Set existingSecret" "${BASE[@]}"
refuse "negative replicas" "replicaCount" "${BASE[@]}" --set existingSecret=s --set ingest.replicaCount=-2
refuse "a cron minute of 61" "retention/schedule" "${BASE[@]}" --set existingSecret=s --set "retention.schedule=61 * * * *"
refuse "an unknown key" "additional properties" "${BASE[@]}" --set existingSecret=s --set dashboard.replica=2

step "every container's settings accepted by its service"
"$PYTHON" "$HERE/settings_check.py" "$OUT/defaults.yaml" "$OUT/all-on.yaml" "$OUT/gitops.yaml"
# and it does catch what the values schema cannot: limits that together overflow a Kafka record
helm template hookbay "$CHART" -f "$CHART/ci/defaults-values.yaml" \
  --set settings.maxBodyBytes=6000000 --set ingest.maxHeaderBytes=1048576 >"$OUT/overflow.yaml"
if out=$("$PYTHON" "$HERE/settings_check.py" "$OUT/overflow.yaml" 2>&1); then
  die "settings_check accepted limits that overflow a Kafka record"
fi
grep -q "would not start" <<<"$out" || die "settings_check refused the overflow render for another reason: $out"
echo "refused limits that overflow a Kafka record (ingest would not start)"

step "kubeconform (strict; Kubernetes ${K8S_VERSIONS[*]}; monitoring CRDs)"
for version in "${K8S_VERSIONS[@]}"; do
  kubeconform -strict -summary -kubernetes-version "$version" \
    -schema-location "$SCHEMAS/{{.NormalizedKubernetesVersion}}-local-strict/{{.ResourceKind}}{{.KindSuffix}}.json" \
    -schema-location "$HERE/schemas/crds/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json" \
    "$OUT/defaults.yaml" "$OUT/all-on.yaml" "$OUT/gitops.yaml"
done

step "helm-unittest"
helm unittest --color=false "$CHART" 2>&1 | grep -v '^$'

step "promtool: rules, rule unit tests"
"$PYTHON" "$HERE/monitoring.py" rules "$OUT/all-on.yaml" "$OUT/hookbay-rules.yaml"
cp "$HERE/rules-test.yaml" "$OUT/"
promtool check rules "$OUT/hookbay-rules.yaml"
promtool test rules "$OUT/rules-test.yaml"

step "promtool: dashboard expressions; metric names against real scrapes"
n=0
while IFS= read -r expr; do
  promtool --experimental promql format "$expr" >/dev/null || die "dashboard expression does not parse: $expr"
  n=$((n + 1))
done < <("$PYTHON" "$HERE/monitoring.py" exprs "$OUT/all-on.yaml")
echo "$n dashboard expressions parse"
for scrape in "$HERE"/metrics/*.prom; do
  promtool check metrics <"$scrape" || die "promtool check metrics: $scrape"
done
"$PYTHON" "$HERE/monitoring.py" names "$OUT/all-on.yaml" "$HERE"/metrics/*.prom

step "kube-score"
# ignored, with reasons (docs/decisions.md, "Deployables"): the image is deployed by tag with IfNotPresent (built
# locally, no registry); hookbay's egress is any destination an owner configures, so NetworkPolicy
# is an opt-in toggle; CPU limits throttle latency-sensitive Python for nothing (requests are set);
# topology spread (a toggle) rather than required host anti-affinity
for values in defaults all-on; do
  kube-score score --output-format ci \
    --ignore-test container-image-pull-policy --ignore-test pod-networkpolicy \
    --ignore-container-cpu-limit --ignore-test container-ephemeral-storage-request-and-limit \
    --ignore-test deployment-has-host-podantiaffinity \
    "$OUT/$values.yaml" >"$OUT/kube-score-$values.txt" && status=0 || status=$?
  grep -E '^\[(WARNING|CRITICAL)\]' "$OUT/kube-score-$values.txt" || true
  echo "$values: $(grep -c '^\[OK\]' "$OUT/kube-score-$values.txt") checks OK"
  [ $status -eq 0 ] || die "kube-score: $values"
done

passed=$((passed + 1))
printf '\ndeploy-check: all checks passed in %d s\n' $((SECONDS - started))
# the plain closing line CI reads: one per step above
printf 'deploy-check: %d passed, 0 failed\n' "$passed"
