"""What the Gateway does with one request, as the Gateway API spec and Envoy Gateway's policy API
state it, evaluated over rendered objects (the program's Gateway, routes, SecurityPolicies and the
API-key Secret): which route rule a request matches, the headers Triton receives after the rule's
filters, and what the route's SecurityPolicy answers (basic auth against the htpasswd lines, a
bearer JWT verified with joserfc against a JWKS, client CIDRs, claims).

No Envoy runs here; this is the contract the routes are written against, so a route that breaks it
fails a test. Path matching follows the spec: `Exact` is the whole path, `PathPrefix` a prefix by
path elements, `RegularExpression` (RE2 in Envoy) must match the whole path; the path is normalised
first (RFC 3986 dot segments, merged slashes), as Envoy Gateway configures Envoy by default.
Precedence among matching HTTPRoute rules: Exact, then RegularExpression, then the longest prefix;
then a method match; then the most header matches; then the route's name; then rule order.
ref: https://gateway-api.sigs.k8s.io/reference/spec/#httprouterule
ref: https://gateway-api.sigs.k8s.io/reference/spec/#grpcrouterule
ref: https://gateway.envoyproxy.io/docs/api/extension_types/#securitypolicy
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

_PATH_RANK = {"Exact": 3, "RegularExpression": 2, "PathPrefix": 1}


@dataclass(frozen=True)
class Request:
    """A client's request: port 443 (TLS, the host is the SNI) or 80; gRPC paths are /service/method."""

    host: str
    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    port: int = 443
    source: str = "203.0.113.10"
    grpc: bool = False


@dataclass(frozen=True)
class Routed:
    """The rule a request matched: its route, the Service and port it goes to and the headers sent there."""

    kind: str
    route: str
    rule: str | None
    backend: tuple[str, int] | None
    headers: dict[str, str]
    redirect: dict[str, Any] | None = None


@dataclass(frozen=True)
class Decision:
    status: int  # 200 (forwarded), 401, 403
    headers: dict[str, str]  # what the proxy forwards after authentication


def normalise_path(path: str) -> str:
    """RFC 3986 remove_dot_segments plus merged slashes (what Envoy Gateway turns on by default)."""
    path = re.sub("/+", "/", path.split("?", 1)[0])
    out: list[str] = []
    for seg in path.split("/")[1:]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    trailing = path.endswith(("/", "/.", "/..")) and bool(out)
    return "/" + "/".join(out) + ("/" if trailing and out[-1] != "" else "")


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _header_ok(wanted: list[dict[str, Any]], headers: dict[str, str]) -> bool:
    for h in wanted:
        value = headers.get(h["name"].lower())
        if value is None:
            return False
        if h.get("type", "Exact") == "Exact" and value != h["value"]:
            return False
        if h.get("type") == "RegularExpression" and not re.fullmatch(h["value"], value):
            return False
    return True


def _path_ok(match: dict[str, Any], path: str) -> bool:
    p = match.get("path") or {"type": "PathPrefix", "value": "/"}
    kind, value = p.get("type", "PathPrefix"), p["value"]
    if kind == "Exact":
        return path == value
    if kind == "RegularExpression":
        return re.fullmatch(value, path) is not None
    prefix = value.rstrip("/")
    return path == prefix or path.startswith(prefix + "/") or prefix == ""


def _http_rank(match: dict[str, Any]) -> tuple[int, int, int, int]:
    p = match.get("path") or {"type": "PathPrefix", "value": "/"}
    kind = p.get("type", "PathPrefix")
    return (
        _PATH_RANK[kind],
        len(p["value"]) if kind == "PathPrefix" else 0,
        1 if match.get("method") else 0,
        len(match.get("headers") or []),
    )


