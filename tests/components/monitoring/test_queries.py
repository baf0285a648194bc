"""The HPA's queue-time metric as prometheus-adapter serves it: the recorded adapter rule and the query
builder. (The queries on a real Prometheus: test_rules.py and test_e2e.py; the LogQL: test_log_queries.py.)"""

from __future__ import annotations

from components.monitoring.queries import adapter_rules, queue_time_query
from components.triton_deployment import QUEUE_TIME_METRIC
from tests.components.monitoring._helpers import RELEASE
from tests.pulumi_kit import Run


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
    assert rules == adapter_rules()
    assert queue_time_query('namespace="x"', "pod", "5m").count("[5m]") == 5
    assert "* 300000000 /" in queue_time_query('namespace="x"', "pod", "5m")
