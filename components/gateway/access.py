"""Who may call each public route: one SecurityPolicy per route (authentication, client CIDRs and,
with JWT, the claim that authorizes the route's model or deployment).

- API keys: HTTP basic auth against the htpasswd Secret (`{SHA}` entries, the one hash Envoy
  Gateway takes); the user name is forwarded as `x-triton-client`. Clients send what they send
  today (`Authorization: Basic base64(client:key)`). An API client may call every model.
- JWT: Envoy's jwt_authn checks the signature against the issuer's JWKS (fetched and cached by the
  proxy), `iss`, `aud` and expiry; the client claim is forwarded as `x-triton-client`. An HTTP
  model route then allows a token whose models claim lists the model (or `*`); a gRPC route one
  whose deployments claim lists the deployment (or `*`): the gRPC model name travels inside the
  protobuf body, where no proxy rule can read it, so gRPC is authorized per deployment.
- Every route allows only `allowed_cidrs`; anything not allowed is denied (403).
ref: https://gateway.envoyproxy.io/docs/api/extension_types/#securitypolicy
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from components.gateway.args import ANY, API_KEYS, IngressArgs, JwtArgs
from components.gateway.routes import CLIENT_HEADER, Route

API_KEYS_SECRET = "triton-api-keys"  # noqa: S105 (a Secret name)
# The key Envoy Gateway reads the htpasswd lines from.
HTPASSWD_KEY = ".htpasswd"
JWT_PROVIDER = "oidc"


def _jwt(jwt: JwtArgs) -> dict[str, Any]:
    return {
        "providers": [
            {
                "name": JWT_PROVIDER,
                "issuer": jwt.issuer,
                "audiences": list(jwt.audiences),
                "remoteJWKS": {"uri": jwt.jwks_uri, "cacheDuration": f"{jwt.jwks_cache_seconds}s"},
                "claimToHeaders": [{"header": CLIENT_HEADER, "claim": jwt.client_claim}],
            }
        ]
    }


def _claims(jwt: JwtArgs, route: Route) -> list[dict[str, Any]]:
    """The claim a token must carry for this route (none for health: any valid token)."""
    if route.model is not None:
        return [{"name": jwt.models_claim, "valueType": "StringArray", "values": [route.model, ANY]}]
    if route.deployment is not None:
        return [{"name": jwt.deployments_claim, "valueType": "StringArray", "values": [route.deployment, ANY]}]
    return []


def security_policy_spec(args: IngressArgs, route: Route) -> dict[str, Any]:
    """The SecurityPolicy of one public route."""
    principal: dict[str, Any] = {"clientCIDRs": list(args.allowed_cidrs)}
    spec: dict[str, Any] = {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": route.kind, "name": route.name}],
    }
    if route.method == API_KEYS:
        spec["basicAuth"] = {"users": {"name": API_KEYS_SECRET}, "forwardUsernameHeader": CLIENT_HEADER}
    else:
        assert args.jwt is not None  # IngressArgs refuses a JWT route without JwtArgs
        spec["jwt"] = _jwt(args.jwt)
        claims = _claims(args.jwt, route)
        if claims:
            principal["jwt"] = {"provider": JWT_PROVIDER, "claims": claims}
    spec["authorization"] = {
        "defaultAction": "Deny",
        "rules": [{"name": "allowed-clients", "action": "Allow", "principal": principal}],
    }
    return spec


def htpasswd_line(client: str, key: str) -> str:
    """A `{SHA}` htpasswd entry. The keys are 48 random alphanumerics (~285 bits), so a slow salted
    hash buys nothing (and SHA is the one scheme Envoy Gateway's basic auth takes)."""
    digest = base64.b64encode(hashlib.sha1(key.encode(), usedforsecurity=False).digest()).decode()
    return f"{client}:{{SHA}}{digest}"


def htpasswd_users(keys: dict[str, str]) -> str:
    """The basic-auth Secret's `.htpasswd`: one line per client, sorted by name."""
    return "\n".join(htpasswd_line(client, keys[client]) for client in sorted(keys))
