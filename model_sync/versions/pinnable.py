"""The one check every command that pins a version runs before it writes anything: `rollback`,
`promote` (with or without --skip-verification) and the gray release (at its start and at its final
flip). A version no replica will serve is refused with exit code 4 (errors.REFUSED) and one line
naming the model, the version, what is wrong and what is allowed; docs/model-sync.md ("Exit codes").

The rule is the agent's own (model_sync.records.servable), plus what the agent finds only when it
downloads: every file the manifest lists present in the bucket with its size (catalog.is_complete)."""

from __future__ import annotations

from typing import Any

from model_sync import errors
from model_sync.contract import layout
from model_sync.records import servable
from model_sync.s3.bucket import Bucket
from model_sync.versions import catalog


def check(repo: Bucket, model: str, version: int, action: str, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest of `model` `version` in `repo` (`doc` when the caller read it already) once the
    version is one every replica serves under a pin of its own config; else exit 4. A missing
    manifest is exit 3, an invalid one exit 4 (catalog.read_manifest). `action` names the command."""
    if doc is None:
        doc = catalog.read_manifest(repo, model, version)
        assert doc is not None
    manifest = repo.uri(layout.manifest_key(model, version))
    problem = servable.unservable(doc, doc["config_pbtxt"], manifest, f"config_pbtxt of {manifest}")
    if problem is not None:
        what, allowed = problem.what, problem.allowed
    else:
        missing = catalog.is_complete(repo, model, version, doc)
        if missing is None:
            return doc
        what = f"{repo.uri(layout.version_prefix(model, version))} is incomplete ({missing})"
        allowed = "a version with every file its manifest lists, at its size"
    raise errors.refused(
        f"{action}: {model} version {version} in {repo.env.name}: {what}; allowed: {allowed}, which every replica "
        "serves (`model-sync status` lists the versions)"
    )
