"""ServingNamespace: Pod Security labels, default deny, DNS and the allow policies, as recorded."""

from __future__ import annotations

import pytest

from components.kubernetes import network_policies
from components.kubernetes.serving_namespace import ServingNamespaceArgs, namespace_labels, namespace_policies
from tests.components._helpers import assert_children_prefixed, registered_outputs
from tests.pulumi_kit import Run

COMPONENT = "triton-platform:serving:ServingNamespace"
# Every namespace the platform owns (logical component name -> namespace, level).
NAMESPACES = {
    "triton-namespace": ("triton", "restricted"),
    "monitoring-namespace": ("monitoring", "restricted"),
    "monitoring-node-exporter-namespace": ("node-exporter", "privileged"),
    "log-shipping-namespace": ("logging", "restricted"),
    "ingress-namespace": ("ingress", "restricted"),
    "ingress-cert-manager-namespace": ("cert-manager", "restricted"),
}


def test_every_platform_namespace_denies_by_default(any_stack: Run) -> None:
    comps = {r.name: r for r in any_stack.of_type(COMPONENT)}
    assert sorted(comps) == sorted(NAMESPACES)
    for name, (namespace, level) in NAMESPACES.items():
        children = assert_children_prefixed(any_stack, comps[name], min_children=3)
        (ns,) = [c.inputs for c in children if c.type == "kubernetes:core/v1:Namespace"]
        assert ns["metadata"]["name"] == namespace
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == level
        policies = {
            c.inputs["metadata"]["name"]: c.inputs
            for c in children
            if c.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"
        }
        assert policies["default-deny"]["spec"] == network_policies.default_deny()
        assert policies["allow-dns"]["spec"] == network_policies.allow_dns()
        assert all(p["metadata"]["namespace"] == namespace for p in policies.values())
        assert registered_outputs(any_stack, comps[name])["networkPolicies"] == sorted(policies)
    # gpu-operators keeps its own Namespace resource and gets the same policies.
    gpu = {
        r.inputs["metadata"]["name"]
        for r in any_stack.kubernetes_objects()
        if r.inputs["kind"] == "NetworkPolicy" and r.inputs["metadata"]["namespace"] == "gpu-operators"
    }
    assert gpu == {"default-deny", "allow-dns", "allow-metrics"}


def test_policies_and_labels_builders() -> None:
    args = ServingNamespaceArgs("logging", allow={"loki": network_policies.allow_dns()})
    assert list(namespace_policies(args)) == ["default-deny", "allow-dns", "allow-loki"]
    assert namespace_policies(ServingNamespaceArgs("x", default_deny=False)) == {}
    assert (
        namespace_labels(ServingNamespaceArgs("x", pod_security="baseline"))["pod-security.kubernetes.io/enforce"]
        == "baseline"
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"namespace": "Bad_NS"}, r"namespace: 'Bad_NS' is not allowed"),
        (
            {"namespace": "x", "pod_security": "open"},
            r"pod_security: 'open' is not allowed; allowed: restricted \| baseline \| privileged",
        ),
        ({"namespace": "x", "default_deny": False, "allow": {"a": {}}}, r"allow: \['a'\] without default_deny"),
        ({"namespace": "x", "allow": {"dns": {}}}, r"allow: role 'dns' is not allowed"),
        ({"namespace": "x", "allow": {"Bad": {}}}, r"allow: role 'Bad' is not allowed"),
    ],
)
def test_args_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ServingNamespaceArgs(**kwargs)  # type: ignore[arg-type]
