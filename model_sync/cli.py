"""`model-sync`: one module per command under model_sync/commands/<name>.py, each exposing
`register(subparsers)` (adds its parser, whose default `func` is `run`) and `run(args) -> int`
(the exit code; model_sync.errors): options, and one call of `command(...)` in the library module
that does the work (`push` -> model_sync.push.publish.command, `canary` -> model_sync.canary.launch.command,
`agent` -> model_sync.agent.loop.command, ...). Add a command by appending its module name to COMMANDS.

Failures print ONE line to stderr, `model-sync: <what>: <bad value>; <allowed>`, and exit with
the documented code (model_sync/errors.py). MODEL_SYNC_DEBUG=1 prints the traceback of
unexpected errors.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from model_sync import __version__, errors
from model_sync.ui import error

# In the order of a model's life: the help lists them so.
COMMANDS: tuple[str, ...] = (
    "export", "push", "verify", "canary", "promote", "rollback", "status", "prune", "plan", "agent"
)  # fmt: skip


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code USAGE."""

    def error(self, message: str) -> NoReturn:
        error(f"{self.prog.removeprefix('model-sync ')}: {message}; see `{self.prog} --help`")
        sys.exit(errors.USAGE)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All commands, or only `only` (start-up time: command modules may import heavy libraries)."""
    parser = Parser(
        prog="model-sync",
        description="Export, publish, verify, promote and roll back Triton models in the S3 model repository.",
        epilog="Exit codes: " + ", ".join(f"{k} {v}" for k, v in errors.EXIT_CODES.items()),
    )
    parser.add_argument("--version", action="version", version=f"model-sync {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in [only] if only in COMMANDS else COMMANDS:
        importlib.import_module(f"model_sync.commands.{name}").register(sub)  # sets func=run
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors (already printed on one line)
        return int(e.code or 0)
    try:
        return int(args.func(args))
    except errors.SyncError as e:
        error(str(e))
        return e.code
    except KeyboardInterrupt:
        error("interrupted: nothing pinned was changed by the unfinished step; re-run the command")
        return errors.UNEXPECTED
    except Exception as e:
        if os.environ.get("MODEL_SYNC_DEBUG"):
            import traceback

            traceback.print_exc()
        error(
            f"unexpected error: {type(e).__name__}: {' '.join(str(e).split())[:300]}; set MODEL_SYNC_DEBUG=1 for "
            "a traceback and report it"
        )
        return errors.UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
