"""Options shared by commands: the environment flags (model_sync.environments) and --quiet."""

from __future__ import annotations

import argparse

from model_sync import environments
from model_sync.environments import Environment


def add_env_options(p: argparse.ArgumentParser, *, required: bool = True, flag: str = "--env", dest: str = "env", image: bool = True) -> None:
    """--env ENV and the overrides; `image`: also --triton-image (commands that check version alignment)."""
    p.add_argument(flag, dest=dest, required=required, metavar="ENV", help="environment from model-sync.yaml (e.g. staging, prod)")
    if flag == "--env":
        add_override_options(p, image=image)


def add_override_options(p: argparse.ArgumentParser, *, image: bool = True) -> None:
    existing = {opt for action in p._actions for opt in action.option_strings}
    for opt, help_text in (
        ("--config", "model-sync.yaml path (default: $MODEL_SYNC_CONFIG, then ./model-sync.yaml)"),
        ("--bucket", "override the environment's repository root, s3://bucket[/prefix]"),
        ("--endpoint-url", "override the S3 endpoint (an S3-compatible server)"),
        ("--region", "override the AWS region"),
        ("--triton-image", "override the environment's Triton image (version alignment), e.g. nvcr.io/nvidia/tritonserver:25.10-py3"),
    ):
        if opt not in existing and (image or opt != "--triton-image"):
            p.add_argument(opt, default=None, help=help_text)


def resolve(args: argparse.Namespace, name: str | None = None) -> Environment:
    env = getattr(args, "env", None) if name is None else name
    return environments.resolve(env, args.config, args.bucket, args.endpoint_url, args.region, getattr(args, "triton_url", None), getattr(args, "triton_image", None))


def add_allow_version_skew(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-version-skew",
        action="store_true",
        help="publish a pytorch_libtorch model even if the target Triton image's LibTorch is older than the exporting torch "
        "(or either is unknown); recorded in the manifest's `compatibility` (exit code 7 without it)",
    )


def add_allow_local_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-local-target",
        action="store_true",
        help="publish a model exported with --target local (python backend + torch.jit.load) to an environment whose tritonImage is an "
        "NGC tritonserver image, whose python backend has no torch; recorded in the manifest's `compatibility` (exit code 7 without it)",
    )


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="print nothing but errors (no operation lines, no progress bars)")


# Environments whose destructive commands (rollback, prune) ask first, on a terminal.
CONFIRM_ENVS = ("prod",)


def add_yes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", action="store_true", help=f"do not ask for confirmation (asked on a terminal for {', '.join(CONFIRM_ENVS)}; CI passes --yes after its approval)")


def confirm(args: argparse.Namespace, env: Environment, question: str) -> None:
    """On a CONFIRM_ENVS environment without --yes or --dry-run: ask on the terminal (model_sync.ui.confirm)."""
    if env.name in CONFIRM_ENVS and not args.yes and not getattr(args, "dry_run", False):
        from model_sync import ui

        ui.confirm(question, f"{args.command} in {env.name}")
