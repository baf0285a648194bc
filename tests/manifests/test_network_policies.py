"""NetworkPolicies over the whole rendered cluster: every namespace the platform owns denies by
default, and every flow the workloads really have is allowed, each derived from the render
where it can be (monitors, datasources, routes, webhooks, aggregated APIs), while what no
workload needs stays denied. tests/manifests/_network.py evaluates the policies."""

from __future__ import annotations

import ipaddress
import urllib.parse
from typing import Any

import pytest
import yaml

from components.kubernetes import naming
from tests.conftest import STACKS, stack_run
from tests.manifests._cluster import Cluster, cluster, pod_labels, pod_spec, running_containers, selects
from tests.manifests._network import Endpoint, Network
from tests.manifests.test_cluster import OUTSIDE_THE_RENDER
from tests.pulumi_kit import stack_config

WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod")
PLATFORM_NAMESPACES = ("triton", "monitoring", "node-exporter", "logging", "ingress", "cert-manager", "gpu-operators")
INTERNET = "203.0.113.10"  # a client / an external service (TEST-NET-3)
# The pods that call the API server (watch, list, leader election, discovery, log tailing), by
# namespace and labels; everything else in a platform namespace is denied the API server.
API_CLIENTS = [
    (
        "cert-manager",
        {"app.kubernetes.io/instance": "cert-manager"},
    ),  # controller, webhook, cainjector, startupapicheck
    ("ingress", {"control-plane": "envoy-gateway"}),  # the Envoy Gateway controller
    ("ingress", {"app": "certgen"}),  # its certificate Job
    ("logging", {"app.kubernetes.io/name": "alloy"}),
    ("monitoring", {"app.kubernetes.io/name": "grafana"}),
    ("monitoring", {"app.kubernetes.io/name": "kube-state-metrics"}),
    ("monitoring", {"app": "kube-prometheus-stack-operator"}),
    ("monitoring", {"app.kubernetes.io/component": "prometheus-operator-webhook"}),  # admission create/patch Jobs
    ("monitoring", {"app.kubernetes.io/name": "prometheus-adapter"}),
    ("monitoring", {"app.kubernetes.io/name": "prometheus"}),  # Kubernetes service discovery
]


