"""The PromQL and LogQL the monitoring stack runs: the HPA's queue-time metric (and the adapter rule
that serves it), the failure ratio the alert and the dashboard share, the gray release's canary vs
stable comparison, and the dashboard's log panels.

- queue_time_query: increase(nv_inference_queue_duration_us[2m]) / increase(nv_inference_request_success[2m])
  while a request succeeded in the window (a ratio of counter increases, not a rate;
  increase() handles the counter resets of a tritonserver restart, delta() is for gauges);
  while none did, Little's law over the pending-request gauge and every completed request
  (failed ones included), so failing requests that wait never read as an idle pod.
- adapter_rules: prometheus-adapter serves it per pod as `triton_queue_time_per_request_us`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.kubernetes import naming
from components.kubernetes.triton_server import AGENT_INIT_CONTAINER, AGENT_SIDECAR, QUEUE_TIME_METRIC, TRITON_CONTAINER

if TYPE_CHECKING:
    from components.monitoring.args import MonitoredDeployment

QUEUE_WINDOW = "2m"
FAILURE_WINDOW = "5m"
# The rate window of the gray-release alert and panels: a version "takes requests" while its rate
# over this window is above 0, so it still does for up to this long after its last request.
CANARY_WINDOW = "5m"
AGENT_CONTAINERS = (AGENT_INIT_CONTAINER, AGENT_SIDECAR)


def duration_seconds(duration: str) -> int:
    """A PromQL duration of one unit ("90s", "2m", "1h") in seconds."""
    return int(duration[:-1]) * {"s": 1, "m": 60, "h": 3600}[duration[-1]]


def duration_of(seconds: int) -> tuple[str, str]:
    """(PromQL duration, words) of a whole number of seconds: minutes where they are whole
    (an alert's `for:` and the wait its summary states)."""
    if seconds % 60 == 0:
        minutes = seconds // 60
        return f"{minutes}m", f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds}s", f"{seconds} second{'s' if seconds != 1 else ''}"


def queue_time_query(
    matchers: str = "<<.LabelMatchers>>", group_by: str = "<<.GroupBy>>", window: str = QUEUE_WINDOW
) -> str:
    """Average queue time per request (µs) over `window`, what the HPA scales on.

    Measured: the increase of the queue-duration counter over the increase of the success
    counter, while at least one request succeeded in the window. Both are counters, so
    increase() (reset-aware: a tritonserver restart starts them at 0 again) and never
    delta(), which is for gauges and turns a reset into a large negative value.

    Triton adds queue time for successful requests only (measured on 2.51: a request whose
    model raised counts in nv_inference_request_failure and nowhere in the queue duration).
    So while no request succeeds, the measured ratio does not exist and the second branch
    answers: Little's law, time waited = (average pending requests x window) / requests
    completed (success + failure), from Triton's nv_inference_pending_request_count gauge.
    Failing requests that queue therefore keep the HPA from scaling down (a queue timeout
    under overload is a failure), and a pod where nothing waits reads 0 (an idle pod,
    or a model that fails at once: more replicas would not help; the failure-ratio alert
    fires). The estimate is coarse (a gauge sampled at the scrape interval) and reads high
    for a pod younger than the window: the safe direction for an autoscaler.
    It always has a value for a pod that serves a model, so the HPA enforces minReplicas.
    ref: https://prometheus.io/docs/prometheus/latest/querying/functions/#increase
    ref: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/metrics.md#pending-request-count"""

    def increase(metric: str) -> str:
        return f"sum(increase({metric}{{{matchers}}}[{window}])) by ({group_by})"

    measured = f"{increase('nv_inference_queue_duration_us')} / ({increase('nv_inference_request_success')} > 0)"
    pending = (
        f"sum(avg_over_time(nv_inference_pending_request_count{{{matchers}}}[{window}])) by ({group_by}) "
        f"* {duration_seconds(window) * 1_000_000} / "
        f"clamp_min({increase('nv_inference_request_success')} + {increase('nv_inference_request_failure')}, 1)"
    )
    return f"({measured}) or ({pending})"


def failure_ratio_query(matchers: str, by: str, window: str = FAILURE_WINDOW) -> str:
    """Failed requests / all requests (failed + successful) over `window`, by `by`: 1 when
    every request fails, 0 when idle. (nv_inference_count counts successful inferences
    only: it is no denominator.) The alert and the dashboard both use this one query."""
    failed = f"sum by ({by}) (rate(nv_inference_request_failure{{{matchers}}}[{window}]))"
    succeeded = f"sum by ({by}) (rate(nv_inference_request_success{{{matchers}}}[{window}]))"
    return f"{failed} / clamp_min({failed} + {succeeded}, 1e-9)"


