"""Console output: operation lines to stdout (aws-cli style: `upload: a to s3://b`), progress
bars to stderr with rich, only on a TTY and never with --quiet, errors as one line to stderr."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from model_sync import errors

if TYPE_CHECKING:
    from model_sync.environments import Environment

PROG = "model-sync"
# asks (on a terminal, for prod) before a command deletes or moves anything: `prune`, `rollback`
Confirm = Callable[["Environment", str], None]


class Console:
    def __init__(self, quiet: bool = False, progress: bool | None = None) -> None:
        self.quiet = quiet
        self.show_progress = (not quiet and sys.stderr.isatty()) if progress is None else progress
        self._lock = threading.Lock()
        self._progress: Any = None

    def line(self, text: str) -> None:
        if self.quiet:
            return
        with self._lock:
            # Above the bar when both share the terminal; to stdout itself when stdout is a pipe or a file.
            if self._progress is not None and sys.stdout.isatty():
                self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
            else:
                print(text, flush=True)

    def warn(self, text: str) -> None:
        with self._lock:
            print(f"{PROG}: warning: {text}", file=sys.stderr, flush=True)

    def progress(self) -> Progress:
        return Progress(self)


class Progress:
    """Byte progress, one task per model; a no-op when progress is off."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._bar: Any = None
        self._lock = threading.Lock()

    def __enter__(self) -> Progress:
        if self.console.show_progress:
            from rich.console import Console as RichConsole
            from rich.progress import BarColumn, DownloadColumn, TextColumn, TransferSpeedColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=RichConsole(stderr=True),
                transient=False,
                redirect_stdout=False,
            )
            self._bar.__enter__()
            self.console._progress = self._bar
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self.console._progress = None

    def task(self, description: str, total: int) -> Any:
        if self._bar is None:
            return None
        with self._lock:
            return self._bar.add_task(description, total=total)

    def advance(self, task: Any, n: int) -> None:
        if self._bar is not None and task is not None:
            self._bar.advance(task, n)


def confirm(question: str, what: str) -> None:
    """Ask `question` [y/N] on a terminal (rich's prompt); anything but yes, or no terminal at all,
    refuses with one line (exit 2) naming --yes."""

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise errors.usage(
            f"{what}: needs confirmation and stdin is not a terminal; allowed: --yes (CI: after the "
            "environment's approval)"
        )
    from rich.console import Console as RichConsole
    from rich.prompt import Confirm

    if not Confirm.ask(question, default=False, console=RichConsole(stderr=True)):
        raise errors.usage(f"{what}: not confirmed; allowed: answer y, or --yes")


def error(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
