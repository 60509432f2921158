#!/usr/bin/env bash
# End to end on a real cluster for those who have Docker and kind (not run in CI, which has no Docker; linted by
# tests/test_readme.py with ShellCheck): build the image, create a kind cluster with KubeRay, install the chart, run
# `helm test` (a server-side dry-run through the webhook), apply an annotated example RayJob, show its prediction.
#   hack/e2e-kind.sh            (needs: docker, kind, kubectl, helm)
# Environment: CLUSTER (rayjob-advisor), KUBERAY_VERSION (the kuberay-operator chart version; default: the latest),
# PYTHON_IMAGE (the base image by digest, while the Dockerfile's is a placeholder: docs/releasing.md),
# CERTIFICATES_MODE (the chart's certificates.mode: helm, the default, or operator; cert-manager needs cert-manager).
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=${CLUSTER:-rayjob-advisor}
image=rayjob-advisor:e2e
kuberay_version=()
if [[ -n ${KUBERAY_VERSION:-} ]]; then
  kuberay_version=(--version "$KUBERAY_VERSION")
fi
base=()
if [[ -n ${PYTHON_IMAGE:-} ]]; then
  base=(--build-arg "PYTHON_IMAGE=$PYTHON_IMAGE")
fi

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "e2e-kind: $tool is needed and not on PATH" >&2; exit 1; }
done

docker build "${base[@]}" -t "$image" .
kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster"
kubectl config use-context "kind-$cluster"
kind load docker-image "$image" --name "$cluster"

helm repo add kuberay https://ray-project.github.io/kuberay-helm/ >/dev/null
helm repo update kuberay >/dev/null
helm upgrade --install kuberay-operator kuberay/kuberay-operator "${kuberay_version[@]}" --wait
helm upgrade --install advisor charts/rayjob-advisor --namespace rayjob-advisor --create-namespace \
  --set image.repository=rayjob-advisor --set image.tag=e2e --set image.pullPolicy=Never \
  --set certificates.mode="${CERTIFICATES_MODE:-helm}" --wait

kubectl label namespace default rayjob-advisor.io/webhook=enabled --overwrite
helm test advisor --namespace rayjob-advisor --logs   # a dry-run RayJob through the webhook gets its prediction

# The digits examples run the profiled digits CNN, mounted from this ConfigMap into rayproject/ray.
kubectl create configmap train-digits \
  --from-file=train_digits.py=operator/rayjob_advisor/profiling/data_parallel.py --dry-run=client -o yaml |
  kubectl apply -f -
kubectl apply -f examples/deadline-recommend.yaml   # prints the webhook's warnings
kubectl wait rayjob/digits-deadline-recommend --timeout=120s \
  --for=jsonpath='{.metadata.annotations.rayjob-advisor\.io/prediction}'
kubectl get rayjobs -o custom-columns='NAME:.metadata.name,PREDICTED:.metadata.annotations.rayjob-advisor\.io/predicted-runtime,REPLICAS:.spec.rayClusterSpec.workerGroupSpecs[0].replicas,ERROR:.metadata.annotations.rayjob-advisor\.io/error'
echo "Follow it: kubectl get rayjob digits-deadline-recommend -w (actual-runtime-seconds once it succeeded)"
