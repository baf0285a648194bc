"""Exit codes of `model-sync` (documented in docs/model-sync.md) and the error type that carries them.

    0  OK            done (including "already up to date" no-ops and --dry-run)
    1  UNEXPECTED    a bug or an unclassified failure (traceback with MODEL_SYNC_DEBUG=1)
    2  USAGE         bad input: flags, names, model directory, config.pbtxt, env config, shapes/dtypes
    3  NOT_FOUND     unknown environment, missing bucket, model or version
    4  REFUSED       conflict or a safety rule: version collision, unverified promotion, pinned version
                     in prune, incomplete version, a version no replica would serve (rollback,
                     promote, canary: model_sync.versions.pinnable), content changed during push,
                     pin moved by another writer while push/promote/rollback ran (conditional pin flip);
                     `plan`: a model whose p99 target no measured step met, or that outgrows a GPU
    5  S3            S3 unreachable, credentials missing or rejected, access denied
    6  CHECK_FAILED  a verification failed (export output differs from eager, or the batch fails on the
                     GPU export measures it on; torch.export or the ONNX exporter refuses the model:
                     model_sync/export/exporter_log.py; `verify` not READY)
    7  INCOMPATIBLE  version alignment, per export format (model_sync/admission/alignment.py): the
                     target Triton image's LibTorch is older than the torch that exported a
                     pytorch_libtorch model; a .pt2 compiled by another torch minor than the
                     image's, for another device or GPU architecture than the deployment's, or
                     for an image without torch_aoti; an ONNX opset or IR version above the
                     image's ONNX Runtime's; or what would prove it unknown
                     (`--allow-version-skew` overrides and is recorded); a `--target local`
                     model for an NGC tritonserver image (`--allow-local-target`, recorded);
                     and GPU memory planning: a version that does not fit the environment's
                     GPUs, i.e. would overcommit its deployment's GPU (model_sync/admission/gpu_plan.py)
    8  INTERRUPTED   a gray release stopped (SIGINT) before its decision: the canary keeps its
                     replicas; `status` shows it, a re-run resumes it, `canary --abort` ends it

Every failure prints exactly one line to stderr:
    model-sync: <what>: <bad value>; <what is allowed or what to do>
"""

from __future__ import annotations

from typing import Any

OK = 0
UNEXPECTED = 1
USAGE = 2
NOT_FOUND = 3
REFUSED = 4
S3 = 5
CHECK_FAILED = 6
INCOMPATIBLE = 7
INTERRUPTED = 8

EXIT_CODES = {
    OK: "ok",
    UNEXPECTED: "unexpected error",
    USAGE: "usage / bad input",
    NOT_FOUND: "not found",
    REFUSED: "conflict / refused",
    S3: "S3 unreachable / credentials / access denied",
    CHECK_FAILED: "check failed",
    INCOMPATIBLE: "incompatible: target Triton cannot load the model in its format (version skew, GPU architecture, "
    "ONNX opset), or it does not fit the GPU",
    INTERRUPTED: "interrupted gray release (resume or abort it)",
}


class SyncError(Exception):
    """A failure with an exit code and a one-line message `<what>: <bad value>; <allowed>`."""

    def __init__(self, code: int, message: str) -> None:
        if code not in EXIT_CODES or code == OK:
            raise ValueError(f"exit code: {code!r}; allowed: one of {sorted(set(EXIT_CODES) - {OK})}")
        super().__init__(" ".join(message.split()))
        self.code = code
        self.message_kind = ""  # what failed, where callers branch on it ("credentials", "unreachable")
        self.run_wide = False  # every request of this run would fail alike (an S3Error says; model_sync.s3.failures)
        self.s3_kind: Any = None  # an S3 failure's model_sync.s3.failures.Kind (an S3Error's, given on construction)


def usage(message: str) -> SyncError:
    return SyncError(USAGE, message)


def not_found(message: str) -> SyncError:
    return SyncError(NOT_FOUND, message)


def refused(message: str) -> SyncError:
    return SyncError(REFUSED, message)


def s3(message: str, kind: str = "") -> SyncError:
    err = SyncError(S3, message)
    err.message_kind = kind
    return err


def incompatible(message: str) -> SyncError:
    return SyncError(INCOMPATIBLE, message)


def with_note(err: SyncError, note: str) -> SyncError:
    """`err` (same code and kind) with `; <note>` appended to its one line: what a refused command
    did about what it had written before the refusal (model_sync.versions.catalog.discard_files)."""
    out = SyncError(err.code, f"{err}; {note}")
    out.message_kind, out.run_wide, out.s3_kind = err.message_kind, err.run_wide, err.s3_kind
    return out


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line (runs of whitespace, newlines included, become one space), at most `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def describe(err: BaseException) -> str:
    """`<ExceptionType>: <message on one line>`, as the agent logs and records errors and the local
    traffic records a failed request."""
    return f"{type(err).__name__}: {one_line(str(err))}"


class Abandoned(Exception):
    """Work stopped because its stop event was set (the agent shutting down): a download, a staging
    pass, a load. Not a failure and carries no exit code."""
