"""The Triton deployments (`tritonDeployments`): each read strictly from its declared fields, each model served once.

A deployment runs on a GPU node group of the stack; its replicas' sizes, autoscaling and
gray-release policy (`canary`, model_sync/contract/canary_policy.py) are its own. Whether its
group can hold it is a rule between the two keys (rules.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.gpu import node_fit
from components.stack_config.declarations import TRITON_FIELDS, TRITON_FIELDS_BY_NAME, fields_required
from components.stack_config.errors import ConfigError
from components.stack_config.model import NodeGroupConfig, TritonDeploymentConfig
from components.stack_config.readers import (
    read_dns_label,
    read_list,
    read_mapping,
    read_quantity,
    read_str,
    read_yaml_mapping,
)
from components.stack_config.vocabulary import config_key
from model_sync.contract import layout
from model_sync.contract.canary_policy import CanaryPolicy, CanaryPolicyError


def read_triton_deployments(value: Any, groups: Mapping[str, NodeGroupConfig]) -> tuple[TritonDeploymentConfig, ...]:
    """`tritonDeployments`: every deployment, each model in exactly one of them (the ingress routes
    /v2/models/<m> to one place)."""
    key = config_key("tritonDeployments")
    tritons = tuple(
        read_triton_deployment(str(name), raw, groups) for name, raw in read_yaml_mapping(key, value).items()
    )
    served_by: dict[str, str] = {}
    for t in tritons:
        for model in t.models:
            other = served_by.setdefault(model, t.name)
            if other != t.name:
                raise ConfigError(
                    f"{key}.{t.name}.models",
                    model,
                    f"is already served by deployment {other!r}",
                    "each model in one deployment (the ingress routes a model to one place)",
                )
    return tritons


def read_triton_deployment(name: str, raw: Any, groups: Mapping[str, NodeGroupConfig]) -> TritonDeploymentConfig:
    """`tritonDeployments.<name>`: its GPU node group, models, replicas and their sizes (TRITON_FIELDS)."""
    base = f"{config_key('tritonDeployments')}.{name}"
    read_dns_label(f"{config_key('tritonDeployments')}.<name>", name)
    m = read_mapping(base, raw, fields_required(TRITON_FIELDS))
    field = TRITON_FIELDS_BY_NAME
    gpu_groups = sorted(n for n, g in groups.items() if g.is_gpu)
    node_group = m["nodeGroup"]
    if node_group not in gpu_groups:
        raise ConfigError(
            f"{base}.nodeGroup",
            node_group,
            "is not a GPU node group of this stack",
            ", ".join(gpu_groups) or "(none defined)",
        )
    models = _models(f"{base}.models", m["models"])
    min_r = field["minReplicas"].read(base, m)
    max_r = field["maxReplicas"].read(base, m)
    if min_r > max_r:
        raise ConfigError(
            f"{base}.minReplicas",
            {"minReplicas": min_r, "maxReplicas": max_r},
            "exceeds maxReplicas",
            "minReplicas <= maxReplicas",
        )
    startup = field["startupTimeoutSeconds"].read(base, m)
    cpu, memory, shm = _container_sizes(base, m)
    return TritonDeploymentConfig(
        name=name,
        node_group=node_group,
        models=models,
        min_replicas=min_r,
        max_replicas=max_r,
        gpus_per_replica=field["gpusPerReplica"].read(base, m),
        cpu=cpu,
        memory=memory,
        model_volume_gib=field["modelVolumeGiB"].read(base, m),
        shm_size_gib=shm,
        queue_time_target_microseconds=field["queueTimeTargetMicroseconds"].read(base, m),
        scale_up_stabilization_seconds=field["scaleUpStabilizationSeconds"].read(base, m),
        scale_down_stabilization_seconds=field["scaleDownStabilizationSeconds"].read(base, m),
        startup_timeout_seconds=startup,
        termination_grace_period_seconds=field["terminationGracePeriodSeconds"].read(base, m),
        agent_interval_seconds=field["agentIntervalSeconds"].read(base, m),
        canary=read_canary(f"{base}.canary", m.get("canary")),
    )


def _models(key: str, value: Any) -> tuple[str, ...]:
    """`<deployment>.models`: model names model_sync accepts (model_sync.contract.layout), each once."""
    models = read_list(key, value)
    if not models:
        raise ConfigError(key, models, "is empty", "at least one model name")
    for model in models:
        read_str(
            key,
            model,
            layout.MODEL_NAME_RE,
            "model names of lowercase letters, digits, '_' and '-', at most 63 characters",
        )
    if len(set(models)) != len(models):
        raise ConfigError(key, models, "lists a model twice", "each model once")
    return tuple(models)


def _container_sizes(base: str, m: Mapping[str, Any]) -> tuple[str, str, int]:
    """The Triton container's cpu, memory and /dev/shm size: at least 500m and 1Gi, /dev/shm below the memory."""
    field = TRITON_FIELDS_BY_NAME
    cpu = read_quantity(f"{base}.cpu", field["cpu"].read(base, m))
    if node_fit.quantity(cpu) < 0.5:
        raise ConfigError(f"{base}.cpu", cpu, "is too little for tritonserver", "at least 500m")
    memory = read_quantity(f"{base}.memory", field["memory"].read(base, m))
    if node_fit.quantity(memory) < node_fit.GI:  # `16` would be 16 bytes
        raise ConfigError(
            f"{base}.memory",
            memory,
            "is less than 1Gi (a quantity without a unit counts bytes)",
            "at least 1Gi, such as 16Gi",
        )
    shm = field["shmSizeGiB"].read(base, m)
    if shm * node_fit.GI >= node_fit.quantity(memory):  # /dev/shm is memory charged to the Triton container
        raise ConfigError(
            f"{base}.shmSizeGiB",
            shm,
            f"is not below the container's memory ({memory}; /dev/shm is charged to it)",
            f"less than {base}.memory",
        )
    return cpu, memory, shm


def read_canary(key: str, value: Any) -> CanaryPolicy:
    """`tritonDeployments.<d>.canary`: a gray release's policy (model_sync/contract/canary_policy.py, the one
    place its keys, defaults and bounds are written); absent or empty takes the defaults. Its
    CanaryPolicyError (`<key path>: <value>; allowed: <what>`) becomes this package's one line."""
    try:
        return CanaryPolicy.from_mapping(value, where=key)
    except CanaryPolicyError as e:
        where, _, rest = str(e).partition(": ")
        shown, _, allowed = rest.partition("; allowed: ")
        name = where[len(key) + 1 :] if where.startswith(key + ".") else ""
        if not name:  # not a mapping at all
            raise ConfigError(key, value, "is not a mapping", allowed) from None
        if shown == "unknown key":
            raise ConfigError(where, value[name], "is an unknown key", allowed) from None
        # The value as written; a key left out (its default broke a cross-check) as the default.
        given = value.get(name, CanaryPolicy().to_mapping().get(name, shown))
        raise ConfigError(where, given, "is not allowed", allowed) from None
