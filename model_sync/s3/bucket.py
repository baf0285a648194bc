"""S3 access for model_sync: one environment's bucket (`Bucket`) on a botocore client, and the
bucket operations every command and the agent share: conditional writes, conditional GETs,
paged listing, deletes. Clients come from model_sync/s3/clients.py (credentials, region, retries),
failures are classified by model_sync/s3/failures.py, big transfers go through model_sync/s3/transfer.py.

Conditional writes (create-only, over the version read) and the probe of whether a server enforces
them are model_sync/s3/conditional.py's, a mixin of `Bucket`.
"""

from __future__ import annotations

import base64
import builtins
import getpass
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from model_sync import errors
from model_sync.s3 import clients
from model_sync.s3.conditional import ConditionalWrites, etag_of
from model_sync.s3.endpoint import Endpoint
from model_sync.s3.failures import Kind, S3Error, kind_of_code, translate

NOT_MODIFIED = object()  # get_if_changed(): the object still has the ETag the caller holds


E = TypeVar("E", bound=Endpoint)  # the caller's environment type (model_sync.environments.Environment)


class Bucket(ConditionalWrites, Generic[E]):
    """One environment's bucket with key helpers relative to the root, on one botocore client
    (created on first use) of `purpose` (clients.CLI or clients.AGENT). Every failure is raised
    as an S3Error (failures.translate), its `s3_kind` set; a missing object is None instead.
    `env` is kept as given (callers read their environment back from it); the S3 layer reads
    only its Endpoint fields."""

    env: E

    def __init__(self, env: E, purpose: clients.Purpose = clients.CLI, session: Any = None) -> None:
        self.env = env
        self.root = env.root
        self.purpose = purpose
        self._client: Any = None
        self._session: Any = session  # a botocore session (default: clients.new_session on first use)
        self._region: str | None = None
        self._client_lock = threading.Lock()
        self._session_lock = threading.Lock()

    def session(self) -> Any:
        """The botocore session (created on first use; one credential resolution per run)."""
        with self._session_lock:
            if self._session is None:
                self._session = clients.new_session(self.env.region)
            return self._session

    @property
    def region(self) -> str:
        if self._region is None:
            self._region = clients.resolve_region(self.env, self.session)
        return self._region

    @property
    def client(self) -> Any:
        """The botocore S3 client (clients.create_client), created on first use."""
        with self._client_lock:
            if self._client is None:
                self._client = clients.create_client(self.session(), self.region, self.env.endpoint_url, self.purpose)
            return self._client

    def key(self, rel: str) -> str:
        return self.root.key(rel)

    def uri(self, rel: str) -> str:
        return self.root.uri(rel)

    @property
    def identity(self) -> str:
        """Stable id of this repository (local cache keys): endpoint + bucket + prefix."""
        return f"{self.env.endpoint_url or 'aws'}|{self.env.region or ''}|{self.root.bucket}|{self.root.prefix}"

    def call(self, rel: str, operation: str, **kwargs: Any) -> Any:
        """One S3 operation of the client on `rel`'s key (Bucket and Key filled in); a failure is
        raised translated (SyncError with its s3_kind)."""
        try:
            return getattr(self.client, operation)(Bucket=self.root.bucket, Key=self.key(rel), **kwargs)
        except errors.SyncError:
            raise
        except Exception as e:
            raise translate(e, self.env, rel) from None

    def get(self, rel: str) -> bytes | None:
        """The object's bytes, or None if it does not exist."""
        found = self.get_with_meta(rel)
        return None if found is None else found[0]

    def get_with_etag(self, rel: str) -> tuple[bytes, str | None] | None:
        """(bytes, ETag) of the object, or None if it does not exist."""
        found = self.get_with_meta(rel)
        return None if found is None else (found[0], found[1])

    def get_with_meta(self, rel: str) -> tuple[bytes, str | None, int | None] | None:
        """(bytes, ETag, LastModified in whole epoch seconds) of the object, or None if it does not exist."""
        try:
            resp = self.call(rel, "get_object")
            body = resp["Body"].read()
        except errors.SyncError as e:
            if e.s3_kind is Kind.NOT_FOUND:
                return None
            raise
        except Exception as e:  # the body's read failed mid-way
            raise translate(e, self.env, rel) from None
        return body, etag_of(resp), modified_of(resp)

    def get_if_changed(self, rel: str, etag: str | None) -> tuple[bytes, str | None] | object | None:
        """(bytes, ETag) when the object's ETag is not `etag` (one conditional GET: If-None-Match);
        NOT_MODIFIED when it still is; None when it does not exist."""
        try:
            resp = self.call(rel, "get_object", **({"IfNoneMatch": f'"{etag}"'} if etag else {}))
            return resp["Body"].read(), etag_of(resp)
        except errors.SyncError as e:
            if e.s3_kind is Kind.NOT_MODIFIED:
                return NOT_MODIFIED
            if e.s3_kind is Kind.NOT_FOUND:
                return None
            raise

    def head(self, rel: str) -> tuple[str | None, int | None] | None:
        """(ETag, LastModified in whole epoch seconds) from one HeadObject; None if it does not exist."""
        try:
            resp = self.call(rel, "head_object")
        except errors.SyncError as e:
            if e.s3_kind is Kind.NOT_FOUND:
                return None
            raise
        return etag_of(resp), modified_of(resp)

    def put(self, rel: str, body: bytes, content_type: str = "application/json") -> str | None:
        """Unconditional write; returns the new object's ETag."""
        return etag_of(self.call(rel, "put_object", Body=body, ContentType=content_type))

    def put_file(self, rel: str, path: str, sha256_hex: str) -> str | None:
        """One PutObject streamed from `path`, its SHA256 checksum the manifest's digest: AWS S3
        stores it and rejects a body that differs (Kind.DIGEST; moto and rclone do not check)."""
        checksum = base64.b64encode(
            bytes.fromhex(sha256_hex)
        ).decode()  # S3 wants the digest in base64 (b64_sha256_to_hex reads it back)
        with open(path, "rb") as body:
            return etag_of(self.call(rel, "put_object", Body=body, ChecksumAlgorithm="SHA256", ChecksumSHA256=checksum))

    def copy(self, source_rel: str, rel: str) -> None:
        """Server-side copy inside this repository (one CopyObject; S3 stores a fresh SHA256 checksum)."""
        self.call(
            rel,
            "copy_object",
            CopySource={"Bucket": self.root.bucket, "Key": self.key(source_rel)},
            ChecksumAlgorithm="SHA256",
        )

    def is_empty(self, rel_prefix: str) -> bool:
        """True when no object exists under the prefix (one ListObjectsV2, MaxKeys=1)."""
        try:
            page = self.client.list_objects_v2(Bucket=self.root.bucket, Prefix=self.key(rel_prefix), MaxKeys=1)
        except Exception as e:
            raise translate(e, self.env, rel_prefix) from None
        return not page.get("Contents")

    def list(self, rel_prefix: str, delimiter: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
        """(objects with Key relative to the root, common prefixes relative to the root): every page."""
        objects: list[dict[str, Any]] = []
        prefixes: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": self.root.bucket, "Prefix": self.key(rel_prefix)}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(**kwargs):
                objects.extend({**o, "Key": self.root.relative(o["Key"])} for o in page.get("Contents") or [])
                prefixes.extend(self.root.relative(p["Prefix"]) for p in page.get("CommonPrefixes") or [])
        except Exception as e:
            raise translate(e, self.env, rel_prefix) from None
        return objects, prefixes

    def delete(self, rels: Sequence[str]) -> None:
        """DeleteObjects, 1,000 keys per request; the first key S3 refused is raised (exit 5)."""
        for i in range(0, len(rels), 1000):
            chunk = rels[i : i + 1000]
            try:
                resp = self.client.delete_objects(
                    Bucket=self.root.bucket, Delete={"Objects": [{"Key": self.key(r)} for r in chunk], "Quiet": True}
                )
            except Exception as e:
                raise translate(e, self.env, chunk[0]) from None
            failed = resp.get("Errors") or []
            if failed:
                err = failed[0]
                raise S3Error(
                    errors.S3,
                    f"delete {self.uri(self.root.relative(err['Key']))}: {err.get('Code')}; allowed: "
                    "s3:DeleteObject on the repository",
                    kind_of_code(str(err.get("Code") or "")),
                )

    def list_uploads(self, rel_prefix: str) -> Sequence[dict[str, Any]]:
        """Multipart uploads in progress (never completed nor aborted) under the prefix: Key
        relative to the root, UploadId, Initiated."""
        uploads: builtins.list[dict[str, Any]] = []  # `list` here is Bucket.list
        try:
            for page in self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.root.bucket, Prefix=self.key(rel_prefix)
            ):
                uploads.extend({**u, "Key": self.root.relative(u["Key"])} for u in page.get("Uploads") or [])
        except Exception as e:
            raise translate(e, self.env, rel_prefix) from None
        return uploads

    def abort_upload(self, rel: str, upload_id: str) -> None:
        """AbortMultipartUpload: S3 frees the parts already stored."""
        self.call(rel, "abort_multipart_upload", UploadId=upload_id)

    def delete_one(self, rel: str) -> None:
        """One DeleteObject (deleting a missing key succeeds, as S3 does)."""
        self.call(rel, "delete_object")


