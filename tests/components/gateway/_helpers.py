"""The program's ingress objects per stack, as the Gateway tests read them."""

from __future__ import annotations

import base64
from typing import Any

from tests.conftest import stack_run
from tests.pulumi_kit import stack_config
from tests.support.gateway_api import Gateway

INFER = "infer.{domain}"
GRPC = "grpc.{domain}"
CLIENT = "198.51.100.7"  # inside every stack's allowed CIDRs (TEST-NET-2)


def docs(stack: str) -> list[dict[str, Any]]:
    return [r.inputs for r in stack_run(stack).kubernetes_objects()]


def gateway(stack: str) -> Gateway:
    return Gateway(docs(stack))


def of_kind(stack: str, kind: str) -> list[dict[str, Any]]:
    return [d for d in docs(stack) if d["kind"] == kind]


def config(stack: str) -> dict[str, Any]:
    """The stack file's ingress settings with the program's defaults where it sets none."""
    raw = {k.split(":", 1)[1]: v for k, v in stack_config(stack).items() if k.startswith("triton-platform:")}
    return {
        "domain": raw["domain"],
        "authentication": raw.get("ingressAuthentication", "api-keys"),
        "clients": raw.get("ingressClients", ["default"]),
        "cidrs": raw.get("ingressAllowedCidrs", ["0.0.0.0/0"]),
        "models": {name: list(d.get("models") or []) for name, d in raw["tritonDeployments"].items()},
        "issuer": raw.get("ingressJwtIssuer"),
        "audiences": raw.get("ingressJwtAudiences"),
        "jwks": raw.get("ingressJwtJwksUri"),
        "rps": raw.get("ingressRateLimitRps", 200),
        "jwt_rps": raw.get("ingressJwtRateLimitRps", 1000),
        "body_mib": raw.get("ingressRequestBodyLimitMiB", 64),
    }


def hosts(stack: str) -> tuple[str, str]:
    domain = config(stack)["domain"]
    return INFER.format(domain=domain), GRPC.format(domain=domain)


def basic(client: str, key: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{client}:{key}".encode()).decode()}


def api_key(stack: str, client: str) -> dict[str, str]:
    """The Authorization header a client sends today with its exported key."""
    return basic(client, stack_run(stack).exports["ingressApiKeys"][client])
