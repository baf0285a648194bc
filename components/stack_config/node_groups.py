"""The node groups (`nodeGroups`): one system group and GPU groups, each read strictly from its declared fields.

A GPU group takes only GPU instance types of a known GPU count (components/gpu/gpu_instances.py)
and may scale to zero; the system group takes no GPU instance and keeps at least one node.
"""

from __future__ import annotations

from typing import Any

from components.gpu.gpu_instances import GPUS_PER_INSTANCE
from components.stack_config.declarations import NODE_GROUP_FIELDS, Field, fields_required
from components.stack_config.errors import ConfigError
from components.stack_config.gpu_sharing import read_gpu_sharing
from components.stack_config.model import NodeGroupConfig
from components.stack_config.readers import read_dns_label, read_list, read_mapping, read_yaml_mapping
from components.stack_config.vocabulary import (
    GPU_INSTANCE_FAMILIES,
    INSTANCE_TYPE,
    RESERVED_LABEL_PREFIXES,
    config_key,
)


def read_node_groups(value: Any) -> dict[str, NodeGroupConfig]:
    """`nodeGroups`: name -> group, exactly one of them the system group and at least one a GPU group."""
    key = config_key("nodeGroups")
    groups = {str(name): read_node_group(str(name), raw) for name, raw in read_yaml_mapping(key, value).items()}
    systems = [g.name for g in groups.values() if g.kind == "system"]
    if len(systems) != 1:
        raise ConfigError(key, systems, "must contain exactly one system group", "one group with kind: system")
    if not any(g.is_gpu for g in groups.values()):
        raise ConfigError(key, sorted(groups), "has no GPU group", "at least one group with kind: gpu")
    return groups


def read_node_group(name: str, raw: Any) -> NodeGroupConfig:
    """`nodeGroups.<name>`: its fields (NODE_GROUP_FIELDS of its kind), instance types and labels."""
    base = f"{config_key('nodeGroups')}.{name}"
    read_dns_label(f"{config_key('nodeGroups')}.<name>", name)
    m = read_mapping(base, raw, fields_required(NODE_GROUP_FIELDS["gpu"]))  # the same names for both kinds
    kind = _by_name("gpu")["kind"].read(base, m)
    fields = _by_name(kind)
    types = _instance_types(base, kind, m["instanceTypes"])
    ami = fields["amiType"].read(base, m)
    min_size = fields["minSize"].read(base, m)
    desired = fields["desiredSize"].read(base, m)
    max_size = fields["maxSize"].read(base, m)
    if not min_size <= desired <= max_size:
        raise ConfigError(
            f"{base}.desiredSize",
            {"minSize": min_size, "desiredSize": desired, "maxSize": max_size},
            "breaks minSize <= desiredSize <= maxSize",
            "sizes with minSize <= desiredSize <= maxSize",
        )
    labels = _labels(base, fields["labels"].read(base, m) or {})
    return NodeGroupConfig(
        name=name,
        kind=kind,
        instance_types=types,
        capacity_type=fields["capacityType"].read(base, m),
        ami_type=ami,
        min_size=min_size,
        desired_size=desired,
        max_size=max_size,
        disk_size_gib=fields["diskSizeGiB"].read(base, m),
        labels=labels,
        sharing=read_gpu_sharing(base, kind, m.get("gpuSharing"), ami, types),
    )


def _by_name(kind: str) -> dict[str, Field]:
    return {f.name: f for f in NODE_GROUP_FIELDS[kind]}


def is_gpu_family(instance_type: str) -> bool:
    """An EC2 instance type of one of GPU_INSTANCE_FAMILIES (`g6.xlarge`: yes; `m7i.large`: no)."""
    m = INSTANCE_TYPE.match(instance_type)
    return bool(m) and m.group(1) in GPU_INSTANCE_FAMILIES  # type: ignore[union-attr]


def _instance_types(base: str, kind: str, value: Any) -> tuple[str, ...]:
    """`<group>.instanceTypes`: EC2 instance types; GPU sizes with a known GPU count in a GPU group, none in
    the system group."""
    key = f"{base}.instanceTypes"
    types = read_list(key, value)
    if not types:
        raise ConfigError(key, types, "is empty", "at least one EC2 instance type")
    for t in types:
        if not isinstance(t, str) or not INSTANCE_TYPE.match(t):
            raise ConfigError(key, t, "is not an EC2 instance type", "names such as g5.xlarge")
        if kind == "gpu" and not is_gpu_family(t):
            raise ConfigError(key, t, "is not a GPU instance type", f"families {', '.join(GPU_INSTANCE_FAMILIES)}")
        if kind == "gpu" and t not in GPUS_PER_INSTANCE:
            raise ConfigError(
                key,
                t,
                "is not a GPU instance size with a known GPU count",
                "sizes listed in components/gpu/gpu_instances.py",
            )
        if kind == "system" and is_gpu_family(t):
            raise ConfigError(key, t, "is a GPU instance type in the system group", "non-GPU families such as m7i, c7i")
    return tuple(types)


def _labels(base: str, value: Any) -> tuple[tuple[str, str], ...]:
    """`<group>.labels`: string values under keys outside RESERVED_LABEL_PREFIXES, sorted."""
    if not isinstance(value, dict):
        raise ConfigError(f"{base}.labels", value, "is not a mapping", "a mapping of label key -> value")
    for k, v in value.items():
        if not isinstance(v, str) or k.startswith(RESERVED_LABEL_PREFIXES):
            raise ConfigError(
                f"{base}.labels.{k}",
                v,
                "is not allowed",
                "string values; keys outside the reserved triton-platform.io/ and kubernetes.io/ prefixes",
            )
    return tuple(sorted(value.items()))
