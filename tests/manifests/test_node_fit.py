"""What components/gpu/node_fit.py assumes about a GPU node, held against what each stack really
renders: the DaemonSets that land on GPU nodes stay inside the budget the fit check subtracts,
and a Triton pod asks exactly what the fit check counts for one replica."""

from __future__ import annotations

from typing import Any

import pytest

from components.gpu import node_fit
from components.stack_config.parser import parse
from tests.conftest import STACKS
from tests.manifests._cluster import cluster, pod_spec
from tests.manifests.test_cluster import _tolerates_gpu
from tests.pulumi_kit import stack_config


def _requests(spec: dict[str, Any]) -> tuple[int, int]:
    """(CPU millicores, memory bytes) one pod of `spec` asks: its containers (native sidecars
    included) summed, or its largest plain init container when that is more."""

    def of(containers: list[dict[str, Any]]) -> list[tuple[int, int]]:
        out = []
        for c in containers:
            r = (c.get("resources") or {}).get("requests") or {}
            out.append(
                (
                    round(1000 * node_fit.quantity(str(r.get("cpu", "0")))),
                    round(node_fit.quantity(str(r.get("memory", "0")))),
                )
            )
        return out

    inits = spec.get("initContainers") or []
    sidecars = of([c for c in inits if c.get("restartPolicy") == "Always"])
    plain = of([c for c in inits if c.get("restartPolicy") != "Always"])
    running = of(spec["containers"]) + sidecars
    return (
        max([sum(c for c, _ in running), *(c for c, _ in plain)]),
        max([sum(m for _, m in running), *(m for _, m in plain)]),
    )


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_node_daemonsets_fit_the_budget(stack: str) -> None:
    c = cluster(stack)
    on_gpu = [
        (str(o), _requests(spec)) for o in c.of_kind("DaemonSet") if (spec := pod_spec(o.doc)) and _tolerates_gpu(spec)
    ]
    assert any("dcgm-exporter" in name for name, _ in on_gpu), on_gpu  # the check saw the GPU agents
    cpu = sum(r[0] for _, r in on_gpu) + node_fit.EKS_ADDON_DAEMONSETS["cpu_millis"]
    memory = sum(r[1] for _, r in on_gpu) + node_fit.EKS_ADDON_DAEMONSETS["memory_bytes"]
    assert cpu <= node_fit.DAEMONSET_BUDGET["cpu_millis"], on_gpu
    assert memory <= node_fit.DAEMONSET_BUDGET["memory_bytes"], on_gpu


@pytest.mark.parametrize("stack", STACKS)
def test_triton_pods_ask_what_the_fit_check_counts(stack: str) -> None:
    config = parse(stack_config(stack), stack)
    pods = {o.name: pod_spec(o.doc) for o in cluster(stack).of_kind("Deployment") if o.namespace == "triton"}
    assert pods
    for d in config.triton_deployments:
        spec = pods[f"triton-{d.name}"]
        assert spec is not None
        counted = node_fit.replica_requests(d.cpu, d.memory, d.model_volume_gib)
        assert _requests(spec) == (counted.cpu_millis, counted.memory_bytes)
        triton = next(ct for ct in spec["containers"] if ct["name"] == "tritonserver")
        assert triton["resources"]["requests"]["ephemeral-storage"] == f"{counted.ephemeral_gib}Gi"
