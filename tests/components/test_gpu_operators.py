"""GPU operators: pinned device plugin + DCGM exporter, scheduled by the GPU contract only."""

from __future__ import annotations

import pytest

from components.gpu import gpu_contract
from components.gpu_operators import (
    DCGM_EXPORTER_TIMEOUT_SECONDS,
    DEVICE_PLUGIN_TIMEOUT_SECONDS,
    GpuOperatorsArgs,
    _build_dcgm_exporter_values,
    _build_device_plugin_values,
    device_plugin_node_groups,
)
from components.kubernetes import naming
from components.upstream import versions
from tests.components._helpers import assert_bounded_resources, assert_children_prefixed, registered_outputs
from tests.pulumi_kit import Run, run_program

GPU_OPERATORS = "triton-platform:gpu:GpuOperators"
RELEASE = "kubernetes:helm.sh/v3:Release"
GPU_GROUPS = {"dev": ["gpu-l4", "gpu-l4-shared"], "staging": ["gpu-l4"], "prod": ["gpu-a10g", "gpu-l4"]}
# The groups whose Bottlerocket NVIDIA AMI runs its own device plugin: the chart's stays off them.
HOST_PLUGIN_GROUPS = {"dev": ["gpu-l4-shared"], "staging": [], "prod": []}


def _release(run: Run, role: str):
    return run.one(RELEASE, f"gpu-operators-{role}")


@pytest.mark.parametrize(
    ("role", "chart", "timeout"),
    [
        ("device-plugin", versions.NVIDIA_DEVICE_PLUGIN_CHART, DEVICE_PLUGIN_TIMEOUT_SECONDS),
        ("dcgm-exporter", versions.DCGM_EXPORTER_CHART, DCGM_EXPORTER_TIMEOUT_SECONDS),
    ],
)
def test_pinned_charts_on_the_cluster_provider(
    any_stack: Run, role: str, chart: versions.HelmChart, timeout: int
) -> None:
    r = _release(any_stack, role)
    assert (r.inputs["chart"], r.inputs["version"], r.inputs["repositoryOpts"]["repo"]) == (
        chart.chart,
        chart.version,
        chart.repository,
    )
    assert r.inputs["name"] == chart.chart
    assert r.inputs["version"][0].isdigit()
    assert r.inputs["repositoryOpts"]["repo"].startswith("https://")
    assert r.inputs["namespace"] == naming.GPU_OPERATORS_NAMESPACE
    # Through components/kubernetes/helm.py's pinned_release: atomic, namespace not Helm's, explicit timeout.
    assert (r.inputs["atomic"], r.inputs["createNamespace"], r.inputs["timeout"]) == (True, False, timeout)
    provider = any_stack.one("pulumi:providers:kubernetes", "cluster-k8s")
    assert r.provider.startswith(provider.urn + "::"), r.provider


@pytest.mark.parametrize("role", ["device-plugin", "dcgm-exporter"])
def test_scheduling_derived_from_the_gpu_contract(any_stack: Run, role: str) -> None:
    values = _release(any_stack, role).inputs["values"]
    groups = GPU_GROUPS[any_stack.stack]
    if role == "device-plugin":
        groups = [g for g in groups if g not in HOST_PLUGIN_GROUPS[any_stack.stack]]
    assert values["tolerations"] == gpu_contract.gpu_tolerations()
    assert values["affinity"] == gpu_contract.gpu_node_affinity(groups)
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == groups
    assert "nodeSelector" not in values


