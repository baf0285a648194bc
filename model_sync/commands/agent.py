"""`model-sync agent`: the repository agent (init container with --once, sidecar without).

    python -m model_sync agent --env prod --repository /models [--once] [--interval 5]
        [--triton-url http://127.0.0.1:8000] [--staging-dir /models-staging]
        [--deployment NAME] [--replica-id ID] [--model NAME ...]

Exit codes. Loop mode (sidecar): 0 stopped cleanly (SIGTERM/SIGINT; the
replica's status object is deleted first); it never exits on S3 outages, access denied or other
errors (logged, recorded as last_error, retried with backoff). `--once` (init container):
0 every pinned version that verified is placed, at least one model placed (or nothing pinned
yet); rejected versions are reported FAILED in the status and do not block the pod;
6 models are pinned but none could be placed; 5 S3 unreachable / access denied / no such
bucket for 5 attempts; 1 five unclassified errors (e.g. ENOSPC); 2 bad usage.
The design: docs/agent.md in the triton-platform repository.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from model_sync import errors
from model_sync.agent.exceptions import AgentError
from model_sync.agent.settings import AgentSettings, default_replica_id, default_staging, defaults
from model_sync.commands import _common
from model_sync.contract import layout

NAME = "agent"
HELP = "keep a replica's local Triton repository in step with the bucket's pins (init container / sidecar)"


def register(subparsers: Any) -> argparse.ArgumentParser:
    d = defaults()  # AgentSettings' defaults: declared once, there
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _common.add_env_options(p, image=False)
    p.add_argument(
        "--repository",
        required=True,
        type=Path,
        help="local Triton model repository root (tritonserver --model-repository)",
    )
    p.add_argument(
        "--staging-dir",
        type=Path,
        default=None,
        help="staging area on the same filesystem, outside the repository (default: <parent>/.<name>.staging)",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="one sync pass then exit (init container); Triton is not waited for unless --triton-url is given",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=float(os.environ.get("MODEL_SYNC_AGENT_INTERVAL", d["interval"])),
        help=f"seconds between passes (default {d['interval']:g})",
    )
    p.add_argument(
        "--triton-url", default=None, help="Triton HTTP endpoint to confirm loads, e.g. http://127.0.0.1:8000 (sidecar)"
    )
    p.add_argument(
        "--triton-header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="header sent to Triton (restricted model-repository API key), repeatable",
    )
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=d["ready_timeout"],
        help=(
            "seconds a new version may take to become READY before it is pinned back (default "
            f"{d['ready_timeout']:g}; the status is still written every --heartbeat meanwhile)"
        ),
    )
    p.add_argument(
        "--deployment",
        default=os.environ.get("MODEL_SYNC_DEPLOYMENT", "default"),
        help="deployment name in status/<deployment>/ (default $MODEL_SYNC_DEPLOYMENT or 'default')",
    )
    p.add_argument(
        "--replica-id",
        default=None,
        help="replica id in status/<deployment>/<replica>.json (default $POD_NAME, else the hostname)",
    )
    p.add_argument(
        "--model",
        dest="models",
        action="append",
        default=[],
        help="serve only this model (repeatable; default: every pinned model)",
    )
    p.add_argument(
        "--ready-file",
        type=Path,
        default=None,
        help=(
            "sidecar: a file that exists exactly while every placed model is READY in Triton (the pod's readiness "
            "probe checks it)"
        ),
    )
    p.add_argument(
        "--heartbeat",
        type=float,
        default=d["heartbeat"],
        help=f"seconds between status reports when nothing changes (default {d['heartbeat']:g})",
    )
    p.add_argument(
        "--backoff-max",
        type=float,
        default=d["backoff_max"],
        help=f"cap in seconds of the retry backoff while S3 is unreachable (default {d['backoff_max']:g})",
    )
    p.add_argument(
        "--full-resync",
        type=float,
        default=d["resync"],
        help=(
            f"seconds between full listings of repository/ (default {d['resync']:g}); between them a pass lists only "
            "the pin index"
        ),
    )
    p.add_argument(
        "--keep-versions",
        type=int,
        default=d["keep_versions"],
        help=f"unpinned versions kept locally per model for quick rollback (default {d['keep_versions']})",
    )
    p.add_argument(
        "--log-level",
        default=os.environ.get("MODEL_SYNC_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
    )
    p.set_defaults(func=run)
    return p


def build_settings(args: argparse.Namespace, env: Any) -> AgentSettings:
    """The AgentSettings of the parsed options (errors.usage for a bad value)."""
    headers = []
    for item in args.triton_header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise errors.usage(f"--triton-header: {item!r}; allowed: NAME:VALUE")
        headers.append((name.strip(), value.strip()))
    try:
        return AgentSettings(
            root=env.root,
            repository=args.repository.absolute(),
            staging=(args.staging_dir or default_staging(args.repository)).absolute(),
            deployment=args.deployment,
            replica=args.replica_id or default_replica_id(),
            env=env.name,
            interval=args.interval,
            triton_url=args.triton_url or (None if args.once else env.triton_url),
            ready_timeout=args.ready_timeout,
            models=tuple(args.models),
            heartbeat=args.heartbeat,
            backoff_max=args.backoff_max,
            keep_versions=args.keep_versions,
            resync=args.full_resync,
            triton_headers=tuple(headers),
            ready_file=args.ready_file.absolute() if args.ready_file else None,
        )
    except (AgentError, layout.LayoutError) as e:
        raise errors.usage(str(e)) from None


def run(args: argparse.Namespace) -> int:
    from model_sync.agent import loop
    from model_sync.s3 import clients
    from model_sync.s3.bucket import Bucket

    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    env = _common.resolve(args)
    settings = build_settings(args, env)
    try:
        return loop.command(settings, Bucket(env, clients.AGENT), once=args.once)
    except AgentError as e:
        raise errors.usage(str(e)) from None
