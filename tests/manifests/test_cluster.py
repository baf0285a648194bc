"""The whole cluster each stack gets (the program's objects plus every chart's rendered
objects), validated against the upstream schemas and held to the platform's invariants."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import yaml
from kubernetes_validate.utils import ValidationError

from components.gpu import gpu_contract
from tests.conftest import STACKS
from tests.manifests._cluster import Cluster, Obj, cluster, pod_labels, pod_spec, running_containers, selects
from tests.manifests._validators import CrdSchemas, validate_builtin
from tools.helm_template import builtin_api_versions

WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod")

# Services the cluster has that no release renders, which the charts' own monitors scrape.
# Each is created by something outside the render; the monitor test checks selector and port.
OUTSIDE_THE_RENDER: list[tuple[str, dict[str, Any]]] = [
    (
        "the API server's Service, in every cluster",
        {
            "kind": "Service",
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {"ports": [{"name": "https", "port": 443}]},
        },
    ),
    (
        "created and kept by prometheus-operator's kubelet controller (kube-prometheus-stack's "
        "prometheusOperator.kubeletService, namespace kube-system)",
        {
            "kind": "Service",
            "metadata": {
                "name": "kube-prometheus-stack-kubelet",
                "namespace": "kube-system",
                "labels": {"app.kubernetes.io/name": "kubelet", "k8s-app": "kubelet"},
            },
            "spec": {
                "ports": [
                    {"name": "https-metrics", "port": 10250},
                    {"name": "http-metrics", "port": 10255},
                    {"name": "cadvisor", "port": 4194},
                ]
            },
        },
    ),
    (
        "the EKS CoreDNS add-on's Service (components/eks/addons.py), which serves metrics on 9153",
        {
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
            "spec": {
                "ports": [
                    {"name": "dns", "port": 53},
                    {"name": "dns-tcp", "port": 53},
                    {"name": "metrics", "port": 9153},
                ]
            },
        },
    ),
]


def _builtin(c: Cluster, o: Obj) -> bool:
    return o.doc["apiVersion"] in builtin_api_versions(c.kubernetes_version)


@pytest.mark.parametrize("stack", STACKS)
def test_builtin_kinds_validate_strictly(stack: str) -> None:
    c = cluster(stack)
    builtin = [o for o in c.objects() if _builtin(c, o)]
    assert len({o.source for o in builtin}) == 10, "the program and all nine releases render built-in objects"
    problems = []
    for o in builtin:
        try:
            validate_builtin(o.doc, c.kubernetes_version)
        except ValidationError as exc:
            problems.append(f"{o}: {exc.message}")
    assert problems == []


@pytest.mark.parametrize("stack", STACKS)
def test_custom_resources_match_the_charts_crds(stack: str) -> None:
    c = cluster(stack)
    schemas = CrdSchemas(c.crds())
    custom = [o for o in c.objects() if not _builtin(c, o)]
    kinds = {o.kind for o in custom}
    assert kinds >= {
        "ServiceMonitor",
        "PrometheusRule",
        "Certificate",
        "ClusterIssuer",
        "Prometheus",
        "Alertmanager",
        "GatewayClass",
        "Gateway",
        "HTTPRoute",
        "GRPCRoute",
        "SecurityPolicy",
        "BackendTrafficPolicy",
        "ClientTrafficPolicy",
        "EnvoyProxy",
    }
    problems = [f"{o}: {p}" for o in custom for p in schemas.validate(o.doc, c.kubernetes_version)]
    assert problems == []


# ---- invariants over the whole render -------------------------------------------------


def _workloads(c: Cluster) -> list[tuple[Obj, dict[str, Any]]]:
    return [(o, spec) for o in c.of_kind(*WORKLOADS) if (spec := pod_spec(o.doc)) is not None]


def _gpu_bound(spec: dict[str, Any]) -> bool:
    """The pod can only run on GPU nodes (node selector or required node affinity on the GPU labels)."""
    gpu_keys = {gpu_contract.NODE_ROLE_LABEL: gpu_contract.GPU_ROLE, gpu_contract.GPU_GROUP_LABEL: None}
    selector = spec.get("nodeSelector") or {}
    if selector.get(gpu_contract.NODE_ROLE_LABEL) == gpu_contract.GPU_ROLE or gpu_contract.GPU_GROUP_LABEL in selector:
        return True
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    return bool(terms) and all(
        any(e["key"] in gpu_keys and e["operator"] == "In" for e in t.get("matchExpressions") or []) for t in terms
    )


def _tolerates_gpu(spec: dict[str, Any]) -> bool:
    taint = gpu_contract.GPU_TAINT
    for t in spec.get("tolerations") or []:
        key_ok = t.get("key") == taint.key or (not t.get("key") and t.get("operator") == "Exists")
        value_ok = t.get("operator") == "Exists" or t.get("value") == taint.value
        if key_ok and value_ok and t.get("effect") in (None, "", taint.effect):
            return True
    return False


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_taint_is_tolerated_exactly_by_what_runs_on_gpu_nodes(stack: str) -> None:
    gpu, problems = [], []
    for o, spec in _workloads(cluster(stack)):
        tolerations = spec.get("tolerations") or []
        if _gpu_bound(spec):
            gpu.append(str(o))
            if tolerations != gpu_contract.gpu_tolerations():
                problems.append(
                    f"{o} runs on GPU nodes with tolerations {tolerations}; allowed: exactly "
                    f"{gpu_contract.gpu_tolerations()}"
                )
        elif _tolerates_gpu(spec):
            # Node agents (DaemonSets) may run on every node, GPU nodes included, but through the
            # exact GPU toleration; no other workload may land on a GPU node.
            exact = {json.dumps(t, sort_keys=True) for t in gpu_contract.gpu_tolerations()}
            if (
                o.kind != "DaemonSet"
                or not exact <= {json.dumps(t, sort_keys=True) for t in tolerations}
                or any(not t.get("key") for t in tolerations)
            ):
                problems.append(f"{o} is not bound to GPU nodes but tolerates the GPU taint: {tolerations}")
    assert problems == []
    # The Triton pods, the device plugin and the DCGM exporter are the GPU workloads.
    assert any("Deployment triton/triton-" in g for g in gpu)
    assert any("dcgm-exporter" in g for g in gpu)


def _replicas(c: Cluster, o: Obj) -> int:
    """The fewest replicas the workload runs: its HPA's minReplicas when one targets it."""
    for h in c.of_kind("HorizontalPodAutoscaler"):
        ref = h.doc["spec"]["scaleTargetRef"]
        if h.namespace == o.namespace and ref["kind"] == o.kind and ref["name"] == o.name:
            return int(h.doc["spec"].get("minReplicas", 1))
    return int(o.doc["spec"].get("replicas", 1))


