"""model_sync/contract/dns_label.py: the platform's names (DNS_LABEL) and Kubernetes' own (RFC1123_LABEL)."""

from __future__ import annotations

import pytest

from model_sync.contract.dns_label import DNS_LABEL, RFC1123_LABEL


@pytest.mark.parametrize("name", ["a", "gpu-a10g", "triton", "a" * 32, "a1-b2"])
def test_a_platform_name_is_a_short_label_starting_with_a_letter(name: str) -> None:
    assert DNS_LABEL.match(name)


@pytest.mark.parametrize("name", ["", "1gpu", "a" * 33, "gpu-", "-gpu", "Gpu", "gpu_a", "a.b"])
def test_anything_else_is_not_a_platform_name(name: str) -> None:
    assert not DNS_LABEL.match(name)


def test_kubernetes_names_are_wider_rfc1123_labels() -> None:
    assert RFC1123_LABEL.match("1-cert-manager")
    assert RFC1123_LABEL.match("a" * 63)
    assert not DNS_LABEL.match("1-cert-manager")
    assert not RFC1123_LABEL.match("a" * 64)
    assert not RFC1123_LABEL.match("kube_system")
