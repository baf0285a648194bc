"""Every metric name the platform queries exists where it comes from.

The queries: the program's alert rules (PrometheusRule `triton-alerts`), its Grafana
dashboard, and the HPA metric's prometheus-adapter rule, expanded as the adapter expands it.
Where each name must exist:
- `nv_*`: the `/metrics` of the real tritonserver (the pinned nvidia-pytriton build), started
  here with the cloud Deployment's metrics flags, after one model loaded and served a request;
- `DCGM_*`: the counters file the dcgm-exporter chart renders from the program's values (the
  ConfigMap its DaemonSet mounts as `default-counters.csv`);
- `kube_*`: kube-state-metrics cannot run here; its names must be among those the pinned
  kube-prometheus-stack chart's own rules and dashboards query (written for the
  kube-state-metrics it ships), or listed in KUBE_STATE_METRICS below with the reason;
- `model_sync_agent_*`: the series the repository agent's own registry exposes
  (model_sync/agent/metrics.py, prometheus-client: a counter as `<name>_total`, a histogram as
  `_bucket`, `_sum` and `_count`).
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import promql_parser
import pytest

from model_sync.sandbox.procs import wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer
from tests.manifests._cluster import Cluster, cluster
from tests.support.triton import ADD_CONFIG, add_model_files, infer_http, triton_runtime  # noqa: F401

# kube-state-metrics series the platform queries that the chart's own rules and dashboards
# do not, each with the kube-state-metrics documentation page that names it.
KUBE_STATE_METRICS: dict[str, str] = {
    "kube_pod_container_status_ready": (
        "kube-state-metrics, "
        "https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/pod-metrics.md (STABLE)"
    ),
    # The agent is a native sidecar (an init container with restartPolicy Always).
    "kube_pod_init_container_status_ready": (
        "kube-state-metrics, "
        "https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/pod-metrics.md (STABLE)"
    ),
    "kube_pod_container_status_restarts_total": (
        "kube-state-metrics, "
        "https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/pod-metrics.md (STABLE)"
    ),
    "kube_pod_init_container_status_restarts_total": (
        "kube-state-metrics, "
        "https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/pod-metrics.md (STABLE)"
    ),
}


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (promql-parser's syntax tree)."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if type(node).__name__ == "VectorSelector":
            if node.name:
                names.add(node.name)
            return
        for attr in ("lhs", "rhs", "expr", "args", "param", "vector_selector"):
            child = getattr(node, attr, None)
            for c in child if isinstance(child, list) else [child]:
                if c is not None:
                    walk(c)

    walk(promql_parser.parse(expr))
    return names


def expand_adapter(query: str, series: str) -> str:
    """A prometheus-adapter metricsQuery as the adapter sends it for one pod."""
    return (
        query.replace("<<.Series>>", series)
        .replace("<<.LabelMatchers>>", 'namespace="triton",pod=~"triton-default-0"')
        .replace("<<.GroupBy>>", "pod")
    )


def queried(c: Cluster) -> dict[str, set[str]]:
    """Metric names -> where the platform queries them."""
    out: dict[str, set[str]] = {}

    def add(expr: str, where: str) -> None:
        for name in metric_names(expr):
            out.setdefault(name, set()).add(where)

    (rules,) = [o for o in c.of_kind("PrometheusRule") if o.source == "program" and o.name == "triton-alerts"]
    for group in rules.doc["spec"]["groups"]:
        for rule in group["rules"]:
            add(rule["expr"], f"alert {rule['alert']}")
    (board,) = [o for o in c.of_kind("ConfigMap") if o.source == "program" and o.name == "triton-dashboard"]
    for panel in json.loads(board.doc["data"]["triton.json"])["panels"]:
        if panel["type"] == "row":  # a row only groups the panels below it
            assert "targets" not in panel, panel["title"]
            continue
        # The Loki log panels: LogQL (tests/components/monitoring/test_log_queries.py).
        if panel["datasource"]["type"] != "prometheus":
            continue
        for target in panel["targets"]:
            add(target["expr"], f"dashboard panel {panel['title']!r}")
    for rule in c.releases["monitoring-prometheus-adapter"].values["rules"]["custom"]:
        series = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", rule["seriesQuery"])
        assert series is not None
        add(rule["seriesQuery"], "HPA metric (seriesQuery)")
        add(expand_adapter(rule["metricsQuery"], series.group(1)), "HPA metric (metricsQuery)")
    return out


def agent_series() -> set[str]:
    """The series names the agent's registry exposes, from its metric families' names and types."""
    from model_sync.agent.metrics import AgentMetrics

    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    return {f.name + s for f in AgentMetrics().registry.collect() for s in suffixes[f.type]}


def dcgm_counters(c: Cluster) -> set[str]:
    (cm,) = [
        d
        for d in c.rendered["gpu-operators-dcgm-exporter"]
        if d["kind"] == "ConfigMap" and "metrics" in (d.get("data") or {})
    ]
    return {
        line.split(",")[0].strip()
        for line in cm["data"]["metrics"].splitlines()
        if line.strip() and not line.strip().startswith("#")
    }


def chart_kube_state_metrics(c: Cluster) -> set[str]:
    """kube_* names in the kube-prometheus-stack chart's own rendered rules and dashboards."""
    text = json.dumps(c.rendered["monitoring-kube-prometheus-stack"])
    return set(re.findall(r"\bkube_[a-z0-9_]+\b", text))