def _count(value: Any, replicas: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = replicas * float(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


@pytest.mark.parametrize("stack", STACKS)
def test_pod_disruption_budgets_allow_evictions(stack: str) -> None:
    c = cluster(stack)
    pdbs = c.of_kind("PodDisruptionBudget")
    assert pdbs
    problems = []
    for pdb in pdbs:
        spec = pdb.doc["spec"]
        if "minAvailable" in spec and "maxUnavailable" in spec:
            problems.append(f"{pdb} sets both minAvailable and maxUnavailable (the API server rejects it)")
            continue
        targets = [
            o
            for o, _ in _workloads(c)
            if o.kind not in ("Job", "CronJob", "Pod")
            and o.namespace == pdb.namespace
            and selects(spec.get("selector"), pod_labels(o.doc))
        ]
        if not targets:
            problems.append(f"{pdb} selects no workload in the render")
        for o in targets:
            n = _replicas(c, o)
            allowed = (
                n - _count(spec["minAvailable"], n, True)
                if "minAvailable" in spec
                else _count(spec.get("maxUnavailable", 1), n, False)
            )
            if allowed < 1:
                problems.append(f"{pdb} blocks every eviction of {o} at {n} replica(s)")
    assert problems == []


def _images(c: Cluster) -> list[tuple[Obj, str]]:
    out = []
    for o, spec in _workloads(c):
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            out.append((o, str(container.get("image") or "")))
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_image_is_pinned(stack: str) -> None:
    images = _images(cluster(stack))
    assert len(images) > 20
    problems = []
    for o, image in images:
        name, _, digest = image.partition("@")
        tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ""
        if not image or (not digest and (not tag or tag == "latest")):
            problems.append(f"{o}: image {image!r} is not pinned by tag or digest")
    assert problems == []


def _services(c: Cluster) -> list[tuple[str, dict[str, Any]]]:
    return [(str(o), o.doc) for o in c.of_kind("Service")] + OUTSIDE_THE_RENDER


@pytest.mark.parametrize("stack", STACKS)
def test_every_monitor_selects_what_exists_with_the_named_port(stack: str) -> None:
    c = cluster(stack)
    services = _services(c)
    monitors = c.of_kind("ServiceMonitor", "PodMonitor")
    assert {o.source for o in monitors} >= {
        "program",
        "gpu-operators-dcgm-exporter",
        "monitoring-kube-prometheus-stack",
    }
    problems = []
    for m in monitors:
        spec = m.doc["spec"]
        ns_sel = spec.get("namespaceSelector") or {}
        names = None if ns_sel.get("any") else set(ns_sel.get("matchNames") or [m.namespace])

        def in_ns(ns: str | None, names: set[str | None] | None = names) -> bool:
            return names is None or ns in names

        if m.kind == "ServiceMonitor":
            chosen = [
                (where, s)
                for where, s in services
                if in_ns(s["metadata"].get("namespace", m.namespace))
                and selects(spec.get("selector"), s["metadata"].get("labels") or {})
            ]
            ports = {p.get("name") for _, s in chosen for p in s["spec"].get("ports") or []}
            wanted = {e["port"] for e in spec.get("endpoints") or [] if "port" in e}
        else:
            pods = [
                (str(o), sp)
                for o, sp in _workloads(c)
                if in_ns(o.namespace) and selects(spec.get("selector"), pod_labels(o.doc))
            ]
            chosen = pods  # type: ignore[assignment]
            ports = {p.get("name") for _, sp in pods for ctr in running_containers(sp) for p in ctr.get("ports") or []}
            wanted = {e["port"] for e in spec.get("podMetricsEndpoints") or [] if "port" in e}
        if not chosen:
            problems.append(f"{m} selects nothing that exists")
        elif wanted - ports:
            problems.append(
                f"{m} scrapes port(s) {sorted(wanted - ports)}; the selected objects name "
                f"{sorted(p for p in ports if p)}"
            )
    assert problems == []


def _datasource_uids(c: Cluster) -> set[str]:
    """UIDs of every datasource Grafana provisions: the sidecar's labelled ConfigMaps/Secrets
    and the chart's own datasource ConfigMap."""
    uids: set[str] = set()
    for o in c.of_kind("ConfigMap", "Secret"):
        if (o.doc["metadata"].get("labels") or {}).get("grafana_datasource") != "1":
            continue
        for text in (o.doc.get("data") or {}).values():
            for ds in (yaml.safe_load(text) or {}).get("datasources") or []:
                uids.add(str(ds.get("uid")))
    return uids


def _dashboard_uids(board: dict[str, Any]) -> set[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ds = node.get("datasource")
            if isinstance(ds, dict) and "uid" in ds:
                found.add(str(ds["uid"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(board)
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_grafana_sees_every_dashboard_and_datasource(stack: str) -> None:
    """Grafana's sidecars watch only its own namespace (a Role, not a cluster-wide Secrets read):
    every labelled dashboard and datasource must live there."""
    c = cluster(stack)
    (grafana,) = [o for o in c.of_kind("Deployment") if o.name == "kube-prometheus-stack-grafana"]
    watched = {
        e["value"]
        for ctr in grafana.doc["spec"]["template"]["spec"]["containers"]
        for e in ctr.get("env") or []
        if e["name"] == "NAMESPACE"
    }
    assert watched == {grafana.namespace}
    assert not [o for o in c.of_kind("ClusterRole") if o.name.endswith("-grafana")]
    labelled = [
        o
        for o in c.of_kind("ConfigMap", "Secret")
        if {"grafana_dashboard", "grafana_datasource"} & set(o.doc["metadata"].get("labels") or {})
    ]
    assert len(labelled) > 10
    assert [str(o) for o in labelled if o.namespace != grafana.namespace] == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_dashboard_datasource_exists(stack: str) -> None:
    c = cluster(stack)
    provisioned = _datasource_uids(c)
    assert {"prometheus", "loki"} <= provisioned
    (board_cm,) = [o for o in c.of_kind("ConfigMap") if o.source == "program" and o.name == "triton-dashboard"]
    board = json.loads(board_cm.doc["data"]["triton.json"])
    variables = {f"${{{v['name']}}}" for v in board["templating"]["list"] if v["type"] == "datasource"}
    used = _dashboard_uids(board)
    assert used
    assert used - provisioned - variables == set()
    for v in board["templating"]["list"]:
        if v["type"] == "datasource":
            assert v["query"] in {"prometheus", "loki"}


@pytest.mark.parametrize("stack", STACKS)
def test_the_prometheus_proxy_names_the_service_and_port_the_chart_renders(stack: str) -> None:
    """`prometheusUrl` (the canary analysis' Prometheus, through the API server's service proxy)
    and the Role that admits it name `http:<service>:<port>`: a Service the pinned
    kube-prometheus-stack renders in the monitoring namespace, selecting the Prometheus pods, with
    that port on Prometheus' web port (9090). The Role and its binding validate with the rest."""
    from components.monitoring.access import PROMETHEUS_PROXY_NAME
    from tests.conftest import stack_run

    c = cluster(stack)
    scheme, name, port = PROMETHEUS_PROXY_NAME.split(":")
    assert scheme == "http"  # Prometheus serves plain HTTP on its web port (no TLS config here)
    (svc,) = [
        o
        for o in c.of_kind("Service")
        if o.source == "monitoring-kube-prometheus-stack" and o.name == name and o.namespace == "monitoring"
    ]
    (web,) = [p for p in svc.doc["spec"]["ports"] if str(p["port"]) == port or p.get("name") == port]
    (prometheus,) = [o for o in c.of_kind("Prometheus") if o.namespace == "monitoring"]
    assert selects(
        {"matchLabels": svc.doc["spec"]["selector"]},
        {"app.kubernetes.io/name": "prometheus", "operator.prometheus.io/name": prometheus.name},
    )
    assert prometheus.doc["spec"].get("portName", "web") == web["name"] == "http-web"
    assert int(web.get("targetPort", web["port"])) == 9090
    url = stack_run(stack).exports["prometheusUrl"]
    assert url.endswith(f"/api/v1/namespaces/monitoring/services/{PROMETHEUS_PROXY_NAME}/proxy")
    (role,) = [o for o in c.of_kind("Role") if o.source == "program" and o.name == "prometheus-query"]
    assert role.doc["rules"][0]["resourceNames"] == [PROMETHEUS_PROXY_NAME]
    assert [o.name for o in c.of_kind("RoleBinding") if o.source == "program"] == ["prometheus-query"]
