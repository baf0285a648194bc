"""Triton deployments: what the real program records per stack, and the builders."""

from __future__ import annotations

import dataclasses
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.gpu import gpu_contract
from components.kubernetes import naming
from components.kubernetes.triton_server import ADMIN_HEADER, GRPC_ADMIN_HEADER, QUEUE_TIME_METRIC
from components.stack_config.model import TritonDeploymentConfig
from components.triton_deployment import (
    ADMIN_KEY_ENV,
    ADMIN_PROTOCOLS,
    NODE_PROVISIONING_SECONDS,
    REPOSITORY_DIR,
    STAGING_DIR,
    TritonDeploymentArgs,
    exit_timeout_seconds,
    pdb_budget,
    prestop_seconds,
    replica_ready_budget_seconds,
    rollout_timeout_seconds,
    triton_args,
)
from model_sync.sandbox.procs import LOOPBACK, Process, free_port, wait_until
from model_sync.sandbox.runtime import TritonRuntime, stub_environment
from tests.components._helpers import assert_children_prefixed, registered_outputs
from tests.pulumi_kit import Resource, Run, stack_config
from tests.support.triton import triton_runtime  # noqa: F401 (fixture)

COMPONENT = "triton-platform:serving:TritonDeployment"
CLUSTER_PROVIDER = "cluster-k8s"  # EksCluster's kubernetes provider (logical name)
DEPLOYMENTS = {"dev": ["default", "light"], "staging": ["default"], "prod": ["default", "large"]}


def _obj(run: Run, kind: str, name: str) -> dict[str, Any]:
    found = [
        r for r in run.kubernetes_objects() if r.inputs.get("kind") == kind and r.inputs["metadata"]["name"] == name
    ]
    assert len(found) == 1, f"{kind} {name}: {len(found)} recorded"
    return found[0].inputs


def _pod(run: Run, d: str) -> dict[str, Any]:
    return _obj(run, "Deployment", f"triton-{d}")["spec"]["template"]["spec"]


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    (c,) = [c for c in pod["containers"] + pod["initContainers"] if c["name"] == name]
    return c


def _cfg(**overrides: Any) -> TritonDeploymentConfig:
    base = TritonDeploymentConfig(
        name="default",
        node_group="gpu-l4",
        models=("resnet18",),
        min_replicas=2,
        max_replicas=4,
        gpus_per_replica=1,
        cpu="4",
        memory="16Gi",
        model_volume_gib=50,
        shm_size_gib=2,
        queue_time_target_microseconds=50_000,
        scale_up_stabilization_seconds=30,
        scale_down_stabilization_seconds=600,
        startup_timeout_seconds=900,
        termination_grace_period_seconds=120,
        agent_interval_seconds=10,
    )
    return dataclasses.replace(base, **overrides)


def test_one_component_per_configured_deployment_on_the_cluster_provider(any_stack: Run) -> None:
    comps = sorted(r.name for r in any_stack.of_type(COMPONENT))
    assert comps == [f"triton-{d}" for d in DEPLOYMENTS[any_stack.stack]]
    for name in comps:
        comp = any_stack.one(COMPONENT, name)
        children = assert_children_prefixed(any_stack, comp, min_children=7)
        for child in children:
            if child.type.startswith("kubernetes:"):
                assert child.provider.split("::")[-2] == CLUSTER_PROVIDER, (
                    f"{child.name} not on the cluster provider: {child.provider!r}"
                )
        assert registered_outputs(any_stack, comp)["serviceAccountName"] == naming.triton_service_account(
            name.removeprefix("triton-")
        )


def test_service_account_matches_the_pod_identity_binding(any_stack: Run) -> None:
    for d in DEPLOYMENTS[any_stack.stack]:
        sa = _obj(any_stack, "ServiceAccount", naming.triton_service_account(d))
        assert sa["metadata"]["namespace"] == naming.TRITON_NAMESPACE
        assert not sa["metadata"].get("annotations"), "Pod Identity needs no IRSA annotation"
        assert _pod(any_stack, d)["serviceAccountName"] == naming.triton_service_account(d)


