"""`model-sync push MODEL_DIR --env E [--name NAME] [--dry-run]`: publish a model directory (or a
repository directory of them) as a new immutable version and pin it.

A model identical to the pinned version (same files and sha256s, same config) is a no-op that
says `up to date`. Files identical to the pinned version are copied server-side, not re-uploaded.

Version alignment: a pytorch_libtorch model exported with a newer torch than the LibTorch in
the environment's Triton image (`tritonImage`) is refused with exit code 7 before anything is
written; python-backend models are exempt. --allow-version-skew overrides (recorded in the
manifest's `compatibility`). A model exported with `--target local` (python backend running
torch.jit.load) is refused the same way (exit 7) for an NGC tritonserver image, whose python
backend has no torch, unless --allow-local-target (recorded); an environment without
`tritonImage` (the local demo) accepts it.
"""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "push"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help="publish a model directory as a new version and pin it", description=__doc__)
    p.add_argument("model_dir", metavar="MODEL_DIR", help="Triton model directory (config.pbtxt + one <N>/), or a directory of them")
    _common.add_env_options(p)
    p.add_argument("--name", default=None, help="model name in the repository (default: the directory name)")
    p.add_argument("--dry-run", action="store_true", help="print `(dryrun) upload: <local> to s3://...` lines; write nothing")
    p.add_argument("--concurrency", type=int, default=16, help="parallel S3 requests (default 16)")
    p.add_argument("--multipart-threshold-mb", type=int, default=16, help="files at least this big upload in parts (default 16)")
    _common.add_allow_version_skew(p)
    _common.add_allow_local_target(p)
    p.add_argument("--no-cache", action="store_true", help="ignore the local hash and pin caches (also MODEL_SYNC_CACHE=off)")
    _common.add_wait(p)
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync import cache, localmodel, publish, s3client
    from model_sync.s3 import Repo, who
    from model_sync.ui import Console, error

    if not 1 <= args.concurrency <= publish.MAX_CONCURRENCY:
        raise errors.usage(f"--concurrency: {args.concurrency}; allowed: 1..{publish.MAX_CONCURRENCY}")
    if not 5 <= args.multipart_threshold_mb <= 5120:
        raise errors.usage(f"--multipart-threshold-mb: {args.multipart_threshold_mb}; allowed: 5..5120 (S3 parts are at least 5 MiB)")
    configs = cache.ConfigCache(None if args.no_cache else cache.cache_dir())  # parsed config.pbtxt facts (model_sync/cache.py)
    models = localmodel.discover(args.model_dir, args.name, configs)
    env = _common.resolve(args)
    publish.check_alignment(models, env, args.allow_version_skew, args.allow_local_target)  # refuse before creating a client
    # connections: file transfers (--concurrency) + the small requests of concurrent models
    repo = Repo(env, s3client.CLI.pooled(args.concurrency + publish.PushOptions.model_workers + 4))
    size = args.multipart_threshold_mb * publish.MB
    options = publish.PushOptions(
        dry_run=args.dry_run, concurrency=args.concurrency, multipart_threshold=size, multipart_chunksize=size,
        allow_version_skew=args.allow_version_skew, use_cache=not args.no_cache, allow_local_target=args.allow_local_target,
    )  # fmt: skip
    console = Console(quiet=_common.quiet(args))
    try:
        results = publish.push(repo, models, console, options, lambda: who(env, repo.session))
    finally:
        configs.save()
    doc: dict[str, Any] = {"env": env.name, "models": [{"model": r.model, "action": r.action, "version": r.version, "error": str(r.error) if r.error else None} for r in results]}
    # One line per distinct error (models failing alike while a run-wide failure was found share
    # its message); the models that failure kept from starting are named on the last line.
    failed = list({str(r.error): r for r in results if r.error is not None and r.action == "failed"}.values())
    skipped = [r.model for r in results if r.action == "skipped"]
    for r in failed[:-1]:
        error(f"{r.model}: {r.error}")
    if failed:
        last = failed[-1]
        note = f" ({len(skipped)} more not started: {', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''})" if skipped else ""
        _common.emit(args, doc)
        raise errors.SyncError(min(r.error.code for r in failed if r.error), (f"{last.model}: {last.error}" if len(models) > 1 else str(last.error)) + note)
    if args.wait and not args.dry_run:
        doc["served"] = {r.model: _common.wait(args, repo, r.model, r.version, console) for r in results if r.version is not None}
    _common.emit(args, doc)
    return errors.OK
