"""The PrometheusRule's alert groups (`triton`, `gpu`): one rule per alert, each summary stating the
wait the rule really has (tests/components/monitoring/test_rules.py checks it with promtool), each
with a `runbook_url` to its section of docs/runbooks.md.

Alerts: queue p99, failure ratio (all requests failing included), no ready replica, model load
failures, restarts, a gray release left running past its deadline (two versions of a model
taking requests), the repository agent's (components/monitoring/agent.py: a replica's agent
behind its peers, a pinned version rejected or failed, a pin not served within the load timeout),
GPU idle, GPU saturated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.kubernetes import naming
from components.kubernetes.triton_server import AGENT_SIDECAR, TRITON_CONTAINER
from components.monitoring.agent import AgentAlertTiming, agent_rules
from components.monitoring.queries import (
    CANARY_WINDOW,
    duration_of,
    duration_seconds,
    failure_ratio_query,
)

if TYPE_CHECKING:
    from components.monitoring.args import MonitoredDeployment, MonitoringArgs

# The runbook page, a file of this repository: one section per alert, headed by the alert's name.
RUNBOOKS_PAGE = "docs/runbooks.md"
GIT_REF_PREFIXES = ("refs/heads/", "refs/tags/")


def runbooks_url(github_repository: str, git_ref: str) -> str:
    """The runbook page as an operator opens it from an alert (Slack, Alertmanager's UI: a path inside
    the repository is no link there): on GitHub, in `github_repository` (owner/name), at the branch or
    tag `git_ref` names (refs/heads/main -> https://github.com/<owner/name>/blob/main/docs/runbooks.md).
    The program passes the stack's first `githubDeployRefs` entry: the ref its deploys run from."""
    for prefix in GIT_REF_PREFIXES:
        name = git_ref.removeprefix(prefix)
        if git_ref.startswith(prefix) and name:
            return f"https://github.com/{github_repository}/blob/{name}/{RUNBOOKS_PAGE}"
    raise ValueError(
        f"runbooks_url git_ref: {git_ref!r} is not allowed; allowed: refs/heads/<branch> or refs/tags/<tag>"
    )


def runbook_url(page: str, alert: str) -> str:
    """`alert`'s section of the runbook page: GitHub's anchor of the heading `## <alert>` is the name
    in lower case."""
    return f"{page}#{alert.lower()}"


def _with_runbook(rule: dict[str, Any], page: str) -> dict[str, Any]:
    return {**rule, "annotations": {**rule["annotations"], "runbook_url": runbook_url(page, rule["alert"])}}


def canary_stuck_rule(ns: str, d: MonitoredDeployment) -> dict[str, Any]:
    """TritonCanaryStuck for deployment `d`: a model of its pods with two (or more) versions taking
    requests, for longer than a gray release may run. The wait is the deadline plus CANARY_WINDOW:
    a version's rate stays above 0 for that window after its last request, so a release that
    promotes or aborts right at its deadline never fires (tests/components/monitoring/test_rules.py)."""
    pods = f'{ns},pod=~"{naming.triton_app_name(d.name)}-.*"'
    versions = (
        f"count by (namespace, model, version) (rate(nv_inference_request_success{{{pods}}}[{CANARY_WINDOW}]) > 0)"
    )
    wait, wait_words = duration_of(d.canary_deadline_seconds + duration_seconds(CANARY_WINDOW))
    _, deadline_words = duration_of(d.canary_deadline_seconds)
    return {
        "alert": "TritonCanaryStuck",
        "expr": f"count by (namespace, model) ({versions}) > 1",
        "for": wait,
        "labels": {"severity": "warning", "deployment": d.name},
        "annotations": {
            "summary": (
                f"Triton {d.name}: two versions of {{{{ $labels.model }}}} took requests at once for {wait_words} "
                f"(the canary deadline, {deadline_words}, plus the {CANARY_WINDOW} rate window): a gray release "
                "is stuck or was left behind; run `model-sync status` and `model-sync canary --abort`"
            ),
            "description": (
                "A gray release serves a new version on some replicas and the stable one on the rest; "
                "`model-sync canary` (or `model-sync promote --to prod`) promotes or aborts it by its deadline "
                f"(tritonDeployments.{d.name}.canary.deadlineSeconds). Past it, the run that owns the canary "
                "record died (a cancelled CI job, a lost runner) or cannot finish: `model-sync status` shows the "
                "canary record and which replicas serve which version; `model-sync canary --abort` returns every "
                "replica to the stable version."
            ),
        },
    }


def restarting_rule(alert: str, restarts: str, who: str, why: str) -> dict[str, Any]:
    """`alert`: the container whose restart count is the series `restarts` restarted more than twice
    within 30 minutes. Restarts seen within the window, counted exactly: increase() extrapolates to
    the window's edges (2 restarts read 2.06 and fired). A pod's restart count never goes down; a
    new pod is a new series."""
    return {
        "alert": alert,
        "expr": f"max_over_time({restarts}[30m]) - min_over_time({restarts}[30m]) > 2",
        "for": "0m",
        "labels": {"severity": "warning"},
        "annotations": {"summary": f"{who} restarted more than twice in 30 minutes ({why})"},
    }


def alert_rule_groups(args: MonitoringArgs, agent_timing: AgentAlertTiming | None = None) -> list[dict[str, Any]]:
    """The PrometheusRule's groups: `triton` (per deployment: queue p99 and a stuck gray release; then
    the namespace's failure ratio, readiness, load failures and restarts), `model-sync-agent` (per
    deployment, on the agent's own metrics: components/monitoring/agent.py, its waits from
    `agent_timing`) and `gpu` (DCGM). Every rule's annotations carry `runbook_url`:
    `<args.runbooks_url>#<alert name in lower case>`."""
    ns = f'namespace="{args.triton_namespace}"'
    triton = [
        *(_queue_latency_rule(ns, d) for d in args.deployments),
        *(canary_stuck_rule(ns, d) for d in args.deployments),
        *_triton_namespace_rules(ns),
    ]
    gpu = _gpu_rules()
    agent = [rule for d in args.deployments for rule in agent_rules(args.triton_namespace, d, agent_timing)]
    # Every rule links its runbook section, added here so that no rule can go without one.
    return [
        {"name": name, "rules": [_with_runbook(r, args.runbooks_url) for r in rules]}
        for name, rules in (("triton", triton), ("model-sync-agent", agent), ("gpu", gpu))
    ]


def _queue_latency_rule(ns: str, d: MonitoredDeployment) -> dict[str, Any]:
    """TritonQueueLatencyP99High of deployment `d`: its p99 queue time above 5x its HPA target."""
    threshold = 5 * d.queue_time_target_microseconds
    pods = f'{ns},pod=~"{naming.triton_app_name(d.name)}-.*"'
    return {
        "alert": "TritonQueueLatencyP99High",
        "expr": (f'max by (namespace, model) (nv_inference_queue_summary_us{{{pods},quantile="0.99"}}) > {threshold}'),
        "for": "10m",
        "labels": {"severity": "warning", "deployment": d.name},
        "annotations": {
            "summary": (
                f"Triton {d.name}: p99 queue time of {{{{ $labels.model }}}} above {threshold} µs "
                "(5x the HPA target) for 10 minutes"
            ),
            "description": (
                "Requests wait in Triton's queue: the HPA is at maxReplicas, GPU nodes cannot be added, "
                "or batching is misconfigured. (Triton times successful requests only: "
                "while every request fails, TritonInferenceFailureRatioHigh fires instead.)"
            ),
        },
    }


def _triton_namespace_rules(ns: str) -> list[dict[str, Any]]:
    """The Triton namespace's failure ratio, readiness, model loads and restarts."""
    return [*_triton_health_rules(ns), *_triton_restart_rules(ns)]


def _triton_health_rules(ns: str) -> list[dict[str, Any]]:
    """Failing requests, a deployment with no ready replica, a placed model that does not load."""
    return [
        {
            "alert": "TritonInferenceFailureRatioHigh",
            # 1 when every request fails (the dashboard's failure-ratio panel is the same query).
            "expr": f"{failure_ratio_query(ns, 'namespace, model')} > 0.05",
            "for": "10m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": (
                    "Triton: more than 5 % of requests to {{ $labels.model }} fail (up to all of them) for 10 minutes"
                )
            },
        },
        {
            "alert": "TritonNoReadyReplica",
            # Only while replicas are wanted: dev scales the Deployment to 0 on purpose
            # (docs/node-autoscaling.md). Both series carry namespace + deployment, so the
            # vector match is one-to-one on exactly those labels.
            # ref: https://prometheus.io/docs/prometheus/latest/querying/operators/#logical-set-binary-operators
            "expr": (
                f'(kube_deployment_status_replicas_available{{{ns},deployment=~"triton-.*"}} < 1) '
                f'and on (namespace, deployment) (kube_deployment_spec_replicas{{{ns},deployment=~"triton-.*"}} > 0)'
            ),
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "Triton deployment {{ $labels.deployment }} has no ready replica for 5 minutes"},
        },
        {
            "alert": "TritonModelLoadFailure",
            # The agent sidecar is ready exactly while every model it placed is READY in Triton
            # (--ready-file); a live tritonserver whose agent stays unready has a placed model
            # that neither loads nor was rolled back / removed. (A failed NEW push is rolled
            # back or removed by the agent and surfaces through `model-sync verify` instead.)
            # The agent is a native sidecar (an init container with restartPolicy Always):
            # kube-state-metrics reports its readiness as kube_pod_init_container_status_ready.
            # ref: https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/pod-metrics.md
            "expr": (
                f'(kube_pod_init_container_status_ready{{{ns},container="{AGENT_SIDECAR}"}} == 0) and on (namespace, pod) '
                f'(kube_pod_container_status_ready{{{ns},container="{TRITON_CONTAINER}"}} == 1)'
            ),
            "for": "15m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": (
                    "Triton pod {{ $labels.pod }} is live but a placed model is not READY for 15 minutes "
                    "(see the agent and tritonserver logs)"
                )
            },
        },
    ]


