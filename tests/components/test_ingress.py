"""Ingress: pinned Envoy Gateway + cert-manager on system nodes, one generated key per API client,
a SecurityPolicy beside every route, the endpoints exported, and every input validated."""

from __future__ import annotations

from typing import Any

import pytest

from components.gateway.access import htpasswd_line, htpasswd_users
from components.gateway.args import IngressArgs, JwtArgs, TritonBackend
from components.gateway.routes import public_routes
from components.gpu import gpu_contract
from components.kubernetes import naming
from components.stack_config.errors import ConfigError
from components.upstream import versions
from tests.components._helpers import assert_bounded_resources, assert_children_prefixed, registered_outputs
from tests.pulumi_kit import Run, run_program

RELEASE = "kubernetes:helm.sh/v3:Release"
TRAEFIK_KINDS = {"IngressRoute", "Middleware", "TLSOption", "IngressRouteTCP", "ServersTransport"}


@pytest.mark.parametrize(
    ("role", "chart"),
    [("envoy-gateway", versions.ENVOY_GATEWAY_CHART), ("cert-manager", versions.CERT_MANAGER_CHART)],
)
def test_pinned_releases_on_system_nodes(any_stack: Run, role: str, chart: versions.HelmChart) -> None:
    r = any_stack.one(RELEASE, f"ingress-{role}")
    assert (r.inputs["chart"], r.inputs["version"]) == (chart.reference, chart.version)
    # An OCI chart is addressed by its reference alone; an HTTP repository is an option.
    assert r.inputs.get("repositoryOpts") == (None if chart.oci else {"repo": chart.repository})
    values = r.inputs["values"]
    selector = values["deployment"]["pod"]["nodeSelector"] if role == "envoy-gateway" else values["nodeSelector"]
    assert selector == gpu_contract.system_node_labels()
    assert r.inputs["namespace"] in (naming.INGRESS_NAMESPACE, naming.CERT_MANAGER_NAMESPACE)


def test_no_traefik_object_is_left(any_stack: Run) -> None:
    assert not [r for r in any_stack.of_type(RELEASE) if "traefik" in r.inputs["chart"]]
    assert not {r.inputs["kind"] for r in any_stack.kubernetes_objects()} & TRAEFIK_KINDS


def test_cert_manager_workloads_have_bounded_resources(prod: Run) -> None:
    cert_manager = prod.one(RELEASE, "ingress-cert-manager").inputs["values"]
    assert_bounded_resources("cert-manager controller", cert_manager["resources"])
    for component in ("webhook", "cainjector", "startupapicheck"):
        assert_bounded_resources(f"cert-manager {component}", cert_manager[component]["resources"])


def test_every_route_has_its_own_security_policy_and_children_are_prefixed(prod: Run) -> None:
    comp = prod.one("triton-platform:serving:Ingress", "ingress")
    assert_children_prefixed(prod, comp, 20)
    objects = [r.inputs for r in prod.descendants_of(comp) if r.type.startswith("kubernetes:")]
    routes = {(d["kind"], d["metadata"]["name"]) for d in objects if d.get("kind") in ("HTTPRoute", "GRPCRoute")}
    targets = [
        (t["kind"], t["name"]) for d in objects if d.get("kind") == "SecurityPolicy" for t in d["spec"]["targetRefs"]
    ]
    assert sorted(targets) == sorted(routes - {("HTTPRoute", "triton-https-redirect")})
    assert len(targets) == len(set(targets))


def test_one_generated_key_per_configured_client(staging: Run, prod: Run) -> None:
    keys = staging.exports["ingressApiKeys"]
    assert sorted(keys) == ["ci-smoke", "default"]
    assert len(set(keys.values())) == 2
    assert keys["ci-smoke"].startswith("mock-ingress-ci-smoke-api-key-")  # each key is its own RandomPassword's result
    (secret,) = [
        r.inputs for r in staging.kubernetes_objects() if r.inputs["kind"] == "Secret" and r.name == "ingress-api-keys"
    ]
    assert secret["metadata"]["name"] == "triton-api-keys"
    users = secret["stringData"][".htpasswd"].split("\n")  # the key Envoy Gateway's basic auth reads
    assert users == [htpasswd_line("ci-smoke", keys["ci-smoke"]), htpasswd_line("default", keys["default"])]
    # Each client keeps its key's logical name (and so its key) across the move off Traefik.
    passwords = [r for r in prod.of_type("random:index/randomPassword:RandomPassword") if r.name.endswith("-api-key")]
    assert all((r.inputs["length"], r.inputs["special"]) == (48, False) for r in passwords)
    names = sorted(r.name for r in passwords)
    assert names == ["ingress-batch-scoring-api-key", "ingress-default-api-key", "ingress-search-api-api-key"]
    assert sorted(prod.exports["ingressApiKeys"]) == ["batch-scoring", "default", "search-api"]
    assert htpasswd_users({"b": "k2", "a": "k1"}) == f"{htpasswd_line('a', 'k1')}\n{htpasswd_line('b', 'k2')}"


