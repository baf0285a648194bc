"""A namespace the platform owns, with its Pod Security Standard enforced and a
default-deny NetworkPolicy plus DNS; every other allowed flow is declared by the
component whose workloads need it (`allow`, specs from components/kubernetes/network_policies.py).

Objects: Namespace `<namespace>`; NetworkPolicies `default-deny`, `allow-dns` and
`allow-<role>` per `allow` entry (logical names `<name>-default-deny`, `<name>-allow-dns`,
`<name>-allow-<role>`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes import naming, network_policies
from model_sync.contract.dns_label import RFC1123_LABEL

POD_SECURITY_LEVELS = ("restricted", "baseline", "privileged")


@dataclass(frozen=True)
class ServingNamespaceArgs:
    """Inputs of `ServingNamespace`.

    namespace: the namespace name (required; a DNS label).
    pod_security: Pod Security Standard enforced (default `restricted`; `baseline` or
        `privileged` only for charts that need host access, e.g. node-exporter; the caller
        says why beside the value).
    default_deny: add the NetworkPolicies `default-deny` (no ingress, no egress for every
        pod) and `allow-dns` (default true).
    allow: the namespace's allow policies, role (a DNS label) -> NetworkPolicy spec from
        components/kubernetes/network_policies.py, each created as `allow-<role>` (default none; only
        with default_deny: an allow policy without the deny would isolate pods one by one).
    """

    namespace: str
    pod_security: str = "restricted"
    default_deny: bool = True
    allow: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not RFC1123_LABEL.match(self.namespace):
            raise ValueError(
                f"ServingNamespaceArgs.namespace: {self.namespace!r} is not allowed; allowed: a DNS label (lowercase "
                "letters, digits, '-')"
            )
        if self.pod_security not in POD_SECURITY_LEVELS:
            raise ValueError(
                f"ServingNamespaceArgs.pod_security: {self.pod_security!r} is not allowed; allowed: "
                f"{' | '.join(POD_SECURITY_LEVELS)}"
            )
        if self.allow and not self.default_deny:
            raise ValueError(
                f"ServingNamespaceArgs.allow: {sorted(self.allow)!r} without default_deny is not allowed; allowed: "
                "allow policies only with default_deny=True"
            )
        for role in self.allow:
            if not RFC1123_LABEL.match(role) or role in ("dns", "default-deny"):
                raise ValueError(
                    f"ServingNamespaceArgs.allow: role {role!r} is not allowed; allowed: a DNS label other than "
                    "'dns' (created as allow-<role>)"
                )


def namespace_labels(args: ServingNamespaceArgs) -> dict[str, str]:
    # ref:
    # https://kubernetes.io/docs/concepts/security/pod-security-admission/#pod-security-admission-labels-for-namespaces
    return {
        **naming.PART_OF_LABELS,
        "pod-security.kubernetes.io/enforce": args.pod_security,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }


def default_deny_spec() -> dict[str, Any]:
    return network_policies.default_deny()


def namespace_policies(args: ServingNamespaceArgs) -> dict[str, dict[str, Any]]:
    """NetworkPolicy name -> spec for the namespace (empty without default_deny)."""
    if not args.default_deny:
        return {}
    return {
        "default-deny": default_deny_spec(),
        "allow-dns": network_policies.allow_dns(),
        **{f"allow-{role}": spec for role, spec in sorted(args.allow.items())},
    }


def create_network_policies(
    name: str, args: ServingNamespaceArgs, opts: pulumi.ResourceOptions
) -> dict[str, k8s.networking.v1.NetworkPolicy]:
    """The namespace's NetworkPolicies (`namespace_policies`), logical names `<name>-<policy>`;
    `opts` carries the parent and the dependency on the Namespace."""
    return {
        policy_name: k8s.networking.v1.NetworkPolicy(
            f"{name}-{policy_name}",
            metadata=_typed(
                {
                    "name": policy_name,
                    "namespace": args.namespace,
                    "labels": dict(naming.PART_OF_LABELS),
                }
            ),
            spec=_typed(spec),
            opts=opts,
        )
        for policy_name, spec in namespace_policies(args).items()
    }


def _typed(value: dict[str, Any]) -> Any:
    """Plain dicts are what the builders return; the SDK's TypedDict inputs accept them."""
    return value


class ServingNamespace(pulumi.ComponentResource):
    namespace_name: pulumi.Output[str]

    def __init__(self, name: str, args: ServingNamespaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:serving:ServingNamespace", name, None, opts)
        meta: Any = {"name": args.namespace, "labels": namespace_labels(args)}
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata=meta, opts=pulumi.ResourceOptions(parent=self)
        )
        self.network_policies = create_network_policies(
            name, args, pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])
        )
        self.default_deny: k8s.networking.v1.NetworkPolicy | None = self.network_policies.get("default-deny")
        self.namespace_name = self.namespace.metadata.name
        self.register_outputs({"namespaceName": self.namespace_name, "networkPolicies": sorted(self.network_policies)})
