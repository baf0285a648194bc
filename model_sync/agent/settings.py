"""What one agent process does: `AgentSettings`, the one place the agent's defaults are declared
(the CLI's option defaults are read from it), and the default staging directory and replica id."""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_sync.agent.exceptions import AgentError
from model_sync.contract import layout

_SECONDS = ("interval", "ready_timeout", "heartbeat", "backoff_max", "resync")


@dataclass(frozen=True)
class AgentSettings:
    """What one agent process does. Paths are local; `root` is the environment's bucket root.
    Every knob says its unit and default beside it; `__post_init__` rejects bad values (AgentError,
    LayoutError for names) with the field, the value and what is allowed."""

    root: layout.Root  # the environment's bucket root
    repository: Path  # the local Triton model repository root (Triton's --model-repository)
    # Scratch area on the SAME filesystem as `repository` and not inside it (renames must be
    # atomic; Triton takes any directory inside the root for a model); wiped at start.
    # Default (CLI): default_staging(repository), the sibling `.<repository name>.staging`.
    staging: Path
    deployment: str  # where this replica reports: status/<deployment>/<replica>.json (DNS names)
    replica: str
    env: str = "local"  # the environment's name, written into the status
    interval: float = 5.0  # seconds between passes (> 0)
    # Triton HTTP endpoint (http(s)://host:port) to confirm loads; None: place files only (the
    # init container, before Triton starts).
    triton_url: str | None = None
    # Seconds a new version may take to become READY before it is pinned back; the status keeps
    # being written every `heartbeat` while waiting, so it may exceed verify's staleness window.
    ready_timeout: float = 300.0
    models: tuple[str, ...] = ()  # serve only these models (empty: every model pinned in the bucket)
    heartbeat: float = (
        30.0  # seconds between status writes when nothing changed (verify's freshness window must be larger)
    )
    backoff_max: float = 60.0  # cap in seconds of the exponential backoff while S3 fails
    keep_versions: int = 2  # unpinned version directories kept per model for a quick local rollback (>= 0)
    # Seconds between full listings of repository/; between them a pass lists only the pin index
    # (manifests/_pins/, one object per model) and re-reads the pins whose entry changed.
    resync: float = 300.0
    triton_headers: tuple[tuple[str, str], ...] = ()  # headers sent to Triton (restricted model-repository API key)
    # A file that exists exactly while this replica serves every model it has in place (sidecar;
    # None: no file): Triton is live and each model with a local version is READY there. The
    # pod's readiness probe checks it (components/triton_deployment.py), because Triton 2.51's
    # own /v2/health/ready (strict readiness) stays not-ready after any failed load in poll mode,
    # even once the agent has removed or rolled it back.
    ready_file: Path | None = None

    def __post_init__(self) -> None:
        layout.status_key(self.deployment, self.replica)  # validates both names (LayoutError)
        for name in self.models:
            layout.check_model_name(name)
        for fname in _SECONDS:
            value = getattr(self, fname)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise AgentError(f"{fname}: {value!r}; allowed: a number of seconds > 0")
        if isinstance(self.keep_versions, bool) or not isinstance(self.keep_versions, int) or self.keep_versions < 0:
            raise AgentError(f"keep_versions: {self.keep_versions!r}; allowed: an integer >= 0")
        if self.triton_url is not None and not re.match(r"^https?://[^/\s]+$", self.triton_url):
            raise AgentError(f"triton_url: {self.triton_url!r}; allowed: http(s)://host:port without a path")
        repo, staging = self.repository.absolute(), self.staging.absolute()
        if staging == repo or repo in staging.parents:
            raise AgentError(
                f"staging: {str(self.staging)!r}; allowed: a directory outside the repository root {str(repo)!r} "
                "(Triton takes any directory inside it for a model)"
            )
        if staging in repo.parents:
            raise AgentError(
                f"staging: {str(self.staging)!r}; allowed: a directory that does not contain the repository root "
                f"{str(repo)!r} (it is wiped at start)"
            )


def defaults() -> dict[str, Any]:
    """Field name -> default of every AgentSettings field that has one (the CLI's option defaults)."""
    return {f.name: f.default for f in dataclasses.fields(AgentSettings) if f.default is not dataclasses.MISSING}


def default_staging(repository: Path) -> Path:
    """`<parent>/.<name>.staging`: beside the repository root, hence (normally) the same filesystem."""
    repository = repository.absolute()
    return repository.parent / f".{repository.name}.staging"


def default_replica_id() -> str:
    """$POD_NAME, else the hostname, lower-cased into a DNS-subdomain-safe id."""
    raw = os.environ.get("POD_NAME") or socket.gethostname()
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", raw.lower()).strip(".-")
    return cleaned[:253] or "replica"
