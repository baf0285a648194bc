"""NetworkPolicy specs, built in one place for every namespace the platform owns.

Each platform namespace (components/kubernetes/serving_namespace.py) denies all ingress and egress of
every pod (`default_deny`) and lets every pod resolve names through the cluster DNS
(`allow_dns`); each component then declares, with `policy`, exactly the flows its
workloads need (scrapes, webhooks, API-server calls, log pushes, ACME). Plain data only:
the specs are unit-tested directly and the manifest tests evaluate them against the whole
rendered cluster (tests/manifests/test_network_policies.py).

Facts the rules rely on:
- traffic between a pod and its own node (kubelet probes) is always allowed, and host-network
  pods (node-exporter) are not subject to NetworkPolicy at all;
  ref: https://kubernetes.io/docs/concepts/services-networking/network-policies/
- on EKS the API server is reached through the cluster's private endpoint, network interfaces
  EKS places in the cluster's VPC subnets, on 443; the same addresses call the webhooks and the
  aggregated API servers. With the VPC CNI, pods and nodes have VPC addresses too, so the
  API server and the kubelets are named by the VPC CIDR.
  ref: https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html
  ref: https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from components.stack_config import vocabulary

TCP = "TCP"
UDP = "UDP"
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}  # the EKS CoreDNS add-on's pods
DNS_PORT = 53
API_SERVER_PORT = 443
WORLD = "0.0.0.0/0"
# Never reachable from pods: the instance metadata service (node credentials).
IMDS_CIDR = "169.254.169.254/32"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace

Port = tuple[int | str, str]  # (number or container port name, protocol)


def tcp(*ports: int | str) -> list[Port]:
    """TCP ports, each once, in the order given."""
    return [(p, TCP) for p in dict.fromkeys(ports)]


def ports(*spec: Port) -> list[dict[str, Any]]:
    return [{"port": p, "protocol": proto} for p, proto in spec]


def namespace_selector(namespace: str) -> dict[str, Any]:
    return {"matchLabels": {NAMESPACE_LABEL: namespace}}


def pods_in(namespace: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A peer: the pods with `labels` in `namespace` (every pod there when labels is None)."""
    return {
        "namespaceSelector": namespace_selector(namespace),
        "podSelector": {"matchLabels": dict(labels)} if labels else {},
    }


def pods_anywhere(labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A peer: pods with `labels` in every namespace (every pod when labels is None)."""
    return {"namespaceSelector": {}, "podSelector": {"matchLabels": dict(labels)} if labels else {}}


def cidr(block: str, except_: Sequence[str] = ()) -> dict[str, Any]:
    network = ipaddress.ip_network(block, strict=True)
    peer: dict[str, Any] = {"cidr": str(network)}
    if except_:
        peer["except"] = [str(ipaddress.ip_network(e, strict=True)) for e in except_]
    return {"ipBlock": peer}


def internet() -> dict[str, Any]:
    """Any address but the instance metadata service."""
    return cidr(WORLD, (IMDS_CIDR,))


def rule(peers: Sequence[dict[str, Any]], *spec: Port) -> dict[str, Any]:
    """One ingress `from` or egress `to` rule (the caller puts it on its side): `peers` on `spec` ports."""
    out: dict[str, Any] = {"peers": list(peers)}
    if spec:
        out["ports"] = ports(*spec)
    return out


def policy(
    pod_labels: Mapping[str, str] | None,
    *,
    ingress: Sequence[dict[str, Any]] = (),
    egress: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """An allow policy for the pods with `pod_labels` (every pod of the namespace when None):
    only the directions it has rules for, so it adds to the namespace's default deny and
    never isolates anything by itself."""
    if not ingress and not egress:
        raise ValueError("network_policies.policy: no ingress and no egress rule; allowed: at least one rule")
    spec: dict[str, Any] = {"podSelector": {"matchLabels": dict(pod_labels)} if pod_labels else {}, "policyTypes": []}
    if ingress:
        spec["policyTypes"].append("Ingress")
        spec["ingress"] = [_side(r, "from") for r in ingress]
    if egress:
        spec["policyTypes"].append("Egress")
        spec["egress"] = [_side(r, "to") for r in egress]
    return spec


def _side(r: dict[str, Any], key: str) -> dict[str, Any]:
    out = {key: r["peers"]}
    if "ports" in r:
        out["ports"] = r["ports"]
    return out


def default_deny() -> dict[str, Any]:
    """Every pod of the namespace: no ingress, no egress, until an allow policy says so."""
    return {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def dns_rule() -> dict[str, Any]:
    return rule([pods_in(DNS_NAMESPACE, DNS_POD_LABELS)], (DNS_PORT, UDP), (DNS_PORT, TCP))


def allow_dns() -> dict[str, Any]:
    """Every pod of the namespace may ask the cluster DNS (CoreDNS in kube-system, 53 UDP/TCP)."""
    return policy(None, egress=[dns_rule()])


def api_server_rule(vpc_cidr: str) -> dict[str, Any]:
    """Egress to the API server (the private endpoint's addresses in the VPC, 443)."""
    return rule([cidr(vpc_cidr)], *tcp(API_SERVER_PORT))


def from_api_server_rule(vpc_cidr: str, *spec: Port) -> dict[str, Any]:
    """Ingress from the API server (webhooks, aggregated APIs) on `spec`."""
    return rule([cidr(vpc_cidr)], *spec)


# The components' default when a caller names no VPC: the stack config's own `vpcCidr`
# default (__main__ always passes the stack's value).
DEFAULT_VPC_CIDR = vocabulary.DEFAULT_VPC_CIDR

# Prometheus' pods (labels the prometheus-operator sets on every Prometheus it runs).
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}


def from_prometheus_rule(monitoring_namespace: str, *spec: Port) -> dict[str, Any]:
    """Ingress from Prometheus (the scrape of a metrics port)."""
    return rule([pods_in(monitoring_namespace, PROMETHEUS_POD_LABELS)], *spec)


def check_vpc_cidr(owner: str, value: str) -> None:
    """`<owner>.vpc_cidr` must be an IPv4 network (one-line ValueError otherwise)."""
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError:
        raise ValueError(
            f"{owner}.vpc_cidr: {value!r} is not allowed; allowed: the VPC's IPv4 CIDR such as 10.0.0.0/16"
        ) from None
