"""`model-sync plan --profiles FILE --gpu-memory-gib N [--gpu-hour-usd PRICE] [...] --demand FILE
[--min-replicas N] [--output text|json]`

Proposes Triton deployments for a set of models: which models share a GPU, how many instances of each
a replica runs, and how many replicas (one GPU each), with each GPU's predicted busy share and planned
memory against what it allows, and with --gpu-hour-usd its monthly on-demand cost (every planned GPU on
for 730 hours). From each model's serving profile measured alone on one instance
(--profiles: the GPU benchmark's model-profiles.json, bench.consolidation.profile) and the demand
(--demand, YAML: `models: {NAME: {rate: <peak requests a second>, p99Ms: <target>}}`), for the GPU the
profiles were measured on (--gpu-memory-gib: its memory). With profiles of several GPU kinds (--profiles,
--gpu-memory-gib and --gpu-hour-usd once per kind, in the same order), each kind is planned and the plan
kept is the cheapest a month (the fewest GPUs without prices); every kind weighed is listed. Profiles of
one GPU given more than once are draws of it: each model's lowest capacity of them is planned. Reads and
writes nothing else.

Exit codes: 0 planned; 2 usage (a file or value not allowed, a model without a profile); 4 refused (a
model whose target no measured step met, or whose instances outgrow one GPU's memory, on every GPU kind).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "plan"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="propose deployments (models per GPU, instances, replicas) from measured profiles and demand",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--profiles", type=Path, required=True, action="append", metavar="FILE",
                   help="model-profiles.json of one GPU kind (once per kind, or per draw of a kind)")  # fmt: skip
    p.add_argument("--demand", type=Path, required=True, metavar="FILE", help="YAML: models: {NAME: {rate, p99Ms}}")
    p.add_argument("--gpu-memory-gib", type=float, required=True, action="append", metavar="N",
                   help="memory of the profiles' GPU (once per --profiles)")  # fmt: skip
    p.add_argument("--min-replicas", type=int, default=1, metavar="N", help="replicas of each deployment (default 1)")
    p.add_argument("--gpu-hour-usd", type=float, action="append", default=[], metavar="PRICE",
                   help="on-demand price of one GPU-hour in your region: the plan's monthly cost (once per "
                        "--profiles, or never)")  # fmt: skip
    _common.add_output(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.planning import document

    document.command(args.profiles, args.demand, args.gpu_memory_gib, args.min_replicas, args.gpu_hour_usd, args.output)
    return errors.OK
