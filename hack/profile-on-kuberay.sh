#!/usr/bin/env bash
# Run a profiling sweep on a Kubernetes cluster with KubeRay, as a RayJob, and fetch its CSV.
# Not run in CI. Needs kubectl (pointed at the cluster), envsubst, and this repository's venv.
#
#   hack/profile-on-kuberay.sh runs.csv --workload digits-cnn --workers 1,2,4,8 \
#       --dataset-sizes 16000,32000,64000,128000 --batch-size 256 --cpus-per-worker 1 --repeats 3
#
# A profiling plan instead of a grid (docs/tutorials/profiling-plan.md): PLAN=plan.yaml, and the options beside
# it (--train-func); an OUT.csv already there is shipped with it, so the plan resumes from its runs:
#
#   PLAN=examples/plans/my-model.yaml hack/profile-on-kuberay.sh runs.csv --train-func my_training:train
#
# Environment: NAME (rayjob-advisor-profile), NODES (worker pods, 4), CPUS_PER_NODE (4),
# IMAGE (rayproject/ray:2.52.0-py311), RAY_VERSION (2.52.0), NAMESPACE (current), PLAN (none).
# Then: .venv/bin/rayjob-advisor profile --emit-profile --data runs.csv | kubectl apply -f -
set -euo pipefail
out=${1:?usage: $0 OUT.csv SWEEP-OPTIONS...}
shift
cd "$(dirname "$0")/.."

export NAME=${NAME:-rayjob-advisor-profile} NODES=${NODES:-4} CPUS_PER_NODE=${CPUS_PER_NODE:-4}
export IMAGE=${IMAGE:-rayproject/ray:2.52.0-py311} RAY_VERSION=${RAY_VERSION:-2.52.0}
export SWEEP="$*" RESUME=""
files=()
if [[ -n "${PLAN:-}" ]]; then
  SWEEP="--plan /opt/rayjob-advisor/plan.yaml $SWEEP"
  files+=(--from-file=plan.yaml="$PLAN")
  if [[ -s "$out" ]]; then
    RESUME="cp /opt/rayjob-advisor/results.csv /tmp/runs.csv && "
    files+=(--from-file=results.csv="$out")
  fi
fi
ns=(${NAMESPACE:+--namespace "$NAMESPACE"})

dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT
.venv/bin/pip wheel --no-deps --quiet --wheel-dir "$dist" .
wheel=$(basename "$dist"/rayjob_advisor-*.whl)
export WHEEL=$wheel

kubectl "${ns[@]}" create configmap "$NAME-wheel" --from-file="$dist/$wheel" "${files[@]}" --dry-run=client -o yaml | kubectl "${ns[@]}" apply -f -
envsubst < hack/profile-rayjob.yaml | kubectl "${ns[@]}" apply -f -
echo "waiting for RayJob $NAME (kubectl get rayjob $NAME -w to follow)..."
kubectl "${ns[@]}" wait "rayjob/$NAME" --for=jsonpath='{.status.jobDeploymentStatus}'=Complete --timeout=24h
kubectl "${ns[@]}" logs "job/$NAME" | sed -n '/^---runs.csv---$/,/^---end---$/p' | sed '1d;$d' > "$out"
echo "$(grep -vc '^#' "$out") lines (header included) written to $out"