def _grpc_ok(match: dict[str, Any], path: str, headers: dict[str, str]) -> bool:
    m = match.get("method") or {}
    service, _, method = path.lstrip("/").partition("/")
    if m.get("type", "Exact") != "Exact":
        raise AssertionError("only Exact gRPC method matches are evaluated")
    if (m.get("service") and m["service"] != service) or (m.get("method") and m["method"] != method):
        return False
    return _header_ok(match.get("headers") or [], headers)


def _grpc_rank(match: dict[str, Any]) -> tuple[int, int, int]:
    m = match.get("method") or {}
    return (len(m.get("service", "")), len(m.get("method", "")), len(match.get("headers") or []))


def apply_filters(filters: list[dict[str, Any]], headers: dict[str, str]) -> dict[str, str]:
    """The request headers after the rule's RequestHeaderModifier filters (set, add, remove)."""
    out = dict(headers)
    for f in filters:
        if f["type"] != "RequestHeaderModifier":
            continue
        mod = f["requestHeaderModifier"]
        for h in mod.get("set") or []:
            out[h["name"].lower()] = h["value"]
        for h in mod.get("add") or []:
            name = h["name"].lower()
            out[name] = f"{out[name]},{h['value']}" if name in out else h["value"]
        for name in mod.get("remove") or []:
            out.pop(name.lower(), None)
    return out


