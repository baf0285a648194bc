"""Log shipping: pinned Loki + Alloy, retention per stack, Grafana datasource."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.kubernetes import naming
from components.log_shipping import ALLOY_UID, LogShippingArgs, alloy_config, loki_url
from components.upstream import versions
from tests.components._helpers import assert_bounded_resources, assert_restricted_container, assert_restricted_pod
from tests.pulumi_kit import Run, run_program

RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.mark.parametrize(("role", "chart"), [("loki", versions.LOKI_CHART), ("alloy", versions.ALLOY_CHART)])
def test_pinned_releases(any_stack: Run, role: str, chart: versions.HelmChart) -> None:
    r = any_stack.one(RELEASE, f"log-shipping-{role}")
    assert (r.inputs["chart"], r.inputs["version"], r.inputs["repositoryOpts"]["repo"]) == (
        chart.chart,
        chart.version,
        chart.repository,
    )
    assert r.inputs["namespace"] == naming.LOGGING_NAMESPACE


def test_retention_follows_the_stack(prod: Run, dev: Run) -> None:
    for run, days in ((prod, 30), (dev, 3)):
        loki = run.one(RELEASE, "log-shipping-loki").inputs["values"]["loki"]
        assert loki["limits_config"]["retention_period"] == f"{days * 24}h"
        assert loki["compactor"]["retention_enabled"] is True
        persistence = run.one(RELEASE, "log-shipping-loki").inputs["values"]["singleBinary"]["persistence"]
        assert persistence == {"enabled": True, "size": "50Gi", "storageClass": naming.STORAGE_CLASS}


def test_alloy_ships_to_loki_without_host_access(staging: Run) -> None:
    values = staging.one(RELEASE, "log-shipping-alloy").inputs["values"]
    config = values["alloy"]["configMap"]["content"]
    assert f'url = "{loki_url(naming.LOGGING_NAMESPACE)}/loki/api/v1/push"' in config
    assert "loki.source.kubernetes" in config
    assert "hostPath" not in str(values)
    assert config == alloy_config(naming.LOGGING_NAMESPACE)


def test_loki_runs_restricted_without_a_token(any_stack: Run) -> None:
    values = any_stack.one(RELEASE, "log-shipping-loki").inputs["values"]
    assert_bounded_resources("loki", values["singleBinary"]["resources"])
    assert_restricted_pod("loki", values["loki"]["podSecurityContext"])
    assert_restricted_container("loki", values["loki"]["containerSecurityContext"])
    assert values["loki"]["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": "http-metrics"}
    # No rules sidecar (and so no cluster-wide Secret read), no API token.
    assert values["sidecar"] == {"rules": {"enabled": False}}
    assert values["serviceAccount"] == {"automountServiceAccountToken": False}


def test_alloy_runs_as_its_own_user_on_a_read_only_root(any_stack: Run) -> None:
    values = any_stack.one(RELEASE, "log-shipping-alloy").inputs["values"]
    pod = values["global"]["podSecurityContext"]
    assert_restricted_pod("alloy pod", pod)
    assert (pod["runAsUser"], pod["fsGroup"]) == (ALLOY_UID, ALLOY_UID)
    for name, container in (("alloy", values["alloy"]), ("config-reloader", values["configReloader"])):
        assert_restricted_container(name, container["securityContext"])
        assert container["securityContext"]["runAsUser"] == ALLOY_UID
        assert_bounded_resources(name, container["resources"])
    # The storage path (the chart's /tmp/alloy) is on an emptyDir, the only writable path.
    assert values["controller"]["volumes"]["extra"] == [{"name": "tmp", "emptyDir": {}}]
    assert values["alloy"]["mounts"]["extra"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert values["alloy"]["livenessProbe"]["httpGet"]["port"] == "http-metrics"


def test_grafana_datasource_only_with_monitoring(staging: Run) -> None:
    (cm,) = [r.inputs for r in staging.kubernetes_objects() if r.inputs["metadata"]["name"] == "loki-datasource"]
    assert cm["metadata"]["namespace"] == naming.MONITORING_NAMESPACE
    assert cm["metadata"]["labels"]["grafana_datasource"] == "1"
    (ds,) = yaml.safe_load(cm["data"]["loki.yaml"])["datasources"]
    assert (ds["type"], ds["url"]) == ("loki", "http://loki.logging.svc:3100")
    run = run_program("dev", overrides={"triton-platform:monitoringEnabled": False})
    assert run.one(RELEASE, "log-shipping-loki")
    assert not [r for r in run.kubernetes_objects() if r.inputs["metadata"]["name"] == "loki-datasource"]


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            {"retention_days": 0},
            r"LogShippingArgs\.retention_days: 0 is out of range; allowed: an integer from 1 to 365",
        ),
        ({"storage_gib": 1}, r"LogShippingArgs\.storage_gib: 1 is out of range"),
        ({"shipper_replicas": 0}, r"LogShippingArgs\.shipper_replicas: 0 is out of range"),
        (
            {"vpc_cidr": "10.0.0.1/16"},
            r"LogShippingArgs\.vpc_cidr: '10\.0\.0\.1/16' is not allowed; allowed: the VPC's IPv4 CIDR",
        ),
    ],
)
def test_args_validation(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LogShippingArgs(**overrides)
    assert LogShippingArgs().retention_days == 7