def test_tritonserver_flags_close_the_admin_api(prod: Run) -> None:
    triton = _container(_pod(prod, "large"), "tritonserver")
    args = triton["args"]
    restricted = f"{','.join(ADMIN_PROTOCOLS)}:admin-key=$(TRITON_ADMIN_KEY)"
    assert f"--http-restricted-api={restricted}" in args
    assert f"--grpc-restricted-protocol={restricted}" in args
    assert {"model-repository", "statistics", "logging", "trace", "shared-memory"} <= set(ADMIN_PROTOCOLS)
    for flag in (
        "--model-repository=/models/repository",
        "--model-control-mode=poll",
        "--strict-readiness=true",
        "--exit-on-error=false",
        "--disable-auto-complete-config",
        "--metrics-config=summary_latencies=true",
    ):
        assert flag in args
    # The stack's `tritonImage` (prod: a digest-pinned mirror), threaded to every deployment.
    assert triton["image"] == stack_config("prod")["triton-platform:tritonImage"]
    assert "@sha256:" in triton["image"]
    (key_env,) = [e for e in triton["env"] if e["name"] == "TRITON_ADMIN_KEY"]
    assert key_env["valueFrom"]["secretKeyRef"] == {"name": "triton-large-admin-key", "key": "key"}
    secret = _obj(prod, "Secret", "triton-large-admin-key")
    assert len(secret["stringData"]["key"]) >= 40


# ---- the restricted groups against the real tritonserver -------------------------------

ADMIN_KEY = "k" * 48
# One request per restricted group (HTTP/REST): (group, method, path).
# ref:
# https://github.com/triton-inference-server/server/blob/main/docs/customization_guide/inference_protocols.md#limit-endpoint-access-beta
RESTRICTED_HTTP = [
    ("model-repository", "POST", "/v2/repository/index"),
    ("statistics", "GET", "/v2/models/stats"),
    ("logging", "GET", "/v2/logging"),
    ("trace", "GET", "/v2/trace/setting"),
    ("shared-memory", "GET", "/v2/systemsharedmemory/status"),
]


@dataclasses.dataclass
class _Restricted:
    http: str
    grpc: str