def test_a_jwt_only_stack_makes_no_keys() -> None:
    run = run_program(
        "staging",
        overrides={"triton-platform:ingressAuthentication": "jwt"},
        remove=("triton-platform:ingressClients",),
    )
    assert run.exports["ingressApiKeys"] == {}
    assert not [r for r in run.of_type("random:index/randomPassword:RandomPassword") if r.name.endswith("-api-key")]
    assert not [r for r in run.kubernetes_objects() if r.name == "ingress-api-keys"]
    policies = [r.inputs for r in run.kubernetes_objects() if r.inputs["kind"] == "SecurityPolicy"]
    assert policies
    assert all("jwt" in p["spec"] and "basicAuth" not in p["spec"] for p in policies)


def test_endpoints_exported_from_the_component(dev: Run) -> None:
    assert dev.exports["tritonEndpoints"] == {
        "http": "https://infer.dev.inference.example.com",
        "grpc": "grpc.dev.inference.example.com:443",
    }
    outputs = registered_outputs(dev, dev.one("triton-platform:serving:Ingress", "ingress"))
    assert outputs["httpEndpoint"] == dev.exports["tritonEndpoints"]["http"]
    assert outputs["grpcEndpoint"] == dev.exports["tritonEndpoints"]["grpc"]


def test_rate_limit_is_per_client_per_proxy_replica(prod: Run) -> None:
    (proxy,) = [r.inputs for r in prod.kubernetes_objects() if r.inputs["kind"] == "EnvoyProxy"]
    replicas = int(proxy["spec"]["provider"]["kubernetes"]["envoyDeployment"]["replicas"])
    assert _args(rate_limit_rps=200, replicas=replicas).aggregate_rate_limit_rps == 200 * replicas


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"triton-platform:ingressClients": []}, r"triton-platform:ingressClients: \[\] is empty"),
        ({"triton-platform:ingressClients": ["default", "default"]}, r"ingressClients: .* has duplicate names"),
        (
            {"triton-platform:ingressClients": ["Team_A"]},
            r"ingressClients: 'Team_A' is not valid; allowed: a DNS label",
        ),
        (
            {"triton-platform:ingressAuthentication": "oauth"},
            r"ingressAuthentication: 'oauth' is not allowed; allowed: api-keys \| jwt \| both",
        ),
        (
            {"triton-platform:ingressJwtIssuer": "https://login.example.com/"},
            r"ingressJwtIssuer: 'https://login.example.com/' is set but ingressAuthentication is api-keys",
        ),
        (
            {"triton-platform:ingressAuthentication": "jwt"},
            r"ingressJwtIssuer: '' is not valid; allowed: the issuer's https URL",
        ),
        (
            {
                "triton-platform:ingressAuthentication": "both",
                "triton-platform:ingressJwtIssuer": "http://login.example.com/",
            },
            r"ingressJwtIssuer: 'http://login.example.com/' is not valid; allowed: the issuer's https URL",
        ),
        (
            {
                "triton-platform:ingressAuthentication": "jwt",
                "triton-platform:ingressJwtIssuer": "https://login.example.com/",
                "triton-platform:ingressJwtJwksUri": "https://login.example.com/jwks.json",
            },
            r"ingressJwtAudiences: \[\] is empty; allowed: at least one audience",
        ),
        (
            {
                "triton-platform:ingressAuthentication": "jwt",
                "triton-platform:ingressJwtIssuer": "https://login.example.com/",
                "triton-platform:ingressJwtJwksUri": "https://login.example.com/jwks.json",
                "triton-platform:ingressJwtAudiences": ["triton"],
                "triton-platform:ingressJwtModelsClaim": "models[0]",
            },
            r"ingressJwtModelsClaim: 'models\[0\]' is not valid; allowed: a claim name",
        ),
        (
            {"triton-platform:ingressAuthentication": "jwt", "triton-platform:ingressClients": ["default"]},
            r"ingressClients: '\[\"default\"\]' is set but ingressAuthentication is jwt",
        ),
    ],
)
def test_ingress_stack_config_validation(overrides: dict[str, Any], match: str) -> None:
    # dev names its API clients; a JWT-only variant drops them unless the case is about them.
    keep = (
        overrides.get("triton-platform:ingressAuthentication") != "jwt" or "triton-platform:ingressClients" in overrides
    )
    with pytest.raises(ConfigError, match=match):
        run_program("dev", overrides=overrides, remove=() if keep else ("triton-platform:ingressClients",))


def test_prod_must_name_how_clients_authenticate() -> None:
    with pytest.raises(
        ConfigError, match=r"ingressAuthentication: <unset> is not set in prod; allowed: api-keys \| jwt \| both"
    ):
        run_program("prod", remove=("triton-platform:ingressAuthentication",))


