"""components/kubernetes/network_policies.py: the NetworkPolicy specs every platform namespace is built from."""

from __future__ import annotations

import pytest

from components.kubernetes import network_policies as np


def test_default_deny_and_dns() -> None:
    assert np.default_deny() == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert np.allow_dns() == {
        "podSelector": {},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
                "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
            }
        ],
    }


def test_policy_has_only_the_directions_it_allows() -> None:
    spec = np.policy({"app": "x"}, egress=[np.api_server_rule("10.30.0.0/16")])
    assert spec == {
        "podSelector": {"matchLabels": {"app": "x"}},
        "policyTypes": ["Egress"],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.30.0.0/16"}}], "ports": [{"port": 443, "protocol": "TCP"}]}],
    }
    both = np.policy(
        None,
        ingress=[np.from_prometheus_rule("monitoring", *np.tcp(9400))],
        egress=[np.rule([np.internet()], *np.tcp(443, 443))],
    )
    assert both["policyTypes"] == ["Ingress", "Egress"]
    assert both["podSelector"] == {}
    assert both["ingress"][0]["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    assert both["egress"][0] == {
        "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}}],
        "ports": [{"port": 443, "protocol": "TCP"}],
    }
    assert np.rule([np.pods_anywhere()]) == {"peers": [{"namespaceSelector": {}, "podSelector": {}}]}


def test_rules_refused() -> None:
    with pytest.raises(ValueError, match="no ingress and no egress rule"):
        np.policy({"app": "x"})
    with pytest.raises(ValueError, match=r"10\.0\.0\.1/16"):
        np.cidr("10.0.0.1/16")
    with pytest.raises(ValueError, match=r"X.vpc_cidr: 'nope' is not allowed; allowed: the VPC's IPv4 CIDR"):
        np.check_vpc_cidr("X", "nope")
    np.check_vpc_cidr("X", "10.0.0.0/16")


def test_default_vpc_is_the_stack_configs_default() -> None:
    from components.stack_config.declarations import KEYS_BY_NAME

    assert np.DEFAULT_VPC_CIDR == KEYS_BY_NAME["vpcCidr"].default
