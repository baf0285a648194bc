"""The edge keys: the ingress allowlist judged by its union, and the public DNS zone."""

from __future__ import annotations

from tests.components.stack_config._helpers import K, fails, parse, raw


def test_the_ingress_allowlist_is_judged_by_its_union_and_prod_must_name_it() -> None:
    cfg = raw("staging")
    cfg[K + "ingressAllowedCidrs"] = ["0.0.0.0/1", "128.0.0.0/1"]
    fails(
        cfg,
        r"ingressAllowedCidrs: '0\.0\.0\.0/1, 128\.0\.0\.0/1 \(their union 0\.0\.0\.0/0: 100% of IPv4\)' lets "
        r"\(almost\) every client through under another spelling; "
        r"allowed: \[0\.0\.0\.0/0\] written as such for a public API",
    )
    cfg[K + "ingressAllowedCidrs"] = ["0.0.0.0/0"]
    assert parse(cfg).ingress_allowed_cidrs == ("0.0.0.0/0",)
    prod = raw("prod")
    del prod[K + "ingressAllowedCidrs"]
    fails(
        prod,
        r"ingressAllowedCidrs: <unset> is not set in prod \(the default lets any client through\); allowed: the "
        r"client CIDRs, or \[0\.0\.0\.0/0\] for a public API",
    )


def test_domain_shape() -> None:
    cfg = raw("dev")
    cfg[K + "domain"] = "Not A Domain"
    fails(cfg, r"domain: 'Not A Domain' is not valid; allowed: a lowercase DNS name")
