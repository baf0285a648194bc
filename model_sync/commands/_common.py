"""Options shared by commands: the environment flags (model_sync.environments) and --quiet."""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import environments, errors, ui
from model_sync.contract import layout
from model_sync.environments import Environment


def add_env_options(
    p: argparse.ArgumentParser, *, required: bool = True, flag: str = "--env", dest: str = "env", image: bool = True
) -> None:
    """--env ENV and the overrides; `image`: also --triton-image (commands that check version alignment)."""
    p.add_argument(
        flag, dest=dest, required=required, metavar="ENV", help="environment from model-sync.yaml (e.g. staging, prod)"
    )
    if flag == "--env":
        add_override_options(p, image=image)


def add_override_options(p: argparse.ArgumentParser, *, image: bool = True) -> None:
    existing = {opt for action in p._actions for opt in action.option_strings}
    for opt, help_text in (
        ("--config", "model-sync.yaml path (default: $MODEL_SYNC_CONFIG, then ./model-sync.yaml)"),
        ("--bucket", "override the environment's repository root, s3://bucket[/prefix]"),
        ("--endpoint-url", "override the S3 endpoint (an S3-compatible server)"),
        ("--region", "override the AWS region"),
        (
            "--triton-image",
            "override the environment's Triton image (version alignment), e.g. nvcr.io/nvidia/tritonserver:25.10-py3",
        ),
    ):
        if opt not in existing and (image or opt != "--triton-image"):
            p.add_argument(opt, default=None, help=help_text)


def resolve(args: argparse.Namespace, name: str | None = None) -> Environment:
    env = getattr(args, "env", None) if name is None else name
    return environments.resolve(
        env,
        args.config,
        args.bucket,
        args.endpoint_url,
        args.region,
        getattr(args, "triton_url", None),
        getattr(args, "triton_image", None),
    )


def check_names(*models: str, version: int | None = None) -> None:
    """The NAME arguments (and --model-version) of a command: a bad one is a usage error (exit 2)
    with layout's one-line message, before any request."""
    try:
        for model in models:
            layout.check_model_name(model)
        if version is not None:
            layout.check_version(version)
    except layout.LayoutError as e:
        raise errors.usage(str(e)) from None


def add_allow_version_skew(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-version-skew",
        action="store_true",
        help="publish a pytorch_libtorch model even if the target Triton image's LibTorch is older than the exporting "
        "torch "
        "(or either is unknown); recorded in the manifest's `compatibility` (exit code 7 without it)",
    )


def add_allow_local_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-local-target",
        action="store_true",
        help="publish a model exported with --target local (python backend + torch.jit.load) to an environment whose "
        "tritonImage is an "
        "NGC tritonserver image, whose python backend has no torch; recorded in the manifest's `compatibility` "
        "(exit code 7 without it)",
    )


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet", action="store_true", help="print nothing but errors (no operation lines, no progress bars)"
    )


# Environments whose destructive commands (rollback, prune) ask first, on a terminal.
CONFIRM_ENVS = ("prod",)


def add_yes(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--yes",
        action="store_true",
        help=(
            f"do not ask for confirmation (asked on a terminal for {', '.join(CONFIRM_ENVS)}; CI passes --yes after "
            "its approval)"
        ),
    )


def confirm(args: argparse.Namespace, env: Environment, question: str) -> None:
    """On a CONFIRM_ENVS environment without --yes or --dry-run: ask on the terminal (model_sync.ui.confirm)."""
    if env.name in CONFIRM_ENVS and not args.yes and not getattr(args, "dry_run", False):
        ui.confirm(question, f"{args.command} in {env.name}")


def add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", choices=("text", "json"), default="text",
                   help="text: operation lines (default); json: one JSON document on stdout when done, no operation "
                        "lines (errors stay one line on stderr)")  # fmt: skip


def add_wait(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        action="store_true",
        help=(
            "return only once every replica serving the model reports the new version READY (exit 6 with those that "
            "do not)"
        ),
    )
    p.add_argument(
        "--wait-timeout", type=float, default=300.0, metavar="SECONDS", help="how long --wait waits (default 300)"
    )


def quiet(args: argparse.Namespace) -> bool:
    """No operation lines: --quiet, or --output json (stdout carries the document only)."""
    return bool(getattr(args, "quiet", False) or getattr(args, "output", "text") == "json")


def emit(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """With --output json: print `doc` (sorted keys) on stdout."""
    if getattr(args, "output", "text") == "json":
        import json

        print(json.dumps(doc, indent=2, sort_keys=True))


def wait(args: argparse.Namespace, repo: Any, model: str, version: int, console: Any) -> dict[str, str] | None:
    """--wait: block until every replica serves `version` (model_sync.observation.replicas.wait_served); None without --wait."""
    if not getattr(args, "wait", False):
        return None
    from model_sync.observation import replicas

    if args.wait_timeout <= 0:
        raise errors.usage(f"--wait-timeout: {args.wait_timeout:g}; allowed: seconds > 0")
    return replicas.wait_served(repo, model, version, args.wait_timeout, console)
