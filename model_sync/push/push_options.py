"""`push`'s options: how it transfers (`PushOptions`, every number checked against its bounds on
construction) and their construction from `model-sync push`'s flags (`cli_options`: a number out
of its bounds is a usage error naming the flag)."""

from __future__ import annotations

from dataclasses import dataclass

from model_sync import errors

MB = 1024 * 1024
MAX_CONCURRENCY = 128
MAX_MODEL_WORKERS = 64
# ref: https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html (parts: 5 MiB to 5 GiB)
MIN_PART = 5 * MB
MAX_PART = 5 * 1024 * MB


@dataclass(frozen=True)
class PushOptions:
    """How `push` transfers. Validated on construction (ValueError, one line naming the field; the
    bounds of every number are checked here only: the CLI names its flag, cli_options)."""

    dry_run: bool = False
    concurrency: int = 16  # parallel S3 requests (s3transfer max_request_concurrency), 1..MAX_CONCURRENCY
    multipart_threshold: int = 16 * MB  # bytes; files at least this big upload in parts; MIN_PART..MAX_PART
    multipart_chunksize: int = 16 * MB  # bytes per part; MIN_PART..MAX_PART
    model_workers: int = 16  # models published in parallel (each mostly waits on small requests), 1..MAX_MODEL_WORKERS
    allow_version_skew: bool = False  # publish what the target image may not load (recorded)
    use_cache: bool = True  # local hash + pin caches (model_sync/push/skip_cache.py); only ever skip work
    allow_local_target: bool = False  # publish a `--target local` model to an NGC Triton image (recorded)

    def __post_init__(self) -> None:
        for name in ("dry_run", "allow_version_skew", "use_cache", "allow_local_target"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"PushOptions.{name}: {getattr(self, name)!r}; allowed: True or False")
        limits = {
            "concurrency": (1, MAX_CONCURRENCY, ""),
            "model_workers": (1, MAX_MODEL_WORKERS, ""),
            "multipart_threshold": (MIN_PART, MAX_PART, " bytes (S3 parts are 5 MiB to 5 GiB)"),
            "multipart_chunksize": (MIN_PART, MAX_PART, " bytes (S3 parts are 5 MiB to 5 GiB)"),
        }
        for name, (low, high, unit) in limits.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise PushOptionError(name, f"PushOptions.{name}: {value!r}; allowed: an integer {low}..{high}{unit}")


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
