"""`promtool test rules` (Debian's Prometheus, tests/support/prometheus.py) over the program's
alert rules as recorded in the prod stack's PrometheusRule, verbatim.

Every alert: it fires after its `for:` and not one evaluation before (the wait its summary
claims, read from the summary's "for N minutes/hours"), and not at the edge of its
threshold. Input series carry the names and labels the real exporters emit: Triton 2.51's
`nv_*` (failures by `reason`), kube-state-metrics (the agent is a native sidecar: its
readiness is `kube_pod_init_container_status_ready`), dcgm-exporter 4.1.1's default
counters. The dashboard's failure-ratio panel and the HPA query are checked the same way
(`promql_expr_test`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.components.monitoring._helpers import alert, program_dashboard, program_rules
from tests.pulumi_kit import Run
from tests.support.prometheus import promtool_test, rules_file

NS = "triton"
POD = "triton-default-7c9d8-abcde"
KSM = 'job="kube-state-metrics",instance="10.0.1.5:8080"'
TRITON = (
    f'namespace="{NS}",pod="{POD}",service="triton-default",container="tritonserver",'
    'endpoint="metrics",job="triton-default",instance="10.0.2.7:8002"'
)
DCGM = (
    'gpu="0",UUID="GPU-1b2c3d4e",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",'
    'Hostname="ip-10-0-2-7",DCGM_FI_DRIVER_VERSION="570.124.06",job="dcgm-exporter",instance="10.0.2.7:9400"'
)
HOUR = 60


def claimed_wait_minutes(rule: dict[str, Any]) -> int:
    """The wait the summary claims ("... for 10 minutes", "... for 2 hours")."""
    m = re.search(r"\bfor (\d+) (minutes|hours)\b", rule["annotations"]["summary"])
    assert m, f"{rule['alert']}: its summary states no wait: {rule['annotations']['summary']!r}"
    return int(m.group(1)) * (HOUR if m.group(2) == "hours" else 1)


def labels_of(series: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', series))


def expected_alert(rule: dict[str, Any], series_labels: dict[str, str]) -> dict[str, Any]:
    labels = {**series_labels, **rule["labels"]}
    render = lambda text: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)  # noqa: E731
    return {"exp_labels": labels, "exp_annotations": {k: render(v) for k, v in rule["annotations"].items()}}


def run_tests(groups: list[dict[str, Any]], tests: list[dict[str, Any]], tmp: Path) -> None:
    proc = promtool_test(rules_file(groups), {"evaluation_interval": "1m", "tests": tests}, tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def fires_after_claim(
    rule: dict[str, Any], series: list[dict[str, str]], active_at: int, labels: dict[str, str]
) -> dict[str, Any]:
    """A promtool test: condition true from minute `active_at`; silent one minute before the
    claimed wait has passed, firing (with these labels and rendered annotations) at it."""
    wait = claimed_wait_minutes(rule)
    return {
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": f"{active_at + wait - 1}m", "alertname": rule["alert"], "exp_alerts": []},
            {
                "eval_time": f"{active_at + wait}m",
                "alertname": rule["alert"],
                "exp_alerts": [expected_alert(rule, labels)],
            },
        ],
    }


def never_fires(rule: dict[str, Any], series: list[dict[str, str]], minutes: list[int] | list[str]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": m if isinstance(m, str) else f"{m}m", "alertname": rule["alert"], "exp_alerts": []}
            for m in minutes
        ],
    }


def s(series: str, values: str) -> dict[str, str]:
    return {"series": series, "values": values}


def requests(failed_per_min: int, ok_per_min: int, minutes: int = 40, model: str = "resnet") -> list[dict[str, str]]:
    """Triton's request counters for one model: failures counted under reason="BACKEND"."""
    m = f'model="{model}",version="1",{TRITON}'
    out = [
        s(f"nv_inference_request_success{{{m}}}", f"0+{ok_per_min}x{minutes}"),
        s(f"nv_inference_count{{{m}}}", f"0+{ok_per_min}x{minutes}"),
    ]
    for reason in ("OTHER", "CANCELED", "REJECTED"):
        out.append(s(f'nv_inference_request_failure{{{m},reason="{reason}"}}', f"0x{minutes}"))
    out.append(s(f'nv_inference_request_failure{{{m},reason="BACKEND"}}', f"0+{failed_per_min}x{minutes}"))
    return out


