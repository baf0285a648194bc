"""What torch.export and the ONNX exporter print while `export --format pt2|onnx` runs them, and their
refusals as export's one line.

`captured` sends everything they write (their `logging` handlers, Python warnings, print() and what
their C++ writes to the process's stdout and stderr) to `<output>/<name>.export.log`, kept only when
they fail. `refusal` turns their exception into one line naming the construct or operator, the
format, what is allowed and that log file: a branch on a tensor's value (`GuardOnDataDependentSymNode`,
at the user's line torch reports), an operator the ONNX exporter has no function for (its
`DispatchError`), or else the innermost cause's first sentence, without torch's ANSI colour codes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from model_sync import errors

LOG_SUFFIX = ".export.log"
_EXPORTER_LOGGERS = ("torch", "onnx", "onnxscript")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_USER_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s+(.+)')
_NO_ONNX_FUNCTION = re.compile(r"No ONNX function found for <OpOverload\(op='([^']+)', overload='([^']+)'\)>")


def log_path(output: str, name: str) -> str:
    """The log of model `name`'s export: beside its model directory, never inside it."""
    return os.path.join(output, f"{name}{LOG_SUFFIX}")


def _stream_handlers() -> list[logging.StreamHandler[Any]]:
    """The exporters' own handlers (torch attaches one to its loggers at import, bound to the stderr of then)."""
    loggers = [logging.getLogger(n) for n in logging.root.manager.loggerDict if n.split(".")[0] in _EXPORTER_LOGGERS]
    found = {id(h): h for lg in loggers for h in lg.handlers if type(h) is logging.StreamHandler}
    return list(found.values())  # once each: torch shares one handler between several of its loggers


def _point(handler: logging.StreamHandler[Any], stream: Any) -> Any:
    """handler's stream set to `stream`; returns the one it had. A closed stream (a test's capture,
    gone since torch was imported) is replaced without the flush setStream does first."""
    old = handler.stream
    if getattr(old, "closed", False):
        handler.stream = stream
    else:
        handler.setStream(stream)
    return old


@contextlib.contextmanager
def captured(path: str) -> Iterator[None]:
    """Everything written while the block runs goes to `path`; the file is removed when the block
    succeeds and kept when it raises."""
    sys.stdout.flush()
    sys.stderr.flush()
    with open(path, "w", buffering=1) as log:
        handlers = _stream_handlers()
        streams = [_point(h, log) for h in handlers]
        saved = [os.dup(1), os.dup(2)]
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield
        finally:
            log.flush()
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
            for h, stream in zip(handlers, streams, strict=True):
                _point(h, stream)
            for h in _stream_handlers():  # made while the block ran (torch sets some up on first use)
                if h.stream is log:
                    _point(h, sys.stderr)
    os.remove(path)


def _chain(e: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cause: BaseException | None = e
    while cause is not None and cause not in out:
        out.append(cause)
        cause = cause.__cause__ or cause.__context__
    return out


def refusal(e: BaseException, step: str, fmt: str, path: str, allowed: str) -> errors.SyncError:
    """export's one line (exit 6) for the exception `step` (torch.export, torch.onnx.export) raised
    with --format `fmt`; `allowed` is the generic advice when the cause is neither a data-dependent
    branch nor an operator without an ONNX function."""
    chain = _chain(e)
    texts = [_ANSI.sub("", str(c)) for c in chain]
    for c, text in zip(chain, texts, strict=True):
        frame = _USER_FRAME.search(text)
        if type(c).__name__ == "GuardOnDataDependentSymNode" and frame:
            file, line, func, code = frame.groups()
            return errors.SyncError(
                errors.CHECK_FAILED,
                f"{step}: data-dependent control flow in {func} at {file}:{line} (`{code.strip()}`): --format {fmt} "
                "captures one graph and cannot branch on a tensor's value; allowed: torch.cond for the branch, or "
                f"--format torchscript; full log: {path}",
            )
    for text in texts:
        op = _NO_ONNX_FUNCTION.search(text)
        if op:
            return errors.SyncError(
                errors.CHECK_FAILED,
                f"{step}: operator {op.group(1)}.{op.group(2)} has no ONNX function (--format {fmt}); allowed: "
                "--format torchscript or pt2, operators ONNX has, or a custom op with an ONNX translation; full log: "
                f"{path}",
            )
    first = re.split(r"(?<=[.!?])\s", texts[-1].strip(), maxsplit=1)[0]
    return errors.SyncError(
        errors.CHECK_FAILED,
        f"{step}: failed ({type(chain[-1]).__name__}: {errors.one_line(first, 200)}); allowed: {allowed}; full "
        f"log: {path}",
    )
