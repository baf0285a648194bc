"""Public ingress for Triton: Envoy Gateway (Gateway API) behind an AWS NLB, certificates from
cert-manager through an ACME ClusterIssuer (HTTP-01 through the Gateway).

Why Envoy Gateway (docs/serving-plane.md has the long form): JWTs are verified inside the proxy
(Envoy's jwt_authn, the issuer's JWKS fetched and cached), gRPC is a first-class GRPCRoute with
no buffering workaround, and API keys, client CIDRs and claim-based authorization are one
SecurityPolicy per route, all without an extra service in the request path.

The parts, one module each in components/gateway/: args (IngressArgs), routes (the public surface
and nothing else), access (who may call each route), traffic (rate and body limits, TLS, header
hygiene), proxy (the controller's chart values, the Gateway and the EnvoyProxy), certificates and
network (NetworkPolicies). This module wires them.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.gateway import access, certificates, network, proxy, routes, traffic
from components.gateway.args import IngressArgs
from components.kubernetes import naming
from components.kubernetes.helm import pinned_release as _release
from components.kubernetes.serving_namespace import ServingNamespace, ServingNamespaceArgs
from components.upstream import versions

GATEWAY_API = "gateway.networking.k8s.io/v1"
ENVOY_GATEWAY_API = "gateway.envoyproxy.io/v1alpha1"


def _in_triton(args: IngressArgs, object_name: str) -> Any:
    """The metadata of an object the ingress keeps in the Triton namespace."""
    return {"name": object_name, "namespace": args.triton_namespace, "labels": dict(naming.PART_OF_LABELS)}


def _custom(
    name: str, role: str, api: str, kind: str, metadata: Any, spec: Any, opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A custom resource (cert-manager's, Gateway API's, Envoy Gateway's) named `<name>-<role>`."""
    return k8s.apiextensions.CustomResource(
        f"{name}-{role}", api_version=api, kind=kind, metadata=metadata, spec=spec, opts=opts
    )


