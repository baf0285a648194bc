"""`model-sync agent`: the repository agent (init container with --once, sidecar without).

    python -m model_sync agent --env prod --repository /models [--once] [--interval 5]
        [--triton-url http://127.0.0.1:8000] [--staging-dir /models-staging]
        [--deployment NAME] [--replica-id ID] [--model NAME ...] [--metrics-port 8003]

Every flag can also be set by the environment variable its help names (MODEL_SYNC_AGENT_<FLAG>;
a repeatable flag's variable is comma-separated); the flag wins over the variable, the variable
over the default. Exit codes. Loop mode (sidecar): 0 stopped cleanly (SIGTERM/SIGINT; the
replica's status object is deleted first); it never exits on S3 outages, access denied or other
errors (logged, recorded as last_error, counted in its metrics, retried with backoff). `--once`
(init container): 0 every pinned version that verified is placed, at least one model placed (or
nothing pinned yet); rejected versions are reported FAILED in the status and do not block the pod;
6 models are pinned but none could be placed; 5 S3 unreachable / access denied / no such bucket
for --max-failures passes in a row; 1 as many unclassified errors (e.g. ENOSPC); 2 bad usage.
The design: docs/agent.md in the triton-platform repository.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from model_sync import errors
from model_sync.agent.exceptions import AgentError
from model_sync.agent.settings import (
    OPTIONS,
    AgentSettings,
    Option,
    default_replica_id,
    default_staging,
    option_values,
)
from model_sync.commands import _common
from model_sync.contract import layout

NAME = "agent"
HELP = "keep a replica's local Triton repository in step with the bucket's pins (init container / sidecar)"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for o in OPTIONS:  # declared once, in model_sync.agent.settings; defaults resolved by options()
        p.add_argument(o.flag, **_argument(o))
    p.set_defaults(func=run)
    return p


def _argument(o: Option) -> dict[str, Any]:
    """argparse's keywords for `o`: every default is None, so that options() tells a flag given
    from one left out (then its environment variable, then its default, apply)."""
    if o.kind == "bool":
        return {"action": "store_const", "const": True, "default": None, "help": o.help_text()}
    kwargs: dict[str, Any] = {"default": None, "metavar": o.metavar, "help": o.help_text()}
    if o.choices:
        kwargs["choices"] = o.choices
    if o.kind == "list":
        kwargs["action"] = "append"
    elif o.kind in ("float", "int"):
        kwargs["type"] = float if o.kind == "float" else int
    elif o.kind == "path":
        kwargs["type"] = Path
    return kwargs


def options(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, Any]:
    """Every option's value (settings.option_values: the flag, else its environment variable, else
    its default); errors.usage for a variable that does not parse or a required option missing."""
    try:
        return option_values(vars(args), environ)
    except AgentError as e:
        raise errors.usage(str(e)) from None


def build_settings(args: argparse.Namespace, env: Any, environ: Mapping[str, str] | None = None) -> AgentSettings:
    """The AgentSettings of the parsed options and the environment variables (errors.usage for a bad value)."""
    v = options(args, os.environ if environ is None else environ)
    headers = []
    for item in v["triton_header"] or ():
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise errors.usage(f"--triton-header: {item!r}; allowed: NAME:VALUE")
        headers.append((name.strip(), value.strip()))
    repository = Path(v["repository"])
    try:
        return AgentSettings(
            root=env.root,
            repository=repository.absolute(),
            staging=Path(v["staging_dir"] or default_staging(repository)).absolute(),
            deployment=v["deployment"],
            replica=v["replica_id"] or default_replica_id(),
            env=env.name,
            interval=v["interval"],
            triton_url=v["triton_url"] or (None if v["once"] else env.triton_url),
            ready_timeout=v["ready_timeout"],
            models=tuple(v["model"] or ()),
            heartbeat=v["heartbeat"],
            backoff_max=v["backoff_max"],
            keep_versions=v["keep_versions"],
            resync=v["full_resync"],
            triton_headers=tuple(headers),
            ready_file=Path(v["ready_file"]).absolute() if v["ready_file"] else None,
            max_failures=v["max_failures"],
            metrics_port=v["metrics_port"],
            metrics_address=v["metrics_address"],
        )
    except (AgentError, layout.LayoutError) as e:
        raise errors.usage(str(e)) from None


def run(args: argparse.Namespace) -> int:
    from model_sync.agent import loop
    from model_sync.s3 import clients
    from model_sync.s3.bucket import Bucket

    v = options(args, os.environ)
    logging.basicConfig(
        level=v["log_level"], stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for dest in ("env", "config", "bucket", "endpoint_url", "region", "triton_url"):  # what _common.resolve reads
        setattr(args, dest, None if v[dest] is None else str(v[dest]))
    env = _common.resolve(args)
    settings = build_settings(args, env)
    try:
        return loop.command(settings, Bucket(env, clients.AGENT), once=bool(v["once"]))
    except AgentError as e:
        raise errors.usage(str(e)) from None
