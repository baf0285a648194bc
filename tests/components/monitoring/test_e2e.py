"""The program's alert rules, dashboard queries and HPA query on a real Prometheus (Debian's
package, tests/support/prometheus.py) scraping two real tritonservers (the pinned
nvidia-pytriton build, with the cloud Deployment's metrics flags) under load.

Two "pods" of the default deployment, labelled as the Triton ServiceMonitor labels them:
- pod 0 serves `resnet`, which sleeps SERVICE_S per request and fails every FAIL_EVERY-th
  (the model raises: Triton counts it in nv_inference_request_failure{reason="BACKEND"});
- pod 1 serves `broken`, which sleeps and then fails every request, while requests wait.
Each model returns (or names in its error) the time it started the request, so the client
measures every request's queue time: started - sent.

The agent's alerts (components/monitoring/agent.py) on the same Prometheus scraping two real
agents' own /metrics, labelled as the agent's PodMonitor labels them: one beside a real
tritonserver (tests/support/triton.py's Serving), one placing files only, whose S3 goes through a
relay that the test cuts.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.monitoring.agent import AgentAlertTiming
from components.monitoring.alerts import alert_rule_groups
from components.monitoring.args import MonitoredDeployment, MonitoringArgs
from model_sync.agent.pod_disk import precompile_python
from model_sync.sandbox.procs import Process, wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer
from tests.components.monitoring._helpers import alert, program_dashboard, program_rules
from tests.conftest import stack_run
from tests.support.prometheus import PrometheusServer, rules_file
from tests.support.relays import Relay
from tests.support.s3_servers import free_port
from tests.support.triton import (
    BUCKET,
    Serving,
    add_model_files,
    flip_pin,
    pinned_config,
    triton_runtime,  # noqa: F401
    upload_version,
)
from tests.support.triton import serving as serving

NS = "triton"
PODS = ("triton-default-7c9d8-aaaaa", "triton-default-7c9d8-bbbbb")
SERVICE_S = 0.025
FAIL_EVERY = 7
CLIENTS = 4  # concurrent clients per pod: ~3 requests wait while one runs
LOAD_S = 12.0

MODEL_PY = """\
import time

import numpy as np
import triton_python_backend_utils as pb_utils

ALWAYS_FAIL = {always_fail}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            started = time.time()
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            time.sleep({service_s})
            if ALWAYS_FAIL or x[0] < 0:
                raise pb_utils.TritonModelException(f"failed on purpose; started={{started!r}}")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("STARTED", np.array([started], dtype=np.float64))]))
        return responses
"""

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "STARTED" data_type: TYPE_FP64 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


@dataclass
class Client:
    """CLIENTS threads sending one request after another; every request's queue time."""

    url: str
    model: str
    ok: list[float] = field(default_factory=list)  # queue time (s) of successful requests
    failed: list[float] = field(default_factory=list)  # ... of failed ones
    unexplained: list[str] = field(default_factory=list)

    def _one(self, value: float) -> None:
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [value]}]}).encode()
        req = urllib.request.Request(f"{self.url}/v2/models/{self.model}/infer", data=body, method="POST")  # noqa: S310
        sent = time.time()
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310
                self.ok.append(float(json.loads(resp.read())["outputs"][0]["data"][0]) - sent)
        except urllib.error.HTTPError as err:
            text = err.read().decode(errors="replace")
            m = re.search(r"started=([0-9.]+)", text)
            if m:
                self.failed.append(float(m.group(1)) - sent)
            else:
                self.unexplained.append(f"{err.code}: {text[:200]}")

    def run(self, seconds: float) -> None:
        stop = time.monotonic() + seconds

        def loop(worker: int) -> None:
            n = worker
            while time.monotonic() < stop:
                n += CLIENTS
                self._one(-1.0 if n % FAIL_EVERY == 0 else 1.0)

        threads = [threading.Thread(target=loop, args=(w,)) for w in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _triton(tmp: Path, runtime: TritonRuntime, name: str, always_fail: bool, version: int = 1) -> TritonServer:
    repo = tmp / "repository"
    (repo / name / str(version)).mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name))
    (repo / name / str(version) / "model.py").write_text(MODEL_PY.format(always_fail=always_fail, service_s=SERVICE_S))
    precompile_python(repo / name / str(version))  # as the agent does: else the stub's pyc makes Triton reload it
    return TritonServer(repo, tmp / "triton.log", runtime=runtime)


