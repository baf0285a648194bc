"""TLS for the public hosts: cert-manager with Gateway API support, the ACME issuer answering HTTP-01
through the Gateway's port-80 listener, the certificate the HTTPS listeners serve."""

from __future__ import annotations

import pytest

from components.gateway.args import ACME_SERVERS
from components.gateway.certificates import cert_manager_values
from components.kubernetes import naming
from tests.components.gateway._helpers import of_kind
from tests.conftest import STACKS


def _one(stack: str, kind: str, name: str) -> dict[str, object]:
    (doc,) = [d for d in of_kind(stack, kind) if d["metadata"]["name"] == name]
    return doc


def test_cert_manager_pdb_from_two_replicas_with_the_charts_bound() -> None:
    # No bound set: the chart then renders `minAvailable: 1` (a bound it only documents in
    # comments is not one of its default keys).
    assert cert_manager_values(2)["podDisruptionBudget"] == {"enabled": True}
    assert cert_manager_values(1)["podDisruptionBudget"] == {"enabled": False}
    for component in ("webhook", "cainjector"):
        assert cert_manager_values(2)[component]["podDisruptionBudget"] == {"enabled": True}
        assert cert_manager_values(1)[component]["podDisruptionBudget"] == {"enabled": False}


def test_cert_manager_speaks_gateway_api() -> None:
    assert cert_manager_values(1)["config"]["enableGatewayAPI"] is True


@pytest.mark.parametrize("stack", STACKS)
def test_http01_is_answered_through_the_gateways_http_listener(stack: str) -> None:
    (issuer,) = of_kind(stack, "ClusterIssuer")
    (solver,) = issuer["spec"]["acme"]["solvers"]
    (parent,) = solver["http01"]["gatewayHTTPRoute"]["parentRefs"]
    (gw,) = of_kind(stack, "Gateway")
    (http,) = [lst for lst in gw["spec"]["listeners"] if lst["protocol"] == "HTTP"]
    assert (parent["kind"], parent["name"], parent["namespace"], parent["sectionName"]) == (
        "Gateway",
        gw["metadata"]["name"],
        gw["metadata"]["namespace"],
        http["name"],
    )


def test_issuer_and_certificate() -> None:
    issuer = _one("staging", "ClusterIssuer", "letsencrypt")["spec"]["acme"]  # type: ignore[index]
    assert issuer["server"] == ACME_SERVERS["letsencrypt"]
    assert issuer["email"] == "platform-team@example.com"
    dev = _one("dev", "ClusterIssuer", "letsencrypt-staging")["spec"]["acme"]  # type: ignore[index]
    assert dev["server"] == ACME_SERVERS["letsencrypt-staging"]
    cert = _one("staging", "Certificate", "triton-tls")
    assert cert["spec"]["dnsNames"] == ["infer.staging.inference.example.com", "grpc.staging.inference.example.com"]  # type: ignore[index]
    assert cert["metadata"]["namespace"] == naming.TRITON_NAMESPACE  # type: ignore[index]
