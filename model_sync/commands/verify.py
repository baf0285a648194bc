"""`model-sync verify NAME --env E --version N [--triton-url URL] [--grpc-url HOST:PORT]`

Passes when the bucket pins version N, every replica serving NAME (status/<deployment>/*.json,
written by the repository agents) reports N READY within --staleness seconds, and a smoke
inference over HTTP and gRPC returns the declared output shapes and dtypes. The result is
recorded at audit/verifications/<NAME>/<N>.json; `promote` requires it to have passed.

Exit codes: 0 passed; 6 (CHECK_FAILED) failed (recorded); 2 usage; 3 unknown model/version;
5 S3 unreachable / access denied.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from model_sync import errors, layout
from model_sync.commands import _common

NAME = "verify"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="check every replica serves version N READY + smoke inference; record the result", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="NAME", help="model name")
    _common.add_env_options(p)
    p.add_argument("--version", type=int, required=True, help="the version that must be served (the pinned one)")
    p.add_argument("--triton-url", default=None, help="Triton HTTP endpoint for the smoke inference (default: tritonUrl of the environment)")
    p.add_argument("--grpc-url", default=None, help="Triton gRPC endpoint HOST:PORT (default: the --triton-url host on port 8001 when it uses 8000)")
    p.add_argument("--deployment", action="append", default=[], help="only replicas of this deployment (repeatable; default: every deployment serving NAME)")
    p.add_argument("--staleness", type=float, default=None, help="seconds a replica status may be old (default 120)")
    p.add_argument("--no-record", action="store_true", help="do not write the audit record (read-only check)")
    p.set_defaults(func=run)
    return p


def default_grpc_url(http_url: str | None) -> str | None:
    m = re.match(r"^https?://([^/:]+):8000/?$", http_url or "")
    return f"{m.group(1)}:8001" if m else None


def run(args: argparse.Namespace) -> int:
    from model_sync import s3, verify
    from model_sync.s3 import Repo
    from model_sync.ui import Console

    try:
        layout.check_model_name(args.model)
        layout.check_version(args.version)
    except layout.LayoutError as e:
        raise errors.usage(str(e)) from None
    staleness = verify.DEFAULT_STALENESS if args.staleness is None else args.staleness
    if staleness <= 0:
        raise errors.usage(f"--staleness: {args.staleness!r}; allowed: seconds > 0")
    env = _common.resolve(args)
    http_url = args.triton_url or env.triton_url
    grpc_url = args.grpc_url or default_grpc_url(http_url)
    repo = Repo(env)
    console = Console()
    result = verify.verify(repo, args.model, args.version, http_url, grpc_url, staleness=staleness, deployments=tuple(args.deployment))
    if result.manifest_sha256 is None:
        raise errors.not_found(result.problems[0])
    if grpc_url is None:
        result.problems.append("smoke inference (grpc): no endpoint; allowed: --grpc-url HOST:PORT")
        result.smoke_inference = False
    for replica, state in result.replicas.items():
        console.line(f"replica {replica}: {state}")
    key = None if args.no_record else verify.record(repo, result, s3.who(env))
    if result.passed:
        console.line(f"verified: {args.model} version {args.version} in {env.name}: {len(result.replicas)} replica(s) READY, smoke inference http+grpc ok" + (f" (recorded {repo.uri(key)})" if key else ""))
        return errors.OK
    raise errors.SyncError(errors.CHECK_FAILED, f"verify {args.model} {args.version} in {env.name}: {result.problems[0]}" + (f" (+{len(result.problems) - 1} more, recorded {repo.uri(key)})" if key else ""))
