"""The whole cluster a stack gets, for the tests in tests/manifests: the program's own
Kubernetes objects (tools/render.py) plus what every Helm release's pinned chart renders from
the values the program records (tools/helm_template.py). Built once per stack and worker."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import stack_run
from tools import yamlio
from tools.helm_template import Release, Renderer, kubernetes_version, load_releases, normalise
from tools.render import write_render

# The nine releases every stack installs (tools/render.py names each file after the release's
# logical name). A release added or dropped must be added here too.
RELEASES = (
    "cluster-autoscaler-release",
    "gpu-operators-dcgm-exporter",
    "gpu-operators-device-plugin",
    "ingress-cert-manager",
    "ingress-envoy-gateway",
    "log-shipping-alloy",
    "log-shipping-loki",
    "monitoring-kube-prometheus-stack",
    "monitoring-prometheus-adapter",
)

# Built-in kinds that are not namespaced (helm template leaves metadata.namespace off the
# namespaced ones: they go to the release namespace, which `objects()` fills in).
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "APIService",
        "PriorityClass",
        "StorageClass",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "RuntimeClass",
        "IngressClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "CertificateSigningRequest",
        "FlowSchema",
        "PriorityLevelConfiguration",
    }
)


@dataclass(frozen=True)
class Obj:
    """One object of the cluster and where it comes from: "program" or a release key."""

    source: str
    doc: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.doc["kind"])

    @property
    def name(self) -> str:
        return str(self.doc["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        return self.doc["metadata"].get("namespace")

    def __str__(self) -> str:
        return f"{self.source}: {self.kind} {self.namespace or '-'}/{self.name}"


@dataclass(frozen=True)
class Cluster:
    stack: str
    kubernetes_version: str
    program: list[dict[str, Any]]
    releases: dict[str, Release]
    rendered: dict[str, list[dict[str, Any]]]
    errors: dict[str, str]
    api_versions: tuple[str, ...]

    def objects(self) -> list[Obj]:
        return self._objects

    @functools.cached_property
    def _objects(self) -> list[Obj]:
        out = [Obj("program", doc) for doc in self.program]
        crd_scope = {
            (c["spec"]["names"]["kind"], c["spec"]["group"]): c["spec"]["scope"]
            for docs in self.rendered.values()
            for c in docs
            if c["kind"] == "CustomResourceDefinition"
        }
        for key, docs in self.rendered.items():
            for doc in docs:
                group = doc["apiVersion"].rsplit("/", 1)[0] if "/" in doc["apiVersion"] else ""
                namespaced = (
                    crd_scope.get((doc["kind"], group), "Namespaced") == "Namespaced"
                    and doc["kind"] not in CLUSTER_SCOPED
                )
                if namespaced and not doc.get("metadata", {}).get("namespace"):
                    doc = {**doc, "metadata": {**doc.get("metadata", {}), "namespace": self.releases[key].namespace}}
                out.append(Obj(key, doc))
        return out

    def of_kind(self, *kinds: str) -> list[Obj]:
        return [o for o in self.objects() if o.kind in kinds]

    def crds(self) -> list[dict[str, Any]]:
        return [o.doc for o in self.of_kind("CustomResourceDefinition")]


@functools.cache
def cluster(stack: str) -> Cluster:
    with tempfile.TemporaryDirectory(prefix=f"cluster-{stack}-") as tmp:  # read whole, then removed
        out = Path(tmp)
        write_render(stack_run(stack), out)
        # Numbers as the provider sends them (the mocks record every number as a float).
        program = [normalise(yamlio.load(p.read_text())) for p in sorted((out / "manifests").glob("*.yaml"))]
        releases = {r.key: r for r in load_releases(out)}
        version = kubernetes_version(out)
    rendered = Renderer().render_all(list(releases.values()), version)
    return Cluster(stack, version, program, releases, rendered.objects, rendered.errors, rendered.api_versions)


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The pod spec of a workload (Pod, Deployment, DaemonSet, StatefulSet, ReplicaSet, Job, CronJob)."""
    kind = doc["kind"]
    if kind == "Pod":
        return dict(doc["spec"])
    if kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"):
        return dict(doc["spec"]["template"]["spec"])
    if kind == "CronJob":
        return dict(doc["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return None


def running_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers that run beside each other in a pod: its containers and its native sidecars
    (init containers with restartPolicy Always), whose ports Prometheus' pod discovery lists too."""
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    return [*(spec.get("containers") or []), *sidecars]


def pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    if doc["kind"] == "Pod":
        return dict(doc["metadata"].get("labels") or {})
    template = doc["spec"].get("template") or doc["spec"].get("jobTemplate", {}).get("spec", {}).get("template", {})
    return dict((template.get("metadata") or {}).get("labels") or {})


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A Kubernetes LabelSelector (matchLabels + matchExpressions) against a label set."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if (
            (op == "In" and labels.get(key) not in values)
            or (op == "NotIn" and labels.get(key) in values)
            or (op == "Exists" and key not in labels)
            or (op == "DoesNotExist" and key in labels)
        ):
            return False
    return True