def test_every_alert_states_the_wait_promtool_sees(prod: Run) -> None:
    groups = program_rules(prod)
    names = {r["alert"] for g in groups for r in g["rules"]}
    assert names == {
        "TritonQueueLatencyP99High",
        "TritonInferenceFailureRatioHigh",
        "TritonNoReadyReplica",
        "TritonModelLoadFailure",
        "TritonServerRestarting",
        "TritonAgentRestarting",
        "TritonCanaryStuck",
        "GpuIdle",
        "GpuSaturated",
    }
    for g in groups:
        for r in g["rules"]:
            if not r["alert"].endswith("Restarting"):  # a window, not a wait: test_restarts
                assert claimed_wait_minutes(r) == int(r["for"][:-1]) * (HOUR if r["for"].endswith("h") else 1), r


def test_queue_p99(prod: Run, tmp_path: Path) -> None:
    groups = program_rules(prod)
    rule = alert(groups, "TritonQueueLatencyP99High", "default")
    threshold = int(rule["expr"].rsplit("> ", 1)[1])
    p99 = f'nv_inference_queue_summary_us{{model="resnet",version="1",quantile="0.99",{TRITON}}}'
    other = p99.replace(POD, "triton-large-5f6d7-zyxwv")  # the large deployment's pod: its own, higher threshold
    run_tests(
        groups,
        [
            fires_after_claim(rule, [s(p99, f"{threshold + 1}x30")], 0, {"namespace": NS, "model": "resnet"}),
            # At the threshold, and another deployment's pod above it: not this rule's alert.
            never_fires(rule, [s(p99, f"{threshold}x30"), s(other, f"{threshold + 1}x30")], [10, 20, 30]),
        ],
        tmp_path,
    )


def test_failure_ratio_alert_counts_every_request_and_fires_when_all_fail(prod: Run, tmp_path: Path) -> None:
    groups = program_rules(prod)
    rule = alert(groups, "TritonInferenceFailureRatioHigh")
    labels = {"namespace": NS, "model": "resnet"}
    run_tests(
        groups,
        [
            # Counters start at 0: rate() has two samples (the condition holds) from minute 1.
            fires_after_claim(rule, requests(3, 17), 1, labels),  # 15 %
            fires_after_claim(rule, requests(20, 0), 1, labels),  # every request fails
            never_fires(rule, requests(1, 19), [11, 20, 40]),  # exactly 5 %: the edge
            never_fires(rule, requests(0, 0), [11, 40]),  # idle
        ],
        tmp_path,
    )


def test_no_ready_replica(prod: Run, tmp_path: Path) -> None:
    groups = program_rules(prod)
    rule = alert(groups, "TritonNoReadyReplica")
    d = f'namespace="{NS}",deployment="triton-default",{KSM}'
    run_tests(
        groups,
        [
            fires_after_claim(
                rule,
                [
                    s(f"kube_deployment_status_replicas_available{{{d}}}", "0x20"),
                    s(f"kube_deployment_spec_replicas{{{d}}}", "2x20"),
                ],
                0,
                labels_of(d),
            ),
            # Scaled to 0 on purpose (dev), and one ready replica: silent.
            never_fires(
                rule,
                [
                    s(f"kube_deployment_status_replicas_available{{{d}}}", "0x20"),
                    s(f"kube_deployment_spec_replicas{{{d}}}", "0x20"),
                ],
                [6, 20],
            ),
            never_fires(
                rule,
                [
                    s(f"kube_deployment_status_replicas_available{{{d}}}", "1x20"),
                    s(f"kube_deployment_spec_replicas{{{d}}}", "2x20"),
                ],
                [6, 20],
            ),
        ],
        tmp_path,
    )


