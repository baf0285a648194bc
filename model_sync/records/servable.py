"""What makes a published version one a replica serves: the rule the repository agent applies to a
pinned version's manifest before it downloads anything (model_sync.agent.bucket), and that every
command that pins a version applies before it writes (model_sync.versions.pinnable). One rule, so
that no command pins a version every agent refuses: the replicas would keep serving the old one
while the command reported success.

A version is servable under a pin when the pin's config parses, a pin of exactly one version names
the manifest's own version with the manifest's own config text (`config_pbtxt`), and the manifest
lists every file the pin's backend needs (model_config.required_files: model.py for the python
backend, model.pt for libtorch, ...)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class Reason(enum.StrEnum):
    """Why a version is not servable (bounded: the agent's metrics label rejections with it)."""

    PIN_INVALID = "pin_invalid"  # the pin's config.pbtxt does not parse
    CONFIG_MISMATCH = "config_mismatch"  # the pin is not the manifest's own config, or names another version
    BACKEND_FILES_MISSING = "backend_files_missing"  # the manifest lacks a file the backend loads


@dataclass(frozen=True)
class Unservable:
    """One reason a version is not servable: `what` is wrong, `allowed` says what would be."""

    reason: Reason
    what: str
    allowed: str

    def __str__(self) -> str:
        return f"{self.what}; allowed: {self.allowed}"


def unservable(doc: Mapping[str, Any], pin_text: str, manifest: str, pin: str) -> Unservable | None:
    """None when a replica's agent places the version of manifest `doc` (read strictly) under the
    pin `pin_text`; else why not. `manifest` and `pin` name the two objects in the messages."""

    from model_sync.triton_model import model_config  # protobuf's text_format: loaded only when a config is parsed

    try:
        cfg = model_config.parse(pin_text, pin)
    except model_config.ConfigPbtxtError as e:
        return Unservable(Reason.PIN_INVALID, str(e), "a config.pbtxt Triton parses")
    versions = list(cfg.version_policy.specific.versions)
    if len(versions) == 1 and (versions[0] != doc["version"] or doc["config_pbtxt"] != pin_text):
        return Unservable(
            Reason.CONFIG_MISMATCH,
            f"pin {pin}: differs from manifest config_pbtxt (pins version(s) {versions}, manifest version "
            f"{doc['version']})",
            f"the config text recorded in {manifest}",
        )
    missing = [f for f in model_config.required_files(cfg) if f not in doc["files"]]
    if missing:
        # tritonserver 2.51 would stay LOADING on it, and its repository poller with it.
        return Unservable(
            Reason.BACKEND_FILES_MISSING,
            f"manifest {manifest}: lists no {', '.join(missing)}",
            "a version with every file its backend needs (model_config.required_files)",
        )
    return None