@pytest.fixture(scope="module")
def restricted_triton(
    triton_runtime: TritonRuntime,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[_Restricted]:
    """The real tritonserver with exactly the Deployment's restricted-API flags (the key the
    kubelet would expand from the Secret substituted), on loopback ports, no models."""
    tmp = tmp_path_factory.mktemp("restricted")
    flags = [
        a.replace(f"$({ADMIN_KEY_ENV})", ADMIN_KEY)
        for a in triton_args(_cfg())
        if a.startswith(("--http-restricted-api=", "--grpc-restricted-protocol="))
    ]
    assert len(flags) == 2, flags
    http, grpc, metrics = free_port(), free_port(), free_port()
    argv = [
        str(triton_runtime.binary),
        f"--model-repository={tmp / 'repository'}",
        f"--backend-directory={triton_runtime.backends}",
        "--model-control-mode=poll",
        f"--http-address={LOOPBACK}",
        f"--http-port={http}",
        f"--grpc-address={LOOPBACK}",
        f"--grpc-port={grpc}",
        f"--metrics-address={LOOPBACK}",
        f"--metrics-port={metrics}",
        *flags,
    ]
    (tmp / "repository").mkdir()
    server = Process("tritonserver", argv, tmp / "tritonserver.log", env=stub_environment()).start()
    try:
        wait_until(
            lambda: _status(f"http://{LOOPBACK}:{http}", "GET", "/v2/health/live") == 200,
            90,
            what=f"tritonserver live (log {tmp / 'tritonserver.log'})",
        )
        yield _Restricted(f"http://{LOOPBACK}:{http}", f"{LOOPBACK}:{grpc}")
    finally:
        server.stop(timeout=20)


def _status(base: str, method: str, path: str, headers: dict[str, str] | None = None) -> int:
    req = urllib.request.Request(  # noqa: S310 (loopback)
        base + path, method=method, headers=headers or {}, data=b"{}" if method == "POST" else None
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 (loopback)
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


@pytest.mark.parametrize(("group", "method", "path"), RESTRICTED_HTTP, ids=[g for g, _, _ in RESTRICTED_HTTP])
def test_real_tritonserver_refuses_each_admin_group_without_the_key(
    restricted_triton: _Restricted, group: str, method: str, path: str
) -> None:
    assert _status(restricted_triton.http, method, path) == 403
    assert group in ADMIN_PROTOCOLS
    assert _status(restricted_triton.http, method, path, {ADMIN_HEADER: "wrong"}) == 403
    assert _status(restricted_triton.http, method, path, {ADMIN_HEADER: ADMIN_KEY}) == 200
    # The public groups stay open (health; the ingress routes them without the key).
    assert _status(restricted_triton.http, "GET", "/v2/health/ready") == 200


def test_real_tritonserver_refuses_grpc_statistics_without_the_key(restricted_triton: _Restricted) -> None:
    """On gRPC Triton reads the restricted key from `triton-grpc-protocol-<header>` (2.51:
    "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'")."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(restricted_triton.grpc)
    try:
        with pytest.raises(InferenceServerException, match=f"restricted, expecting header '{GRPC_ADMIN_HEADER}'"):
            client.get_inference_statistics()
        with pytest.raises(InferenceServerException, match="restricted"):
            client.get_model_repository_index()
        assert client.get_inference_statistics(headers={GRPC_ADMIN_HEADER: ADMIN_KEY}) is not None
        assert client.is_server_live()
    finally:
        client.close()


def test_agent_init_and_sidecar(staging: Run) -> None:
    pod = _pod(staging, "default")
    init, sidecar = pod["initContainers"]
    cfg = stack_config("staging")
    assert [init["name"], sidecar["name"]] == ["agent-init", "agent"]
    assert init["image"] == sidecar["image"] == cfg["triton-platform:agentImage"]
    assert init["command"][:4] == ["python", "-m", "model_sync", "agent"]
    assert init["command"][-1] == "--once"
    assert "--interval" not in init["command"]
    assert "restartPolicy" not in init
    assert sidecar["restartPolicy"] == "Always"
    cmd = sidecar["command"]
    assert cmd[cmd.index("--interval") + 1] == "10"
    # The sidecar serves its own /metrics on a named port; the init container (one pass) does not.
    assert cmd[cmd.index("--metrics-port") + 1] == "8003"
    assert "--metrics-port" not in init["command"]
    assert sidecar["ports"] == [{"name": "agent-metrics", "containerPort": 8003, "protocol": "TCP"}]
    assert "ports" not in init
    assert cmd[cmd.index("--repository") + 1] == REPOSITORY_DIR
    assert cmd[cmd.index("--staging-dir") + 1] == STAGING_DIR
    assert not STAGING_DIR.startswith(REPOSITORY_DIR + "/")
    assert cmd[cmd.index("--bucket") + 1].startswith("s3://")
    assert cmd[cmd.index("--env") + 1] == "staging"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--model"] == ["resnet18", "text-encoder"]
    (pod_name,) = [e for e in sidecar["env"] if e["name"] == "POD_NAME"]
    assert pod_name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    mounts = {m["mountPath"]: m for m in _container(pod, "tritonserver")["volumeMounts"]}
    assert mounts["/models"]["readOnly"] is True
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["models"]["emptyDir"] == {"sizeLimit": "60Gi"}
    assert vols["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "2Gi"}


def test_probes_resources_and_scheduling(prod: Run) -> None:
    pod = _pod(prod, "large")
    triton = _container(pod, "tritonserver")
    # Process health restarts; model readiness only gates traffic (a failing model must not
    # restart tritonserver in a loop under --strict-readiness).
    assert triton["startupProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert triton["startupProbe"]["periodSeconds"] * triton["startupProbe"]["failureThreshold"] == 1800
    assert triton["readinessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert triton["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    # Model readiness gates traffic through the agent sidecar's marker file, which the
    # sidecar is told to maintain (the same path on both sides).
    agent = next(c for c in pod["initContainers"] if c["name"] == "agent")
    assert agent["restartPolicy"] == "Always"
    marker = agent["readinessProbe"]["exec"]["command"]
    assert marker[:2] == ["test", "-f"]
    assert agent["command"][agent["command"].index("--ready-file") + 1] == marker[2]
    assert "--ready-file" not in next(c for c in pod["initContainers"] if c["name"] == "agent-init")["command"]
    limits = triton["resources"]["limits"]
    assert limits[gpu_contract.GPU_RESOURCE] == "1"
    assert limits["cpu"] == "12"
    assert limits["memory"] == "48Gi"
    assert triton["resources"]["requests"]["cpu"] == "12"
    assert pod["tolerations"] == gpu_contract.gpu_tolerations()
    assert pod["nodeSelector"] == gpu_contract.gpu_node_selector("gpu-a10g")
    assert {c["topologyKey"] for c in pod["topologySpreadConstraints"]} == {
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    }
    assert pod["terminationGracePeriodSeconds"] == 180
    assert triton["lifecycle"]["preStop"]["sleep"]["seconds"] == 15
    assert "--exit-timeout-secs=160" in triton["args"]


def test_security_context_everywhere(any_stack: Run) -> None:
    for d in DEPLOYMENTS[any_stack.stack]:
        pod = _pod(any_stack, d)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 1000
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        for c in pod["containers"] + pod["initContainers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["runAsUser"] == 1000
            assert "limits" in c["resources"]
            assert "requests" in c["resources"]


def test_pulumi_waits_for_the_whole_gpu_rollout(prod: Run) -> None:
    """Pulumi's default 10-minute await would fail `pulumi up` while a GPU node is still
    being launched: the Deployment carries the rollout budget (prod `large`: 1800 s startup,
    maxReplicas 6)."""
    dep = _obj(prod, "Deployment", "triton-large")
    per_replica = NODE_PROVISIONING_SECONDS + 1800 + 30
    assert dep["spec"]["progressDeadlineSeconds"] == per_replica
    assert dep["spec"]["minReadySeconds"] == 30
    assert dep["metadata"]["annotations"] == {"pulumi.com/timeoutSeconds": str(per_replica * 6)}
    assert int(dep["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) > 600
    cfg = _cfg(startup_timeout_seconds=600, max_replicas=2)
    assert replica_ready_budget_seconds(cfg) == NODE_PROVISIONING_SECONDS + 630
    assert rollout_timeout_seconds(cfg) == 2 * (NODE_PROVISIONING_SECONDS + 630)
    assert NODE_PROVISIONING_SECONDS >= 600


def test_rollout_pdb_and_hpa(prod: Run) -> None:
    dep = _obj(prod, "Deployment", "triton-default")["spec"]
    assert dep["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    pdb = _obj(prod, "PodDisruptionBudget", "triton-default")["spec"]
    assert pdb["minAvailable"] == 1
    assert "maxUnavailable" not in pdb
    assert pdb["selector"] == dep["selector"]
    hpa = _obj(prod, "HorizontalPodAutoscaler", "triton-default")
    assert hpa["apiVersion"] == "autoscaling/v2"
    spec = hpa["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 8)
    (metric,) = spec["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] == QUEUE_TIME_METRIC
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "20000"}
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert spec["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == 30


def test_service_ports_service_monitor_and_the_agents_pod_monitor(staging: Run) -> None:
    svc = _obj(staging, "Service", "triton-default")["spec"]
    assert {(p["name"], p["port"]) for p in svc["ports"]} == {("http", 8000), ("grpc", 8001), ("metrics", 8002)}
    assert svc["type"] == "ClusterIP"
    sm = _obj(staging, "ServiceMonitor", "triton-default")["spec"]
    assert [e["port"] for e in sm["endpoints"]] == ["metrics"]
    assert sm["selector"]["matchLabels"] == svc["selector"]
    # The agent's metrics: every pod, ready or not (the Service lists only ready ones).
    pm = _obj(staging, "PodMonitor", "triton-default-agent")["spec"]
    assert [e["port"] for e in pm["podMetricsEndpoints"]] == ["agent-metrics"]
    assert pm["selector"]["matchLabels"] == svc["selector"]
    assert pm["namespaceSelector"] == {"matchNames": [naming.TRITON_NAMESPACE]}


def test_network_policy_admits_only_ingress_and_prometheus(dev: Run) -> None:
    np = _obj(dev, "NetworkPolicy", "triton-default")["spec"]
    assert np["policyTypes"] == ["Ingress", "Egress"]
    sources = {
        (
            r["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            tuple(p["port"] for p in r["ports"]),
        )
        for r in np["ingress"]
    }
    assert sources == {(naming.INGRESS_NAMESPACE, (8000, 8001)), (naming.MONITORING_NAMESPACE, (8002, 8003))}
    egress_ports = sorted({p["port"] for r in np["egress"] for p in r["ports"]})
    assert egress_ports == [53, 80, 443]
    https = next(r for r in np["egress"] if r["ports"][0]["port"] == 443)
    assert "169.254.169.254/32" in https["to"][0]["ipBlock"]["except"]
    (deny,) = [
        r.inputs
        for r in dev.kubernetes_objects()
        if r.inputs["kind"] == "NetworkPolicy"
        and r.inputs["metadata"]["name"] == "default-deny"
        and r.inputs["metadata"]["namespace"] == naming.TRITON_NAMESPACE
    ]
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def test_monitoring_disabled_drops_hpa_and_service_monitor() -> None:
    from tests.pulumi_kit import run_program

    run = run_program(
        "dev", overrides={"triton-platform:monitoringEnabled": False, "triton-platform:loggingEnabled": False}
    )
    kinds = {r.inputs["kind"] for r in run.kubernetes_objects()}
    assert "Deployment" in kinds
    assert "HorizontalPodAutoscaler" not in kinds
    assert "ServiceMonitor" not in kinds
    assert "PodMonitor" not in kinds
    assert "PrometheusRule" not in kinds
    assert not [
        r
        for r in run.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] in ("loki", "kube-prometheus-stack")
    ]


# ---- builders and validation ---------------------------------------------------------


def test_drain_and_exit_timing() -> None:
    assert prestop_seconds(_cfg(termination_grace_period_seconds=120)) == 15
    assert prestop_seconds(_cfg(termination_grace_period_seconds=20)) == 5
    assert exit_timeout_seconds(_cfg(termination_grace_period_seconds=120)) == 100
    assert exit_timeout_seconds(_cfg(termination_grace_period_seconds=10)) == 3
    # One replica: a minAvailable of 1 would block every eviction (drains, upgrades, scale-down).
    assert pdb_budget(_cfg(min_replicas=1)) == {"maxUnavailable": 1}
    assert pdb_budget(_cfg(min_replicas=2)) == {"minAvailable": 1}
    assert pdb_budget(_cfg(min_replicas=4)) == {"minAvailable": 3}
    assert "--repository-poll-secs=2" in triton_args(_cfg())


def _args(**overrides: Any) -> TritonDeploymentArgs:
    base: dict[str, Any] = {
        "deployment": _cfg(),
        "environment": "dev",
        "bucket_name": "b",
        "region": "us-east-1",
        "agent_image": "registry.example.com/agent:1.0",
    }
    return TritonDeploymentArgs(**{**base, **overrides})


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"deployment": _cfg(min_replicas=0)}, r"deployment\.min_replicas: 0 .*HPAScaleToZero"),
        ({"environment": "qa"}, r"environment: 'qa' is not allowed; allowed: dev \| staging \| prod"),
        ({"region": ""}, r"region: '' is not allowed"),
        ({"agent_image": "agent"}, r"agent_image: 'agent' is not allowed"),
        ({"triton_image": "nvcr.io/nvidia/tritonserver"}, r"triton_image: .* has no tag"),
    ],
)
def test_args_validation(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _args(**overrides)
    assert _args() is not None


def test_resource_of_record_types(dev: Run) -> None:
    kinds = sorted(
        {
            r.inputs["kind"]
            for r in dev.descendants_of(dev.one(COMPONENT, "triton-default"))
            if isinstance(r, Resource) and r.type.startswith("kubernetes:")
        }
    )
    assert kinds == [
        "Deployment",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "PodMonitor",
        "Secret",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    ]


def test_agent_commands_in_the_pod_parse_with_the_real_agent_cli(
    any_stack: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pod runs exactly the command the agent's own tests run: the init container's and
    the sidecar's command lines parse with model_sync's CLI and resolve an environment with
    no model-sync.yaml in the image (everything comes from flags)."""
    from model_sync import environments
    from model_sync.agent import AGENT_COMMAND
    from model_sync.cli import build_parser

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MODEL_SYNC_CONFIG", raising=False)
    parser = build_parser("agent")
    deployments = any_stack.of_type("kubernetes:apps/v1:Deployment")
    agents = []
    for dep in deployments:
        spec = dep.inputs["spec"]["template"]["spec"]
        agents += [
            c for c in [*spec.get("initContainers", []), *spec["containers"]] if c["command"][:4] == list(AGENT_COMMAND)
        ]
    assert agents, "no repository-agent containers recorded"
    for container in agents:
        args = parser.parse_args(container["command"][3:])
        assert args.command == "agent"
        env = environments.resolve(args.env, bucket=args.bucket, region=args.region)
        assert env.root.bucket.startswith("triton-platform-")
        assert args.staging_dir.parent == args.repository.parent