class Ingress(pulumi.ComponentResource):
    """Envoy Gateway + cert-manager, the ClusterIssuer, the certificate, the Gateway and Triton's
    public routes, each with the policy that says who may call it."""

    http_host: pulumi.Output[str]
    grpc_host: pulumi.Output[str]
    http_endpoint: pulumi.Output[str]
    grpc_endpoint: pulumi.Output[str]
    api_keys: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: IngressArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:serving:Ingress", name, None, opts)
        self._charts(name, args)
        # cert-manager's Gateway API solver and the Gateway both need the chart's CRDs first.
        after_charts = pulumi.ResourceOptions(parent=self, depends_on=[self.cert_manager, self.envoy_gateway])
        self._certificates(name, args, after_charts)
        api_keys_secret = self._api_keys(name, args)
        self._gateway(name, args, after_charts)
        # Policies before routes: a route only ever exists with its SecurityPolicy and limits in
        # place (a route without its SecurityPolicy would be open to every client).
        policy_deps: list[pulumi.Resource] = [self.envoy_gateway, *api_keys_secret]
        self._routes(name, args, pulumi.ResourceOptions(parent=self, depends_on=policy_deps))

        self.http_host = pulumi.Output.from_input(args.http_host)
        self.grpc_host = pulumi.Output.from_input(args.grpc_host)
        self.http_endpoint = pulumi.Output.from_input(f"https://{args.http_host}")
        self.grpc_endpoint = pulumi.Output.from_input(f"{args.grpc_host}:443")
        self.register_outputs(
            {
                "httpHost": self.http_host,
                "grpcHost": self.grpc_host,
                "httpEndpoint": self.http_endpoint,
                "grpcEndpoint": self.grpc_endpoint,
                "apiKeys": self.api_keys,
            }
        )

    def _charts(self, name: str, args: IngressArgs) -> None:
        """The ingress and cert-manager namespaces, and the two charts in them."""
        child = pulumi.ResourceOptions(parent=self)
        ingress_ns = ServingNamespace(
            f"{name}-namespace",
            ServingNamespaceArgs(args.ingress_namespace, allow=network.ingress_network_policy_specs(args)),
            opts=child,
        )
        cm_ns = ServingNamespace(
            f"{name}-cert-manager-namespace",
            ServingNamespaceArgs(args.cert_manager_namespace, allow=network.cert_manager_network_policy_specs(args)),
            opts=child,
        )
        self.cert_manager = _release(
            f"{name}-cert-manager",
            versions.CERT_MANAGER_CHART,
            args.cert_manager_namespace,
            certificates.cert_manager_values(min(args.replicas, 3)),
            pulumi.ResourceOptions(parent=self, depends_on=[cm_ns]),
        )
        self.envoy_gateway = _release(
            f"{name}-envoy-gateway",
            versions.ENVOY_GATEWAY_CHART,
            args.ingress_namespace,
            proxy.envoy_gateway_values(args),
            pulumi.ResourceOptions(parent=self, depends_on=[ingress_ns]),
        )

    def _certificates(self, name: str, args: IngressArgs, after_charts: pulumi.ResourceOptions) -> None:
        """The ClusterIssuer, the hosts' Certificate and the NetworkPolicy that lets the ACME solver answer."""
        self.cluster_issuer = _custom(
            name,
            "cluster-issuer",
            "cert-manager.io/v1",
            "ClusterIssuer",
            {"name": args.tls_issuer},
            certificates.cluster_issuer_spec(args),
            after_charts,
        )
        self.certificate = _custom(
            name,
            "certificate",
            "cert-manager.io/v1",
            "Certificate",
            _in_triton(args, proxy.TLS_SECRET),
            certificates.certificate_spec(args),
            pulumi.ResourceOptions(parent=self, depends_on=[self.cluster_issuer]),
        )
        solver_spec: Any = network.acme_solver_policy_spec(args.ingress_namespace)
        k8s.networking.v1.NetworkPolicy(
            f"{name}-acme-solver-policy",
            metadata=_in_triton(args, "allow-acme-http01-solver"),
            spec=solver_spec,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _api_keys(self, name: str, args: IngressArgs) -> list[pulumi.Resource]:
        """One generated key per API client (`self.api_keys`) and, with API keys on, their htpasswd Secret."""
        child = pulumi.ResourceOptions(parent=self)
        # One key per API client; `<name>-<client>-api-key` keeps each key across upgrades.
        keys = {
            c: random.RandomPassword(f"{name}-{c}-api-key", length=48, special=False, opts=child).result
            for c in args.clients
        }
        # (Output.all of no keyword answers a list: a JWT-only stack exports an empty map.)
        all_keys: pulumi.Output[dict[str, str]] = pulumi.Output.all(**keys) if keys else pulumi.Output.from_input({})
        self.api_keys = pulumi.Output.secret(all_keys)
        if not args.api_keys_on:
            return []
        secret = k8s.core.v1.Secret(
            f"{name}-api-keys",
            metadata=_in_triton(args, access.API_KEYS_SECRET),
            type="Opaque",
            string_data={access.HTPASSWD_KEY: all_keys.apply(access.htpasswd_users)},
            opts=child,
        )
        return [secret]

    def _gateway(self, name: str, args: IngressArgs, after_charts: pulumi.ResourceOptions) -> None:
        """The GatewayClass, the EnvoyProxy that shapes the proxies, and the Gateway."""
        self.gateway_class = _custom(
            name,
            "gateway-class",
            GATEWAY_API,
            "GatewayClass",
            {"name": proxy.GATEWAY_CLASS},
            {"controllerName": proxy.CONTROLLER_NAME},
            after_charts,
        )
        self.envoy_proxy = _custom(
            name,
            "envoy-proxy",
            ENVOY_GATEWAY_API,
            "EnvoyProxy",
            _in_triton(args, proxy.ENVOY_PROXY),
            proxy.envoy_proxy_spec(args),
            after_charts,
        )
        self.gateway = _custom(
            name,
            "gateway",
            GATEWAY_API,
            "Gateway",
            _in_triton(args, naming.GATEWAY_NAME),
            proxy.gateway_spec(args),
            pulumi.ResourceOptions(parent=self, depends_on=[self.gateway_class, self.envoy_proxy, self.certificate]),
        )

    def _routes(self, name: str, args: IngressArgs, policies: pulumi.ResourceOptions) -> None:
        """Each public route after its traffic limits and SecurityPolicy (`policies`), and the HTTP redirect."""
        public = routes.public_routes(args)
        limits = [
            _custom(
                name,
                f"traffic-{policy}",
                ENVOY_GATEWAY_API,
                "BackendTrafficPolicy",
                _in_triton(args, policy),
                spec,
                policies,
            )
            for policy, spec in traffic.backend_traffic_policy_specs(args, public).items()
        ]
        limits.append(
            _custom(
                name,
                "client-traffic",
                ENVOY_GATEWAY_API,
                "ClientTrafficPolicy",
                _in_triton(args, traffic.CLIENT_POLICY),
                traffic.client_traffic_policy_spec(args),
                policies,
            )
        )
        self.security_policies = {
            r.name: _custom(
                name,
                f"security-{r.name}",
                ENVOY_GATEWAY_API,
                "SecurityPolicy",
                _in_triton(args, r.name),
                access.security_policy_spec(args, r),
                policies,
            )
            for r in public
        }
        self.routes = {
            r.name: _custom(
                name,
                f"route-{r.name}",
                GATEWAY_API,
                r.kind,
                _in_triton(args, r.name),
                r.spec,
                pulumi.ResourceOptions(parent=self, depends_on=[self.gateway, self.security_policies[r.name], *limits]),
            )
            for r in public
        }
        _custom(
            name,
            "route-redirect",
            GATEWAY_API,
            "HTTPRoute",
            _in_triton(args, routes.REDIRECT_ROUTE),
            routes.redirect_route_spec(args),
            pulumi.ResourceOptions(parent=self, depends_on=[self.gateway]),
        )