def test_model_load_failure_reads_the_native_sidecars_readiness(prod: Run, tmp_path: Path) -> None:
    """kube-state-metrics reports a native sidecar (init container, restartPolicy Always)
    under kube_pod_init_container_*; kube_pod_container_status_ready{container="agent"}
    never exists."""
    groups = program_rules(prod)
    rule = alert(groups, "TritonModelLoadFailure")
    pod = f'namespace="{NS}",pod="{POD}",uid="0f1e2d3c",{KSM}'
    agent = s(f'kube_pod_init_container_status_ready{{{pod},container="agent"}}', "0x30")
    agent_init = s(
        f'kube_pod_init_container_status_ready{{{pod},container="agent-init"}}', "0x30"
    )  # completed: not ready
    live = s(f'kube_pod_container_status_ready{{{pod},container="tritonserver"}}', "1x30")
    run_tests(
        groups,
        [
            fires_after_claim(rule, [agent, agent_init, live], 0, {**labels_of(pod), "container": "agent"}),
            # tritonserver itself not ready (starting, or down: other alerts), agent ready: silent.
            never_fires(
                rule, [agent, s(f'kube_pod_container_status_ready{{{pod},container="tritonserver"}}', "0x30")], [16, 30]
            ),
            never_fires(
                rule, [s(f'kube_pod_init_container_status_ready{{{pod},container="agent"}}', "1x30"), live], [16, 30]
            ),
        ],
        tmp_path,
    )


@pytest.mark.parametrize(
    ("name", "restarts", "container"),
    [
        ("TritonServerRestarting", "kube_pod_container_status_restarts_total", "tritonserver"),
        # The agent is a native sidecar: kube-state-metrics counts it among the init containers.
        ("TritonAgentRestarting", "kube_pod_init_container_status_restarts_total", "agent"),
    ],
)
def test_restarts(prod: Run, tmp_path: Path, name: str, restarts: str, container: str) -> None:
    """ "More than twice in 30 minutes": the third restart within 30 minutes fires at once;
    two never do. (increase() extrapolates to the window's edges: evaluated between two
    scrapes, as a real Prometheus is, 2 restarts read 2.07 and fired.) Another container's
    restarts in the same pod never fire it."""
    groups = program_rules(prod)
    rule = alert(groups, name)
    assert "more than twice in 30 minutes" in rule["annotations"]["summary"]
    series = f'{restarts}{{namespace="{NS}",pod="{POD}",uid="0f1e2d3c",container="{container}",{KSM}}}'
    others = [
        f'{metric}{{namespace="{NS}",pod="{POD}",uid="0f1e2d3c",container="{other}",{KSM}}}'
        for metric, other in (
            ("kube_pod_container_status_restarts_total", "tritonserver"),
            ("kube_pod_init_container_status_restarts_total", "agent"),
            ("kube_pod_init_container_status_restarts_total", "agent-init"),
        )
        if (metric, other) != (restarts, container)
    ]
    labels = labels_of(series)
    three = s(series, "0x4 1x9 2x9 3x15")  # restarts at minutes 5, 15 and 25
    run_tests(
        groups,
        [
            {
                "interval": "1m",
                "input_series": [three],
                "alert_rule_test": [
                    {"eval_time": "24m", "alertname": rule["alert"], "exp_alerts": []},
                    {"eval_time": "25m", "alertname": rule["alert"], "exp_alerts": [expected_alert(rule, labels)]},
                ],
            },
            # Exactly two (at 15 and 25, one restart long before), evaluated between scrapes.
            never_fires(rule, [s(series, "1x14 2x9 3x40")], [f"{m}m30s" for m in range(10, 60, 2)]),
            never_fires(
                rule, [s(series, "0x4 1x14 2x19 3x20")], [f"{m}m30s" for m in range(0, 60, 3)]
            ),  # 5, 20, 40: never 3 in 30 min
            never_fires(rule, [s(other, "0x4 1x9 2x9 3x15") for other in others], [f"{m}m" for m in range(20, 40, 2)]),
        ],
        tmp_path,
    )


