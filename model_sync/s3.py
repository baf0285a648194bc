"""S3 access for model_sync: clients from botocore's (= boto3's) default credential chain only, error
translation to exit codes, conditional writes and small JSON/text helpers.

Conditional writes: `put_new()` uses `IfNoneMatch='*'` (AWS S3 and moto reject a second write
with 412 PreconditionFailed); `put_if()` writes only over the object version it read (`IfMatch`
= its ETag; `IfNoneMatch='*'` when there was none): the pin flip. moto 5.2.5 enforces both
(If-Match on a missing key answers 404 NoSuchKey, as AWS S3 does). Some S3-compatible servers
(rclone serve s3) ignore both headers and silently overwrite; `conditional_writes_enforced()` /
`if_match_enforced()` detect that once per process with three writes to layout.PROBE_KEY, and
callers warn that version allocation and the pin flip are then not race-free.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from model_sync import errors, layout, s3http
from model_sync.environments import Environment

_LOCK = threading.Lock()
_PROBED: dict[tuple[str | None, str], tuple[bool, bool]] = {}  # (If-None-Match, If-Match) enforced

CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AccessDenied", "AuthorizationHeaderMalformed", "Forbidden", "403"}
PRECONDITION_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}


def new_session(region: str | None = None) -> Any:
    """A botocore session: the same default credential chain boto3 uses (env, profile, SSO,
    IRSA/instance role), without importing boto3 (and the s3transfer it pulls in) at start-up.
    Timestamps in responses stay strings (model_sync only reads the pin's LastModified: modified_of): botocore's
    dateutil parsing was a third of the time of a no-op push's listing (cProfile)."""
    import botocore.loaders
    import botocore.session

    class _KnownServices(botocore.loaders.Loader):  # type: ignore[misc]
        """botocore validates a service name by listing every service directory it ships (~400,
        three times: ~40 ms of a no-op push, cProfile); model_sync creates only s3 and sts clients."""

        def list_available_services(self, type_name: str) -> list[str]:
            return ["s3", "sts"]

    session = botocore.session.get_session()
    data_path = session.get_config_variable("data_path")
    session.register_component("data_loader", _KnownServices(extra_search_paths=[os.path.expanduser(p) for p in data_path.split(os.pathsep)] if data_path else []))
    if region:
        session.set_config_variable("region", region)
    # ref: https://github.com/boto/botocore/blob/develop/botocore/parsers.py (ResponseParserFactory.set_parser_defaults)
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    return session


def aws_hosted(env: Environment) -> bool:
    """True for AWS S3 itself: no custom endpoint, or one under amazonaws.com(.cn) (a VPC interface
    endpoint, a FIPS URL set through AWS_ENDPOINT_URL_S3). Such endpoints verify checksums, have an
    STS identity and need a real region; S3-compatible servers do not."""
    if env.endpoint_url is None:
        return True
    import urllib.parse

    host = (urllib.parse.urlsplit(env.endpoint_url).hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def resolve_region(env: Environment, session: Callable[[], Any]) -> str:
    """The request region: the environment's, else AWS_REGION / AWS_DEFAULT_REGION, else the
    profile's (`session`: botocore reads the config file), else us-east-1 for a custom
    S3-compatible endpoint. AWS S3 without one: exit 2."""
    region = env.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        region = session().get_config_variable("region")
    if not region and aws_hosted(env):
        raise errors.usage(f"region: none configured for environment {env.name}; allowed: `region` in model-sync.yaml, --region, AWS_REGION or a profile's region")
    return str(region or "us-east-1")


def credential_source(session: Callable[[], Any]) -> Callable[[], s3http.Credentials]:
    """The AWS default credential chain. Its first link (AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
    [+ AWS_SESSION_TOKEN], e.g. from GitHub OIDC's configure-aws-credentials) is read here; anything
    else (profiles, SSO, web identity, Pod Identity, IMDS) is the resolver of `session` (botocore,
    shared with the Repo's botocore client: one MFA prompt, one credential_process run),
    refreshed as it expires."""
    found = s3http.env_credentials()
    if found is not None:
        return lambda: found
    lock = threading.Lock()
    state: dict[str, Any] = {}

    def get() -> s3http.Credentials:
        with lock:
            if "creds" not in state:
                state["creds"] = session().get_credentials()
        creds = state["creds"]
        if creds is None:
            raise s3http.NoCredentialsError("Unable to locate credentials")
        frozen = creds.get_frozen_credentials()
        return s3http.Credentials(frozen.access_key, frozen.secret_key, frozen.token)

    return get


class Repo:
    """One environment's bucket with key helpers relative to the root. Single requests go through
    the standard-library client (`http`, model_sync/s3http.py); `client` is a botocore client for
    s3transfer's multipart transfers and `promote`, created only when one of those needs it. Both
    use the same endpoint (env.endpoint_url, resolved once by environments.resolve), region and
    botocore session (credentials beyond the environment variables)."""

    def __init__(self, env: Environment, max_pool: int = 32) -> None:
        self.env = env
        self.root = env.root
        self.max_pool = max_pool
        self._client: Any = None
        self._http: s3http.Client | None = None
        self._session: Any = None
        self._region: str | None = None
        self._client_lock = threading.Lock()
        self._session_lock = threading.Lock()

    def session(self) -> Any:
        """The botocore session (imported and created on first use only)."""
        with self._session_lock:
            if self._session is None:
                self._session = new_session(self.env.region)
            return self._session

    @property
    def region(self) -> str:
        if self._region is None:
            self._region = resolve_region(self.env, self.session)
        return self._region

    @property
    def http(self) -> s3http.Client:
        with self._client_lock:
            if self._http is None:
                endpoint = self.env.endpoint_url
                try:
                    self._http = s3http.Client(self.region, credential_source(self.session), endpoint, path_style=endpoint is not None, attempts=attempts(),
                                               connect_timeout=5, read_timeout=60)  # fmt: skip
                except ValueError as e:
                    raise errors.usage(f"S3 client: {e}") from None
            return self._http

    @property
    def client(self) -> Any:
        """The botocore S3 client, created on first use (~0.25 s with the import: only multipart transfers and `promote` need it)."""
        with self._client_lock:
            if self._client is None:
                from botocore.config import Config

                endpoint = self.env.endpoint_url
                self._client = self.session().create_client(
                    "s3",
                    region_name=self.region,
                    endpoint_url=endpoint,
                    config=Config(
                        retries={"mode": "standard", "max_attempts": attempts()},
                        connect_timeout=5,
                        read_timeout=60,
                        max_pool_connections=self.max_pool,
                        # Checksums only where we ask for them (SHA256 on version files); avoids the
                        # aws-chunked trailer encoding some S3-compatible servers reject.
                        request_checksum_calculation="when_required",
                        response_checksum_validation="when_required",
                        s3={"addressing_style": "path"} if endpoint else None,
                        ignore_configured_endpoint_urls=True,  # the endpoint is env.endpoint_url, as for the stdlib client
                    ),
                )
            return self._client

    def key(self, rel: str) -> str:
        return self.root.key(rel)

    def uri(self, rel: str) -> str:
        return self.root.uri(rel)

    @property
    def identity(self) -> str:
        """Stable id of this repository (local cache keys): endpoint + bucket + prefix."""
        return f"{self.env.endpoint_url or 'aws'}|{self.env.region or ''}|{self.root.bucket}|{self.root.prefix}"

    def get(self, rel: str) -> bytes | None:
        """The object's bytes, or None if it does not exist."""
        found = self.get_with_etag(rel)
        return None if found is None else found[0]

    def get_with_etag(self, rel: str) -> tuple[bytes, str | None] | None:
        """(bytes, ETag) of the object, or None if it does not exist."""
        found = self.get_with_meta(rel)
        return None if found is None else (found[0], found[1])

    def get_with_meta(self, rel: str) -> tuple[bytes, str | None, int | None] | None:
        """(bytes, ETag, LastModified in whole epoch seconds) of the object, or None if it does not exist."""
        try:
            resp = self.http.get_object(self.root.bucket, self.key(rel))
        except Exception as e:
            if error_code(e) in ("NoSuchKey", "404"):
                return None
            raise translate(e, self.env, rel) from None
        return resp.body, _etag(resp), _modified(resp)

    def head(self, rel: str) -> tuple[str | None, int | None] | None:
        """(ETag, LastModified in whole epoch seconds) from one HeadObject; None if it does not exist."""
        try:
            resp = self.http.head_object(self.root.bucket, self.key(rel))
        except Exception as e:
            if error_code(e) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise translate(e, self.env, rel) from None
        return _etag(resp), _modified(resp)

    def put(self, rel: str, body: bytes, content_type: str = "application/json") -> str | None:
        """Unconditional write; returns the new object's ETag."""
        try:
            return _etag(self.http.put_object(self.root.bucket, self.key(rel), body, content_type=content_type))
        except Exception as e:
            raise translate(e, self.env, rel) from None

    def copy(self, source_rel: str, rel: str) -> None:
        """Server-side copy inside this repository (one CopyObject; S3 stores a fresh SHA256 checksum)."""
        try:
            self.http.copy_object(self.root.bucket, self.key(rel), self.root.bucket, self.key(source_rel))
        except Exception as e:
            raise translate(e, self.env, rel) from None

    def is_empty(self, rel_prefix: str) -> bool:
        """True when no object exists under the prefix (one ListObjectsV2, MaxKeys=1)."""
        try:
            page = self.http.list_objects_v2(self.root.bucket, self.key(rel_prefix), max_keys=1)
        except Exception as e:
            raise translate(e, self.env, rel_prefix) from None
        return not page.contents

    def put_new(self, rel: str, body: bytes, content_type: str = "application/json") -> bool:
        """Create-only write (If-None-Match: *). False if the key already exists (with other bytes:
        see _landed)."""
        try:
            self.http.put_object(self.root.bucket, self.key(rel), body, content_type=content_type, if_none_match=True)
            return True
        except Exception as e:
            if error_code(e) in PRECONDITION_CODES:
                return getattr(e, "retried", False) and self._landed(rel, body) is not None
            raise translate(e, self.env, rel) from None

    def _landed(self, rel: str, body: bytes) -> str | None:
        """After a conditional write refused on a RETRY: the ETag of the object if it holds exactly
        `body`. A try whose response was lost (connection dropped, or a 5xx, after S3 applied it)
        is retried and then refused by its own write; the bytes tell ours from another writer's
        (allocation markers carry a nonce, manifests are per version). A refusal on the first try
        is always a conflict (two `rollback --to N` write the same bytes)."""
        found = self.get_with_etag(rel)
        return (found[1] or "") if found is not None and found[0] == body else None

    def put_if(self, rel: str, body: bytes, etag: str | None, content_type: str = "application/json") -> tuple[bool, str | None]:
        """Write only over the version that was read: If-Match: <etag>, or If-None-Match: * when
        `etag` is None (no object was read). (False, None) if the object changed (412), or
        vanished (404 NoSuchKey on If-Match); else (True, new ETag)."""
        try:
            resp = self.http.put_object(self.root.bucket, self.key(rel), body, content_type=content_type, if_match=etag, if_none_match=not etag)
        except Exception as e:
            if error_code(e) in PRECONDITION_CODES or (etag and error_code(e) in ("NoSuchKey", "404")):
                landed = self._landed(rel, body) if getattr(e, "retried", False) else None
                return (True, landed or None) if landed is not None else (False, None)
            raise translate(e, self.env, rel) from None
        return True, _etag(resp)

    def list(self, rel_prefix: str, delimiter: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
        """(objects with Key relative to the root, common prefixes relative to the root)."""
        try:
            objects, prefixes = self.http.list_all(self.root.bucket, self.key(rel_prefix), delimiter=delimiter)
        except Exception as e:
            raise translate(e, self.env, rel_prefix) from None
        return [{**o, "Key": self.root.relative(o["Key"])} for o in objects], [self.root.relative(p) for p in prefixes]

    def delete(self, rels: Sequence[str]) -> None:
        for i in range(0, len(rels), 1000):
            chunk = rels[i : i + 1000]
            try:
                failed = self.http.delete_objects(self.root.bucket, [self.key(r) for r in chunk])
            except Exception as e:
                raise translate(e, self.env, chunk[0]) from None
            if failed:
                err = failed[0]
                raise errors.s3(f"delete {self.uri(self.root.relative(err['Key']))}: {err.get('Code')}; allowed: s3:DeleteObject on the repository")

    def conditional_writes_enforced(self) -> bool:
        """Whether the server rejects a second create-only write (If-None-Match: *)."""
        return self._probe()[0]

    def if_match_enforced(self) -> bool:
        """Whether the server rejects a write whose If-Match names another ETag."""
        return self._probe()[1]

    def _probe(self) -> tuple[bool, bool]:
        cache_key = (self.env.endpoint_url, self.root.bucket)
        with _LOCK:
            if cache_key in _PROBED:
                return _PROBED[cache_key]
        import uuid

        def body() -> bytes:  # distinct bytes per write: a refused write is never mistaken for our own (_landed)
            return f"probe {uuid.uuid4().hex}\n".encode()

        self.put_new(layout.PROBE_KEY, body(), "text/plain")
        none_match = not self.put_new(layout.PROBE_KEY, body(), "text/plain")
        if_match = not self.put_if(layout.PROBE_KEY, body(), "0" * 32, "text/plain")[0]  # an ETag no object has
        with _LOCK:
            _PROBED[cache_key] = (none_match, if_match)
        return none_match, if_match

    def ignored_conditions(self) -> str | None:
        """What the server ignores ("If-None-Match", "If-Match", or both joined by "and"); None when it enforces both."""
        ignored = [h for h, ok in zip(("If-None-Match", "If-Match"), self._probe(), strict=True) if not ok]
        return " and ".join(ignored) or None


def attempts() -> int:
    """Tries per request (MODEL_SYNC_S3_ATTEMPTS, default 3), for both clients."""
    return int(os.environ.get("MODEL_SYNC_S3_ATTEMPTS", "3"))


def _etag(resp: s3http.Response) -> str | None:
    return etag_of({"ETag": resp.headers.get("etag")})


def _modified(resp: s3http.Response) -> int | None:
    return modified_of({"LastModified": resp.headers.get("last-modified")})


def etag_of(obj: dict[str, Any]) -> str | None:
    """The ETag without quotes: rclone serve s3 lists it bare but returns it quoted from PUT/GET."""
    etag = str(obj.get("ETag") or "").strip('"')
    return etag or None


def modified_of(obj: dict[str, Any]) -> int | None:
    """LastModified as whole epoch seconds, from a listing (ISO 8601, rclone adds milliseconds),
    a GET/HEAD (HTTP date: seconds only) or a parsed datetime; None if absent or unparseable."""
    import datetime
    import email.utils

    value = obj.get("LastModified")
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


def error_code(e: BaseException) -> str:
    resp = getattr(e, "response", None)
    if isinstance(resp, dict):
        code = resp.get("Error", {}).get("Code") or str(resp.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
        return str(code)
    return ""


# Failures every request of the run would hit alike (SyncError.run_wide): the endpoint, the
# credentials, the clock, the bucket itself. AccessDenied is not one: a policy can deny one prefix.
RUN_WIDE_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AuthorizationHeaderMalformed", "RequestTimeTooSkewed", "NoSuchBucket"}


def translate(e: BaseException, env: Environment, what: str = "") -> errors.SyncError:
    """s3http and botocore exceptions -> SyncError with the documented exit code (botocore is
    imported only to classify its own exceptions); `run_wide` set for RUN_WIDE_CODES, missing
    credentials, an unreachable endpoint and a wrong region."""
    if isinstance(e, errors.SyncError):
        return e
    err = _translate(e, env, what)
    err.run_wide = err.message_kind in ("unreachable", "credentials") or error_code(e) in RUN_WIDE_CODES or bool(getattr(e, "bucket_region", None))
    return err


def _translate(e: BaseException, env: Environment, what: str) -> errors.SyncError:
    bx: Any = None
    if type(e).__module__.startswith("botocore"):
        import botocore.exceptions

        bx = botocore.exceptions
    where = f"s3://{env.bucket}" + (f"/{env.root.key(what)}" if what else "")
    if isinstance(e, s3http.NoCredentialsError) or (bx and isinstance(e, bx.NoCredentialsError | bx.PartialCredentialsError)):
        return errors.s3(f"AWS credentials: none found for {where}; allowed: the standard AWS chain (env vars, profile, SSO, instance/IRSA role)", kind="credentials")
    if isinstance(e, s3http.EndpointError) or (
        bx and isinstance(e, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError | bx.ConnectionClosedError)
    ):
        return errors.s3(f"S3 endpoint: {env.endpoint_url or 'AWS'} unreachable ({_cause(e)}); allowed: a reachable S3 endpoint", kind="unreachable")
    code = error_code(e)
    bucket_region = getattr(e, "bucket_region", None)
    if bucket_region:
        return errors.usage(f"region: requests for bucket {env.bucket!r} went to the wrong region ({code}); allowed: {bucket_region} (the bucket's region: `region` in model-sync.yaml or --region)")
    if code == "RequestTimeTooSkewed":
        return errors.s3(f"clock: this machine's time differs from S3's by more than 15 minutes (RequestTimeTooSkewed on {where}); allowed: a synchronized clock (NTP)")
    if code in ("NoSuchBucket",):
        return errors.not_found(f"bucket: {env.bucket!r} does not exist (environment {env.name}); allowed: an existing model repository bucket")
    if code in ("NoSuchKey", "NoSuchVersion", "404", "NotFound"):
        return errors.not_found(
            f"object: {where} does not exist (removed while model-sync ran?); allowed: a complete version, re-run when nothing else prunes it"
        )
    if code in CREDENTIAL_CODES:
        return errors.s3(f"S3 credentials/access: {code} on {where}; allowed: valid credentials from the AWS chain with access to the repository")
    if isinstance(e, s3http.S3Error) or (bx and isinstance(e, bx.BotoCoreError | bx.ClientError)):
        return errors.s3(f"S3 request on {where}: {code or type(e).__name__} ({' '.join(str(e).split())[:160]}); allowed: a healthy S3 endpoint")
    if isinstance(e, OSError):
        return errors.s3(f"S3 endpoint: {env.endpoint_url or 'AWS'} failed ({e}); allowed: a reachable S3 endpoint")
    return errors.SyncError(errors.UNEXPECTED, f"{where}: {type(e).__name__}: {e}")


def _cause(e: BaseException) -> str:
    cause = e.__cause__ if isinstance(e, s3http.EndpointError) and e.__cause__ is not None else e
    return type(cause).__name__


def who(env: Environment, session: Callable[[], Any] | None = None) -> str:
    """STS caller ARN on AWS (aws_hosted); $USER (or the login name) against S3-compatible
    servers or when STS fails. `session`: the Repo's botocore session (one credential resolution
    per run)."""
    if aws_hosted(env):
        try:
            chosen = session() if session is not None else new_session(env.region)
            arn = chosen.create_client("sts", region_name=env.region or chosen.get_config_variable("region")).get_caller_identity()["Arn"]
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


def hex_to_b64(hexdigest: str) -> str:
    return base64.b64encode(bytes.fromhex(hexdigest)).decode()


def sha256_stream(body: Any, bufsize: int = 1 << 20) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    while chunk := body.read(bufsize):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n
