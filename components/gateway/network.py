"""The network policies of the ingress path (each added to its namespace's default deny):

- ingress namespace: clients reach the Envoy proxies on their listener ports only (the client CIDR
  allow-list is each route's SecurityPolicy: the NLB keeps client addresses, so a NetworkPolicy
  could not narrow it better); the proxies reach the Triton Services, cert-manager's HTTP-01
  solvers, the controller's xDS port and, with JWT, the issuer's JWKS over HTTPS; the controller and
  its certgen Job reach the API server;
- cert-manager namespace: ACME to the CA, the API server to the webhook, everything to the API server;
- triton namespace: the proxies reach the ACME solver pods.
"""

from __future__ import annotations

from typing import Any

from components.gateway.args import IngressArgs
from components.gateway.proxy import (
    CERTGEN_POD_LABELS,
    CONTROLLER_POD_LABELS,
    PROXY_HTTP_PORT,
    PROXY_HTTPS_PORT,
    XDS_PORT,
)
from components.kubernetes import naming, network_policies
from components.kubernetes.network_policies import from_api_server_rule, pods_in, rule, tcp
from components.kubernetes.triton_server import GRPC_PORT, HTTP_PORT

ACME_SOLVER_PORT = 8089
ACME_SOLVER_LABELS = {"acme.cert-manager.io/http01-solver": "true"}
# cert-manager's pods and ports (the chart's defaults).
CERT_MANAGER_WEBHOOK_PORT = 10250
CERT_MANAGER_CONTROLLER_LABELS = {"app.kubernetes.io/name": "cert-manager", "app.kubernetes.io/component": "controller"}
CERT_MANAGER_WEBHOOK_LABELS = {"app.kubernetes.io/name": "webhook", "app.kubernetes.io/component": "webhook"}
HTTPS = 443


def acme_solver_policy_spec(ingress_namespace: str) -> dict[str, Any]:
    """The triton namespace denies everything by default; cert-manager's HTTP-01 solver pods
    (created next to the Certificate) must be reachable from the proxies."""
    return network_policies.policy(
        ACME_SOLVER_LABELS,
        ingress=[rule([pods_in(ingress_namespace, naming.PROXY_POD_LABELS)], *tcp(ACME_SOLVER_PORT))],
    )


def ingress_network_policy_specs(args: IngressArgs) -> dict[str, dict[str, Any]]:
    """The ingress namespace's allow policies (role -> spec)."""
    proxy_egress = [
        rule([pods_in(args.triton_namespace, {"app.kubernetes.io/name": "triton"})], *tcp(HTTP_PORT, GRPC_PORT)),
        rule([pods_in(args.triton_namespace, ACME_SOLVER_LABELS)], *tcp(ACME_SOLVER_PORT)),
        rule([pods_in(args.ingress_namespace, CONTROLLER_POD_LABELS)], *tcp(XDS_PORT)),
    ]
    if args.jwt_on:
        # The issuer's JWKS, fetched by each proxy: a public HTTPS endpoint, never the VPC (the
        # API server's private endpoint) nor the instance metadata service.
        public = network_policies.cidr(network_policies.WORLD, (network_policies.IMDS_CIDR, args.vpc_cidr))
        proxy_egress.append(rule([public], *tcp(HTTPS)))
    return {
        "proxies": network_policies.policy(
            naming.PROXY_POD_LABELS,
            ingress=[rule([network_policies.cidr(network_policies.WORLD)], *tcp(PROXY_HTTP_PORT, PROXY_HTTPS_PORT))],
            egress=proxy_egress,
        ),
        "controller": network_policies.policy(
            CONTROLLER_POD_LABELS,
            ingress=[rule([pods_in(args.ingress_namespace, naming.PROXY_POD_LABELS)], *tcp(XDS_PORT))],
            egress=[network_policies.api_server_rule(args.vpc_cidr)],
        ),
        "certgen": network_policies.policy(
            CERTGEN_POD_LABELS, egress=[network_policies.api_server_rule(args.vpc_cidr)]
        ),
    }


def cert_manager_network_policy_specs(args: IngressArgs) -> dict[str, dict[str, Any]]:
    """The cert-manager namespace's allow policies (role -> spec)."""
    return {
        # The controller talks ACME to the CA (HTTPS) and self-checks each HTTP-01 challenge
        # through the public host (port 80) before asking the CA to validate it.
        # ref: https://cert-manager.io/docs/configuration/acme/http01/
        "acme": network_policies.policy(
            CERT_MANAGER_CONTROLLER_LABELS, egress=[rule([network_policies.internet()], *tcp(HTTPS, 80))]
        ),
        "webhook": network_policies.policy(
            CERT_MANAGER_WEBHOOK_LABELS, ingress=[from_api_server_rule(args.vpc_cidr, *tcp(CERT_MANAGER_WEBHOOK_PORT))]
        ),
        # Controller, webhook, cainjector and the startup check all call the API server.
        "api-server": network_policies.policy(None, egress=[network_policies.api_server_rule(args.vpc_cidr)]),
    }
