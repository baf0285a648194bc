"""A namespace of the serving plane with its Pod Security Standard enforced and,
optionally, a default-deny NetworkPolicy (every allowed flow is then declared by the
workload that needs it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

POD_SECURITY_LEVELS = ("restricted", "baseline", "privileged")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class ServingNamespaceArgs:
    """Inputs of `ServingNamespace`.

    namespace: the namespace name (required; a DNS label).
    pod_security: Pod Security Standard enforced (default `restricted`; `baseline` or
        `privileged` only for charts that need host access, e.g. node-exporter).
    default_deny: add a NetworkPolicy denying all ingress and egress of every pod
        (default true).
    """

    namespace: str
    pod_security: str = "restricted"
    default_deny: bool = True

    def __post_init__(self) -> None:
        if not _DNS_LABEL.match(self.namespace):
            raise ValueError(f"ServingNamespaceArgs.namespace: {self.namespace!r} is not allowed; allowed: a DNS label (lowercase letters, digits, '-')")
        if self.pod_security not in POD_SECURITY_LEVELS:
            raise ValueError(f"ServingNamespaceArgs.pod_security: {self.pod_security!r} is not allowed; allowed: {' | '.join(POD_SECURITY_LEVELS)}")


def namespace_labels(args: ServingNamespaceArgs) -> dict[str, str]:
    # ref: https://kubernetes.io/docs/concepts/security/pod-security-admission/#pod-security-admission-labels-for-namespaces
    return {
        "app.kubernetes.io/part-of": "triton-platform",
        "pod-security.kubernetes.io/enforce": args.pod_security,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }


def default_deny_spec() -> dict[str, Any]:
    return {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


class ServingNamespace(pulumi.ComponentResource):
    namespace_name: pulumi.Output[str]

    def __init__(self, name: str, args: ServingNamespaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:serving:ServingNamespace", name, None, opts)
        meta: Any = {"name": args.namespace, "labels": namespace_labels(args)}
        self.namespace = k8s.core.v1.Namespace(f"{name}-namespace", metadata=meta, opts=pulumi.ResourceOptions(parent=self))
        self.default_deny: k8s.networking.v1.NetworkPolicy | None = None
        if args.default_deny:
            spec: Any = default_deny_spec()
            self.default_deny = k8s.networking.v1.NetworkPolicy(
                f"{name}-default-deny", metadata={"name": "default-deny", "namespace": args.namespace}, spec=spec,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespace]))
        self.namespace_name = self.namespace.metadata.name
        self.register_outputs({"namespaceName": self.namespace_name})
