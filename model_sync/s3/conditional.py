"""Conditional writes on one environment's bucket: `ConditionalWrites`, a mixin of s3.Bucket (whose
client, keys and GETs it writes through), and the ETag as these conditions name it (`etag_of`).

`put_new()` uses `IfNoneMatch='*'` (AWS S3 and moto reject a second write with 412
PreconditionFailed); `put_if()` writes only over the object version it read (`IfMatch` = its ETag;
`IfNoneMatch='*'` when there was none): the pin flip. moto 5.2.5 enforces both (If-Match on a
missing key answers 404 NoSuchKey, as AWS S3 does). Some S3-compatible servers (rclone serve s3)
ignore both headers and silently overwrite; `conditional_writes_enforced()` /
`if_match_enforced()` detect that once per process with three writes to layout.PROBE_KEY, and
callers warn that version allocation and the pin flip are then not race-free.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from model_sync.contract import layout
from model_sync.s3.failures import Kind, classify, retried, translate

if TYPE_CHECKING:
    from model_sync.s3.endpoint import Endpoint

_LOCK = threading.Lock()
_PROBED: dict[tuple[str | None, str], tuple[bool, bool]] = {}  # (If-None-Match, If-Match) enforced


class _Bucket(Protocol):
    """What the conditional writes use of s3.Bucket."""

    env: Endpoint

    @property
    def root(self) -> layout.Root: ...

    @property
    def client(self) -> Any: ...

    def key(self, rel: str) -> str: ...

    def get_with_etag(self, rel: str) -> tuple[bytes, str | None] | None: ...

    def put_new(self, rel: str, body: bytes, content_type: str = ...) -> bool: ...

    def put_if(self, rel: str, body: bytes, etag: str | None, content_type: str = ...) -> tuple[bool, str | None]: ...


class ConditionalWrites:
    """The create-only write, the write over the version read, and the probe of whether the
    server enforces them (s3.bucket.Bucket's; failures raised as SyncError, failures.translate)."""

    def put_new(self: _Bucket, rel: str, body: bytes, content_type: str = "application/json") -> bool:
        """Create-only write (If-None-Match: *). False if the key already exists (with other bytes:
        see _landed)."""
        try:
            self.client.put_object(
                Bucket=self.root.bucket, Key=self.key(rel), Body=body, ContentType=content_type, IfNoneMatch="*"
            )
            return True
        except Exception as e:
            if classify(e) is Kind.PRECONDITION:
                return retried(e) and _landed(self, rel, body) is not None
            raise translate(e, self.env, rel) from None

    def put_if(
        self: _Bucket, rel: str, body: bytes, etag: str | None, content_type: str = "application/json"
    ) -> tuple[bool, str | None]:
        """Write only over the version that was read: If-Match: <etag>, or If-None-Match: * when
        `etag` is None (no object was read). (False, None) if the object changed (412), or
        vanished (404 NoSuchKey on If-Match); else (True, new ETag)."""
        condition = {"IfMatch": f'"{etag}"'} if etag else {"IfNoneMatch": "*"}
        try:
            resp = self.client.put_object(
                Bucket=self.root.bucket, Key=self.key(rel), Body=body, ContentType=content_type, **condition
            )
        except Exception as e:
            kind = classify(e)
            if kind is Kind.PRECONDITION or (etag and kind is Kind.NOT_FOUND):
                landed = _landed(self, rel, body) if retried(e) else None
                return (True, landed or None) if landed is not None else (False, None)
            raise translate(e, self.env, rel) from None
        return True, etag_of(resp)

    def conditional_writes_enforced(self: _Bucket) -> bool:
        """Whether the server rejects a second create-only write (If-None-Match: *)."""
        return _probe(self)[0]

    def if_match_enforced(self: _Bucket) -> bool:
        """Whether the server rejects a write whose If-Match names another ETag."""
        return _probe(self)[1]

    def ignored_conditions(self: _Bucket) -> str | None:
        """What the server ignores ("If-None-Match", "If-Match", or both joined by "and"); None when it enforces
        both."""
        ignored = [h for h, ok in zip(("If-None-Match", "If-Match"), _probe(self), strict=True) if not ok]
        return " and ".join(ignored) or None


def etag_of(obj: dict[str, Any]) -> str | None:
    """The ETag without quotes (what If-Match names): rclone serve s3 lists it bare but returns it
    quoted from PUT/GET."""
    etag = str(obj.get("ETag") or "").strip('"')
    return etag or None


def _landed(repo: _Bucket, rel: str, body: bytes) -> str | None:
    """After a conditional write refused on a RETRY: the ETag of the object if it holds exactly
    `body`. A try whose response was lost (connection dropped, or a 5xx, after S3 applied it)
    is retried by botocore and then refused by its own write; the bytes tell ours from another
    writer's (allocation markers carry a nonce, manifests are per version). A refusal on the
    first try is always a conflict (two `rollback --model-version N` write the same bytes)."""
    found = repo.get_with_etag(rel)
    return (found[1] or "") if found is not None and found[0] == body else None


def _probe(repo: _Bucket) -> tuple[bool, bool]:
    """Once per process and bucket, whatever the number of threads asking at once: the
    first one probes while the others wait for its answer."""
    import uuid

    def body() -> bytes:  # distinct bytes per write: a refused write is never mistaken for our own (_landed)
        return f"probe {uuid.uuid4().hex}\n".encode()

    cache_key = (repo.env.endpoint_url, repo.root.bucket)
    with _LOCK:
        if cache_key not in _PROBED:
            repo.put_new(layout.PROBE_KEY, body(), "text/plain")
            none_match = not repo.put_new(layout.PROBE_KEY, body(), "text/plain")
            if_match = not repo.put_if(layout.PROBE_KEY, body(), "0" * 32, "text/plain")[0]  # an ETag no object has
            _PROBED[cache_key] = (none_match, if_match)
        return _PROBED[cache_key]
