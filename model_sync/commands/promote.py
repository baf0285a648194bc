"""`model-sync promote NAME --model-version N --from staging --to prod [--skip-verification] [--dry-run]`:
copy a verified version pinned in the source environment into the target and pin it there; to prod,
through a gray release (`model-sync canary`) unless --no-canary.
The target keeps number N when it is free there, else gets the next one.
A pytorch_libtorch version the TARGET's Triton image cannot load (its exporting torch is newer
than the image's LibTorch) is refused with exit code 7, unless --allow-version-skew (recorded); so is
a `--target local` version for an NGC tritonserver image, unless --allow-local-target (recorded);
and so is a version that would overcommit its deployment's GPU in the target (`tritonGpus`: GPU
memory planning, docs/model-sync.md)."""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "promote"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="copy a verified version from one environment to another and pin it", description=__doc__
    )
    p.add_argument("model", metavar="NAME")
    p.add_argument(
        "--model-version",
        dest="version",
        metavar="N",
        type=int,
        required=True,
        help="the model version pinned (and verified) in the source environment",
    )
    p.add_argument("--from", dest="source", required=True, metavar="ENV", help="source environment (e.g. staging)")
    p.add_argument("--to", dest="target", required=True, metavar="ENV", help="target environment (e.g. prod)")
    p.add_argument(
        "--skip-verification",
        action="store_true",
        help="promote without a passing verify record (recorded in the provenance)",
    )
    p.add_argument(
        "--config", default=None, help="model-sync.yaml path (default: $MODEL_SYNC_CONFIG, then ./model-sync.yaml)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the copies and the pin flip; write nothing")
    p.add_argument("--canary", action=argparse.BooleanOptionalAction, default=None,
                   help="promote through a gray release (model-sync canary) in the target: the default for prod; "
                        "--no-canary pins at once (recorded in the provenance)")  # fmt: skip
    _common.add_allow_version_skew(p)
    _common.add_allow_local_target(p)
    _common.add_wait(p)
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.lifecycle import promote

    _common.check_names(args.model, version=args.version)
    doc = promote.command(
        args.model, args.version, args.source, args.target, args.config, skip_verification=args.skip_verification,
        dry_run=args.dry_run,
        allow_version_skew=args.allow_version_skew, allow_local_target=args.allow_local_target,
        quiet=_common.quiet(args), canary=args.canary,
        wait=lambda repo, model, version, console: _common.wait(args, repo, model, version, console),
    )  # fmt: skip
    _common.emit(args, doc)
    return errors.OK