def _args(**overrides: Any) -> IngressArgs:
    base: dict[str, Any] = {
        "domain": "example.com",
        "acme_email": "a@example.com",
        "backends": (TritonBackend("default", "triton-default", ("m1",)),),
        "allowed_cidrs": ("0.0.0.0/0",),
    }
    return IngressArgs(**{**base, **overrides})


JWT = JwtArgs("https://login.example.com/", ("triton",), "https://login.example.com/jwks.json")


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"domain": "Example"}, r"IngressArgs\.domain: 'Example' is not allowed"),
        ({"acme_email": "nobody"}, r"IngressArgs\.acme_email: 'nobody' is not valid; allowed: an e-mail address"),
        (
            {"tls_issuer": "zerossl"},
            r"IngressArgs\.tls_issuer: 'zerossl' is not allowed; allowed: letsencrypt \| letsencrypt-staging",
        ),
        ({"backends": ()}, r"IngressArgs\.backends: \(\) is not allowed"),
        (
            {"backends": (TritonBackend("a", "triton-a", ("m",)), TritonBackend("b", "triton-b", ("m",)))},
            r"model 'm' is served by both 'a' and 'b'",
        ),
        ({"backends": (TritonBackend("a", "triton-a", ("M`)",)),)}, r"models: 'M`\)' is not allowed"),
        (
            {"backends": (TritonBackend("a", "triton-a", ("a_b", "a-b")),)},
            r"models 'a_b' and 'a-b' differ only in '_' and '-'",
        ),
        ({"allowed_cidrs": ()}, r"IngressArgs\.allowed_cidrs: \(\) is not allowed"),
        ({"allowed_cidrs": ("10.0.0.1/8",)}, r"IngressArgs\.allowed_cidrs: '10\.0\.0\.1/8' is not allowed"),
        (
            {"allowed_cidrs": ("0.0.0.0/1", "128.0.0.0/1")},
            (
                r"IngressArgs\.allowed_cidrs: 0\.0\.0\.0/1, 128\.0\.0\.0/1 \(their union 0\.0\.0\.0/0: 100% of "
                r"IPv4\) lets \(almost\) every client through"
            ),
        ),
        (
            {"request_body_limit_mib": 0},
            r"request_body_limit_mib: 0 is out of range; allowed: an integer from 1 to 1024",
        ),
        ({"rate_limit_rps": 100_001}, r"rate_limit_rps: 100001 is out of range"),
        ({"replicas": 0}, r"IngressArgs\.replicas: 0 is not allowed"),
        ({"vpc_cidr": "::/0"}, r"IngressArgs\.vpc_cidr: '::/0' is not allowed; allowed: the VPC's IPv4 CIDR"),
        ({"clients": ()}, r"IngressArgs\.clients: \(\) is not allowed"),
        (
            {"clients": ("a:b",)},
            r"IngressArgs\.clients: 'a:b' is not valid; allowed: a DNS label: lowercase letters, digits and '-'",
        ),
        ({"clients": ("a", "a")}, r"IngressArgs\.clients: \['a', 'a'\] has duplicates"),
        ({"authentication": "oidc"}, r"IngressArgs\.authentication: 'oidc' is not allowed; allowed: api-keys"),
        ({"authentication": "jwt", "clients": ()}, r"IngressArgs\.jwt: None is not allowed with authentication 'jwt'"),
        (
            {"authentication": "jwt", "jwt": JWT},
            r"IngressArgs\.clients: \['default'\] is not allowed with authentication",
        ),
        ({"jwt": JWT}, r"IngressArgs\.jwt: is set with authentication 'api-keys'"),
    ],
)
def test_args_validation(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _args(**overrides)
    assert len(public_routes(_args())) == 4


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"issuer": "http://login.example.com/"}, r"JwtArgs\.issuer: 'http://login\.example\.com/' is not allowed"),
        ({"jwks_uri": "login.example.com"}, r"JwtArgs\.jwks_uri: 'login\.example\.com' is not allowed"),
        ({"audiences": ()}, r"JwtArgs\.audiences: \[\] is not allowed"),
        (
            {"jwks_cache_seconds": 10},
            r"JwtArgs\.jwks_cache_seconds: 10 is out of range; allowed: an integer from 60 to 86400",
        ),
        ({"models_claim": "a b"}, r"JwtArgs\.models_claim: 'a b' is not allowed"),
        ({"rate_limit_rps": 0}, r"JwtArgs\.rate_limit_rps: 0 is out of range"),
    ],
)
def test_jwt_args_validation(overrides: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = {
        "issuer": "https://login.example.com/",
        "audiences": ("triton",),
        "jwks_uri": "https://login.example.com/jwks.json",
    }
    with pytest.raises(ValueError, match=match):
        JwtArgs(**{**base, **overrides})
