"""`model-sync verify NAME --env E --model-version N [--triton-url URL] [--grpc-url HOST:PORT]`

Passes when the bucket pins version N and every replica serving NAME (status/<deployment>/*.json,
written by the repository agents) that reported within --departed seconds reports N READY within
--staleness seconds with a passing smoke inference of N, run by its agent on the replica's
loopback (at least one such replica). Replicas silent for longer than --departed are listed as
departed, not failed (replaced pods). Needs only the bucket: runs from CI without cluster access.
With a Triton endpoint (--triton-url / --grpc-url, tritonUrl / grpcUrl of the environment)
verify also runs its own smoke inference over HTTP and/or gRPC; a protocol without an endpoint
is reported "not run", never "failed". Every attempt is recorded, never overwritten, at
audit/verifications/<NAME>/<N>/<stamp>-<hex>.json; `promote` requires the latest attempt made
while N was pinned to have passed (verifying an unpinned version cannot block or unblock it).

Exit codes: 0 passed; 6 (CHECK_FAILED) failed (recorded); 2 usage; 3 unknown model/version;
5 S3 unreachable / access denied.
"""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "verify"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="check every replica serves version N READY + smoke inference; record the result",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="NAME", help="model name")
    _common.add_env_options(p, image=False)
    p.add_argument(
        "--model-version",
        dest="version",
        metavar="N",
        type=int,
        required=True,
        help="the model version that must be served (the pinned one)",
    )
    p.add_argument(
        "--triton-url",
        default=None,
        help="Triton HTTP endpoint for the smoke inference (default: tritonUrl of the environment)",
    )
    p.add_argument(
        "--grpc-url",
        default=None,
        help=(
            "Triton gRPC endpoint HOST:PORT (default: grpcUrl of the environment, else the --triton-url host on port "
            "8001 when it uses 8000)"
        ),
    )
    p.add_argument(
        "--deployment",
        action="append",
        default=[],
        help="only replicas of this deployment (repeatable; default: every deployment serving NAME)",
    )
    p.add_argument(
        "--staleness",
        type=float,
        default=None,
        help="seconds a replica status may be old (default 120; agents report every 30 s)",
    )
    p.add_argument(
        "--departed",
        type=float,
        default=None,
        help=(
            "seconds after which a silent replica counts as gone (listed, not failing; default 300 = 10 x the "
            "agents' heartbeat; > --staleness)"
        ),
    )
    p.add_argument("--no-record", action="store_true", help="do not write the audit record (read-only check)")
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.observation import verify

    _common.check_names(args.model, version=args.version)
    doc, failure = verify.command(
        args.model, args.version, lambda: _common.resolve(args), triton_url=args.triton_url, grpc_url=args.grpc_url,
        deployments=tuple(args.deployment),
        staleness=args.staleness, departed=args.departed, record_attempt=not args.no_record, quiet=_common.quiet(args),
    )  # fmt: skip
    _common.emit(args, doc)
    if failure is not None:
        raise failure
    return errors.OK