class World:
    """The pods of the render (plus those the operator and cert-manager create), and the
    addresses outside them: the API server's private endpoint and the nodes, in the VPC."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        vpc = ipaddress.ip_network(stack_config(c.stack)["triton-platform:vpcCidr"])
        self.api = Endpoint("the API server", str(vpc[10]))
        self.node = Endpoint("a node", str(vpc[20]))
        self.internet = Endpoint("the internet", INTERNET)
        pod_ip = str(vpc[100])
        self.pods: list[Endpoint] = []
        for o in c.of_kind(*WORKLOADS):
            spec = pod_spec(o.doc)
            if spec is None:
                continue
            ports = {
                p["name"]: int(p["containerPort"])
                for ctr in running_containers(spec)
                for p in ctr.get("ports") or []
                if "name" in p
            }
            self.pods.append(
                Endpoint(
                    str(o), pod_ip, o.namespace or "default", pod_labels(o.doc), ports, bool(spec.get("hostNetwork"))
                )
            )
        for o in c.of_kind("Prometheus"):
            self.pods.append(
                Endpoint(
                    str(o),
                    pod_ip,
                    o.namespace,
                    {
                        "app.kubernetes.io/name": "prometheus",
                        "prometheus": o.name,
                        "operator.prometheus.io/name": o.name,
                    },
                    {"http-web": 9090, "reloader-web": 8080},
                )
            )
        for o in c.of_kind("Alertmanager"):
            self.pods.append(
                Endpoint(
                    str(o),
                    pod_ip,
                    o.namespace,
                    {"app.kubernetes.io/name": "alertmanager", "alertmanager": o.name},
                    {"http-web": 9093, "mesh-tcp": 9094, "mesh-udp": 9094, "reloader-web": 8080},
                )
            )
        # cert-manager's HTTP-01 solver, created beside the Certificate; the EKS CoreDNS add-on.
        self.pods.append(
            Endpoint(
                "acme solver",
                pod_ip,
                naming.TRITON_NAMESPACE,
                {"acme.cert-manager.io/http01-solver": "true"},
                {"http": 8089},
            )
        )
        self.pods.append(
            Endpoint("coredns", pod_ip, "kube-system", {"k8s-app": "kube-dns"}, {"dns": 53, "metrics": 9153})
        )
        # The Envoy proxies Envoy Gateway runs for each Gateway, in its controller's namespace: the
        # labels and ports its v1.9.0 source gives them (proxy/resource.go EnvoyAppLabel and the
        # owning-gateway labels; a listener port below 1024 is bound at port + 10000; stats 19001,
        # readiness 19003).
        (controller_ns,) = {r.namespace for r in c.releases.values() if r.chart.chart == "gateway-helm"}
        for gw in c.of_kind("Gateway"):
            ports = {
                f"listener-{lst['name']}": int(lst["port"]) + (10000 if int(lst["port"]) < 1024 else 0)
                for lst in gw.doc["spec"]["listeners"]
            }
            labels = {
                "app.kubernetes.io/name": "envoy",
                "app.kubernetes.io/component": "proxy",
                "app.kubernetes.io/managed-by": "envoy-gateway",
                "gateway.envoyproxy.io/owning-gateway-name": gw.name,
                "gateway.envoyproxy.io/owning-gateway-namespace": str(gw.namespace),
            }
            self.pods.append(
                Endpoint(
                    f"envoy proxy of {gw}",
                    pod_ip,
                    controller_ns,
                    labels,
                    {**ports, "metrics": 19001, "readiness": 19003},
                )
            )
        self.services = [o.doc for o in c.of_kind("Service")] + [doc for _, doc in OUTSIDE_THE_RENDER]

    def select(self, namespace: str, labels: dict[str, str]) -> list[Endpoint]:
        found = [p for p in self.pods if p.namespace == namespace and selects({"matchLabels": labels}, p.labels)]
        assert found, f"no pod in {namespace} with {labels}"
        return found

    def service(self, name: str, namespace: str) -> dict[str, Any]:
        (svc,) = [
            s
            for s in self.services
            if s["metadata"]["name"] == name and s["metadata"].get("namespace", namespace) == namespace
        ]
        return svc

    def backends(self, svc: dict[str, Any], port: dict[str, Any]) -> list[tuple[Endpoint, int]]:
        """(destination, pod port) behind one Service port."""
        name, ns = svc["metadata"]["name"], svc["metadata"].get("namespace")
        if name == "kubernetes":
            return [(self.api, int(port["port"]))]
        if "selector" not in svc.get("spec", {}) and name.endswith("-kubelet"):
            return [(self.node, int(port["port"]))]
        target = port.get("targetPort", port["port"])
        out = []
        for pod in self.pods:
            if (
                pod.namespace == ns
                and selects({"matchLabels": svc["spec"].get("selector") or {}}, pod.labels)
                and svc["spec"].get("selector")
            ):
                number = pod.ports.get(target) if isinstance(target, str) else int(target)
                if number is not None:
                    out.append((self.node if pod.host_network else pod, number))
        return out

    def by_url(self, url: str, default_namespace: str) -> list[tuple[Endpoint, int]]:
        parsed = urllib.parse.urlparse(url)
        parts = [*(parsed.hostname or "").split("."), default_namespace]
        host, ns = parts[0], parts[1]
        svc = self.service(host, ns)
        (port,) = [p for p in svc["spec"]["ports"] if int(p["port"]) == (parsed.port or 80)]
        return self.backends(svc, port)


def _flows(w: World) -> list[tuple[str, list[Endpoint], list[tuple[Endpoint, int]], str]]:
    """(why, sources, [(destination, port)], protocol) for every flow the cluster has."""
    c = w.c
    prometheus = w.select("monitoring", {"app.kubernetes.io/name": "prometheus"})
    flows: list[tuple[str, list[Endpoint], list[tuple[Endpoint, int]], str]] = []
    # Every monitor's targets, from Prometheus.
    for m in c.of_kind("ServiceMonitor"):
        spec = m.doc["spec"]
        ns_sel = spec.get("namespaceSelector") or {}
        names = None if ns_sel.get("any") else set(ns_sel.get("matchNames") or [m.namespace])
        for svc in w.services:
            svc_ns = svc["metadata"].get("namespace", m.namespace)
            if (names is None or svc_ns in names) and selects(
                spec.get("selector"), svc["metadata"].get("labels") or {}
            ):
                wanted = {e["port"] for e in spec.get("endpoints") or []}
                for port in svc["spec"].get("ports") or []:
                    if port.get("name") in wanted:
                        flows.append(
                            (
                                f"scrape {m}",
                                prometheus,
                                w.backends({**svc, "metadata": {**svc["metadata"], "namespace": svc_ns}}, port),
                                "TCP",
                            )
                        )
    # Every pod monitor's pods, from Prometheus (the agent sidecar's metrics port, on every pod).
    for m in c.of_kind("PodMonitor"):
        spec = m.doc["spec"]
        names = set((spec.get("namespaceSelector") or {}).get("matchNames") or [m.namespace])
        wanted = {e["port"] for e in spec.get("podMetricsEndpoints") or []}
        targets = [
            (pod, pod.ports[port])
            for pod in w.pods
            if pod.namespace in names and selects(spec.get("selector"), pod.labels)
            for port in wanted
            if port in pod.ports
        ]
        assert targets, f"{m} selects no pod port"
        flows.append((f"scrape {m}", prometheus, targets, "TCP"))
    # Grafana's datasources, the adapter's Prometheus, Alloy's Loki, Prometheus' Alertmanagers.
    grafana = w.select("monitoring", {"app.kubernetes.io/name": "grafana"})
    for o in c.of_kind("ConfigMap", "Secret"):
        if (o.doc["metadata"].get("labels") or {}).get("grafana_datasource") == "1":
            for text in (o.doc.get("data") or {}).values():
                for ds in (yaml.safe_load(text) or {}).get("datasources") or []:
                    flows.append(
                        (f"grafana datasource {ds['name']}", grafana, w.by_url(ds["url"], "monitoring"), "TCP")
                    )
    adapter = c.releases["monitoring-prometheus-adapter"].values["prometheus"]
    flows.append(
        (
            "adapter -> prometheus",
            w.select("monitoring", {"app.kubernetes.io/name": "prometheus-adapter"}),
            w.by_url(f"{adapter['url']}:{adapter['port']}", "monitoring"),
            "TCP",
        )
    )
    alloy = w.select("logging", {"app.kubernetes.io/name": "alloy"})
    config = c.releases["log-shipping-alloy"].values["alloy"]["configMap"]["content"]
    loki = next(line.split('"')[1] for line in config.splitlines() if "url" in line and "http" in line)
    flows.append(("alloy -> loki", alloy, w.by_url(loki, "logging"), "TCP"))
    flows.append(("alloy clustering", alloy, [(a, 12345) for a in alloy], "TCP"))
    for o in c.of_kind("Prometheus"):
        for am in o.doc["spec"].get("alerting", {}).get("alertmanagers") or []:
            svc = w.service(am["name"], am["namespace"])
            (port,) = [p for p in svc["spec"]["ports"] if p["name"] == am["port"]]
            flows.append(("prometheus -> alertmanager", prometheus, w.backends(svc, port), "TCP"))
    alertmanager = w.select("monitoring", {"app.kubernetes.io/name": "alertmanager"})
    flows += [("alertmanager mesh", alertmanager, [(a, 9094) for a in alertmanager], proto) for proto in ("TCP", "UDP")]
    # The Envoy proxies: the public listeners, their routes' Services, the ACME solvers, the
    # controller's xDS Service and, where a SecurityPolicy verifies JWTs, the issuer's JWKS.
    proxies = w.select("ingress", {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy"})
    flows.append(
        (
            "clients -> envoy listeners",
            [w.internet],
            [(p, n) for p in proxies for name, n in p.ports.items() if name.startswith("listener-")],
            "TCP",
        )
    )
    for route in c.of_kind("HTTPRoute", "GRPCRoute"):
        for r in route.doc["spec"]["rules"]:
            for ref in r.get("backendRefs") or []:
                svc = w.service(ref["name"], str(route.namespace))
                (port,) = [p for p in svc["spec"]["ports"] if int(p["port"]) == int(ref["port"])]
                flows.append((f"envoy -> {ref['name']}:{ref['port']}", proxies, w.backends(svc, port), "TCP"))
    flows.append(
        (
            "envoy -> acme solver",
            proxies,
            [(p, 8089) for p in w.select("triton", {"acme.cert-manager.io/http01-solver": "true"})],
            "TCP",
        )
    )
    xds = w.service("envoy-gateway", "ingress")
    (grpc,) = [p for p in xds["spec"]["ports"] if p["name"] == "grpc"]
    flows.append(("envoy -> controller xDS", proxies, w.backends(xds, grpc), "TCP"))
    if any("jwt" in p.doc["spec"] for p in c.of_kind("SecurityPolicy")):
        flows.append(("envoy -> issuer JWKS", proxies, [(w.internet, 443)], "TCP"))
    # The API server calls the webhooks and the aggregated APIs.
    for o in c.of_kind("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService"):
        refs = (
            [h["clientConfig"].get("service") for h in o.doc.get("webhooks") or []]
            if o.kind != "APIService"
            else [o.doc["spec"].get("service")]
        )
        for ref in filter(None, refs):
            svc = w.service(ref["name"], ref["namespace"])
            (port,) = [p for p in svc["spec"]["ports"] if int(p["port"]) == int(ref.get("port", 443))]
            flows.append((f"API server -> {o}", [w.api], w.backends(svc, port), "TCP"))
    # The API server's service proxy to Prometheus: the canary analysis' queries (prometheusUrl).
    svc = w.service("kube-prometheus-stack-prometheus", "monitoring")
    (web,) = [p for p in svc["spec"]["ports"] if int(p["port"]) == 9090]
    flows.append(("API server proxy -> prometheus", [w.api], w.backends(svc, web), "TCP"))
    # API-server clients; the outside world where a workload really goes there.
    for ns, labels in API_CLIENTS:
        flows.append((f"{ns} {labels} -> API server", w.select(ns, labels), [(w.api, 443)], "TCP"))
    flows.append(("alertmanager -> Slack", alertmanager, [(w.internet, 443)], "TCP"))
    controller = w.select("cert-manager", {"app.kubernetes.io/component": "controller"})
    flows += [
        ("cert-manager -> ACME CA", controller, [(w.internet, 443)], "TCP"),
        ("cert-manager -> HTTP-01 self-check", controller, [(w.internet, 80)], "TCP"),
    ]
    triton = w.select("triton", {"app.kubernetes.io/name": "triton"})
    flows += [
        ("triton agent -> S3", triton, [(w.internet, 443)], "TCP"),
        ("triton agent -> Pod Identity agent", triton, [(Endpoint("pod identity agent", "169.254.170.23"), 80)], "TCP"),
    ]
    # Every pod resolves names.
    ours = [p for p in w.pods if p.namespace in PLATFORM_NAMESPACES and p.pod]
    dns = w.select("kube-system", {"k8s-app": "kube-dns"})
    flows += [("DNS", ours, [(d, 53) for d in dns], proto) for proto in ("UDP", "TCP")]
    return flows


@pytest.mark.parametrize("stack", STACKS)
def test_every_platform_namespace_denies_by_default_and_resolves_names(stack: str) -> None:
    c = cluster(stack)
    policies = {(o.namespace, o.name): o.doc["spec"] for o in c.of_kind("NetworkPolicy")}
    for ns in PLATFORM_NAMESPACES:
        assert policies.get((ns, "default-deny")) == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}, ns
        assert (ns, "allow-dns") in policies, ns
    assert not [key for key in policies if key[0] not in PLATFORM_NAMESPACES], (
        "policies only in the platform's namespaces"
    )


@pytest.mark.parametrize("stack", STACKS)
def test_every_flow_the_workloads_have_is_allowed(stack: str) -> None:
    w = World(cluster(stack))
    net = Network(w.c)
    flows = _flows(w)
    assert len(flows) > 40
    problems = []
    for why, sources, destinations, protocol in flows:
        assert sources, f"{why}: no source"
        assert destinations, f"{why}: no destination"
        for src in sources:
            for dst, port in destinations:
                if not net.allowed(src, dst, port, protocol):
                    problems.append(f"{why}: {src.what} -> {dst.what}:{port}/{protocol} denied")
    assert sorted(set(problems)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_what_no_workload_needs_is_denied(stack: str) -> None:
    w = World(cluster(stack))
    net = Network(w.c)
    triton = w.select("triton", {"app.kubernetes.io/name": "triton"})[0]
    proxy = w.select("ingress", {"app.kubernetes.io/name": "envoy"})[0]
    controller = w.select("ingress", {"control-plane": "envoy-gateway"})[0]
    grafana = w.select("monitoring", {"app.kubernetes.io/name": "grafana"})[0]
    loki = w.select("logging", {"app.kubernetes.io/name": "loki"})[0]
    dcgm = w.select("gpu-operators", {"app.kubernetes.io/name": "dcgm-exporter"})[0]
    webhook = w.select("cert-manager", {"app.kubernetes.io/component": "webhook"})[0]
    imds = Endpoint("instance metadata", "169.254.169.254")
    prometheus = w.select("monitoring", {"app.kubernetes.io/name": "prometheus"})[0]
    alertmanager = w.select("monitoring", {"app.kubernetes.io/name": "alertmanager"})[0]
    # An address of the VPC outside the cluster's (private) subnets: a public subnet's load balancer.
    vpc = ipaddress.ip_network(stack_config(stack)["triton-platform:vpcCidr"])
    public = Endpoint("a public subnet", str(list(vpc.subnets(prefixlen_diff=3))[7][10]))
    denied = [
        (public, prometheus, 9090),  # the proxy's rule admits the cluster's subnets only
        (w.internet, prometheus, 9090),
        (w.api, prometheus, 8080),  # the config reloader: not through the proxy's rule
        (w.api, alertmanager, 9093),
        (w.api, grafana, 3000),
        (w.internet, triton, 8000),
        (w.internet, grafana, 3000),
        (w.internet, loki, 3100),
        (w.internet, webhook, 10250),
        (proxy, grafana, 3000),
        (proxy, triton, 8002),
        (proxy, triton, 8003),  # the agent's metrics: Prometheus only
        (grafana, triton, 8003),
        (proxy, imds, 80),
        (proxy, w.api, 443),
        (w.internet, proxy, 19001),  # the proxies' stats port is not public
        (w.internet, controller, 18000),  # xDS: only the proxies
        (controller, w.internet, 443),
        (triton, imds, 80),
        (triton, loki, 3100),
        (loki, w.internet, 443),
        (dcgm, w.api, 443),
        (dcgm, w.internet, 443),
        (grafana, w.internet, 443),
        (grafana, triton, 8000),
    ]
    if not any("jwt" in p.doc["spec"] for p in w.c.of_kind("SecurityPolicy")):
        denied.append((proxy, w.internet, 443))  # no JWKS to fetch: no way out
    allowed = [f"{s.what} -> {d.what}:{p}" for s, d, p in denied if net.allowed(s, d, p)]
    assert allowed == []


def test_api_server_and_node_rules_name_the_stack_vpc() -> None:
    """The VPC CIDR reaches every component from the stack config (prod: 10.30.0.0/16); the
    service proxy's rule names the cluster's (private) subnets, the Network's own CIDRs."""
    run = stack_run("prod")
    vpc = stack_config("prod")["triton-platform:vpcCidr"]
    cidrs = {
        peer["ipBlock"]["cidr"]
        for r in run.kubernetes_objects()
        if r.inputs["kind"] == "NetworkPolicy"
        for rules in (r.inputs["spec"].get("ingress") or [], r.inputs["spec"].get("egress") or [])
        for rule in rules
        for peer in rule.get("from", rule.get("to", []))
        if "ipBlock" in peer
    }
    assert vpc == "10.30.0.0/16"
    private = {
        r.inputs["cidrBlock"] for r in run.of_type("aws:ec2/subnet:Subnet") if r.inputs["tags"]["tier"] == "private"
    }
    assert private == {"10.30.0.0/19", "10.30.32.0/19", "10.30.64.0/19"}
    assert cidrs == {vpc, "0.0.0.0/0", "169.254.170.23/32"} | private