def modified_of(obj: dict[str, Any], field: str = "LastModified") -> int | None:
    """LastModified (or another timestamp field: a multipart upload's Initiated) as whole epoch
    seconds, from a listing (ISO 8601, rclone adds milliseconds), a GET/HEAD (HTTP date: seconds
    only) or a parsed datetime; None if absent or unparseable."""
    import datetime
    import email.utils

    value = obj.get(field)
    try:
        if isinstance(value, datetime.datetime):
            return int(value.timestamp())
        if isinstance(value, str) and value:
            if value[:4].isdigit():
                return int(datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
            return int(email.utils.parsedate_to_datetime(value).timestamp())
    except (ValueError, TypeError):
        return None
    return None


def who(env: Endpoint, session: Callable[[], Any] | None = None) -> str:
    """STS caller ARN on AWS (aws_hosted); $USER (or the login name) against S3-compatible
    servers or when STS fails. `session`: the Bucket's botocore session (one credential resolution
    per run)."""
    if clients.aws_hosted(env):
        try:
            chosen = session() if session is not None else clients.new_session(env.region)
            sts = clients.create_client(
                chosen, clients.resolve_region(env, lambda: chosen), None, clients.CLI, service="sts"
            )
            arn = sts.get_caller_identity()["Arn"]
            return str(arn)
        except Exception:  # noqa: S110 - fall back to the local user
            pass
    try:
        return os.environ.get("USER") or getpass.getuser()
    except Exception:
        return "unknown"


def b64_sha256_to_hex(value: str) -> str | None:
    """S3 ChecksumSHA256 (base64 of the digest) -> hex; None for composite ('...-N') checksums."""
    if not value or "-" in value:
        return None
    try:
        return base64.b64decode(value).hex()
    except ValueError:
        return None
