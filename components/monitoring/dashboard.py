"""The Grafana dashboard `Triton inference + GPU` (its JSON model): request, failure, queue and GPU
panels, the `Canary vs stable` row, the Loki log panels, the clients' row and the `Repository agent`
row (agent_row), filtered by a `model` variable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.monitoring.agent import agent_panel_queries
from components.monitoring.queries import (
    canary_queries,
    client_queries,
    failure_ratio_query,
    log_queries,
    queue_time_query,
)

if TYPE_CHECKING:
    from components.monitoring.args import MonitoredDeployment


def _panel(pid: int, title: str, expr: str, unit: str, y: int, x: int, legend: str, w: int = 12) -> dict[str, Any]:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": "A", "expr": expr, "legendFormat": legend}],
    }


def _log_panel(pid: int, title: str, expr: str, y: int, x: int) -> dict[str, Any]:
    # ref: https://grafana.com/docs/grafana/latest/panels-visualizations/visualizations/logs/
    return {
        "id": pid,
        "type": "logs",
        "title": title,
        "datasource": {"type": "loki", "uid": "${logs}"},
        "gridPos": {"h": 10, "w": 12, "x": x, "y": y},
        "options": {
            "showTime": True,
            "wrapLogMessage": True,
            "sortOrder": "Descending",
            "enableLogDetails": True,
            "dedupStrategy": "none",
            "prettifyLogMessage": False,
            "showLabels": False,
            "showCommonLabels": False,
        },
        "targets": [{"refId": "A", "expr": expr, "queryType": "range"}],
    }


def agent_row(triton_namespace: str, first_id: int, y: int) -> list[dict[str, Any]]:
    """The `Repository agent` row, from row `y` on: the agent's own metrics
    (components/monitoring/agent.py's queries), two panels side by side."""
    panels: list[dict[str, Any]] = [
        {
            "id": first_id,
            "type": "row",
            "title": "Repository agent",
            "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            "panels": [],
        }
    ]
    for i, (title, (expr, unit, legend)) in enumerate(agent_panel_queries(triton_namespace).items()):
        panels.append(_panel(first_id + 1 + i, title, expr, unit, y + 1 + 8 * (i // 2), 12 * (i % 2), legend))
    return panels


def _client_panel(pid: int, title: str, expr: str, y: int, x: int) -> dict[str, Any]:
    panel = _panel(pid, title, expr, "reqps", y, x, "{{client}}", w=8)
    panel["datasource"] = {"type": "loki", "uid": "${logs}"}
    panel["targets"][0]["queryType"] = "range"
    return panel


def dashboard(
    triton_namespace: str, deployments: tuple[MonitoredDeployment, ...], ingress_namespace: str
) -> dict[str, Any]:
    """The Triton + GPU dashboard (Grafana JSON model), log panels, then the ingress's clients."""
    ns = f'namespace="{triton_namespace}"'
    panels = _serving_panels(ns)
    # Canary vs stable: a row, then its three panels side by side.
    panels.append(
        {
            "id": len(panels) + 1,
            "type": "row",
            "title": "Canary vs stable",
            "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": 32},
            "panels": [],
        }
    )
    for i, (title, (expr, unit)) in enumerate(canary_queries(triton_namespace).items()):
        panels.append(_panel(len(panels) + 1, title, expr, unit, 33, 8 * i, "{{model}} v{{version}}", w=8))
    for i, (title, expr) in enumerate(log_queries(triton_namespace, deployments).items()):
        panels.append(_log_panel(len(panels) + 1, title, expr, 41 + 10 * (i // 2), 12 * (i % 2)))
    y = 41 + 10 * ((len(log_queries(triton_namespace, deployments)) + 1) // 2)
    panels.append(
        {
            "id": len(panels) + 1,
            "type": "row",
            "title": "Clients (ingress access log)",
            "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            "panels": [],
        }
    )
    for i, (title, expr) in enumerate(client_queries(ingress_namespace).items()):
        panels.append(_client_panel(len(panels) + 1, title, expr, y + 1, 8 * i))
    panels += agent_row(triton_namespace, len(panels) + 1, max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels))
    return {"uid": "triton-platform", **_dashboard_settings(ns), "panels": panels}


def _serving_panels(ns: str) -> list[dict[str, Any]]:
    """Requests, failures, queue and compute time, ready replicas, GPU utilisation and memory."""
    return [
        _panel(
            1,
            "Inference requests / s by model",
            f"sum by (model) (rate(nv_inference_request_success{{{ns}}}[5m]))",
            "reqps",
            0,
            0,
            "{{model}}",
        ),
        _panel(2, "Failure ratio by model", failure_ratio_query(ns, "model"), "percentunit", 0, 12, "{{model}}"),
        _panel(
            3, "Queue time per request (HPA metric) by pod", queue_time_query(ns, "pod", "2m"), "µs", 8, 0, "{{pod}}"
        ),
        _panel(
            4,
            "Queue time p99 by model",
            f'max by (model) (nv_inference_queue_summary_us{{{ns},quantile="0.99"}})',
            "µs",
            8,
            12,
            "{{model}}",
        ),
        _panel(
            5,
            "Compute time per request by model",
            (
                f"sum by (model) (rate(nv_inference_compute_infer_duration_us{{{ns}}}[5m])) / "
                f"clamp_min(sum by (model) (rate(nv_inference_request_success{{{ns}}}[5m])), 1e-9)"
            ),
            "µs",
            16,
            0,
            "{{model}}",
        ),
        _panel(
            6,
            "Ready Triton replicas",
            f'sum by (deployment) (kube_deployment_status_replicas_available{{{ns},deployment=~"triton-.*"}})',
            "short",
            16,
            12,
            "{{deployment}}",
        ),
        *_gpu_panels(),
    ]


def _gpu_panels() -> list[dict[str, Any]]:
    """GPU utilisation and memory used, per node and GPU (DCGM)."""
    return [
        _panel(
            7,
            "GPU utilisation",
            "avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL)",
            "percent",
            24,
            0,
            "{{Hostname}} gpu {{gpu}}",
        ),
        _panel(
            8,
            "GPU memory used",
            "sum by (Hostname, gpu) (DCGM_FI_DEV_FB_USED) * 1024 * 1024",
            "bytes",
            24,
            12,
            "{{Hostname}} gpu {{gpu}}",
        ),
    ]


def _dashboard_settings(ns: str) -> dict[str, Any]:
    """The dashboard's title, time range, refresh and variables (datasources, the model)."""
    return {
        "title": "Triton inference + GPU",
        "schemaVersion": 39,
        "version": 1,
        "timezone": "utc",
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "tags": ["triton", "gpu"],
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Datasource"},
                {"name": "logs", "type": "datasource", "query": "loki", "label": "Logs"},
                # The models Triton serves here; "All" is `.*` (the log panels' line filter).
                # ref: https://grafana.com/docs/grafana/latest/datasources/prometheus/template-variables/
                {
                    "name": "model",
                    "type": "query",
                    "label": "Model",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": {"query": f"label_values(nv_inference_request_success{{{ns}}}, model)", "refId": "model"},
                    "definition": f"label_values(nv_inference_request_success{{{ns}}}, model)",
                    "refresh": 2,
                    "includeAll": True,
                    "allValue": ".*",
                    "multi": False,
                    "current": {"text": "All", "value": "$__all"},
                },
            ]
        },
    }
