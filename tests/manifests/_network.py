"""NetworkPolicy semantics over the rendered cluster, to ask "is this connection allowed?".

A connection from `src` to `dst` on (port, protocol) is allowed when the source's egress and the
destination's ingress both allow it. A side is unrestricted when it is not a pod, is a
host-network pod (NetworkPolicy does not apply to the host network), or no policy of its
namespace selects it for that direction; otherwise one rule of one selecting policy must match
the peer and the port. With the VPC CNI pods have VPC addresses, so `ipBlock`s match pods by
their address too. Named ports resolve against the destination pod's container ports.
ref: https://kubernetes.io/docs/concepts/services-networking/network-policies/
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from tests.manifests._cluster import Cluster, selects

NAMESPACE_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Endpoint:
    what: str
    ip: str
    namespace: str | None = None  # None: not a pod (API server, node, internet)
    labels: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)  # container port name -> number
    host_network: bool = False

    @property
    def pod(self) -> bool:
        return self.namespace is not None and not self.host_network


def _peer_matches(peer: dict[str, Any], policy_ns: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        ip = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(e) for e in block.get("except") or []
        )
    if not other.pod:
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], {NAMESPACE_LABEL: other.namespace or ""}):
            return False
    elif other.namespace != policy_ns:
        return False
    return "podSelector" not in peer or selects(peer["podSelector"], other.labels)


def _port_matches(entries: list[dict[str, Any]] | None, port: int, protocol: str, dst: Endpoint) -> bool:
    if not entries:
        return True
    for e in entries:
        if e.get("protocol", "TCP") != protocol:
            continue
        wanted = e.get("port")
        if wanted is None:
            return True
        number = dst.ports.get(wanted) if isinstance(wanted, str) else int(wanted)
        if number is not None and number <= port <= int(e.get("endPort", number)):
            return True
    return False


class Network:
    def __init__(self, c: Cluster) -> None:
        self.policies = [o for o in c.of_kind("NetworkPolicy")]

    def _side_allows(
        self, pod: Endpoint, direction: str, other: Endpoint, port: int, protocol: str, dst: Endpoint
    ) -> bool:
        if not pod.pod:
            return True
        selecting = [
            p
            for p in self.policies
            if p.namespace == pod.namespace
            and direction in p.doc["spec"].get("policyTypes", ["Ingress"])
            and selects(p.doc["spec"].get("podSelector"), pod.labels)
        ]
        if not selecting:
            return True
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for p in selecting:
            for r in p.doc["spec"].get(key) or []:
                peers = r.get(peers_key)
                if (not peers or any(_peer_matches(peer, str(p.namespace), other) for peer in peers)) and _port_matches(
                    r.get("ports"), port, protocol, dst
                ):
                    return True
        return False

    def allowed(self, src: Endpoint, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
        return self._side_allows(src, "Egress", dst, port, protocol, dst) and self._side_allows(
            dst, "Ingress", src, port, protocol, dst
        )
