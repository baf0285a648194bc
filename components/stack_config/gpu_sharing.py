"""A GPU node group's `gpuSharing`: read strictly, then held to what the group's AMI and GPUs can apply
(the modes, bounds and MIG profiles live in components/gpu/gpu_sharing.py)."""

from __future__ import annotations

from typing import Any

from components.gpu.gpu_instances import gpus_of
from components.gpu.gpu_sharing import MIG_PROFILES, MODES, REPLICA_BOUNDS, GpuSharing, refusal
from components.stack_config.errors import ConfigError
from components.stack_config.readers import read_choice, read_int, read_mapping

SHARING_FIELDS = {"mode": True, "replicas": False, "migProfile": False}


def read_gpu_sharing(base: str, kind: str, value: Any, ami_type: str, instance_types: tuple[str, ...]) -> GpuSharing:
    """`<group>.gpuSharing` (absent: whole GPUs): mode, with `replicas` for time-slicing and mps or
    `migProfile` for mig, that the group's AMI and every instance type's GPU can apply."""
    key = f"{base}.gpuSharing"
    if value is None:
        return GpuSharing()
    if kind != "gpu":
        raise ConfigError(key, value, "is set on a system group", "gpuSharing on groups of kind gpu only")
    m = read_mapping(key, value, SHARING_FIELDS)
    mode = read_choice(f"{key}.mode", m["mode"], MODES)
    if mode in REPLICA_BOUNDS:
        if "replicas" not in m:
            raise ConfigError(f"{key}.replicas", None, "is missing", f"replicas per GPU with mode {mode}")
        replicas = read_int(f"{key}.replicas", m["replicas"], *REPLICA_BOUNDS[mode])
    elif "replicas" in m:
        raise ConfigError(f"{key}.replicas", m["replicas"], f"is set with mode {mode}", "replicas with mode "
                          + " or ".join(REPLICA_BOUNDS))  # fmt: skip
    else:
        replicas = 1
    profile = m.get("migProfile")
    if mode == "mig" and not isinstance(profile, str):
        offered = sorted({p for profiles in MIG_PROFILES.values() for p in profiles})
        raise ConfigError(f"{key}.migProfile", profile, "is not a MIG profile name", ", ".join(offered))
    if mode != "mig" and profile is not None:
        raise ConfigError(f"{key}.migProfile", profile, f"is set with mode {mode}", "migProfile with mode mig")
    sharing = GpuSharing(mode, replicas, profile or "")
    bad = refusal(sharing, ami_type, gpus_of(instance_types))
    if bad is not None:
        field, why, allowed = bad
        raise ConfigError(
            f"{key}.{field}", getattr(sharing, "mig_profile" if field == "migProfile" else field), why, allowed
        )
    return sharing