class Gateway:
    """One Gateway and the routes and SecurityPolicies attached to it, from rendered documents."""

    def __init__(self, docs: list[dict[str, Any]], name: str = "triton") -> None:
        (self.gateway,) = [d for d in docs if d["kind"] == "Gateway" and d["metadata"]["name"] == name]
        self.namespace = self.gateway["metadata"]["namespace"]
        self.routes = [d for d in docs if d["kind"] in ("HTTPRoute", "GRPCRoute")]
        self.policies = [d for d in docs if d["kind"] == "SecurityPolicy"]
        self.secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}

    def listener(self, req: Request) -> dict[str, Any] | None:
        for lst in self.gateway["spec"]["listeners"]:
            if int(lst["port"]) == req.port and lst.get("hostname") in (None, req.host):
                return lst
        return None

    def _attached(self, route: dict[str, Any], listener: str, host: str) -> bool:
        hostnames = route["spec"].get("hostnames")
        if hostnames and host not in hostnames:
            return False
        return any(
            p["name"] == self.gateway["metadata"]["name"]
            and p.get("namespace", route["metadata"]["namespace"]) == self.namespace
            and p.get("sectionName") in (None, listener)
            for p in route["spec"]["parentRefs"]
        )

    def route(self, req: Request) -> Routed | None:
        """The rule that wins for `req` (None: no route, Envoy answers 404)."""
        lst = self.listener(req)
        if lst is None:
            return None
        headers = _lower(req.headers)
        path = normalise_path(req.path)
        kind = "GRPCRoute" if req.grpc else "HTTPRoute"
        best: tuple[Any, ...] | None = None
        found: Routed | None = None
        for route in sorted(self.routes, key=lambda r: r["metadata"]["name"]):
            if route["kind"] != kind or not self._attached(route, lst["name"], req.host):
                continue
            for i, rule in enumerate(route["spec"]["rules"]):
                for match in rule.get("matches") or [{}]:
                    if req.grpc:
                        ok = _grpc_ok(match, path, headers)
                        rank: tuple[Any, ...] = _grpc_rank(match)
                    else:
                        ok = (
                            _path_ok(match, path)
                            and match.get("method", req.method) == req.method
                            and _header_ok(match.get("headers") or [], headers)
                        )
                        rank = _http_rank(match)
                    # Higher rank wins; among equals the earlier route name and rule (negated to sort).
                    key = (*rank, tuple(-ord(c) for c in route["metadata"]["name"]), -i)
                    if ok and (best is None or key > best):
                        best = key
                        filters = rule.get("filters") or []
                        redirect = next((f["requestRedirect"] for f in filters if f["type"] == "RequestRedirect"), None)
                        refs = rule.get("backendRefs") or []
                        found = Routed(
                            kind,
                            route["metadata"]["name"],
                            rule.get("name"),
                            (refs[0]["name"], int(refs[0]["port"])) if refs else None,
                            apply_filters(filters, headers),
                            redirect,
                        )
        return found

    def policy_of(self, routed: Routed) -> dict[str, Any]:
        """The one SecurityPolicy that targets the route (a route with none or two is a defect)."""
        found = [
            p
            for p in self.policies
            if any(t["kind"] == routed.kind and t["name"] == routed.route for t in p["spec"]["targetRefs"])
        ]
        assert len(found) == 1, f"{routed.route}: {len(found)} SecurityPolicies"
        return found[0]

    def authorize(self, req: Request, routed: Routed, jwks: Mapping[str, KeySet] | None = None) -> Decision:
        """What the route's SecurityPolicy answers: 401 unauthenticated, 403 denied, 200 forwarded."""
        spec = self.policy_of(routed)["spec"]
        headers = _lower(req.headers)
        claims: dict[str, Any] = {}
        if "basicAuth" in spec:
            user = self._basic_user(spec["basicAuth"], headers.get("authorization", ""))
            if user is None:
                return Decision(401, headers)
            if spec["basicAuth"].get("forwardUsernameHeader"):
                headers[spec["basicAuth"]["forwardUsernameHeader"].lower()] = user
        if "jwt" in spec:
            verified = self._jwt_claims(spec["jwt"], headers.get("authorization", ""), jwks or {})
            if verified is None:
                return Decision(401, headers)
            provider, claims = verified
            for c in provider.get("claimToHeaders") or []:
                if c["claim"] in claims:
                    headers[c["header"].lower()] = str(claims[c["claim"]])
        authz = spec.get("authorization") or {}
        for rule in authz.get("rules") or []:
            if self._principal_ok(rule.get("principal") or {}, req.source, claims):
                return Decision(200 if rule["action"] == "Allow" else 403, headers)
        return Decision(200 if authz.get("defaultAction", "Allow") == "Allow" else 403, headers)

    def _basic_user(self, basic: dict[str, Any], value: str) -> str | None:
        if not value.startswith("Basic "):
            return None
        try:
            user, _, password = base64.b64decode(value[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        secret = self.secrets[basic["users"]["name"]]
        lines = (secret.get("stringData") or {}).get(".htpasswd", "").splitlines()
        digest = base64.b64encode(hashlib.sha1(password.encode(), usedforsecurity=False).digest()).decode()
        return user if f"{user}:{{SHA}}{digest}" in lines else None

    @staticmethod
    def _jwt_claims(
        spec: dict[str, Any], value: str, jwks: Mapping[str, KeySet]
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        if not value.startswith("Bearer "):
            return None
        for provider in spec["providers"]:
            keys = jwks.get(provider["remoteJWKS"]["uri"])
            if keys is None:
                continue
            try:
                token = jwt.decode(value[7:], keys)
                jwt.JWTClaimsRegistry(
                    now=int(time.time()),
                    iss={"essential": True, "value": provider["issuer"]},
                    aud={"essential": True, "values": provider.get("audiences") or []},
                    exp={"essential": True},
                ).validate(token.claims)
            except (JoseError, ValueError):
                continue
            return provider, dict(token.claims)
        return None

    @staticmethod
    def _principal_ok(principal: dict[str, Any], source: str, claims: dict[str, Any]) -> bool:
        cidrs = principal.get("clientCIDRs")
        if cidrs and not any(ipaddress.ip_address(source) in ipaddress.ip_network(c) for c in cidrs):
            return False
        for claim in (principal.get("jwt") or {}).get("claims") or []:
            value: Any = claims
            for part in claim["name"].split("."):
                value = value.get(part) if isinstance(value, dict) else None
            have = value if isinstance(value, list) else [value]
            if not set(map(str, have)) & set(claim["values"]):
                return False
        return True
