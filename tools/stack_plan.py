"""Write a `model-sync plan` into a stack file's `tritonDeployments`, checked by the stack's own parser.

    python -m tools.stack_plan --plan PLAN.json --stack-file stacks/Pulumi.<stack>.yaml --node-group GROUP [--dry-run]

The plan (`model-sync plan --output json`, model_sync/planning/document.py) names its deployments, their
models and the replicas its peak rates need, for the GPU its profiles were measured on, one whole GPU a
replica. Each planned deployment is written on node group GROUP with `minReplicas` the plan's
--min-replicas and `maxReplicas` its replicas; a deployment of the same name keeps its other fields (sizes,
timeouts, canary), one GPU a replica. The stack's other deployments keep serving the models the plan
does not place; one left with none is dropped. Only the `tritonDeployments` block is rewritten (the
comments inside it with it); every other byte of the file stays.

The result is parsed as `pulumi up` would parse it (components/stack_config: every declaration and rule)
before the file is replaced, atomically; a refusal writes nothing and is one line, exit 2: a node group
whose GPU is not the plan's (or is shared), a planned deployment that would keep an unplanned model, or
whatever the parser refuses (a group too small for the replicas, ...). --dry-run prints the change as a
unified diff and writes nothing. The models' instance counts live in their Triton configs, not the stack:
they are printed, as the `model-sync export --instance-count` each needs.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from components.gpu.gpu_instances import guaranteed_gpu
from components.stack_config.errors import ConfigError
from components.stack_config.loading import read_stack_file
from components.stack_config.parser import parse
from components.stack_config.vocabulary import config_key
from model_sync import errors
from model_sync.planning.document import Plan, read_plan

KEY = config_key("tritonDeployments")
PLANNED_FIELDS = ("nodeGroup", "models", "minReplicas", "maxReplicas")  # what the plan decides; the rest is kept


class Refused(Exception):
    """One line: what was refused, why, what is allowed."""


def deployments(plan: Plan, current: dict[str, Any], node_group: str) -> dict[str, Any]:
    """The new `tritonDeployments`: the stack's others with their unplanned models, then the plan's."""
    planned = {m for d in plan.deployments for m in d.instances}
    names = {d.name for d in plan.deployments}
    out: dict[str, Any] = {}
    for name, body in current.items():
        kept = [m for m in body.get("models", []) if m not in planned]
        if name in names and kept:
            raise Refused(f"{KEY}.{name} serves {', '.join(kept)}, which the plan does not place, under a planned "
                          "deployment's name; allowed: a demand that names them, or another name for that deployment")  # fmt: skip
        if kept and name not in names:
            out[name] = {**body, "models": kept}
    for d in plan.deployments:
        rest = {k: v for k, v in current.get(d.name, {}).items() if k not in (*PLANNED_FIELDS, "gpusPerReplica")}
        out[d.name] = {"nodeGroup": node_group, "models": list(d.instances), "minReplicas": plan.min_replicas,
                       "maxReplicas": d.replicas, **rest}  # fmt: skip
    return out


def splice(text: str, old: dict[str, Any], new: dict[str, Any]) -> str:
    """`text` with KEY's block (its line and every deeper-indented or blank line after it) holding `new`:
    a deployment whose value is unchanged keeps its lines (comments too); the others are dumped at the
    block's indent. Every line outside the block stays."""
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if re.match(rf"\s*{re.escape(KEY)}:", line)), None)
    if at is None:
        raise Refused(f"{KEY}: not in the stack file; allowed: a stack file that declares it (every stack does)")
    end = at + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > _indent(lines[at])):
        end += 1
    while end > at + 1 and not lines[end - 1].strip():  # blank lines before the next key stay with it
        end -= 1
    kept = _entries(lines[at + 1 : end])
    child = " " * (_indent(lines[at]) + 2)
    block = [lines[at].rstrip() + "\n" if lines[at].rstrip().endswith(":") else f"{lines[at].split(':', 2)[0]}:\n"]
    for name, value in new.items():
        if name in kept and old.get(name) == value:
            block.extend(kept[name])
            continue
        dumped = yaml.safe_dump({name: value}, sort_keys=False, default_flow_style=None, width=120)
        block.extend(child + line for line in dumped.splitlines(keepends=True))
    return "".join([*lines[:at], *block, *lines[end:]])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _entries(body: list[str]) -> dict[str, list[str]]:
    """The block's lines per deployment, from its name's line (with the comment lines just above it) to the next."""
    heads = [i for i, line in enumerate(body) if re.match(r"\s*[A-Za-z0-9_-]+:\s*(#.*)?$", line)]
    heads = [i for i in heads if _indent(body[i]) == min((_indent(body[h]) for h in heads), default=0)]
    starts = []
    for i in heads:
        while i > 0 and body[i - 1].lstrip().startswith("#") and _indent(body[i - 1]) == _indent(body[i]):
            i -= 1
        starts.append(i)
    return {
        body[h].split(":", 1)[0].strip(): body[s:e]
        for h, s, e in zip(heads, starts, [*starts[1:], len(body)], strict=True)
    }