def _triton_restart_rules(ns: str) -> list[dict[str, Any]]:
    """tritonserver or the agent sidecar restarting."""
    return [
        restarting_rule(
            "TritonServerRestarting",
            f'kube_pod_container_status_restarts_total{{{ns},container="{TRITON_CONTAINER}"}}',
            "tritonserver in {{ $labels.pod }}",
            "startup budget exceeded or crash",
        ),
        # The agent is a native sidecar: kube-state-metrics counts its restarts as an init
        # container's. While it crash-loops no new pin is placed, and tritonserver (which a sidecar's
        # restart leaves running) keeps serving what it has; its readiness alert
        # (TritonModelLoadFailure) would name a model load instead.
        restarting_rule(
            "TritonAgentRestarting",
            f'kube_pod_init_container_status_restarts_total{{{ns},container="{AGENT_SIDECAR}"}}',
            "the model-sync agent in {{ $labels.pod }}",
            "no new pin is placed while it crash-loops; tritonserver keeps serving what it loaded; see the agent's log",
        ),
    ]


def _gpu_rules() -> list[dict[str, Any]]:
    """The `gpu` group (DCGM): a GPU idle or saturated."""
    return [
        # The wait is the `for:` over a short (5-minute) average: a long averaging window
        # adds nothing for a GPU idle or saturated from its first sample (the average is
        # true at once) and its own length for one that becomes so, so the wait would
        # depend on the history. The summary states what the rule does.
        {
            "alert": "GpuIdle",
            "expr": "avg by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m])) < 5",
            "for": "2h",
            "labels": {"severity": "info"},
            "annotations": {
                "summary": (
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} below 5 % utilisation (5-minute average) "
                    "for 2 hours: paying for an idle GPU"
                )
            },
        },
        {
            "alert": "GpuSaturated",
            "expr": "avg by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m])) > 95",
            "for": "30m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": (
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} above 95 % utilisation (5-minute average) "
                    "for 30 minutes"
                )
            },
        },
    ]