def served(
    version: str,
    pod: str,
    ok_per_min: int,
    failed_per_min: int = 0,
    minutes: int = 120,
    *,
    model: str = "resnet18",
    stops_at: int | None = None,
) -> list[dict[str, str]]:
    """One model version's request counters on one pod (Triton 2.51's labels); `stops_at`: the
    minute from which it takes no more requests (its counters stay where they are)."""
    labels = f'model="{model}",version="{version}",{TRITON.replace(POD, pod)}'

    def counter(per_min: int) -> str:
        if stops_at is None:
            return f"0+{per_min}x{minutes}"
        return f"0+{per_min}x{stops_at} {per_min * stops_at}x{minutes - stops_at}"

    out = [s(f"nv_inference_request_success{{{labels}}}", counter(ok_per_min))]
    for reason in ("OTHER", "CANCELED", "REJECTED"):
        out.append(s(f'nv_inference_request_failure{{{labels},reason="{reason}"}}', f"0x{minutes}"))
    out.append(s(f'nv_inference_request_failure{{{labels},reason="BACKEND"}}', counter(failed_per_min)))
    return out


STABLE_POD, CANARY_POD = "triton-default-7c9d8-aaaaa", "triton-default-7c9d8-bbbbb"
LARGE_POD = "triton-large-5f6d7-zyxwv"


def test_canary_stuck_fires_with_two_versions_past_the_deadline_and_never_with_one(prod: Run, tmp_path: Path) -> None:
    """A gray release serves version 2 on one replica and version 1 on the other. Left running (its
    CI run died), the alert fires once the deadline (1 h for `default`) and the 5-minute rate window
    have passed; one version on every replica never fires (an idle second version loaded beside it
    neither), a release that promotes right at its deadline never fires, and another deployment's
    two versions are that deployment's alert, after its own deadline (`large`: 90 minutes)."""
    groups = program_rules(prod)
    rule = alert(groups, "TritonCanaryStuck", "default")
    large = alert(groups, "TritonCanaryStuck", "large")
    labels = {"namespace": NS, "model": "resnet18"}
    two = served("1", STABLE_POD, 90) + served("2", CANARY_POD, 10)
    deadline_minutes = 60
    assert claimed_wait_minutes(rule) == deadline_minutes + 5
    run_tests(
        groups,
        [
            # Counters start at 0: rate() has two samples (the condition holds) from minute 1.
            fires_after_claim(rule, two, 1, labels),
            # One version everywhere; version 2 loaded on the canary pod but taking no request.
            never_fires(rule, served("1", STABLE_POD, 90) + served("1", CANARY_POD, 90), [66, 90, 119]),
            never_fires(
                rule, served("1", STABLE_POD, 90) + served("1", CANARY_POD, 90) + served("2", CANARY_POD, 0), [66, 119]
            ),
            # Promoted at the deadline (minute 60): version 1 stops; its 5-minute rate is above 0 up
            # to minute 64, so two versions "took requests" for 64 minutes: below the wait.
            never_fires(
                rule, served("1", STABLE_POD, 90, stops_at=60) + served("2", CANARY_POD, 10), [61, 65, 66, 119]
            ),
            # The large deployment's pods: no alert after the default's wait (the alert name is shared: the
            # large rule's fires only after its own 90 + 5 minutes).
            never_fires(
                rule,
                served("1", LARGE_POD, 90, model="reranker-large")
                + served("2", LARGE_POD.replace("zyxwv", "vwxyz"), 10, model="reranker-large"),
                [66, 95],
            ),
            fires_after_claim(
                large,
                served("1", LARGE_POD, 90, model="reranker-large")
                + served("2", LARGE_POD.replace("zyxwv", "vwxyz"), 10, model="reranker-large"),
                1,
                {"namespace": NS, "model": "reranker-large"},
            ),
        ],
        tmp_path,
    )


