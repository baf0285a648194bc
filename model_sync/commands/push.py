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

GPU memory planning: where the environment names its deployments' GPUs (`tritonGpus`), a version
that would overcommit its deployment's GPU (the server process' CUDA context, plus instances x GPU
memory per instance from export.json and a per-instance allowance, over 90 % of one GPU) is refused with exit code 7 before
anything is written; otherwise one line says how much it plans, or why it was not checked.
"""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "push"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="publish a model directory as a new version and pin it", description=__doc__
    )
    p.add_argument(
        "model_dir",
        metavar="MODEL_DIR",
        help="Triton model directory (config.pbtxt + one <N>/), or a directory of them",
    )
    _common.add_env_options(p)
    p.add_argument("--name", default=None, help="model name in the repository (default: the directory name)")
    p.add_argument(
        "--dry-run", action="store_true", help="print `(dryrun) upload: <local> to s3://...` lines; write nothing"
    )
    p.add_argument("--concurrency", type=int, default=16, help="parallel S3 requests (default 16)")
    p.add_argument(
        "--multipart-threshold-mb", type=int, default=16, help="files at least this big upload in parts (default 16)"
    )
    _common.add_allow_version_skew(p)
    _common.add_allow_local_target(p)
    p.add_argument(
        "--no-cache", action="store_true", help="ignore the local hash and pin caches (also MODEL_SYNC_CACHE=off)"
    )
    _common.add_wait(p)
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.push import publish
    from model_sync.push.push_options import cli_options

    options = cli_options(
        concurrency=args.concurrency, multipart_threshold_mb=args.multipart_threshold_mb, dry_run=args.dry_run,
        allow_version_skew=args.allow_version_skew, use_cache=not args.no_cache,
        allow_local_target=args.allow_local_target,
    )  # fmt: skip
    wait = (
        (lambda repo, model, version, console: _common.wait(args, repo, model, version, console)) if args.wait else None
    )
    doc, failure = publish.command(
        args.model_dir, args.name, lambda: _common.resolve(args), options, quiet=_common.quiet(args), wait=wait
    )
    _common.emit(args, doc)
    if failure is not None:
        raise failure
    return errors.OK
