"""Run the operator against the test suite's API emulator, for trying it with kubectl (no cluster).

    .venv/bin/python hack/try-operator.py
    # in another shell, with the KUBECONFIG it prints:
    kubectl apply -f examples/rayjob-digits.yaml
    kubectl get rayjob digits-cnn -o jsonpath='{.metadata.annotations}'

Stops on Ctrl-C. Everything is in memory and gone afterwards.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
import time

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

from emulator import Emulator, operator_settings, run_operator  # noqa: E402

from rayjob_advisor import run  # noqa: E402
from rayjob_advisor.config import OperatorConfig  # noqa: E402


def kubeconfig(url: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "emulator", "user": {}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "emulator", "namespace": "default"}}],
        "current-context": "emulator",
    }


def main() -> None:
    with Emulator() as api:
        arguments = run.operator_arguments(OperatorConfig(kube_api=api.url, liveness_port=0, metrics_port=0))
        settings = operator_settings()
        settings.persistence = arguments["settings"].persistence
        with run_operator(api, registry=arguments["registry"], settings=settings, memo=arguments["memo"], timeout=60):
            path = pathlib.Path(tempfile.mkdtemp()) / "kubeconfig"
            path.write_text(yaml.safe_dump(kubeconfig(api.url)))
            print(f"operator running; in another shell:\n  export KUBECONFIG={path}", flush=True)
            try:
                while True:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass


if __name__ == "__main__":
    main()
