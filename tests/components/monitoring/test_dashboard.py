"""The dashboard ConfigMap as prod records it: labelled for Grafana's sidecar, the Triton and GPU panels,
the `Canary vs stable` row, the `Repository agent` row below everything. (Its queries on a real
Prometheus: test_rules.py and test_e2e.py.)"""

from __future__ import annotations

import json

from tests.components.monitoring._helpers import recorded
from tests.pulumi_kit import Run


def test_dashboard_is_labelled_for_grafana_and_queries_triton_and_the_gpus(prod: Run) -> None:
    cm = recorded(prod, "ConfigMap", "triton-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(cm["data"]["triton.json"])
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p.get("targets", []))
    assert "DCGM_FI_DEV_GPU_UTIL" in exprs
    assert "nv_inference_queue_duration_us" in exprs


def test_canary_vs_stable_row_compares_versions_side_by_side(prod: Run) -> None:
    board = json.loads(recorded(prod, "ConfigMap", "triton-dashboard")["data"]["triton.json"])
    panels = board["panels"]
    (row,) = [p for p in panels if p["type"] == "row" and p["title"] == "Canary vs stable"]
    assert row["title"] == "Canary vs stable"
    following = [p for p in panels if p["gridPos"]["y"] == row["gridPos"]["y"] + 1]
    assert [p["title"] for p in following] == [
        "Canary vs stable: requests / s by version",
        "Canary vs stable: failure ratio by version",
        "Canary vs stable: request p99 by version",
    ]
    # Side by side: one line of the 24-column grid, below the row, above the log panels.
    assert [(p["gridPos"]["x"], p["gridPos"]["w"]) for p in following] == [(0, 8), (8, 8), (16, 8)]
    logs = [p for p in panels if p["type"] == "logs"]
    assert min(p["gridPos"]["y"] for p in logs) >= row["gridPos"]["y"] + 1 + 8
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for p in following:
        (target,) = p["targets"]
        assert "by (model, version)" in target["expr"]
        assert 'model=~"$model"' in target["expr"]
        assert target["legendFormat"] == "{{model}} v{{version}}"
    p99 = following[2]["targets"][0]["expr"]
    assert p99 == (
        'max by (model, version) (nv_inference_request_summary_us{namespace="triton",model=~"$model",quantile="0.99"})'
    )


def test_repository_agent_row_comes_last_on_the_agents_own_metrics(prod: Run) -> None:
    board = json.loads(recorded(prod, "ConfigMap", "triton-dashboard")["data"]["triton.json"])
    panels = board["panels"]
    (row,) = [p for p in panels if p["type"] == "row" and p["title"] == "Repository agent"]
    below = [p for p in panels if p["gridPos"]["y"] > row["gridPos"]["y"]]
    above = [p for p in panels if p["gridPos"]["y"] < row["gridPos"]["y"]]
    assert max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in above) == row["gridPos"]["y"]  # nothing overlaps
    assert len(below) == 6
    assert all(p["title"].startswith("Agent: ") for p in below)
    assert all("model_sync_agent_" in p["targets"][0]["expr"] for p in below)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
