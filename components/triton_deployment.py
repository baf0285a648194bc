"""One Triton Inference Server deployment: a model group on one GPU
node group, served from a pod-local repository the repository agent keeps in sync.

Per deployment `<d>` (objects named `triton-<d>` unless noted):

- ServiceAccount `naming.triton_service_account(d)`: the AWS engineer's EKS Pod Identity
  association binds exactly this name to the serving role (no IRSA annotation).
- Secret `triton-<d>-admin-key`: a generated key; Triton's admin protocols
  (model-repository, statistics, logging, trace, shared-memory) answer only requests
  carrying it in the `admin-key` header. Nothing outside the cluster ever sees it.
- Deployment: `agent-init` (the repository agent, `--once`: the first sync before Triton
  starts), `agent` (the same image as a native sidecar in loop mode: it starts before and
  stops after Triton) and `tritonserver` polling the LOCAL directory /models/repository.
  The agent downloads into /models/.staging (same emptyDir, beside the repository root,
  never inside it: Triton would take it for a model) and moves verified versions in by
  atomic rename, then flips config.pbtxt pins the same way.
- Service (8000 http, 8001 grpc, 8002 `metrics`), PodDisruptionBudget, NetworkPolicy,
  and when monitoring is on, a HorizontalPodAutoscaler on per-request queue time, a
  ServiceMonitor on the `metrics` port and a PodMonitor on the agent sidecar's own
  `agent-metrics` port (8003: model_sync/agent/metrics.py), which only Prometheus may reach.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.gpu import gpu_contract, node_fit
from components.kubernetes import naming, network_policies
from components.kubernetes.triton_server import (
    ADMIN_HEADER,
    AGENT_INIT_CONTAINER,
    AGENT_METRICS_PORT,
    AGENT_METRICS_PORT_NAME,
    AGENT_SIDECAR,
    GRPC_PORT,
    HTTP_PORT,
    METRICS_PORT,
    QUEUE_TIME_METRIC,
    TRITON_CONTAINER,
)
from components.stack_config.model import TritonDeploymentConfig
from components.stack_config.vocabulary import ENVIRONMENTS
from components.upstream import versions
from model_sync.contract import layout

UID = 1000  # the NGC image's `triton-server` user

MODELS_MOUNT = "/models"
REPOSITORY_DIR = f"{MODELS_MOUNT}/repository"
STAGING_DIR = f"{MODELS_MOUNT}/.staging"
# Exists exactly while the agent sees every placed model READY in Triton (model_sync agent --ready-file).
READY_FILE = f"{MODELS_MOUNT}/.agent-ready"
TMP_DIR = "/tmp"  # noqa: S108 (a private emptyDir per pod)
SHM_DIR = "/dev/shm"  # noqa: S108 (the memory-backed emptyDir Triton and its backends use)

# Triton protocol groups that only cluster operators may call (never the ingress).
# `statistics` (GET /v2/models/stats, gRPC ModelStatistics) tells per-model request counts
# and timings: operational data, not an inference API. Prometheus reads the same numbers
# from the metrics port, which is no protocol group (the NetworkPolicy admits Prometheus).
# ref:
# https://github.com/triton-inference-server/server/blob/main/docs/customization_guide/inference_protocols.md#limit-endpoint-access-beta
ADMIN_PROTOCOLS = ("model-repository", "statistics", "logging", "trace", "shared-memory")
ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"

REPOSITORY_POLL_SECONDS = 2
PRESTOP_SLEEP_MAX_SECONDS = 15
# A new pod counts as available only after this much readiness.
MIN_READY_SECONDS = 30
# Time before a new replica's tritonserver even starts: the cluster autoscaler launching a
# GPU node (3-5 min, more when a zone is short of capacity) plus pulling the 10-20 GB Triton
# image onto it (5-10 min). docs/serving-plane.md, "Rollout and Pulumi's wait".
NODE_PROVISIONING_SECONDS = 900
# Pulumi's await for a Deployment (default 10 min); customTimeouts wins over it when both are set.
# ref: https://github.com/pulumi/pulumi-kubernetes/issues/672
PULUMI_TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"

# EKS Pod Identity agent (host network, link-local): the agent's credentials (NetworkPolicy egress). ref:
# https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html
POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"


@dataclass(frozen=True)
class TritonDeploymentArgs:
    """Inputs of `TritonDeployment`.

    deployment: the validated `tritonDeployments.<name>` entry (required).
    environment: dev | staging | prod (required; the agent's `--env`).
    bucket_name: this environment's model-repository bucket (required; the agent's `--bucket`).
    region: AWS region of the bucket (required; the agent's `--region`).
    agent_image: repository-agent image (required; digest-pinned outside dev by stack config).
    namespace: namespace the objects live in (default `naming.TRITON_NAMESPACE`; must exist).
    triton_image: Triton image (default `versions.TRITON_IMAGE`).
    monitoring: create the ServiceMonitor and the HPA (default true). Both need
        kube-prometheus-stack and prometheus-adapter; without them replicas stay at
        min_replicas.
    ingress_namespace / monitoring_namespace: where the only allowed clients run.
    """

    deployment: TritonDeploymentConfig
    environment: str
    bucket_name: pulumi.Input[str]
    region: str
    agent_image: str
    namespace: str = naming.TRITON_NAMESPACE
    triton_image: str = versions.TRITON_IMAGE
    monitoring: bool = True
    ingress_namespace: str = naming.INGRESS_NAMESPACE
    monitoring_namespace: str = naming.MONITORING_NAMESPACE

    def __post_init__(self) -> None:
        d = self.deployment
        if d.min_replicas < 1:
            raise ValueError(
                f"TritonDeploymentArgs.deployment.min_replicas: {d.min_replicas!r} is not allowed; allowed: 1 or more "
                "(HPA minReplicas 0 needs the HPAScaleToZero feature gate, which EKS does not enable)"
            )
        if self.environment not in ENVIRONMENTS:
            raise ValueError(
                f"TritonDeploymentArgs.environment: {self.environment!r} is not allowed; allowed: "
                f"{' | '.join(ENVIRONMENTS)}"
            )
        if not self.region:
            raise ValueError("TritonDeploymentArgs.region: '' is not allowed; allowed: an AWS region such as us-east-1")
        if not self.agent_image or ":" not in self.agent_image:
            raise ValueError(
                f"TritonDeploymentArgs.agent_image: {self.agent_image!r} is not allowed; allowed: "
                "registry/repo:tag[@sha256:...]"
            )
        if ":" not in self.triton_image.rsplit("/", 1)[-1]:
            raise ValueError(
                f"TritonDeploymentArgs.triton_image: {self.triton_image!r} has no tag; allowed: a pinned image from "
                "components/upstream/versions.py"
            )


# --------------------------------------------------------------------------------------
# Builders (plain data; unit-tested directly).
# --------------------------------------------------------------------------------------


def labels(d: TritonDeploymentConfig) -> dict[str, str]:
    return {
        **selector_labels(d),
        "app.kubernetes.io/component": "inference",
        **naming.PART_OF_LABELS,
        "triton-platform.io/deployment": d.name,
    }


def selector_labels(d: TritonDeploymentConfig) -> dict[str, str]:
    return {"app.kubernetes.io/name": "triton", "app.kubernetes.io/instance": naming.triton_app_name(d.name)}


def prestop_seconds(d: TritonDeploymentConfig) -> int:
    """Seconds the pod keeps serving after it is marked terminating, so that endpoints,
    kube-proxy and the Envoy proxies stop sending it new requests first."""
    return min(PRESTOP_SLEEP_MAX_SECONDS, d.termination_grace_period_seconds // 4)


def exit_timeout_seconds(d: TritonDeploymentConfig) -> int:
    """Triton's own drain after SIGTERM: it refuses new requests and waits this long for
    in-flight ones; what is left of the grace period after the preStop sleep, less 5 s."""
    return max(1, d.termination_grace_period_seconds - prestop_seconds(d) - 5)


def triton_args(d: TritonDeploymentConfig) -> list[str]:
    """tritonserver's command line. `$(TRITON_ADMIN_KEY)` is expanded by the kubelet from
    the container's env (the Secret), so the key never appears in the pod spec."""
    restricted = f"{','.join(ADMIN_PROTOCOLS)}:{ADMIN_HEADER}=$({ADMIN_KEY_ENV})"
    # ref:
    # https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_management.md#model-control-mode-poll
    # ref: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/metrics.md#summaries
    return [
        f"--model-repository={REPOSITORY_DIR}",
        "--model-control-mode=poll",
        f"--repository-poll-secs={REPOSITORY_POLL_SECONDS}",
        "--strict-readiness=true",
        "--exit-on-error=false",
        "--disable-auto-complete-config",
        f"--http-restricted-api={restricted}",
        f"--grpc-restricted-protocol={restricted}",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        "--allow-metrics=true",
        "--allow-gpu-metrics=true",
        f"--metrics-port={METRICS_PORT}",
        "--metrics-config=summary_latencies=true",
        f"--exit-timeout-secs={exit_timeout_seconds(d)}",
        "--log-format=ISO8601",
    ]


def agent_command(
    d: TritonDeploymentConfig, *, environment: str, bucket: pulumi.Input[str], region: str, once: bool
) -> list[Any]:
    """The repository agent's command line (model_sync/commands/agent.py). The init
    container places every pin once; the sidecar loops, confirms loads through Triton's
    HTTP endpoint and reports status/<deployment>/<$POD_NAME>.json."""
    cmd: list[Any] = [
        *layout.AGENT_COMMAND,
        "--env",
        environment,
        "--bucket",
        pulumi.Output.concat("s3://", bucket),
        "--region",
        region,
        "--repository",
        REPOSITORY_DIR,
        "--staging-dir",
        STAGING_DIR,
        "--deployment",
        d.name,
    ]
    for model in d.models:
        cmd += ["--model", model]
    if once:
        return [*cmd, "--once"]
    return [
        *cmd,
        "--metrics-port",
        str(AGENT_METRICS_PORT),
        "--interval",
        str(d.agent_interval_seconds),
        "--ready-file",
        READY_FILE,
        "--triton-url",
        f"http://127.0.0.1:{HTTP_PORT}",
        "--triton-header",
        f"{ADMIN_HEADER}:$({ADMIN_KEY_ENV})",
    ]


def _agent_env(region: str, admin_secret: str) -> list[dict[str, Any]]:
    return [
        # Each replica reports what it has loaded under status/<deployment>/<pod name>.json.
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "AWS_REGION", "value": region},
        {"name": "HOME", "value": TMP_DIR},
        {"name": ADMIN_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": admin_secret, "key": "key"}}},
    ]


def container_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "runAsGroup": UID,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def probes(d: TritonDeploymentConfig) -> dict[str, dict[str, Any]]:
    """tritonserver's probes ask only whether the PROCESS is healthy (/v2/health/live).
    Which models are READY gates traffic through the agent sidecar's readiness probe: the
    agent keeps READY_FILE exactly while every model it has placed is READY in Triton. A
    model that fails to load never restarts Triton (that would only load it again, in a
    loop); the agent rolls a failing new version back locally or removes a failing new
    model, and the replica is ready again as soon as what remains is READY. Triton's own
    strict readiness (/v2/health/ready) cannot be the gate: on 2.51 in poll mode it stays
    not-ready after any failed load, even once the model is gone (docs/agent.md)."""
    period = 10
    return {
        # startupTimeoutSeconds bounds how long the server may take to start listening
        # (model loading happens before /v2/health/live answers on a cold start).
        "startupProbe": {
            "httpGet": {"path": "/v2/health/live", "port": "http"},
            "periodSeconds": period,
            "timeoutSeconds": 5,
            "failureThreshold": math.ceil(d.startup_timeout_seconds / period),
        },
        # The container itself is ready when the server answers; which models are READY is
        # judged by the agent sidecar's readiness probe (READY_FILE), see probes() docstring.
        "readinessProbe": {
            "httpGet": {"path": "/v2/health/live", "port": "http"},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
            "successThreshold": 1,
        },
        "livenessProbe": {
            "httpGet": {"path": "/v2/health/live", "port": "http"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 6,
        },
    }


def pod_spec(
    d: TritonDeploymentConfig,
    *,
    environment: str,
    bucket: pulumi.Input[str],
    region: str,
    agent_image: str,
    triton_image: str,
    admin_secret: str,
) -> dict[str, Any]:
    """The pod: the agent (once, then as a native sidecar) beside tritonserver, on the deployment's GPU group."""
    agent_init, agent = _agent_containers(
        d, environment=environment, bucket=bucket, region=region, agent_image=agent_image, admin_secret=admin_secret
    )
    triton = _triton_container(d, triton_image, admin_secret)
    spread = _topology_spread(d)
    return {
        "serviceAccountName": naming.triton_service_account(d.name),
        # EKS Pod Identity injects its own projected token; nothing here calls the Kubernetes API.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": d.termination_grace_period_seconds,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": UID,
            "runAsGroup": UID,
            "fsGroup": UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "nodeSelector": gpu_contract.gpu_node_selector(d.node_group),
        "tolerations": gpu_contract.gpu_tolerations(),
        "topologySpreadConstraints": spread,
        "initContainers": [agent_init, agent],
        "containers": [triton],
        "volumes": [
            {"name": "models", "emptyDir": {"sizeLimit": f"{d.model_volume_gib}Gi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            # Memory-backed: counts against the pod's memory limit.
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{d.shm_size_gib}Gi"}},
        ],
    }


def _mounts() -> tuple[dict[str, Any], dict[str, Any]]:
    """The models volume's and the private /tmp's mounts."""
    return {"name": "models", "mountPath": MODELS_MOUNT}, {"name": "tmp", "mountPath": TMP_DIR}


def _agent_containers(
    d: TritonDeploymentConfig,
    *,
    environment: str,
    bucket: pulumi.Input[str],
    region: str,
    agent_image: str,
    admin_secret: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The agent's first sync (`agent-init`) and the agent as a native sidecar (`agent`)."""
    models_mount, tmp_mount = _mounts()
    agent_resources = {"requests": dict(node_fit.AGENT_REQUESTS), "limits": {"cpu": "1", "memory": "1Gi"}}
    agent_init = {
        "name": AGENT_INIT_CONTAINER,
        "image": agent_image,
        "imagePullPolicy": "IfNotPresent",
        "command": agent_command(d, environment=environment, bucket=bucket, region=region, once=True),
        "env": _agent_env(region, admin_secret),
        "volumeMounts": [models_mount, tmp_mount],
        "resources": {"requests": dict(node_fit.AGENT_INIT_REQUESTS), "limits": {"cpu": "2", "memory": "2Gi"}},
        "securityContext": container_security_context(),
    }
    agent = {
        **agent_init,
        "name": AGENT_SIDECAR,
        "command": agent_command(d, environment=environment, bucket=bucket, region=region, once=False),
        "resources": agent_resources,
        # A native sidecar: started before tritonserver, stopped after it.
        # ref: https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/
        "restartPolicy": "Always",
        "ports": [{"name": AGENT_METRICS_PORT_NAME, "containerPort": AGENT_METRICS_PORT, "protocol": "TCP"}],
        # Pod readiness = every placed model READY (the agent's marker). Triton's own
        # /v2/health/ready latches not-ready after any failed load in poll mode (measured on
        # 2.51), so it cannot gate traffic without one bad push draining every replica.
        "readinessProbe": {
            "exec": {"command": ["test", "-f", READY_FILE]},
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 2,
            "successThreshold": 1,
        },
    }
    return agent_init, agent


def _triton_container(d: TritonDeploymentConfig, triton_image: str, admin_secret: str) -> dict[str, Any]:
    """tritonserver: its ports, probes, drain on stop, GPU and memory, and mounts."""
    models_mount, tmp_mount = _mounts()
    triton = {
        "name": TRITON_CONTAINER,
        "image": triton_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["tritonserver"],
        "args": triton_args(d),
        "env": [
            {"name": ADMIN_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": admin_secret, "key": "key"}}},
            {"name": "HOME", "value": TMP_DIR},
        ],
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        **probes(d),
        # The sleep keeps serving while the endpoint is withdrawn everywhere; Triton then
        # drains in-flight requests itself on SIGTERM (--exit-timeout-secs).
        # ref: https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/#hook-handler-implementations
        "lifecycle": {"preStop": {"sleep": {"seconds": prestop_seconds(d)}}},
        "resources": {
            "requests": {
                "cpu": d.cpu,
                "memory": d.memory,
                "ephemeral-storage": f"{d.model_volume_gib + node_fit.EPHEMERAL_OVERHEAD_GIB}Gi",
            },
            "limits": {"cpu": d.cpu, "memory": d.memory, gpu_contract.GPU_RESOURCE: str(d.gpus_per_replica)},
        },
        "securityContext": container_security_context(),
        "volumeMounts": [
            {**models_mount, "readOnly": True},
            tmp_mount,
            {"name": "dshm", "mountPath": SHM_DIR},
        ],
    }
    return triton


def _topology_spread(d: TritonDeploymentConfig) -> list[dict[str, Any]]:
    """Replicas spread over zones where possible and over nodes always."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector_labels(d)},
        },
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": selector_labels(d)},
        },
    ]


def replica_ready_budget_seconds(d: TritonDeploymentConfig) -> int:
    """Worst case for ONE new replica to become available: a GPU node and the image pull,
    Triton's startup (model loading) and minReadySeconds. The Deployment's
    progressDeadlineSeconds: Kubernetes marks the rollout failed when no replica became
    available for this long (and Pulumi then fails at once)."""
    return NODE_PROVISIONING_SECONDS + d.startup_timeout_seconds + MIN_READY_SECONDS


def rollout_timeout_seconds(d: TritonDeploymentConfig) -> int:
    """How long `pulumi up` waits for the Deployment (create or update). A rolling update
    with maxSurge 1 / maxUnavailable 0 replaces the replicas one after another, and the HPA
    may run up to maxReplicas of them; the progress deadline still fails a stuck rollout
    after one replica's budget."""
    return replica_ready_budget_seconds(d) * d.max_replicas


def deployment_metadata_annotations(d: TritonDeploymentConfig) -> dict[str, str]:
    # ref: https://www.pulumi.com/registry/packages/kubernetes/api-docs/apps/v1/deployment/
    return {PULUMI_TIMEOUT_ANNOTATION: str(rollout_timeout_seconds(d))}


def deployment_spec(d: TritonDeploymentConfig, pod: dict[str, Any]) -> dict[str, Any]:
    return {
        # Starts at the floor; the HPA owns the count afterwards (spec.replicas is ignored on update).
        "replicas": d.min_replicas,
        "revisionHistoryLimit": 5,
        "selector": {"matchLabels": selector_labels(d)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
        "minReadySeconds": MIN_READY_SECONDS,
        "progressDeadlineSeconds": replica_ready_budget_seconds(d),
        "template": {"metadata": {"labels": labels(d)}, "spec": pod},
    }


def service_spec(d: TritonDeploymentConfig) -> dict[str, Any]:
    return {
        "type": "ClusterIP",
        "selector": selector_labels(d),
        "ports": [
            {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP", "appProtocol": "http"},
            {
                "name": "grpc",
                "port": GRPC_PORT,
                "targetPort": "grpc",
                "protocol": "TCP",
                "appProtocol": "kubernetes.io/h2c",
            },
            {
                "name": "metrics",
                "port": METRICS_PORT,
                "targetPort": "metrics",
                "protocol": "TCP",
                "appProtocol": "http",
            },
        ],
    }


def pdb_budget(d: TritonDeploymentConfig) -> dict[str, int]:
    """How many replicas a drain may take at once. With a floor of two or more, a drain never
    takes the deployment below one replica short of its floor. With a floor of one (dev,
    staging) a `minAvailable: 1` would block every eviction of the only replica, so node drains,
    node-group upgrades and the autoscaler's scale-down would hang: one replica at a time may go."""
    if d.min_replicas >= 2:
        return {"minAvailable": d.min_replicas - 1}
    return {"maxUnavailable": 1}


def pdb_spec(d: TritonDeploymentConfig) -> dict[str, Any]:
    return {
        **pdb_budget(d),
        "selector": {"matchLabels": selector_labels(d)},
        # A crash-looping pod must not block node drains.
        # ref: https://kubernetes.io/docs/tasks/run-application/configure-pdb/#unhealthy-pod-eviction-policy
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }


def hpa_spec(d: TritonDeploymentConfig) -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": naming.triton_app_name(d.name)},
        "minReplicas": d.min_replicas,
        "maxReplicas": d.max_replicas,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": QUEUE_TIME_METRIC},
                    "target": {"type": "AverageValue", "averageValue": str(d.queue_time_target_microseconds)},
                },
            }
        ],
        # ref: https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#configurable-scaling-behavior
        "behavior": {
            "scaleUp": {
                "stabilizationWindowSeconds": d.scale_up_stabilization_seconds,
                "selectPolicy": "Max",
                "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
            },
            "scaleDown": {
                "stabilizationWindowSeconds": d.scale_down_stabilization_seconds,
                "selectPolicy": "Min",
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
            },
        },
    }


def network_policy_spec(
    d: TritonDeploymentConfig, *, ingress_namespace: str, monitoring_namespace: str
) -> dict[str, Any]:
    """Ingress: the Envoy proxies to http/grpc, Prometheus to Triton's and the agent's metrics,
    nothing else. Egress: DNS, HTTPS (S3 through the gateway endpoint uses S3's public addresses;
    IMDS excluded) and the EKS Pod Identity agent (credentials)."""
    np = network_policies
    return np.policy(
        selector_labels(d),
        ingress=[
            np.rule([np.pods_in(ingress_namespace, naming.PROXY_POD_LABELS)], *np.tcp(HTTP_PORT, GRPC_PORT)),
            np.from_prometheus_rule(monitoring_namespace, *np.tcp(METRICS_PORT, AGENT_METRICS_PORT)),
        ],
        egress=[
            np.dns_rule(),
            np.rule([np.internet()], *np.tcp(443)),
            np.rule([np.cidr(POD_IDENTITY_AGENT_CIDR)], *np.tcp(80)),
        ],
    )


def service_monitor_spec(d: TritonDeploymentConfig, namespace: str) -> dict[str, Any]:
    return {
        "selector": {"matchLabels": selector_labels(d)},
        "namespaceSelector": {"matchNames": [namespace]},
        "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}],
    }


def pod_monitor_spec(d: TritonDeploymentConfig, namespace: str) -> dict[str, Any]:
    """The agent sidecar's /metrics, scraped from every pod (ready or not: a replica whose agent
    cannot reach S3 is exactly one to hear from). Prometheus discovers a native sidecar's ports
    like any container's."""
    # ref: https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.PodMonitor
    return {
        "selector": {"matchLabels": selector_labels(d)},
        "namespaceSelector": {"matchNames": [namespace]},
        "podMetricsEndpoints": [
            {"port": AGENT_METRICS_PORT_NAME, "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
        ],
    }


# --------------------------------------------------------------------------------------
# The component.
# --------------------------------------------------------------------------------------


def _typed(value: dict[str, Any]) -> Any:
    """Plain dicts are what the builders return; the SDK's TypedDict inputs accept them."""
    return value


class TritonDeployment(pulumi.ComponentResource):
    """A Triton deployment with its agent, Service, PDB, NetworkPolicy, HPA, ServiceMonitor and PodMonitor."""

    service_name: pulumi.Output[str]
    deployment_name: pulumi.Output[str]
    service_account_name: pulumi.Output[str]

    def __init__(self, name: str, args: TritonDeploymentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:serving:TritonDeployment", name, None, opts)
        admin_secret_name = self._identity(name, args)
        self._deployment(name, args, admin_secret_name)
        self._service_and_policies(name, args)
        self._monitoring(name, args)

        self.service_name = self.service.metadata.name
        self.deployment_name = self.deployment.metadata.name
        self.service_account_name = self.service_account.metadata.name
        self.register_outputs(
            {
                "serviceName": self.service_name,
                "deploymentName": self.deployment_name,
                "serviceAccountName": self.service_account_name,
            }
        )

    def _identity(self, name: str, args: TritonDeploymentArgs) -> str:
        """The ServiceAccount and the admin-key Secret; returns the Secret's name."""
        d = args.deployment
        child = pulumi.ResourceOptions(parent=self)
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata=_meta(args, naming.triton_service_account(d.name)),
            automount_service_account_token=False,
            opts=child,
        )
        admin_key = random.RandomPassword(f"{name}-admin-key", length=48, special=False, opts=child)
        admin_secret_name = f"{naming.triton_app_name(d.name)}-admin-key"
        self.admin_secret = k8s.core.v1.Secret(
            f"{name}-admin-secret",
            metadata=_meta(args, admin_secret_name),
            type="Opaque",
            string_data={"key": admin_key.result},
            opts=child,
        )
        return admin_secret_name

    def _deployment(self, name: str, args: TritonDeploymentArgs, admin_secret_name: str) -> None:
        """The Deployment, awaited for its whole rollout."""
        d = args.deployment
        app = naming.triton_app_name(d.name)
        pod = pod_spec(
            d,
            environment=args.environment,
            bucket=args.bucket_name,
            region=args.region,
            agent_image=args.agent_image,
            triton_image=args.triton_image,
            admin_secret=admin_secret_name,
        )
        # Pulumi's default 10-minute await would give up long before a GPU node, a 10-20 GB
        # image and model loading are through: wait for the whole rollout (the annotation,
        # and the same value as customTimeouts, which take precedence where supported).
        timeout = f"{rollout_timeout_seconds(d)}s"
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata={**_meta(args, app), "annotations": deployment_metadata_annotations(d)},
            spec=_typed(deployment_spec(d, pod)),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.service_account, self.admin_secret],
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
                ignore_changes=["spec.replicas"] if args.monitoring else None,
            ),
        )

    def _service_and_policies(self, name: str, args: TritonDeploymentArgs) -> None:
        """The Service, the PodDisruptionBudget and the NetworkPolicy."""
        d = args.deployment
        app = naming.triton_app_name(d.name)
        child = pulumi.ResourceOptions(parent=self)
        self.service = k8s.core.v1.Service(
            f"{name}-service", metadata=_meta(args, app), spec=_typed(service_spec(d)), opts=child
        )
        self.pdb = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=_meta(args, app), spec=_typed(pdb_spec(d)), opts=child
        )
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-network-policy",
            metadata=_meta(args, app),
            spec=_typed(
                network_policy_spec(
                    d, ingress_namespace=args.ingress_namespace, monitoring_namespace=args.monitoring_namespace
                )
            ),
            opts=child,
        )

    def _monitoring(self, name: str, args: TritonDeploymentArgs) -> None:
        """With monitoring: the HPA on queue time, the ServiceMonitor and the agent's PodMonitor."""
        d = args.deployment
        app = naming.triton_app_name(d.name)
        child = pulumi.ResourceOptions(parent=self)
        self.hpa: k8s.autoscaling.v2.HorizontalPodAutoscaler | None = None
        self.service_monitor: k8s.apiextensions.CustomResource | None = None
        self.pod_monitor: k8s.apiextensions.CustomResource | None = None
        if not args.monitoring:
            return
        self.hpa = k8s.autoscaling.v2.HorizontalPodAutoscaler(
            f"{name}-hpa", metadata=_meta(args, app), spec=_typed(hpa_spec(d)), opts=child
        )
        self.service_monitor = k8s.apiextensions.CustomResource(
            f"{name}-service-monitor",
            api_version="monitoring.coreos.com/v1",
            kind="ServiceMonitor",
            metadata=_meta(args, app),
            spec=_typed(service_monitor_spec(d, args.namespace)),
            opts=child,
        )
        self.pod_monitor = k8s.apiextensions.CustomResource(
            f"{name}-pod-monitor",
            api_version="monitoring.coreos.com/v1",
            kind="PodMonitor",
            metadata=_meta(args, f"{app}-agent"),
            spec=_typed(pod_monitor_spec(d, args.namespace)),
            opts=child,
        )


def _meta(args: TritonDeploymentArgs, obj_name: str) -> Any:
    """The metadata of an object of this deployment: its name, namespace and labels."""
    return {"name": obj_name, "namespace": args.namespace, "labels": labels(args.deployment)}


def build_triton_deployments(
    deployments: tuple[TritonDeploymentConfig, ...],
    *,
    environment: str,
    bucket_name: pulumi.Input[str],
    region: str,
    agent_image: str,
    monitoring: bool,
    triton_image: str = versions.TRITON_IMAGE,
    opts: pulumi.ResourceOptions | None = None,
) -> dict[str, TritonDeployment]:
    """One `TritonDeployment` per `tritonDeployments` entry, keyed by deployment name
    (logical names `triton-<name>`)."""
    return {
        d.name: TritonDeployment(
            naming.triton_app_name(d.name),
            TritonDeploymentArgs(
                deployment=d,
                environment=environment,
                bucket_name=bucket_name,
                region=region,
                agent_image=agent_image,
                monitoring=monitoring,
                triton_image=triton_image,
            ),
            opts=opts,
        )
        for d in deployments
    }