@pytest.fixture(scope="module")
def triton_metrics(tmp_path_factory: pytest.TempPathFactory, triton_runtime: TritonRuntime) -> set[str]:  # noqa: F811
    """Metric names the real tritonserver exports after one model loaded and served a request."""
    tmp = tmp_path_factory.mktemp("metrics")
    repo = tmp / "repository"
    (repo / "probe" / "1").mkdir(parents=True)
    (repo / "probe" / "config.pbtxt").write_text(ADD_CONFIG.format(name="probe"))
    for name, body in add_model_files(1).items():
        (repo / "probe" / "1" / name).write_bytes(body)
    server = TritonServer(repo, tmp / "triton.log", runtime=triton_runtime).start()
    try:
        server.wait_version_ready("probe", 1)
        assert infer_http(server.http_url, "probe")[0] == 200
        url = f"http://127.0.0.1:{server.metrics_port}/metrics"

        def scrape() -> str:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return str(resp.read().decode())

        wait_until(lambda: 'nv_inference_request_success{model="probe"' in scrape(), 30, what="probe metrics")
        text = scrape()
    finally:
        server.stop()
    return {m.group(1) for m in re.finditer(r"^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) ", text, re.M)}


def test_local_tritonserver_runs_with_the_deployments_metrics_flags(tmp_path: Path) -> None:
    local = set(TritonServer(tmp_path, tmp_path / "log", runtime=TritonRuntime(tmp_path)).argv())
    (deployment,) = [
        o for o in cluster("prod").program if o["kind"] == "Deployment" and o["metadata"]["name"] == "triton-default"
    ]
    (container,) = [x for x in deployment["spec"]["template"]["spec"]["containers"] if x["name"] == "tritonserver"]
    flags = {a for a in container["args"] if a.startswith(("--allow-metrics", "--metrics-config"))}
    assert flags == {"--allow-metrics=true", "--metrics-config=summary_latencies=true"}
    assert flags <= local


@pytest.mark.e2e
def test_every_queried_metric_exists_where_it_comes_from(triton_metrics: set[str]) -> None:
    c = cluster("prod")
    names = queried(c)
    assert {
        "nv_inference_queue_duration_us",
        "nv_inference_request_success",
        "nv_inference_request_summary_us",  # the "Canary vs stable" p99 (summary_latencies=true)
        "DCGM_FI_DEV_GPU_UTIL",
        "kube_deployment_status_replicas_available",
    } <= set(names)
    assert "dashboard panel 'Canary vs stable: request p99 by version'" in names["nv_inference_request_summary_us"]
    assert "alert TritonCanaryStuck" in names["nv_inference_request_success"]
    dcgm, ksm, agent = dcgm_counters(c), chart_kube_state_metrics(c) | set(KUBE_STATE_METRICS), agent_series()
    assert "model_sync_agent_passes_total" in agent
    assert "DCGM_FI_DEV_GPU_UTIL" in dcgm
    assert "kube_pod_info" in ksm
    assert "nv_inference_count" in triton_metrics
    missing = []
    for name, where in sorted(names.items()):
        source = (
            triton_metrics
            if name.startswith("nv_")
            else dcgm
            if name.startswith("DCGM_")
            else ksm
            if name.startswith("kube_")
            else agent
            if name.startswith("model_sync_agent_")
            else set()
        )
        if name not in source:
            missing.append(f"{name} (queried by {', '.join(sorted(where))})")
    assert missing == []


def test_metric_names_are_read_from_the_syntax_tree() -> None:
    expr = 'sum by (m) (rate(a_total{x="y"}[5m])) / clamp_min(sum(increase(b[2m])), 1) and on (n) (c offset 5m > 1)'
    assert metric_names(expr) == {"a_total", "b", "c"}
    assert metric_names(expand_adapter("sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)", "q")) == {"q"}