def test_canary_vs_stable_panels_compare_the_versions(prod: Run, tmp_path: Path) -> None:
    """The row's three panels on the series of a running gray release (stable version 1: 90
    requests a minute, none failing, p99 20 ms; canary version 2: 10 a minute, one failing, p99
    30 ms), with the dashboard's `model` variable at All (`.*`) and at one model: one series per
    (model, version), another model's only under All."""
    board = program_dashboard(prod)
    (row,) = [p for p in board["panels"] if p["type"] == "row" and p["title"] == "Canary vs stable"]
    panels = {
        p["title"]: p["targets"][0]["expr"] for p in board["panels"] if p["title"].startswith("Canary vs stable:")
    }
    assert len(panels) == 3
    p99 = "nv_inference_request_summary_us"
    series = (
        served("1", STABLE_POD, 81 + 9)
        + served("2", CANARY_POD, 9, 1)
        + served("1", STABLE_POD, 30, model="text-encoder")
        + [
            s(f'{p99}{{model="resnet18",version="1",quantile="0.99",{TRITON.replace(POD, STABLE_POD)}}}', "20000x40"),
            s(f'{p99}{{model="resnet18",version="2",quantile="0.99",{TRITON.replace(POD, CANARY_POD)}}}', "30000x40"),
            s(f'{p99}{{model="resnet18",version="1",quantile="0.5",{TRITON.replace(POD, STABLE_POD)}}}', "5000x40"),
            s(
                f'{p99}{{model="text-encoder",version="1",quantile="0.99",{TRITON.replace(POD, STABLE_POD)}}}',
                "7000x40",
            ),
        ]
    )
    want = {
        "Canary vs stable: requests / s by version": {"1": 90 / 60, "2": 10 / 60},
        "Canary vs stable: failure ratio by version": {"1": 0.0, "2": 0.1},
        "Canary vs stable: request p99 by version": {"1": 20_000.0, "2": 30_000.0},
    }
    other = {
        "Canary vs stable: requests / s by version": 30 / 60,
        "Canary vs stable: failure ratio by version": 0.0,
        "Canary vs stable: request p99 by version": 7_000.0,
    }
    tests = []
    for title, expr in panels.items():
        for variable in (".*", "resnet18"):
            query = expr.replace("$model", variable)  # Grafana's substitution (All is `.*`)
            expected = {("resnet18", v): value for v, value in want[title].items()}
            if variable == ".*":
                expected[("text-encoder", "1")] = other[title]
            # The expected values as a vector keyed by (model, version); compared within 0.1 %.
            vector = " or ".join(
                f'label_replace(label_replace(vector({value!r}), "model", "{m}", "", ""), "version", "{v}", "", "")'
                for (m, v), value in expected.items()
            )
            tests.append(
                {
                    "interval": "1m",
                    "input_series": series,
                    "promql_expr_test": [
                        {
                            "expr": f"count({query})",
                            "eval_time": "20m",
                            "exp_samples": [{"labels": "{}", "value": len(expected)}],
                        },
                        {
                            "expr": f"abs(({query}) - on (model, version) ({vector})) <= bool 1e-3 * ({vector})",
                            "eval_time": "20m",
                            "exp_samples": [
                                {"labels": f'{{model="{m}",version="{v}"}}', "value": 1} for m, v in expected
                            ],
                        },
                    ],
                }
            )
    run_tests(program_rules(prod), tests, tmp_path)
    assert row["title"] == "Canary vs stable"


def _five_minute_average_crossing(values: list[float], below: float | None = None, above: float | None = None) -> int:
    """The first minute at which avg_over_time(x[5m]) (samples at whole minutes, both ends
    included) is below / above the bound."""
    for t in range(len(values)):
        window = values[max(0, t - 5) : t + 1]
        avg = sum(window) / len(window)
        if (below is not None and avg < below) or (above is not None and avg > above):
            return t
    raise AssertionError("never crosses")


@pytest.mark.parametrize(
    ("name", "idle", "busy", "bound"), [("GpuIdle", 0, 60, "below"), ("GpuSaturated", 100, 60, "above")]
)
def test_gpu_alerts_wait_what_they_claim(
    prod: Run, tmp_path: Path, name: str, idle: int, busy: int, bound: str
) -> None:
    """From the first sample, and after a change (the 5-minute average has to cross first)."""
    groups = program_rules(prod)
    rule = alert(groups, name)
    limit = float(rule["expr"].rsplit(" ", 1)[1])
    wait = claimed_wait_minutes(rule)
    gpu = f"DCGM_FI_DEV_GPU_UTIL{{{DCGM}}}"
    labels = {"Hostname": "ip-10-0-2-7", "gpu": "0"}
    n = wait + 60
    changed = [float(busy)] * 30 + [float(idle)] * (n - 30)
    crossing = _five_minute_average_crossing(changed, **{bound: limit})
    edge = limit  # exactly at the bound: never
    run_tests(
        groups,
        [
            fires_after_claim(rule, [s(gpu, f"{idle}x{n}")], 0, labels),
            fires_after_claim(rule, [s(gpu, f"{busy}x29 {idle}x{n - 30}")], crossing, labels),
            never_fires(rule, [s(gpu, f"{edge:g}x{n}")], [wait, n]),
        ],
        tmp_path,
    )


