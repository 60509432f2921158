"""What ``rayjob-advisor run`` starts: the handlers of one role, with their settings and memo."""

from __future__ import annotations

from typing import Any

from rayjob_advisor.kube import handlers, webhook, wiring
from rayjob_advisor.kube.config import OperatorConfig


def operator_arguments(config: OperatorConfig) -> dict[str, Any]:
    """Keyword arguments of ``kopf.operator`` for the controller role, or the webhook role with its HTTPS server."""
    if config.role == "webhook":
        arguments = wiring.operator_arguments(config, webhook.REGISTRY)
        webhook.serve(arguments["settings"], config)
        return arguments
    return wiring.operator_arguments(config, handlers.REGISTRY)
