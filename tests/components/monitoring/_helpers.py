"""What the monitoring tests read from a recorded run: its Kubernetes objects by kind and name, the
PrometheusRule's groups, the dashboard's JSON model, one alert rule."""

from __future__ import annotations

import json
from typing import Any

from tests.pulumi_kit import Run

RELEASE = "kubernetes:helm.sh/v3:Release"


def recorded(run: Run, kind: str, name: str) -> dict[str, Any]:
    """The inputs of the one Kubernetes object of `kind` named `name`."""
    (found,) = [
        r.inputs
        for r in run.kubernetes_objects()
        if r.inputs.get("kind") == kind and r.inputs["metadata"]["name"] == name
    ]
    return found


def program_rules(run: Run) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = recorded(run, "PrometheusRule", "triton-alerts")["spec"]["groups"]
    return groups


def program_dashboard(run: Run) -> dict[str, Any]:
    board: dict[str, Any] = json.loads(recorded(run, "ConfigMap", "triton-dashboard")["data"]["triton.json"])
    return board


def alert(groups: list[dict[str, Any]], name: str, deployment: str | None = None) -> dict[str, Any]:
    (found,) = [
        r
        for g in groups
        for r in g["rules"]
        if r.get("alert") == name and (deployment is None or r["labels"].get("deployment") == deployment)
    ]
    return found
