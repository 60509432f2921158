"""Run the operator against the test kit's API emulator, for trying it with kubectl (no cluster).

    .venv/bin/python hack/try-operator.py
    # in another shell, with the KUBECONFIG it prints:
    kubectl apply -f examples/rayjob-digits.yaml
    kubectl get rayjob digits-cnn -o jsonpath='{.metadata.annotations}'

Stops on Ctrl-C. Everything is in memory and gone afterwards.
"""

from __future__ import annotations

import pathlib
import tempfile
import time

import yaml

from rayjob_advisor_testkit.advisor import running_advisor


def kubeconfig(url: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "emulator", "user": {}}],
        "contexts": [
            {"name": "emulator", "context": {"cluster": "emulator", "user": "emulator", "namespace": "default"}}
        ],
        "current-context": "emulator",
    }


def main() -> None:
    """Runs until Ctrl-C, which may come at any moment, even while the kubeconfig line is being printed."""
    try:
        with running_advisor(timeout=60) as advisor:
            path = pathlib.Path(tempfile.mkdtemp()) / "kubeconfig"
            path.write_text(yaml.safe_dump(kubeconfig(advisor.api.url)))
            print(f"operator running; in another shell:\n  export KUBECONFIG={path}", flush=True)
            while True:
                time.sleep(1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
