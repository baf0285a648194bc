"""The repository agent: keeps a replica's LOCAL Triton model repository in step with the pins in
its environment's bucket. Runs as the init container (`--once`) and as the sidecar. The pass and
its guarantees: docs/architecture.md#the-agents-pass; the operator's side: docs/agent.md.

One module per concern: settings (AgentSettings, the defaults, and OPTIONS, the command line),
exceptions, state (ModelState and its one transition), pins, bucket, staging, pod_disk, triton,
loads, replica_record, metrics (its own /metrics), and loop (RepositoryAgent). The names below are re-exported, loaded on first use: the CLI reads the
settings' defaults when it builds its parser without importing the S3 layer or the records."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from model_sync.contract.layout import AGENT_COMMAND as AGENT_COMMAND

if TYPE_CHECKING:  # the same names as _EXPORTS, for the type checker
    from model_sync.agent.bucket import AGENT_TRANSFER as AGENT_TRANSFER
    from model_sync.agent.bucket import CHANGED as CHANGED
    from model_sync.agent.bucket import DENIED_KINDS as DENIED_KINDS
    from model_sync.agent.bucket import AgentBucket as AgentBucket
    from model_sync.agent.exceptions import AgentError as AgentError
    from model_sync.agent.exceptions import PassError as PassError
    from model_sync.agent.exceptions import S3AccessDenied as S3AccessDenied
    from model_sync.agent.exceptions import S3Unavailable as S3Unavailable
    from model_sync.agent.exceptions import VersionRejected as VersionRejected
    from model_sync.agent.loads import Load as Load
    from model_sync.agent.loads import Loads as Loads
    from model_sync.agent.loop import RepositoryAgent as RepositoryAgent
    from model_sync.agent.loop import backoff_delay as backoff_delay
    from model_sync.agent.loop import command as command
    from model_sync.agent.pins import backend_files as backend_files
    from model_sync.agent.pins import pinned_versions as pinned_versions
    from model_sync.agent.pod_disk import PodDisk as PodDisk
    from model_sync.agent.pod_disk import atomic_write as atomic_write
    from model_sync.agent.pod_disk import local_versions as local_versions
    from model_sync.agent.pod_disk import precompile_python as _precompile_python  # noqa: F401
    from model_sync.agent.pod_disk import read_local_pin as read_local_pin
    from model_sync.agent.replica_record import STATUS_SCHEMA as STATUS_SCHEMA
    from model_sync.agent.replica_record import ReadyFile as ReadyFile
    from model_sync.agent.replica_record import StatusReport as StatusReport
    from model_sync.agent.settings import AgentSettings as AgentSettings
    from model_sync.agent.settings import default_replica_id as default_replica_id
    from model_sync.agent.settings import default_staging as default_staging
    from model_sync.agent.state import ModelState as ModelState
    from model_sync.agent.triton import TritonProbe as TritonProbe
    from model_sync.records.codec import ReplicaState

    READY, LOADING, FAILED, PLACED, PENDING = (
        ReplicaState.READY,
        ReplicaState.LOADING,
        ReplicaState.FAILED,
        ReplicaState.PLACED,
        ReplicaState.PENDING,
    )

# name -> (module, attribute)
_EXPORTS: dict[str, tuple[str, str]] = {
    **{n: ("bucket", n) for n in ("AGENT_TRANSFER", "CHANGED", "DENIED_KINDS", "AgentBucket")},
    **{n: ("exceptions", n) for n in ("AgentError", "PassError", "S3AccessDenied", "S3Unavailable", "VersionRejected")},
    **{n: ("loads", n) for n in ("Load", "Loads")},
    **{n: ("pod_disk", n) for n in ("PodDisk", "atomic_write", "local_versions", "read_local_pin")},
    "_precompile_python": ("pod_disk", "precompile_python"),
    **{n: ("loop", n) for n in ("RepositoryAgent", "backoff_delay", "command")},
    **{n: ("pins", n) for n in ("backend_files", "pinned_versions")},
    **{n: ("settings", n) for n in ("AgentSettings", "default_replica_id", "default_staging")},
    "ModelState": ("state", "ModelState"),
    **{n: ("replica_record", n) for n in ("STATUS_SCHEMA", "ReadyFile", "StatusReport")},
    "TritonProbe": ("triton", "TritonProbe"),
}
_STATES = ("READY", "LOADING", "FAILED", "PLACED", "PENDING")  # model_sync.records.codec.ReplicaState members


def __getattr__(name: str) -> Any:
    if name in _STATES:
        from model_sync.records.codec import ReplicaState

        return ReplicaState[name]
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value