@contextlib.contextmanager
def _stack(
    tmp: Path, runtime: TritonRuntime, rules: str, models: tuple[tuple[str, bool, int], ...] | None = None
) -> Iterator[tuple[list[TritonServer], PrometheusServer]]:
    """Two "pods" of the default deployment; `models`: (model, always_fail, version) of each."""
    models = models or (("resnet", False, 1), ("broken", True, 1))
    servers = [_triton(tmp / f"pod{i}", runtime, *m) for i, m in enumerate(models)]
    labels = [
        {"namespace": NS, "pod": pod, "container": "tritonserver", "service": "triton-default", "endpoint": "metrics"}
        for pod in PODS
    ]
    prom = PrometheusServer(
        tmp / "prometheus", {f"127.0.0.1:{s.metrics_port}": lab for s, lab in zip(servers, labels, strict=True)}, rules
    )
    try:
        for s in servers:
            s.start()
        for s, (model, _, version) in zip(servers, models, strict=True):
            s.wait_version_ready(model, version)
        prom.start()
        yield servers, prom
    finally:
        for stopper in (prom.stop, *(s.stop for s in servers)):
            with contextlib.suppress(Exception):
                stopper()


def _by_label(result: dict[str, float], label: str) -> dict[str, float]:
    return {dict(kv.split("=", 1) for kv in key.split(","))[label]: v for key, v in result.items()}


