"""The HPA's queue-time metric as prometheus-adapter serves it: the recorded adapter rule and the query
builder. (The queries on a real Prometheus: test_rules.py and test_e2e.py; the LogQL: test_log_queries.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import promql_parser

from components.kubernetes.triton_server import QUEUE_TIME_METRIC
from components.monitoring.queries import queue_time_query
from tests.components.monitoring._helpers import RELEASE, program_rules
from tests.pulumi_kit import Run
from tests.support.prometheus import promtool_test, rules_file

# A Triton series as Prometheus stores it from the Triton ServiceMonitor's target (the operator
# adds namespace, pod, service, container, endpoint, job and instance).
TRITON = (
    'namespace="triton",pod="triton-default-7c9d8-abcde",service="triton-default",container="tritonserver",'
    'endpoint="metrics",job="triton-default",instance="10.0.2.7:8002"'
)


def test_adapter_metric_is_a_ratio_of_counter_increases(dev: Run) -> None:
    rules = dev.one(RELEASE, "monitoring-prometheus-adapter").inputs["values"]["rules"]
    (rule,) = rules["custom"]
    assert rule["name"]["as"] == QUEUE_TIME_METRIC
    q = rule["metricsQuery"]
    measured, pending = q.split(" or ")
    # Counters: increase() survives a tritonserver restart (counter reset); delta() does not.
    # While a request succeeded in the window: queue time over successful requests.
    assert measured == (
        "(sum(increase(nv_inference_queue_duration_us{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) / "
        "(sum(increase(nv_inference_request_success{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) > 0))"
    )
    # Otherwise Little's law over every completed request (failures included); 0 when idle.
    assert pending.startswith(
        "(sum(avg_over_time(nv_inference_pending_request_count{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) * "
        "120000000 / clamp_min("
    )
    assert "nv_inference_request_failure{<<.LabelMatchers>>}[2m]" in pending
    assert "delta(" not in q
    assert "rate(" not in q
    assert queue_time_query('namespace="x"', "pod", "5m").count("[5m]") == 5
    assert "* 300000000 /" in queue_time_query('namespace="x"', "pod", "5m")


def test_adapter_serves_one_metric_under_the_hpas_name_from_each_pods_series(dev: Run, tmp_path: Path) -> None:
    """What the recorded adapter rules must do for the HPAs: serve exactly one custom metric, under the
    name every HPA asks for, discovered from the series that name a namespace and a pod, which are the
    resources the adapter attaches the metric to (an HPA's `Pods` metric is read per pod)."""
    rules = dev.one(RELEASE, "monitoring-prometheus-adapter").inputs["values"]["rules"]
    # None of the chart's default rules (every container series as a custom metric), no resource or
    # external rules: one custom rule.
    assert rules["default"] is False
    assert sorted(rules) == ["custom", "default"]
    (rule,) = rules["custom"]

    # The discovery query is one selector of one series name that requires exactly the labels the
    # rule maps to Kubernetes resources, each to the resource of the same name.
    selector = promql_parser.parse(rule["seriesQuery"])
    assert type(selector).__name__ == "VectorSelector"
    series = selector.name
    required = {m.name for m in selector.matchers.matchers if str(m.op) == "MatchOp.NotEqual" and m.value == ""}
    assert len(selector.matchers.matchers) == len(required)
    overrides = rule["resources"]["overrides"]
    assert required == set(overrides) == {"namespace", "pod"}
    assert {label: o["resource"] for label, o in overrides.items()} == {"namespace": "namespace", "pod": "pod"}

    # The adapter names what it discovered by name.matches -> name.as (Go's ReplaceAllString; Python's
    # re.sub agrees on this pattern): the series becomes the metric every recorded HPA reads.
    assert re.fullmatch(rule["name"]["matches"], series)
    served = re.sub(rule["name"]["matches"], rule["name"]["as"], series)
    hpa_metrics = {
        m["pods"]["metric"]["name"]
        for r in dev.kubernetes_objects()
        if r.inputs.get("kind") == "HorizontalPodAutoscaler"
        for m in r.inputs["spec"]["metrics"]
    }
    assert hpa_metrics == {served} == {QUEUE_TIME_METRIC}
    # metricsQuery reads the discovered series (it is what <<.Series>> stands for).
    assert f"{series}{{<<.LabelMatchers>>}}" in rule["metricsQuery"]

    # On a real Prometheus the discovery query selects the pod's series and not the same metric from a
    # target without a pod (a static scrape of a Triton outside the cluster, a service-level series).
    model = 'model="resnet",version="1"'
    pod_series = f"{series}{{{model},{TRITON}}}"
    without_pod = [
        f'{series}{{{model},job="triton-static",instance="10.9.0.4:8002"}}',
        f'{series}{{{model},namespace="triton",service="triton-default",job="triton-default"}}',
    ]
    proc = promtool_test(
        rules_file(program_rules(dev)),
        {
            "evaluation_interval": "1m",
            "tests": [
                {
                    "interval": "1m",
                    "input_series": [{"series": s, "values": "0+1000x10"} for s in [pod_series, *without_pod]],
                    "promql_expr_test": [
                        {
                            "expr": rule["seriesQuery"],
                            "eval_time": "5m",
                            "exp_samples": [{"labels": pod_series, "value": 5000}],
                        }
                    ],
                }
            ],
        },
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