def adapter_rules() -> dict[str, Any]:
    """prometheus-adapter's rules: the HPA metric QUEUE_TIME_METRIC per pod (queue_time_query), from the
    series the Triton ServiceMonitor labels with namespace and pod, and none of the chart's default rules."""
    # ref: https://github.com/kubernetes-sigs/prometheus-adapter/blob/master/docs/config.md
    return {
        "default": False,
        "custom": [
            {
                "seriesQuery": 'nv_inference_queue_duration_us{namespace!="",pod!=""}',
                "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
                "name": {"matches": "^nv_inference_queue_duration_us$", "as": QUEUE_TIME_METRIC},
                "metricsQuery": queue_time_query(),
            }
        ],
    }


def canary_queries(triton_namespace: str) -> dict[str, tuple[str, str]]:
    """The "Canary vs stable" row (title -> (PromQL, unit)): every request, the failure ratio and
    the request p99 of each model's versions side by side, as `model-sync canary` compares them
    (a gray release serves the canary version on some replicas, the stable one on the rest),
    filtered by the dashboard's `model` variable. The p99 is Triton's own summary quantile
    (`--metrics-config summary_latencies=true`), the highest replica's."""
    m = f'namespace="{triton_namespace}",model=~"$model"'
    by = "model, version"
    every = (
        f"sum by ({by}) (rate(nv_inference_request_success{{{m}}}[{CANARY_WINDOW}])) + "
        f"sum by ({by}) (rate(nv_inference_request_failure{{{m}}}[{CANARY_WINDOW}]))"
    )
    return {
        "Canary vs stable: requests / s by version": (every, "reqps"),
        "Canary vs stable: failure ratio by version": (failure_ratio_query(m, by, CANARY_WINDOW), "percentunit"),
        "Canary vs stable: request p99 by version": (
            f'max by ({by}) (nv_inference_request_summary_us{{{m},quantile="0.99"}})',
            "µs",
        ),
    }


# The Envoy proxies' container (Envoy Gateway names it `envoy`) and the access-log fields the
# per-client panels read (components/gateway/proxy.py, ACCESS_LOG_FIELDS).
PROXY_CONTAINER = "envoy"


def client_queries(ingress_namespace: str) -> dict[str, str]:
    """LogQL metric queries of the dashboard's per-client panels (title -> query), over the proxies'
    JSON access log: requests, errors (HTTP 5xx, or a gRPC status other than OK) and the requests
    the ingress itself turned away (401 unauthenticated, 403 denied, 413 too large, 429 rate
    limited), each by `client` (the API client or the token's client claim; `-` when unknown).
    ref: https://grafana.com/docs/loki/latest/query/metric_queries/"""
    stream = f'{{namespace="{ingress_namespace}", container="{PROXY_CONTAINER}"}} | json | __error__=""'
    window = "[$__auto]"
    return {
        "Requests / s by client": f"sum by (client) (rate({stream} {window}))",
        "Errors / s by client (5xx, gRPC not OK)": (
            f"sum by (client) (rate({stream} | response_code >= 500 or grpc_status > 0 {window}))"
        ),
        "Refused by the ingress / s by client and code": (
            f'sum by (client, response_code) (rate({stream} | response_code =~ "401|403|413|429" {window}))'
        ),
    }


def log_queries(triton_namespace: str, deployments: tuple[MonitoredDeployment, ...]) -> dict[str, str]:
    """LogQL of the dashboard's log panels (title -> query): tritonserver per deployment and
    the agent (its init run and the sidecar) of every deployment, each filtered by the
    dashboard's `model` variable (`.*` for all: Triton and the agent name the model in every
    line about it). Labels as Alloy attaches them (components/log_shipping.py).
    ref: https://grafana.com/docs/loki/latest/query/log_queries/"""
    ns = f'namespace="{triton_namespace}"'
    queries = {
        f"Triton logs: deployment {d.name}": (
            f'{{{ns}, container="{TRITON_CONTAINER}", pod=~"{naming.triton_app_name(d.name)}-.*"}} |~ "$model"'
        )
        for d in deployments
    }
    queries["Agent logs (model sync, every deployment)"] = (
        f'{{{ns}, container=~"{"|".join(AGENT_CONTAINERS)}"}} |~ "$model"'
    )
    return queries