def _within(expr: str, low: float, high: float) -> str:
    """1 where `expr` is strictly between low and high, 0 elsewhere (no float equality)."""
    return f"(({expr}) > bool {low}) * (({expr}) < bool {high})"


def test_dashboard_failure_ratio_is_failures_over_all_requests(prod: Run, tmp_path: Path) -> None:
    """15 % failures read 0.15 (dividing by nv_inference_count, the successful inferences,
    read 0.176), and every request failing reads 1 (not 1e9)."""
    (panel,) = [p for p in program_dashboard(prod)["panels"] if p["title"] == "Failure ratio by model"]
    expr = panel["targets"][0]["expr"]
    tests = [
        {
            "interval": "1m",
            "input_series": requests(failed, ok),
            "promql_expr_test": [
                {
                    "expr": _within(expr, want - 0.001, want + 0.001),
                    "eval_time": "20m",
                    "exp_samples": [{"labels": '{model="resnet"}', "value": 1}],
                },
            ],
        }
        for failed, ok, want in ((3, 17, 0.15), (20, 0, 1.0), (0, 20, 0.0))
    ]
    run_tests(program_rules(prod), tests, tmp_path)


def test_hpa_metric_sees_waiting_requests_that_fail(prod: Run, tmp_path: Path) -> None:
    """The adapter's metricsQuery for one pod: 50 ms per successful request; idle, 0 (a
    defined value); every request failing while 3 wait on average, Little's law (> 0; the
    ratio of successes alone read 0 and scaled the pod down)."""
    rule = prod.one("kubernetes:helm.sh/v3:Release", "monitoring-prometheus-adapter").inputs["values"]["rules"][
        "custom"
    ][0]
    expr = (
        rule["metricsQuery"]
        .replace("<<.Series>>", "nv_inference_queue_duration_us")
        .replace("<<.LabelMatchers>>", f'namespace="{NS}",pod=~"{POD}"')
        .replace("<<.GroupBy>>", "pod")
    )
    m = f'model="resnet",version="1",{TRITON}'

    def counters(ok: int, failed: int, queue_us: int, pending: int) -> list[dict[str, str]]:
        return [
            *[x for x in requests(failed, ok) if "nv_inference_count" not in x["series"]],
            s(f"nv_inference_queue_duration_us{{{m}}}", f"0+{queue_us}x40"),
            s(f"nv_inference_pending_request_count{{{m}}}", f"{pending}x40"),
        ]

    pod = f'{{pod="{POD}"}}'
    tests = [
        {
            "interval": "1m",
            "input_series": counters(10, 0, 500_000, 1),
            "promql_expr_test": [
                {
                    "expr": _within(expr, 49_999, 50_001),
                    "eval_time": "20m",
                    "exp_samples": [{"labels": pod, "value": 1}],
                }
            ],
        },
        {
            "interval": "1m",
            "input_series": counters(0, 0, 0, 0),
            "promql_expr_test": [{"expr": expr, "eval_time": "20m", "exp_samples": [{"labels": pod, "value": 0}]}],
        },
        {
            "interval": "1m",
            "input_series": counters(0, 20, 0, 3),
            "promql_expr_test": [
                # 3 pending x 120 s / ~40 requests in 2 minutes: ~9 s per request.
                {
                    "expr": _within(expr, 1_000_000, 100_000_000),
                    "eval_time": "20m",
                    "exp_samples": [{"labels": pod, "value": 1}],
                }
            ],
        },
    ]
    run_tests(program_rules(prod), tests, tmp_path)