@pytest.mark.e2e
@pytest.mark.slow
def test_rules_dashboard_and_hpa_query_on_a_real_prometheus(
    tmp_path: Path,
    triton_runtime: TritonRuntime,  # noqa: F811 (the fixture imported above)
    capsys: Any,
) -> None:
    prod = stack_run("prod")
    groups = program_rules(prod)
    adapter = prod.one("kubernetes:helm.sh/v3:Release", "monitoring-prometheus-adapter").inputs["values"]["rules"][
        "custom"
    ][0]
    series = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", adapter["seriesQuery"])
    assert series is not None
    # prometheus-adapter's template fields for the HPA's pods (the pod resource, namespaced).
    # ref: https://github.com/kubernetes-sigs/prometheus-adapter/blob/master/docs/config.md#querying
    hpa = (
        adapter["metricsQuery"]
        .replace("<<.Series>>", series.group(1))
        .replace("<<.LabelMatchers>>", f'namespace="{NS}",pod=~"{"|".join(PODS)}"')
        .replace("<<.GroupBy>>", "pod")
    )
    assert "<<" not in hpa
    (ratio_panel,) = [p for p in program_dashboard(prod)["panels"] if p["title"] == "Failure ratio by model"]
    ratio_alert = alert(groups, "TritonInferenceFailureRatioHigh")

    with _stack(tmp_path, triton_runtime, rules_file(groups)) as (servers, prom):
        wait_until(
            lambda: len(prom.query('nv_inference_pending_request_count{namespace="triton"}')) == 2,
            20,
            what="both pods scraped",
        )
        wait_until(lambda: len(prom.query(hpa)) == 2, 20, what="the HPA query answers for both pods")
        idle = _by_label(prom.query(hpa), "pod")
        assert idle == {PODS[0]: 0.0, PODS[1]: 0.0}  # defined (not NaN, not absent) while idle

        clients = [Client(servers[0].http_url, "resnet"), Client(servers[1].http_url, "broken")]
        threads = [threading.Thread(target=c.run, args=(LOAD_S,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        mixed, broken = clients
        assert mixed.unexplained == broken.unexplained == []
        assert broken.ok == []
        assert len(mixed.ok) > 100
        assert len(mixed.failed) > 10
        assert len(broken.failed) > 100

        # Every request in Prometheus: the last scrape is after the last response.
        def scraped() -> bool:
            got = _by_label(
                prom.query(
                    'sum by (model) (nv_inference_request_success{namespace="triton"}) + '
                    'sum by (model) (nv_inference_request_failure{namespace="triton"})'
                ),
                "model",
            )
            return got == {"resnet": len(mixed.ok) + len(mixed.failed), "broken": len(broken.failed)}

        wait_until(scraped, 15, what="the final counters scraped")
        at = time.time()
        hpa_us = _by_label(prom.query(hpa, at), "pod")
        client_us = 1e6 * sum(mixed.ok) / len(mixed.ok)
        client_failed_us = 1e6 * sum(broken.failed) / len(broken.failed)
        seen = len(mixed.failed) / (len(mixed.ok) + len(mixed.failed))
        panel = _by_label(prom.query(ratio_panel["targets"][0]["expr"], at), "model")
        alerting = _by_label(prom.query(ratio_alert["expr"], at), "model")
        pending = _by_label(
            prom.query('ALERTS{alertname="TritonInferenceFailureRatioHigh",alertstate="pending"}'), "model"
        )
        with capsys.disabled():
            print(
                f"\nHPA metric (queue time per request, µs): pod 0 {hpa_us[PODS[0]]:.0f} vs client {client_us:.0f} "
                f"over {len(mixed.ok)} "
                f"successful requests ({hpa_us[PODS[0]] / client_us - 1:+.1%}); pod 1 (every request fails) "
                f"{hpa_us[PODS[1]]:.0f} vs "
                f"client {client_failed_us:.0f} over {len(broken.failed)} failed requests. Failure ratio: client "
                f"{seen:.4f}, "
                f"panel {panel}, alert {alerting}"
            )

        # The HPA metric under load matches what the client waited, within 10 %.
        assert abs(hpa_us[PODS[0]] - client_us) <= 0.10 * client_us
        # Every request failing while requests wait: not read as idle (the pending estimate;
        # coarse, and high for a pod younger than the 2-minute window, never low).
        assert hpa_us[PODS[1]] >= 0.5 * client_failed_us
        # The dashboard panel and the alert's expression agree with the client, and the
        # loaded rule is evaluating (pending: `for` is 10 minutes).
        assert panel["resnet"] == pytest.approx(seen, abs=0.01)
        assert panel["broken"] == alerting["broken"] == 1.0
        assert alerting["resnet"] == pytest.approx(seen, abs=0.01)
        assert set(pending) == {"resnet", "broken"}


@pytest.mark.e2e
@pytest.mark.slow
def test_canary_alert_and_panels_see_two_versions_on_a_real_prometheus(
    tmp_path: Path,
    triton_runtime: TritonRuntime,  # noqa: F811 (the fixture imported above)
) -> None:
    """A gray release as the cluster has it: pod 0 serves `resnet` version 1 (stable), pod 1
    version 2 (canary). While only version 1 takes requests (version 2 loaded, idle) the
    TritonCanaryStuck condition is false; once both do it holds (pending: its `for:` is the
    deadline), and the "Canary vs stable" panels give one series per version, with Triton's
    real `version` label."""
    prod = stack_run("prod")
    groups = program_rules(prod)
    rule = alert(groups, "TritonCanaryStuck", "default")
    versions_taking_requests = rule["expr"].removesuffix(" > 1")
    assert versions_taking_requests != rule["expr"]
    panels = {
        p["title"]: p["targets"][0]["expr"].replace("$model", "resnet")
        for p in program_dashboard(prod)["panels"]
        if p["title"].startswith("Canary vs stable:")
    }
    assert len(panels) == 3
    models = (("resnet", False, 1), ("resnet", False, 2))
    with _stack(tmp_path, triton_runtime, rules_file(groups), models) as (servers, prom):
        wait_until(
            lambda: len(prom.query('nv_inference_request_success{namespace="triton",model="resnet"}')) == 2,
            20,
            what="both versions scraped",
        )
        stable, canary = Client(servers[0].http_url, "resnet"), Client(servers[1].http_url, "resnet")
        stable.run(4.0)  # version 1 only
        wait_until(
            lambda: prom.query(versions_taking_requests) == {"model=resnet,namespace=triton": 1.0},
            20,
            what="one version taking requests",
        )
        assert prom.query(rule["expr"]) == {}
        threads = [threading.Thread(target=c.run, args=(6.0,)) for c in (stable, canary)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert stable.unexplained == canary.unexplained == []
        assert len(canary.ok) > 20
        wait_until(
            lambda: prom.query(rule["expr"]) == {"model=resnet,namespace=triton": 2.0},
            20,
            what="two versions taking requests",
        )
        wait_until(
            lambda: (
                _by_label(prom.query('ALERTS{alertname="TritonCanaryStuck",alertstate="pending"}'), "model")
                == {"resnet": 1.0}
            ),
            20,
            what="TritonCanaryStuck pending",
        )
        for title, expr in panels.items():
            got = _by_label(prom.query(expr), "version")
            assert set(got) == {"1", "2"}, (title, got)
            assert all(v > 0 for v in got.values()) or "failure" in title, (title, got)
        # Every 7th request fails on both versions: the failure ratio panel reads it per version.
        ratio = _by_label(prom.query(panels["Canary vs stable: failure ratio by version"]), "version")
        assert ratio["1"] == pytest.approx(1 / FAIL_EVERY, abs=0.05)
        assert ratio["2"] == pytest.approx(1 / FAIL_EVERY, abs=0.05)


# The agent's alerts with their waits shrunk (the builder the program runs, AgentAlertTiming and the
# deployment's load timeout as parameters): a replica 4 s behind, held 1 s; a failure held 1 s; a
# pin not served for 3 s.
TIMING = AgentAlertTiming(stale_seconds=4, stale_for_seconds=1, failed_for_seconds=1)
LOAD_TIMEOUT_S = 3
AGENT_PODS = ("triton-default-7c9d8-aaaaa", "triton-default-7c9d8-bbbbb")  # A: beside Triton; B: S3 cut later
# A python-backend model whose initialize never returns within the test: Triton keeps it LOADING.
SLOW_MODEL_PY = """\
import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(300)

    def execute(self, requests):
        return []
"""


def _agent_rules() -> list[dict[str, Any]]:
    """The `model-sync-agent` group with TIMING; the same expressions as the program's prod rules."""
    args = MonitoringArgs(
        deployments=(MonitoredDeployment("default", 20_000, 3_600, LOAD_TIMEOUT_S),),
        control_plane_cidrs=("10.0.0.0/24",),
        runbooks_url="https://github.com/o/r/blob/main/docs/runbooks.md",
        vpc_cidr="10.0.0.0/16",
    )
    (group,) = [g for g in alert_rule_groups(args, TIMING) if g["name"] == "model-sync-agent"]
    program = program_rules(stack_run("prod"))
    for rule in group["rules"]:
        ours = rule["expr"].replace(f" {TIMING.stale_seconds}", " 600")
        assert ours == alert(program, rule["alert"], "default")["expr"], rule["alert"]
    return [group]


def _publish(stack: Serving, name: str, files: dict[str, bytes]) -> None:
    """A version 1 of `name` and its pin, written as another tool could (no push: a version push
    would refuse is one of them)."""
    text = pinned_config(name, 1)
    upload_version(stack.client, BUCKET, name, 1, files, text)
    flip_pin(stack, name, 1, config_text=text)


def _replica_b(stack: Serving, relay: Relay, port: int) -> Process:
    """A second replica's agent: its own pod disk, no Triton (it places files: PLACED), its S3
    through `relay`."""
    argv = stack.agent_argv("--metrics-port", str(port), "--metrics-address", "127.0.0.1")
    values = {"--repository": str(stack.tmp / "b" / "models"), "--staging-dir": str(stack.tmp / "b" / ".staging"),
              "--replica-id": "replica-1", "--endpoint-url": relay.endpoint_url}  # fmt: skip
    for flag, value in values.items():
        argv[argv.index(flag) + 1] = value
    i = argv.index("--triton-url")
    del argv[i : i + 2]
    return Process("agent-b", argv, stack.tmp / "logs" / "agent-b.log", env=stack.agent_env()).start()


def _alerts(prom: PrometheusServer, state: str = "firing") -> dict[tuple[str, str, str], float]:
    """(alert, pod or '', model or '') -> value, of the alerts in `state`."""
    data = prom.api("alerts")
    return {
        (a["labels"]["alertname"], a["labels"].get("pod", ""), a["labels"].get("model", "")): float(a["value"])
        for a in data["alerts"]
        if a["state"] == state
    }


@pytest.mark.e2e
@pytest.mark.slow
def test_agent_alerts_fire_on_real_agents_and_stay_silent_on_a_healthy_replica(
    serving: Serving,
    capsys: Any,
) -> None:
    """Two replicas of `default`, each a real agent serving its own /metrics: A beside the real
    tritonserver, B placing files only. `healthy` is served everywhere; `rejected` is pinned
    without the model.py its backend needs (every agent refuses it); then B's S3 is cut and
    `slow`, which never finishes loading, is pinned. TritonPinnedVersionFailed fires for
    `rejected` (both replicas), TritonPinNotServed for `slow` on A, TritonAgentStale for B;
    nothing else, ever: not for `healthy`, not for A's passes."""
    rules = rules_file(_agent_rules())  # the program's run is shared with this module's other tests
    started = time.monotonic()
    stack = serving
    relay = Relay(stack.s3.port)
    ports = (free_port(), free_port())
    labels = [{"namespace": NS, "pod": pod, "container": "agent", "endpoint": "agent-metrics"} for pod in AGENT_PODS]
    prom = PrometheusServer(
        stack.tmp / "prometheus",
        {f"127.0.0.1:{port}": lab for port, lab in zip(ports, labels, strict=True)},
        rules,
    )
    b: Process | None = None
    try:
        _publish(stack, "healthy", add_model_files(1))
        _publish(stack, "rejected", {"model.pt": b"weights"})
        stack.start_agent("--metrics-port", str(ports[0]), "--metrics-address", "127.0.0.1", "--ready-timeout", "600")
        b = _replica_b(stack, relay, ports[1])
        prom.start()
        served = f'model_sync_agent_model_served_version{{model="healthy",pod="{AGENT_PODS[0]}"}}'
        wait_until(
            lambda: (
                set(_alerts(prom)) == {("TritonPinnedVersionFailed", "", "rejected")}
                and list(prom.query(served).values()) == [1.0]
            ),
            45,
            what="TritonPinnedVersionFailed firing for `rejected` alone, `healthy` served by A",
        )
        assert _alerts(prom)[("TritonPinnedVersionFailed", "", "rejected")] == 2  # both replicas refuse it
        assert _alerts(prom, "pending") == {}

        relay.cut()  # B's S3, from now on
        cut = time.monotonic()
        _publish(stack, "slow", {"model.py": SLOW_MODEL_PY.encode()})  # A places it; Triton never finishes it
        expected = {
            ("TritonPinnedVersionFailed", "", "rejected"),
            ("TritonPinNotServed", AGENT_PODS[0], "slow"),
            ("TritonAgentStale", AGENT_PODS[1], ""),
        }
        wait_until(lambda: set(_alerts(prom)) == expected, 45, what=f"exactly {sorted(expected)} firing")
        fired_after = time.monotonic() - cut
        assert _alerts(prom)[("TritonPinNotServed", AGENT_PODS[0], "slow")] == 1  # its value: the pinned version
        assert not [k for k in _alerts(prom, "pending") if k[2] == "healthy" or k[1] == AGENT_PODS[0]]
        assert list(prom.query(served).values()) == [1.0]  # A serves `healthy` throughout, and passes
    finally:
        for stopper in (prom.stop, b.stop if b else None, relay.close):
            if stopper is not None:
                with contextlib.suppress(Exception):
                    stopper()
    with capsys.disabled():
        print(
            f"\nagent alerts e2e: {time.monotonic() - started:.1f}s from the first publish; TritonAgentStale and TritonPinNotServed "
            f"firing {fired_after:.1f}s after the cut (stale bound {TIMING.stale_seconds}s + for "
            f"{TIMING.stale_for_seconds}s)"
        )
