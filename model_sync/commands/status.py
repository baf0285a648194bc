"""`model-sync status [--env E] [NAME ...] [--output table|json]`: per model, the pinned version,
what each replica serves (from its agent's status report: version, state and the one-line reason
of a failed load; a pin no replica serves READY is flagged PIN NOT SERVED), the available versions (complete =
manifest + every file), the previous pin, provenance (who/when
published or promoted it, from where) and whether it was verified; per version, the torch that
exported it and whether each shown environment's Triton image can load it (version alignment:
yes / NO / exempt for python-backend models / ? when the torch version or
the image is unknown); per Triton deployment of the environment's `tritonGpus`, the GPU memory its
pinned versions plan on one GPU against what the card allows (or that the environment does not
know its GPUs). Without --env: every environment in model-sync.yaml."""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "status"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="show pinned and available versions and their provenance", description=__doc__
    )
    p.add_argument("models", metavar="NAME", nargs="*", help="models to show (default: all)")
    _common.add_env_options(p, required=False)
    p.add_argument("--output", choices=("table", "json"), default="table", help="table (default) or json")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.observation import status

    _common.check_names(*args.models)
    status.command(args.env, args.config, args.models, lambda name: _common.resolve(args, name), args.output)
    return errors.OK
