"""The Envoy data plane and its controller: Envoy Gateway's chart values, the GatewayClass, the
Gateway with its listeners, and the EnvoyProxy that shapes the proxies Envoy Gateway runs for it
(pinned image, replicas, spread, PDB, resources, security contexts, the AWS NLB Service and the
JSON access log that names each request's client).

The controller runs the proxies in its own namespace (the ingress namespace); the Gateway, its
routes and policies live beside the Triton Services they route to.
ref: https://gateway.envoyproxy.io/docs/api/extension_types/#envoyproxy
ref: https://github.com/envoyproxy/gateway/blob/v1.9.0/charts/gateway-helm/values.tmpl.yaml
"""

from __future__ import annotations

from typing import Any

from components.gateway.args import IngressArgs
from components.gateway.routes import CLIENT_HEADER, GRPC_LISTENER, HTTP_LISTENER, INFER_LISTENER
from components.gpu import gpu_contract
from components.kubernetes import naming
from components.upstream import versions

GATEWAY_CLASS = "triton"
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
ENVOY_PROXY = "triton-proxy"
TLS_SECRET = "triton-tls"  # noqa: S105 (a Secret name)
# The chart's controller and certgen pods (its templates' labels).
CONTROLLER_POD_LABELS = {"control-plane": "envoy-gateway", "app.kubernetes.io/instance": "gateway-helm"}
CERTGEN_POD_LABELS = {"app": "certgen"}
# The controller's xDS port, where every proxy takes its configuration (mTLS, certgen's certificates).
XDS_PORT = 18000
# Envoy Gateway binds a listener below 1024 to the port + 10000 inside the proxy pod (so that the
# proxy needs no NET_BIND_SERVICE): 80 -> 10080, 443 -> 10443
# (internal/gatewayapi/listener.go, servicePortToContainerPort, at tag v1.9.0).
PRIVILEGED_PORT_SHIFT = 10000
HTTP_PORT = 80
HTTPS_PORT = 443
PROXY_HTTP_PORT = HTTP_PORT + PRIVILEGED_PORT_SHIFT
PROXY_HTTPS_PORT = HTTPS_PORT + PRIVILEGED_PORT_SHIFT
# The proxies' JSON access log (Loki collects the pods' stdout): what a request was, who sent it
# and what it got. `client` is the API client or the token's client claim (`-`: unauthenticated).
# ref: https://www.envoyproxy.io/docs/envoy/latest/configuration/observability/access_log/usage
ACCESS_LOG_FIELDS = {
    "start_time": "%START_TIME%",
    "client": f"%REQ({CLIENT_HEADER.upper()})%",
    "method": "%REQ(:METHOD)%",
    "authority": "%REQ(:AUTHORITY)%",
    "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
    "protocol": "%PROTOCOL%",
    "response_code": "%RESPONSE_CODE%",
    "grpc_status": "%GRPC_STATUS(NUMBER)%",
    "response_flags": "%RESPONSE_FLAGS%",
    "route": "%ROUTE_NAME%",
    "upstream_host": "%UPSTREAM_HOST%",
    "duration_ms": "%DURATION%",
    "bytes_received": "%BYTES_RECEIVED%",
    "bytes_sent": "%BYTES_SENT%",
    "source_address": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
    "request_id": "%REQ(X-REQUEST-ID)%",
}
_ZONE = "topology.kubernetes.io/zone"


def _spread(labels: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": _ZONE,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": labels},
        }
    ]


def controller_replicas(args: IngressArgs) -> int:
    return min(args.replicas, 2)


def envoy_gateway_values(args: IngressArgs) -> dict[str, Any]:
    """gateway-helm's values: the controller on system nodes, spread, bounded, with a PDB when it runs twice."""
    # ref: https://github.com/envoyproxy/gateway/blob/v1.9.0/charts/gateway-helm/values.tmpl.yaml
    replicas = controller_replicas(args)
    system = gpu_contract.system_node_labels()
    return {
        "deployment": {
            "replicas": replicas,
            "envoyGateway": {
                "resources": {
                    "requests": {"cpu": "100m", "memory": "256Mi"},
                    "limits": {"cpu": "1", "memory": "1024Mi"},
                }
            },
            "pod": {"nodeSelector": system, "topologySpreadConstraints": _spread(CONTROLLER_POD_LABELS)},
        },
        "podDisruptionBudget": {"minAvailable": 1 if replicas > 1 else 0},
        # The topology injector is a mutating webhook the API server would have to reach in this
        # namespace; it only adds zone hints for zone-aware routing, which this platform does not use.
        "topologyInjector": {"enabled": False},
        "certgen": {
            "job": {
                "nodeSelector": system,
                "resources": {
                    "requests": {"cpu": "10m", "memory": "64Mi"},
                    "limits": {"cpu": "200m", "memory": "128Mi"},
                },
            }
        },
    }


def gateway_spec(args: IngressArgs) -> dict[str, Any]:
    """Port 80 for the https redirect and ACME HTTP-01; port 443 per host, TLS from cert-manager."""

    def https(name: str, host: str) -> dict[str, Any]:
        return {
            "name": name,
            "protocol": "HTTPS",
            "port": HTTPS_PORT,
            "hostname": host,
            "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": TLS_SECRET}]},
            "allowedRoutes": {"namespaces": {"from": "Same"}},
        }

    return {
        "gatewayClassName": GATEWAY_CLASS,
        "infrastructure": {
            "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": ENVOY_PROXY}
        },
        "listeners": [
            {
                "name": HTTP_LISTENER,
                "protocol": "HTTP",
                "port": HTTP_PORT,
                "allowedRoutes": {"namespaces": {"from": "Same"}},
            },
            https(INFER_LISTENER, args.http_host),
            https(GRPC_LISTENER, args.grpc_host),
        ],
    }


def _security_context() -> dict[str, Any]:
    """The envoy container's: Envoy Gateway's own default, stated so that it is ours to review (its
    default leaves the root filesystem writable for Envoy, and so does this)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def envoy_proxy_spec(args: IngressArgs) -> dict[str, Any]:
    return {
        "provider": {
            "type": "Kubernetes",
            "kubernetes": {
                "envoyDeployment": {
                    "replicas": args.replicas,
                    "pod": {
                        "nodeSelector": gpu_contract.system_node_labels(),
                        "topologySpreadConstraints": _spread(naming.PROXY_POD_LABELS),
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                    },
                    "container": {
                        "image": versions.ENVOY_PROXY_IMAGE,
                        "resources": {
                            "requests": {"cpu": "500m", "memory": "512Mi"},
                            "limits": {"cpu": "2", "memory": "1Gi"},
                        },
                        "securityContext": _security_context(),
                    },
                },
                **({"envoyPDB": {"minAvailable": 1}} if args.replicas > 1 else {}),
                "envoyService": {
                    "type": "LoadBalancer",
                    # Local keeps the client's source address, which the SecurityPolicies' client
                    # CIDRs are checked against.
                    # ref: https://kubernetes.io/docs/tasks/access-application-cluster/create-external-load-balancer/#preserving-the-client-source-ip
                    "externalTrafficPolicy": "Local",
                    # ref: https://docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html
                    "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
                },
            },
        },
        "logging": {"level": {"default": "warn"}},
        "telemetry": {
            "accessLog": {
                "settings": [
                    {
                        "format": {"type": "JSON", "json": dict(ACCESS_LOG_FIELDS)},
                        "sinks": [{"type": "File", "file": {"path": "/dev/stdout"}}],
                    }
                ]
            }
        },
    }
