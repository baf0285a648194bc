"""`push`'s options: how it transfers (`PushOptions`, every number checked against its bounds on
construction; its transfer settings are model_sync.s3.transfer.TransferSettings, whose defaults and
bounds they take) and their construction from `model-sync push`'s flags (`cli_options`: a number
out of its bounds is a usage error naming the flag)."""

from __future__ import annotations

from dataclasses import dataclass

from model_sync import errors
from model_sync.s3.transfer import MAX_CONCURRENCY, MAX_PART, MB, MIN_PART, TransferSettingError, TransferSettings

MAX_MODEL_WORKERS = 64
DEFAULT_TRANSFER = TransferSettings()


@dataclass(frozen=True)
class PushOptions:
    """How `push` transfers. Validated on construction (ValueError, one line naming the field; the
    bounds of every number are checked here only: the CLI names its flag, cli_options)."""

    dry_run: bool = False
    concurrency: int = DEFAULT_TRANSFER.concurrency  # parallel S3 requests (TransferSettings.concurrency)
    multipart_threshold: int = DEFAULT_TRANSFER.threshold  # bytes; files this big upload in parts; MIN_PART..
    multipart_chunksize: int = DEFAULT_TRANSFER.chunksize  # bytes per part; MIN_PART..MAX_PART
    model_workers: int = 16  # models published in parallel (each mostly waits on small requests), 1..MAX_MODEL_WORKERS
    allow_version_skew: bool = False  # publish what the target image may not load (recorded)
    use_cache: bool = True  # local hash + pin caches (model_sync/push/skip_cache.py); only ever skip work
    allow_local_target: bool = False  # publish a `--target local` model to an NGC Triton image (recorded)

    def __post_init__(self) -> None:
        for name in ("dry_run", "allow_version_skew", "use_cache", "allow_local_target"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"PushOptions.{name}: {getattr(self, name)!r}; allowed: True or False")
        field = {"concurrency": "concurrency", "threshold": "multipart_threshold", "chunksize": "multipart_chunksize"}
        try:
            self.transfer  # noqa: B018  (TransferSettings checks its own bounds)
        except TransferSettingError as e:
            name = field[e.name]
            raise PushOptionError(name, self._out_of_bounds(name, getattr(self, name))) from None
        for name in ("model_workers", "multipart_threshold", "multipart_chunksize"):  # what uploads add
            low, high = (1, MAX_MODEL_WORKERS) if name == "model_workers" else (MIN_PART, MAX_PART)
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise PushOptionError(name, self._out_of_bounds(name, value))

    @property
    def transfer(self) -> TransferSettings:
        """How this push's files move (model_sync.s3.transfer)."""
        return TransferSettings(self.multipart_threshold, self.multipart_chunksize, self.concurrency)

    @staticmethod
    def _out_of_bounds(name: str, value: object) -> str:
        low, high, unit = {
            "concurrency": (1, MAX_CONCURRENCY, ""),
            "model_workers": (1, MAX_MODEL_WORKERS, ""),
        }.get(name, (MIN_PART, MAX_PART, " bytes (S3 parts are 5 MiB to 5 GiB)"))
        return f"PushOptions.{name}: {value!r}; allowed: an integer {low}..{high}{unit}"


class PushOptionError(ValueError):
    """A PushOptions number out of its bounds; `name`: the field."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def cli_options(*, concurrency: int, multipart_threshold_mb: int, **flags: bool) -> PushOptions:
    """PushOptions from `model-sync push`'s flags (`flags`: the booleans); a number out of its
    bounds is a usage error naming the flag (exit 2)."""
    size = multipart_threshold_mb * MB
    try:
        return PushOptions(concurrency=concurrency, multipart_threshold=size, multipart_chunksize=size, **flags)
    except PushOptionError as e:
        if e.name == "concurrency":
            raise errors.usage(f"--concurrency: {concurrency}; allowed: 1..{MAX_CONCURRENCY}") from None
        raise errors.usage(
            f"--multipart-threshold-mb: {multipart_threshold_mb}; allowed: {MIN_PART // MB}..{MAX_PART // MB} "
            "(S3 parts are at least 5 MiB)"
        ) from None
