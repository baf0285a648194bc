"""TLS for the public hosts: cert-manager's values (Gateway API support on), the ACME ClusterIssuer
(HTTP-01 answered through the Gateway's port-80 listener) and the Certificate the listeners serve."""

from __future__ import annotations

from typing import Any

from components.gateway.args import ACME_SERVERS, IngressArgs
from components.gateway.proxy import TLS_SECRET
from components.gateway.routes import HTTP_LISTENER
from components.gpu import gpu_contract
from components.kubernetes import naming


def cert_manager_values(replicas: int) -> dict[str, Any]:
    # ref: https://cert-manager.io/docs/installation/helm/
    # The chart's security contexts are already restricted (non-root, seccomp RuntimeDefault,
    # read-only root, no capabilities); what it leaves empty is resources. Sized for one
    # cluster's certificates: memory limits 2x the request, CPU limits well above steady use
    # (room for the informers' initial list at start-up).
    # ref: https://github.com/cert-manager/cert-manager/blob/v1.20.2/deploy/charts/cert-manager/values.yaml (resources)
    system = gpu_contract.system_node_labels()
    return {
        "crds": {"enabled": True, "keep": True},
        "replicaCount": replicas,
        # Gateway API support: the HTTP-01 solver attaches an HTTPRoute to the Gateway.
        # ref: https://cert-manager.io/docs/usage/gateway/
        "config": {
            "apiVersion": "controller.config.cert-manager.io/v1alpha1",
            "kind": "ControllerConfiguration",
            "enableGatewayAPI": True,
        },
        # With neither bound set the chart renders `minAvailable: 1` (its values.yaml only
        # documents the bounds in comments, so they are not default keys).
        "podDisruptionBudget": {"enabled": replicas > 1},
        "nodeSelector": system,
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
        # The webhook and the cainjector get the same PDB as the controller: a drain that took
        # every webhook replica at once would refuse every Certificate change meanwhile.
        "webhook": {
            "replicaCount": replicas,
            "nodeSelector": system,
            "podDisruptionBudget": {"enabled": replicas > 1},
            "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        },
        "cainjector": {
            "replicaCount": replicas,
            "nodeSelector": system,
            "podDisruptionBudget": {"enabled": replicas > 1},
            "resources": {"requests": {"cpu": "20m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        },
        "startupapicheck": {
            "nodeSelector": system,
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        },
    }


def cluster_issuer_spec(args: IngressArgs) -> dict[str, Any]:
    # ref: https://cert-manager.io/docs/configuration/acme/http01/#configuring-the-http-01-gateway-api-solver
    return {
        "acme": {
            "server": ACME_SERVERS[args.tls_issuer],
            "email": args.acme_email,
            "privateKeySecretRef": {"name": f"{args.tls_issuer}-account-key"},
            "solvers": [
                {
                    "http01": {
                        "gatewayHTTPRoute": {
                            "parentRefs": [
                                {
                                    "name": naming.GATEWAY_NAME,
                                    "namespace": args.triton_namespace,
                                    "kind": "Gateway",
                                    "sectionName": HTTP_LISTENER,
                                }
                            ]
                        }
                    }
                }
            ],
        }
    }


def certificate_spec(args: IngressArgs) -> dict[str, Any]:
    return {
        "secretName": TLS_SECRET,
        "dnsNames": [args.http_host, args.grpc_host],
        "issuerRef": {"name": args.tls_issuer, "kind": "ClusterIssuer", "group": "cert-manager.io"},
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "duration": "2160h",
        "renewBefore": "720h",
    }