def test_device_plugin_values(any_stack: Run) -> None:
    values = _release(any_stack, "device-plugin").inputs["values"]
    assert values["priorityClassName"] == "system-node-critical"
    assert values["gfd"] == {"enabled": False}
    assert values["nfd"] == {"enabled": False}
    assert_bounded_resources("device-plugin", values["resources"])
    # Pod level: also the MPS daemon's. A non-empty container context replaces the chart's,
    # so it restates it: root (the kubelet's socket directory), nothing else.
    assert values["podSecurityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert values["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_dcgm_exporter_keeps_the_charts_container_context(any_stack: Run) -> None:
    values = _release(any_stack, "dcgm-exporter").inputs["values"]
    assert_bounded_resources("dcgm-exporter", values["resources"])
    assert values["podSecurityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    # The chart's root + SYS_ADMIN (profiling metrics); the API server refuses
    # allowPrivilegeEscalation: false next to SYS_ADMIN, so nothing is merged into it.
    assert "securityContext" not in values


def test_service_monitor_follows_monitoring_enabled(any_stack: Run) -> None:
    sm = _release(any_stack, "dcgm-exporter").inputs["values"]["serviceMonitor"]
    assert sm["enabled"] is True  # monitoringEnabled defaults to true in every shipped stack
    assert _release(any_stack, "dcgm-exporter").inputs["values"]["service"]["type"] == "ClusterIP"


def test_service_monitor_off_when_monitoring_disabled() -> None:
    run = run_program("dev", overrides={"triton-platform:monitoringEnabled": False})
    assert run.one(RELEASE, "gpu-operators-dcgm-exporter").inputs["values"]["serviceMonitor"]["enabled"] is False


def test_namespace_is_named_and_privileged_for_host_access(any_stack: Run) -> None:
    ns = any_stack.one("kubernetes:core/v1:Namespace", "gpu-operators-namespace")
    assert ns.inputs["metadata"]["name"] == naming.GPU_OPERATORS_NAMESPACE
    assert ns.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_component_shape(any_stack: Run) -> None:
    comp = any_stack.one(GPU_OPERATORS, "gpu-operators")
    children = assert_children_prefixed(any_stack, comp, min_children=3)
    provider = any_stack.one("pulumi:providers:kubernetes", "cluster-k8s")
    assert all(c.provider.startswith(provider.urn + "::") for c in children)
    assert registered_outputs(any_stack, comp)["namespace"] == naming.GPU_OPERATORS_NAMESPACE


def test_builders_use_only_given_groups() -> None:
    args = GpuOperatorsArgs(gpu_node_groups=["b", "a"], service_monitor=True, service_monitor_labels={"release": "kps"})
    dcgm = _build_dcgm_exporter_values(args)
    assert dcgm["serviceMonitor"]["additionalLabels"] == {"release": "kps"}
    assert dcgm["affinity"] == gpu_contract.gpu_node_affinity(["a", "b"])
    assert _build_device_plugin_values(args)["tolerations"] == [gpu_contract.GPU_TAINT.toleration()]


def test_bottlerocket_groups_keep_their_host_device_plugin() -> None:
    """Bottlerocket NVIDIA AMIs run the device plugin on the host: the chart's plugin skips
    those groups; DCGM still covers every GPU group."""
    args = GpuOperatorsArgs(gpu_node_groups=["al2023", "br"], host_device_plugin_node_groups=["br"])
    assert device_plugin_node_groups(args) == ["al2023"]
    assert _build_device_plugin_values(args)["affinity"] == gpu_contract.gpu_node_affinity(["al2023"])
    assert _build_dcgm_exporter_values(args)["affinity"] == gpu_contract.gpu_node_affinity(["al2023", "br"])


def _with_bottlerocket(group: str) -> dict[str, str]:
    import yaml

    from tests.pulumi_kit import stack_config

    groups = stack_config("dev")["triton-platform:nodeGroups"]
    groups[group]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
    return {"triton-platform:nodeGroups": yaml.safe_dump(groups)}  # the string spelling, still read


def test_bottlerocket_only_stack_installs_no_device_plugin() -> None:
    run = run_program("dev", overrides=_with_bottlerocket("gpu-l4"))
    releases = {r.name for r in run.of_type(RELEASE)}
    assert "gpu-operators-dcgm-exporter" in releases
    assert "gpu-operators-device-plugin" not in releases
    outputs = run.component_outputs[run.one(GPU_OPERATORS, "gpu-operators").urn]
    assert outputs["devicePluginNodeGroups"] == []
    assert "devicePluginRelease" not in outputs


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"gpu_node_groups": ["a"], "host_device_plugin_node_groups": ["b"]},
            r"GpuOperatorsArgs.host_device_plugin_node_groups: \['b'\] are not in gpu_node_groups",
        ),
        ({"gpu_node_groups": []}, r"GpuOperatorsArgs.gpu_node_groups: \[\] is empty or repeats a group"),
        (
            {"gpu_node_groups": ["a", "a"]},
            r"GpuOperatorsArgs.gpu_node_groups: \['a', 'a'\] is empty or repeats a group",
        ),
        (
            {"gpu_node_groups": ["a"], "service_monitor_labels": {"x": "y"}},
            r"GpuOperatorsArgs.service_monitor_labels: .* is set without service_monitor",
        ),
        ({"gpu_node_groups": ["a"], "namespace": ""}, r"GpuOperatorsArgs.namespace: '' is empty"),
    ],
)
def test_args_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GpuOperatorsArgs(**kwargs)
