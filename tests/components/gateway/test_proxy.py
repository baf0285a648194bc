"""The Envoy data plane as the program shapes it: the controller's chart values, the Gateway's
listeners and the EnvoyProxy that pins the proxy image and gives the proxies their replicas,
spread, PDB, resources, Pod Security, NLB Service and the access log that names the client."""

from __future__ import annotations

import pytest

from components.gateway import proxy
from components.gpu import gpu_contract
from components.upstream import versions
from tests.components._helpers import assert_bounded_resources
from tests.components.gateway._helpers import hosts, of_kind
from tests.conftest import STACKS, stack_run
from tests.manifests._pod_security import violations

RELEASE = "kubernetes:helm.sh/v3:Release"


def _envoy_proxy(stack: str) -> dict[str, object]:
    (doc,) = of_kind(stack, "EnvoyProxy")
    return doc["spec"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("stack", STACKS)
def test_the_gateway_uses_the_envoy_proxy_and_one_certificate(stack: str) -> None:
    (gw,) = of_kind(stack, "Gateway")
    (cls,) = of_kind(stack, "GatewayClass")
    assert cls["spec"] == {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller"}
    assert gw["spec"]["gatewayClassName"] == cls["metadata"]["name"]
    ref = gw["spec"]["infrastructure"]["parametersRef"]
    (ep,) = of_kind(stack, "EnvoyProxy")
    assert (ref["kind"], ref["name"]) == ("EnvoyProxy", ep["metadata"]["name"])
    assert ep["metadata"]["namespace"] == gw["metadata"]["namespace"]  # a Gateway's parametersRef is local
    listeners = {lst["name"]: lst for lst in gw["spec"]["listeners"]}
    assert {(n, int(lst["port"]), lst["protocol"]) for n, lst in listeners.items()} == {
        ("http", 80, "HTTP"),
        ("https-infer", 443, "HTTPS"),
        ("https-grpc", 443, "HTTPS"),
    }
    assert (listeners["https-infer"]["hostname"], listeners["https-grpc"]["hostname"]) == hosts(stack)
    (cert,) = of_kind(stack, "Certificate")
    for name in ("https-infer", "https-grpc"):
        tls = listeners[name]["tls"]
        assert tls == {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": cert["spec"]["secretName"]}]}
        assert listeners[name]["hostname"] in cert["spec"]["dnsNames"]
    for lst in listeners.values():
        assert lst["allowedRoutes"] == {"namespaces": {"from": "Same"}}


@pytest.mark.parametrize("stack", STACKS)
def test_the_proxies_are_pinned_spread_bounded_and_behind_an_nlb(stack: str) -> None:
    k8s = _envoy_proxy(stack)["provider"]["kubernetes"]  # type: ignore[index]
    deployment = k8s["envoyDeployment"]
    assert deployment["container"]["image"] == versions.ENVOY_PROXY_IMAGE
    assert_bounded_resources("envoy proxy", deployment["container"]["resources"])
    pod = deployment["pod"]
    assert pod["nodeSelector"] == gpu_contract.system_node_labels()
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    # The spread selects the proxies by the labels Envoy Gateway v1.9.0 gives them.
    assert spread["labelSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "envoy",
        "app.kubernetes.io/component": "proxy",
        "app.kubernetes.io/managed-by": "envoy-gateway",
        "gateway.envoyproxy.io/owning-gateway-name": "triton",
        "gateway.envoyproxy.io/owning-gateway-namespace": "triton",
    }
    service = k8s["envoyService"]
    assert service["type"] == "LoadBalancer"
    assert service["externalTrafficPolicy"] == "Local"  # client addresses reach the CIDR checks
    assert service["annotations"] == {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}
    replicas = int(deployment["replicas"])
    assert replicas >= 2 or stack == "dev"
    assert k8s.get("envoyPDB") == ({"minAvailable": 1} if replicas > 1 else None)


@pytest.mark.parametrize("stack", STACKS)
def test_the_proxy_pod_is_admitted_as_restricted(stack: str) -> None:
    """The proxy pod Envoy Gateway builds: our pod and envoy-container security contexts, and its
    shutdown-manager sidecar with Envoy Gateway's default (resource.DefaultSecurityContext at v1.9.0,
    root filesystem left writable)."""
    deployment = _envoy_proxy(stack)["provider"]["kubernetes"]["envoyDeployment"]  # type: ignore[index]
    shutdown_manager = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    spec = {
        "securityContext": deployment["pod"]["securityContext"],
        "containers": [
            {"name": "envoy", "securityContext": deployment["container"]["securityContext"]},
            {"name": "shutdown-manager", "securityContext": shutdown_manager},
        ],
    }
    assert violations(spec, "restricted") == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_access_log_names_the_client(stack: str) -> None:
    (setting,) = _envoy_proxy(stack)["telemetry"]["accessLog"]["settings"]  # type: ignore[index]
    assert setting["sinks"] == [{"type": "File", "file": {"path": "/dev/stdout"}}]  # Loki collects stdout
    fields = setting["format"]["json"]
    assert setting["format"]["type"] == "JSON"
    assert fields["client"] == "%REQ(X-TRITON-CLIENT)%"
    assert {"response_code", "grpc_status", "path", "method", "route", "duration_ms", "upstream_host"} <= set(fields)


@pytest.mark.parametrize("stack", STACKS)
def test_the_controller_runs_on_system_nodes_with_a_pdb_when_it_runs_twice(stack: str) -> None:
    release = stack_run(stack).one(RELEASE, "ingress-envoy-gateway")
    values = release.inputs["values"]
    assert values["deployment"]["pod"]["nodeSelector"] == gpu_contract.system_node_labels()
    assert_bounded_resources("envoy gateway", values["deployment"]["envoyGateway"]["resources"])
    replicas = int(values["deployment"]["replicas"])
    assert int(values["podDisruptionBudget"]["minAvailable"]) == (1 if replicas > 1 else 0)
    assert values["topologyInjector"] == {"enabled": False}  # no webhook for the API server to call
    assert_bounded_resources("certgen", values["certgen"]["job"]["resources"])


def test_privileged_listener_ports_are_shifted_as_envoy_gateway_does() -> None:
    assert (proxy.PROXY_HTTP_PORT, proxy.PROXY_HTTPS_PORT) == (10080, 10443)
