"""Every Helm release of every stack, rendered by helm with its pinned upstream chart
(tools/helm_template.py) from exactly the values the program records: helm accepts the values
(it enforces each chart's values.schema.json here), and every key the program sets is a key
of the chart (Helm would silently ignore any other)."""

from __future__ import annotations

import pytest

from components.upstream import versions
from tests.conftest import STACKS
from tests.manifests._cluster import RELEASES, cluster
from tools import chart_values, charts
from tools.helm_template import builtin_api_versions

PAIRS = [(s, r) for s in STACKS for r in RELEASES]


@pytest.mark.parametrize("stack", STACKS)
def test_the_stack_declares_the_nine_releases(stack: str) -> None:
    c = cluster(stack)
    assert sorted(c.releases) == sorted(RELEASES)
    assert {r.chart for r in c.releases.values()} == set(charts.pinned_charts())


@pytest.mark.parametrize(("stack", "release"), PAIRS)
def test_release_renders(stack: str, release: str) -> None:
    c = cluster(stack)
    assert release not in c.errors, f"helm refuses {release} in {stack}: {c.errors.get(release)}"
    docs = c.rendered[release]
    assert docs, f"{release} renders no objects"
    assert all(d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name") for d in docs)


@pytest.mark.parametrize(("stack", "release"), PAIRS)
def test_release_sets_no_unknown_values(stack: str, release: str) -> None:
    r = cluster(stack).releases[release]
    defaults = chart_values.default_values(charts.archive_path(r.chart))
    assert [str(u) for u in chart_values.unknown_keys(r.chart.chart, r.values, defaults)] == []


def test_every_free_form_entry_is_used() -> None:
    """No stale entries: each free-form map is one some release of some stack sets."""
    used: set[tuple[str, str]] = set()

    def walk(chart: str, value: object, path: list[str]) -> None:
        if not isinstance(value, dict):
            return
        for key, sub in value.items():
            here = [*path, str(key)]
            for (owner, pattern), _ in chart_values.FREE_FORM.items():
                if owner in ("*", chart) and chart_values.matches(pattern.split("."), here):
                    used.add((owner, pattern))
            walk(chart, sub, here)

    for stack in STACKS:
        for r in cluster(stack).releases.values():
            walk(r.chart.chart, r.values, [])
    assert set(chart_values.FREE_FORM) - used == set()


def test_api_versions_are_the_builtin_groups_plus_the_charts_crds() -> None:
    apis = set(cluster("prod").api_versions)
    # Without apiregistration.k8s.io/v1, prometheus-adapter renders a v1beta1 APIService
    # (removed in Kubernetes 1.22).
    assert {"v1", "apps/v1", "policy/v1", "apiregistration.k8s.io/v1", "apps/v1/Deployment"} <= apis
    assert {
        "monitoring.coreos.com/v1",
        "cert-manager.io/v1",
        "gateway.networking.k8s.io/v1",
        "gateway.envoyproxy.io/v1alpha1",
    } <= apis
    assert [a for a in builtin_api_versions("1.33") if "alpha" in a or "beta" in a] == []
    (apiservice,) = [d for d in cluster("prod").rendered["monitoring-prometheus-adapter"] if d["kind"] == "APIService"]
    assert apiservice["apiVersion"] == "apiregistration.k8s.io/v1"


def test_envoy_gateway_pin_is_the_oci_release_and_names_its_proxy_image() -> None:
    chart = versions.ENVOY_GATEWAY_CHART
    assert (chart.reference, chart.version) == ("oci://docker.io/envoyproxy/gateway-helm", "1.9.0")
    # The proxy image is pinned beside the chart, not left to the controller's built-in default.
    assert versions.ENVOY_PROXY_IMAGE == "docker.io/envoyproxy/envoy:distroless-v1.39.0"
