#!/usr/bin/env bash
# End to end on a real cluster for those who have Docker and kind (not run in CI): build the image,
# create a kind cluster with KubeRay, install the chart, apply an annotated RayJob, show its prediction.
#   hack/e2e-kind.sh            (needs: docker, kind, kubectl, helm)
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=${CLUSTER:-rayjob-advisor}
image=rayjob-advisor:e2e

docker build -t "$image" .
kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster"
kind load docker-image "$image" --name "$cluster"

helm repo add kuberay https://ray-project.github.io/kuberay-helm/ >/dev/null
helm upgrade --install kuberay-operator kuberay/kuberay-operator --wait
helm upgrade --install advisor charts/rayjob-advisor --namespace rayjob-advisor --create-namespace \
  --set image.repository=rayjob-advisor --set image.tag=e2e --set image.pullPolicy=Never --wait

kubectl label namespace default rayjob-advisor.io/webhook=enabled --overwrite
kubectl apply -f examples/deadline-enforce.yaml   # prints the webhook's warnings
kubectl wait rayjob/digits-deadline-enforce --for=jsonpath='{.metadata.annotations.rayjob-advisor\.io/prediction}' --timeout=120s
kubectl get rayjobs -o custom-columns='NAME:.metadata.name,PREDICTED:.metadata.annotations.rayjob-advisor\.io/predicted-runtime,REPLICAS:.spec.rayClusterSpec.workerGroupSpecs[0].replicas,ERROR:.metadata.annotations.rayjob-advisor\.io/error'