def check_group(plan: Plan, raw: dict[str, Any], stack: str, node_group: str) -> None:
    """The node group must exist and carry, unshared, the GPU the plan's profiles were measured on."""
    groups = {g.name: g for g in parse(raw, stack).node_groups}
    group = groups.get(node_group)
    if group is None or not group.is_gpu:
        allowed = ", ".join(sorted(n for n, g in groups.items() if g.is_gpu)) or "(none)"
        raise Refused(f"--node-group {node_group}: not a GPU node group of stack {stack}; allowed: {allowed}")
    gpu = guaranteed_gpu(group.instance_types)
    if gpu.model not in re.split(r"[\s-]+", plan.gpu) or gpu.memory_gib < plan.gpu_memory_gib:
        raise Refused(f"--node-group {node_group}: its GPU is the {gpu.model} {gpu.memory_gib} GB, the plan is for the "
                      f"{plan.gpu} ({plan.gpu_memory_gib:g} GiB); allowed: a group of the plan's GPU, or a plan "
                      "from profiles measured on the group's")  # fmt: skip
    if group.sharing.shared:
        raise Refused(f"--node-group {node_group}: shares its GPUs ({group.sharing.mode}); allowed: a group of whole "
                      "GPUs (the plan gives each replica one)")  # fmt: skip


def write(plan_path: Path, stack_file: Path, node_group: str, dry_run: bool) -> list[str]:
    """Plan into `stack_file` (or, dry-run, the diff it would make): the lines to print."""
    plan = read_plan(plan_path)
    stack = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    text = stack_file.read_text()
    raw = read_stack_file(stack_file)
    check_group(plan, raw, stack, node_group)
    current = dict(raw.get(KEY) or {})
    new = splice(text, current, deployments(plan, current, node_group))
    with tempfile.NamedTemporaryFile("w", dir=stack_file.parent, prefix=f".{stack_file.name}.", delete=False) as tmp:
        tmp.write(new)
    try:
        parse(read_stack_file(Path(tmp.name)), stack)  # every declaration and rule of the stack, as `pulumi up`
        if dry_run:
            diff = difflib.unified_diff(
                text.splitlines(), new.splitlines(), str(stack_file), str(stack_file), lineterm=""
            )
            return [*diff, f"dry-run: would write {len(plan.deployments)} planned deployment(s) to {stack_file}"]
        os.chmod(tmp.name, stack_file.stat().st_mode & 0o777)
        os.replace(tmp.name, stack_file)
    finally:
        Path(tmp.name).unlink(missing_ok=True)
    exports = [
        f"{m}: model-sync export ... --instance-count {n}" for d in plan.deployments for m, n in d.instances.items()
    ]
    return [f"wrote {len(plan.deployments)} planned deployment(s) to {stack_file} (node group {node_group})", *exports]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.stack_plan", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--plan", type=Path, required=True, metavar="FILE", help="model-sync plan --output json")
    p.add_argument("--stack-file", type=Path, required=True, metavar="FILE", help="stacks/Pulumi.<stack>.yaml")
    p.add_argument("--node-group", required=True, metavar="GROUP", help="the GPU node group the deployments run on")
    p.add_argument("--dry-run", action="store_true", help="print the change as a diff; write nothing")
    a = p.parse_args(argv)
    try:
        print("\n".join(write(a.plan, a.stack_file, a.node_group, a.dry_run)))
    except (Refused, ConfigError, errors.SyncError, OSError) as e:
        print(f"stack_plan: {str(e).removeprefix('model-sync: ')}", file=sys.stderr)
        return errors.USAGE
    return errors.OK


if __name__ == "__main__":
    sys.exit(main())
