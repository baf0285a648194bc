"""tools/chart_values.py: default values read from the packaged charts (subcharts merged as
Helm merges them), and every key the program sets that the chart lacks reported by path."""

from __future__ import annotations

from components.upstream import versions
from tools import chart_values, charts


def _defaults(chart: versions.HelmChart) -> dict[str, object]:
    return chart_values.default_values(charts.archive_path(chart))


def test_subchart_defaults_are_merged_under_their_alias() -> None:
    kps = _defaults(versions.KUBE_PROMETHEUS_STACK_CHART)
    # grafana's own values.yaml holds `sidecar.dashboards.labelValue`; the parent only overrides some keys.
    assert "labelValue" in kps["grafana"]["sidecar"]["dashboards"]  # type: ignore[index]
    assert "nodeSelector" in kps["kube-state-metrics"]  # type: ignore[operator]
    loki = _defaults(versions.LOKI_CHART)
    assert "rollout_operator" in loki  # alias of rollout-operator
    # Helm reads a dependency's condition (nfd.enabled) even where values.yaml leaves it out.
    plugin = _defaults(versions.NVIDIA_DEVICE_PLUGIN_CHART)
    assert "enabled" in plugin["nfd"]  # type: ignore[operator]


def test_keys_the_chart_lacks_are_reported_by_path() -> None:
    gateway = _defaults(versions.ENVOY_GATEWAY_CHART)
    # gateway-helm has no values.schema.json: a misplaced key renders silently and is lost.
    values = {
        "deployment": {"replicas": 2, "envoyGateway": {"replicas": 2}},
        "topologyInjector": {"enabled": False},
        "podDisruptionBudget": {"minAvailable": 1},
        "proxy": {"image": "x"},
    }
    assert [str(u) for u in chart_values.unknown_keys("gateway-helm", values, gateway)] == [
        "deployment.envoyGateway.replicas: not in the chart's default values (Helm ignores it)",
        "proxy: not in the chart's default values (Helm ignores it)",
    ]


def test_a_map_where_the_chart_has_a_scalar_is_reported() -> None:
    cert_manager = _defaults(versions.CERT_MANAGER_CHART)
    got = chart_values.unknown_keys("cert-manager", {"replicaCount": {"min": 1}}, cert_manager)
    assert [u.path for u in got] == ["replicaCount"]
    assert "a map where the chart's default is int 1" in got[0].reason


def test_free_form_maps_take_any_key_but_must_exist_themselves() -> None:
    adapter = _defaults(versions.PROMETHEUS_ADAPTER_CHART)
    ok = {"nodeSelector": {"anything.example.com/x": "y"}, "resources": {"requests": {"cpu": "1"}}}
    assert chart_values.unknown_keys("prometheus-adapter", ok, adapter) == []
    assert [u.path for u in chart_values.unknown_keys("prometheus-adapter", {"nodeSelectr": {"a": "b"}}, adapter)] == [
        "nodeSelectr"
    ]
    # The same path is free-form only for the chart it is listed for.
    assert chart_values.free_form_reason("cluster-autoscaler", ["extraArgs"]) is not None
    assert chart_values.free_form_reason("gateway-helm", ["extraArgs"]) is None


def test_path_patterns() -> None:
    assert chart_values.matches(["**", "nodeSelector"], ["nodeSelector"])
    assert chart_values.matches(["**", "nodeSelector"], ["a", "b", "nodeSelector"])
    assert not chart_values.matches(["**", "nodeSelector"], ["nodeSelector", "x"])
    assert chart_values.matches(["a", "*", "c"], ["a", "b", "c"])
    assert not chart_values.matches(["a", "*", "c"], ["a", "c"])
