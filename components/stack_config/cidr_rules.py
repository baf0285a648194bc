"""The one rule for the CIDR lists a stack takes (the EKS public endpoint, the ingress allowlist):
judge the union of the addresses they cover, never their spelling. `[0.0.0.0/1, 128.0.0.0/1]` is
the whole internet as surely as `0.0.0.0/0`.

Used by the stack config (components/stack_config/rules.py and edge.py, before any resource),
components/eks_cluster.py and components/ingress.py (their Args) and the policy pack
(policy/policies.py), so the four agree.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

# A union wider than a /8 (16,777,216 addresses, 1/256 of IPv4) is "open to the internet": no
# office, VPN or CI egress range is that large.
WIDEST_SPECIFIC = 2**24
WORLD = ipaddress.IPv4Network("0.0.0.0/0")


def union(cidrs: Iterable[str]) -> list[ipaddress.IPv4Network]:
    """The CIDRs merged (overlaps and neighbours collapsed); invalid or non-IPv4 entries are left out."""
    nets = []
    for c in cidrs:
        try:
            net = ipaddress.ip_network(c, strict=False)
        except ValueError:
            continue
        if isinstance(net, ipaddress.IPv4Network):
            nets.append(net)
    return list(ipaddress.collapse_addresses(nets))


def coverage(cidrs: Iterable[str]) -> int:
    """How many IPv4 addresses the union covers."""
    return sum(n.num_addresses for n in union(cidrs))


def world_open(cidrs: Iterable[str]) -> bool:
    """The union covers more than a /8: for access control, the internet."""
    return coverage(cidrs) > WIDEST_SPECIFIC


def whole_internet(cidrs: Iterable[str]) -> bool:
    """The union is exactly 0.0.0.0/0, however it is spelled."""
    return union(cidrs) == [WORLD]


def describe(cidrs: Iterable[str]) -> str:
    """`0.0.0.0/1, 128.0.0.0/1 (their union 0.0.0.0/0: 100% of IPv4)`, for one-line errors."""
    listed = list(cidrs)
    merged = union(listed)
    share = 100.0 * sum(n.num_addresses for n in merged) / WORLD.num_addresses
    return f"{', '.join(listed)} (their union {', '.join(map(str, merged))}: {share:.3g}% of IPv4)"
