"""The S3 REST calls model_sync makes one request at a time, over the standard library:
http.client connections (one keep-alive connection per thread and host), AWS Signature Version 4
in the Authorization header, ListObjectsV2 / error XML read with xml.etree.

Why not botocore for these: importing botocore and creating a client costs ~0.25 s of CPU before
the first request (bench/results/push.json, `floor_seconds`), more than a whole no-op `push` of a
50-model repository is allowed to take (<= 0.2 x `aws s3 sync`), and botocore hashes every upload
body again for the signature although `push` already hashed it for the manifest. Here the
manifest's sha256 IS the signed payload hash (x-amz-content-sha256) and the stored checksum
(x-amz-checksum-sha256): the file is read once to hash it and once to send it, and AWS S3 rejects
a body that differs from either (XAmzContentSHA256Mismatch / BadDigest).

botocore stays where it earns its cost: credentials when they are not in the environment (the rest
of the default chain: profiles, SSO, web identity, Pod Identity / container, IMDS, refreshed as
they expire), multipart transfers (s3transfer), `promote`'s transfers and the in-cluster agent.

Errors are raised as S3Error (botocore-shaped `.response`, so s3.error_code() reads both) and
EndpointError (an OSError: the endpoint could not be reached or dropped the connection).
Retries follow botocore's "standard" mode: up to `attempts` tries (MODEL_SYNC_S3_ATTEMPTS, default
3) on connection errors, 429/500/502/503/504 and throttling codes, exponential backoff with full
jitter (base 0.1 s, capped at 2 s), request bodies rewound before each try. A CopyObject that
fails after its 200 status line is retried the same way. A request signed for the wrong region
is not followed (botocore's redirector is): the error names the bucket's region.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import os
import select
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # urllib.request and xml.etree are imported where needed: a no-op `push` never loads them
    import ssl
    import xml.etree.ElementTree as ET

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
RETRY_STATUS = {429, 500, 502, 503, 504}
# ref: https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html (standard mode: transient and throttling errors)
RETRY_CODES = {"RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete", "InternalError", "ServiceUnavailable", "SlowDown", "Throttling",
               "ThrottlingException", "ThrottledException", "RequestThrottledException", "TooManyRequestsException", "RequestLimitExceeded",
               "BandwidthLimitExceeded", "ProvisionedThroughputExceededException", "TransactionInProgressException", "EC2ThrottledException"}  # fmt: skip
BACKOFF_BASE_S = 0.1
BACKOFF_MAX_S = 2.0
SEND_BLOCK = 1 << 20  # bytes per socket write of a file body
USER_AGENT = "model-sync s3http"


class Credentials(NamedTuple):
    access_key: str
    secret_key: str
    token: str | None = None


class NoCredentialsError(Exception):
    """No credentials anywhere in the AWS default chain."""


class EndpointError(OSError):
    """The endpoint could not be reached, timed out or dropped the connection (after all retries)."""


class S3Error(Exception):
    """An S3 error response. `.response` mirrors botocore's ClientError.response (Error.Code,
    Error.Message, ResponseMetadata.HTTPStatusCode) so callers read both the same way."""

    def __init__(self, status: int, code: str, message: str, operation: str, bucket_region: str | None = None) -> None:
        super().__init__(f"An error occurred ({code}) when calling the {operation} operation: {message}")
        self.status = status
        self.code = code
        self.retried = False  # an earlier try of this request got no answer or a 5xx: S3 may have applied it
        self.bucket_region = bucket_region  # the bucket's region, when S3 says the request went to the wrong one
        self.response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}


class Response(NamedTuple):
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class Page(NamedTuple):
    """One ListObjectsV2 page: Contents as botocore returns them (Key, ETag, LastModified string, Size)."""

    contents: list[dict[str, Any]]
    prefixes: list[str]
    next_token: str | None


def env_credentials() -> Credentials | None:
    """The first link of the AWS default chain: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return Credentials(key, secret, os.environ.get("AWS_SESSION_TOKEN") or os.environ.get("AWS_SECURITY_TOKEN") or None)
    return None


def aws_endpoint(region: str, *, fips: bool = False, dualstack: bool = False) -> str:
    """The regional S3 endpoint, FIPS and/or dual-stack as AWS_USE_FIPS_ENDPOINT /
    AWS_USE_DUALSTACK_ENDPOINT ask (ref: https://docs.aws.amazon.com/general/latest/gr/s3.html)."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://s3{'-fips' if fips else ''}{'.dualstack' if dualstack else ''}.{region}.{suffix}"


def backoff(attempt: int) -> None:
    """Full-jitter exponential backoff before try `attempt` (1-based retries)."""
    import random  # only when a request is retried

    time.sleep(random.uniform(0, min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt)))  # noqa: S311 - jitter, not crypto


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def ca_bundle() -> str | None:
    """The CA file botocore would use: AWS_CA_BUNDLE, else certifi's (when installed), else None (the system store)."""
    explicit = os.environ.get("AWS_CA_BUNDLE")
    if explicit:
        return explicit
    try:
        import certifi
    except ImportError:
        return None
    return str(certifi.where())


def virtual_host_ok(bucket: str) -> bool:
    """A bucket name usable as a TLS host label (no dots: the wildcard certificate covers one label)."""
    return "." not in bucket and bucket == bucket.lower() and 3 <= len(bucket) <= 63


def _quote(value: str, safe: str = "/") -> str:
    return urllib.parse.quote(value, safe=safe + "~")


class Signer:
    """AWS Signature Version 4, header form (ref: https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html)."""

    def __init__(self, region: str, service: str = "s3") -> None:
        self.region = region
        self.service = service
        self._keys: dict[tuple[str, str], bytes] = {}

    def _signing_key(self, secret: str, day: str) -> bytes:
        cached = self._keys.get((secret, day))
        if cached is None:
            k = hmac.new(("AWS4" + secret).encode(), day.encode(), hashlib.sha256).digest()
            for part in (self.region, self.service, "aws4_request"):
                k = hmac.new(k, part.encode(), hashlib.sha256).digest()
            self._keys = {(secret, day): k}
            cached = k
        return cached

    def sign(self, method: str, host: str, path: str, query: dict[str, str], headers: dict[str, str], payload_sha256: str, creds: Credentials,
             now: datetime.datetime | None = None) -> dict[str, str]:  # fmt: skip
        """`headers` plus host, x-amz-date, x-amz-content-sha256, x-amz-security-token and Authorization,
        all of them signed. `path` is the already-encoded request path."""
        now = now or datetime.datetime.now(datetime.UTC)
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        day = stamp[:8]
        out = {k.lower(): str(v).strip() for k, v in headers.items()}
        out["host"] = host
        out["x-amz-date"] = stamp
        out["x-amz-content-sha256"] = payload_sha256
        if creds.token:
            out["x-amz-security-token"] = creds.token
        signed = sorted(out)  # every header sent except user-agent (added after signing, as the SDKs leave it out)
        canonical = "\n".join([
            method,
            path,
            "&".join(f"{_quote(k, '')}={_quote(v, '')}" for k, v in sorted(query.items())),
            "".join(f"{k}:{' '.join(out[k].split())}\n" for k in signed),
            ";".join(signed),
            payload_sha256,
        ])  # fmt: skip
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._signing_key(creds.secret_key, day), to_sign.encode(), hashlib.sha256).hexdigest()
        out["authorization"] = f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope}, SignedHeaders={';'.join(signed)}, Signature={signature}"
        return out


class XMLError(ValueError):
    """A response body that is not the plain XML S3 sends."""


def parse_xml(body: bytes) -> ET.Element:
    """S3 response XML. A document type declaration (entities: expansion and external-entity
    attacks) is refused; S3 never sends one. XMLError when refused or malformed."""
    import xml.etree.ElementTree as ET

    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise XMLError("XML with a DOCTYPE/ENTITY declaration; allowed: plain S3 response XML")
    try:
        return ET.fromstring(body)  # noqa: S314 - no DTD (checked above), so no entity expansion
    except ET.ParseError as e:
        raise XMLError(f"malformed XML: {e}") from None


def _xml_children(root: ET.Element) -> Iterator[tuple[str, ET.Element]]:
    for child in root:
        yield child.tag.rsplit("}", 1)[-1], child


def _xml_text(node: ET.Element, name: str) -> str | None:
    for tag, child in _xml_children(node):
        if tag == name:
            return child.text or ""
    return None


def parse_error(status: int, body: bytes, operation: str, headers: dict[str, str] | None = None) -> S3Error:
    """S3's <Error><Code/><Message/></Error>; a body-less error (HEAD) reports the status as the code,
    as botocore does. A request signed for the wrong region (301 PermanentRedirect, 400
    AuthorizationHeaderMalformed) carries the bucket's region (x-amz-bucket-region or <Region>)."""
    code, message, region = str(status), http.client.responses.get(status, ""), (headers or {}).get("x-amz-bucket-region")
    if body:
        try:
            root = parse_xml(body.strip())
            code = _xml_text(root, "Code") or code
            message = _xml_text(root, "Message") or message
            region = region or _xml_text(root, "Region")
        except XMLError:
            message = body[:200].decode("utf-8", "replace")
    wrong_region = status == 301 or code in ("PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException")
    return S3Error(status, code, message, operation, region if wrong_region and region else None)


def copy_result_error(body: bytes) -> S3Error | None:
    """CopyObject answers 200 and may still fail: S3 keeps the connection alive with whitespace and
    ends the body with <Error> (ref: https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html).
    None for a <CopyObjectResult>; an S3Error (status 200) otherwise."""
    try:
        root = parse_xml(body.strip())
    except XMLError as e:
        return S3Error(200, "InvalidResponse", f"CopyObject answer is not S3 XML ({e})", "CopyObject")
    tag = root.tag.rsplit("}", 1)[-1]
    if tag == "CopyObjectResult":
        return None
    if tag == "Error":
        return S3Error(200, _xml_text(root, "Code") or "InternalError", _xml_text(root, "Message") or "", "CopyObject")
    return S3Error(200, "InvalidResponse", f"CopyObject answer is <{tag}>; allowed: <CopyObjectResult>", "CopyObject")


def parse_list(body: bytes) -> Page:
    root = parse_xml(body)
    url_encoded = (_xml_text(root, "EncodingType") or "").lower() == "url"

    def decode(value: str) -> str:
        return urllib.parse.unquote_plus(value) if url_encoded else value

    contents: list[dict[str, Any]] = []
    prefixes: list[str] = []
    truncated = (_xml_text(root, "IsTruncated") or "").lower() == "true"
    for tag, node in _xml_children(root):
        if tag == "Contents":
            item: dict[str, Any] = {}
            for name, child in _xml_children(node):
                if name == "Key":
                    item["Key"] = decode(child.text or "")
                elif name in ("ETag", "LastModified", "StorageClass"):
                    item[name] = child.text or ""
                elif name == "Size":
                    item["Size"] = int(child.text or 0)
            contents.append(item)
        elif tag == "CommonPrefixes":
            prefixes.append(decode(_xml_text(node, "Prefix") or ""))
    token = _xml_text(root, "NextContinuationToken") if truncated else None
    return Page(contents, prefixes, token or None)


class Client:
    """Signed S3 requests to one endpoint. Thread-safe: each thread keeps its own connections."""

    def __init__(self, region: str, credentials: Callable[[], Credentials], endpoint_url: str | None = None, *, path_style: bool | None = None,
                 attempts: int = 3, connect_timeout: float = 5.0, read_timeout: float = 60.0) -> None:  # fmt: skip
        if attempts < 1:
            raise ValueError(f"attempts: {attempts!r}; allowed: 1 or more")
        url = urllib.parse.urlsplit(endpoint_url or aws_endpoint(region, fips=env_flag("AWS_USE_FIPS_ENDPOINT"), dualstack=env_flag("AWS_USE_DUALSTACK_ENDPOINT")))
        try:
            port = url.port
        except ValueError:
            port, url = None, url._replace(netloc="")
        if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment or url.username or url.password:
            raise ValueError(f"endpoint_url: {endpoint_url!r}; allowed: http(s)://host[:port][/path], no query or credentials")
        self.region = region
        self.scheme = url.scheme
        self.host = url.hostname  # without IPv6 brackets
        self.port = port or (443 if url.scheme == "https" else 80)
        self.base_path = url.path.rstrip("/")  # sent as given (already URI-encoded)
        self.custom_endpoint = endpoint_url is not None
        self.path_style = self.custom_endpoint if path_style is None else path_style
        self.credentials = credentials
        self.attempts = attempts
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.signer = Signer(region)
        self._local = threading.local()
        self._ssl: ssl.SSLContext | None = None
        self._proxy, self._proxy_headers = self._proxy_for()

    # ---- connections --------------------------------------------------------------------

    def _proxy_for(self) -> tuple[urllib.parse.SplitResult | None, dict[str, str]]:
        """HTTPS_PROXY / HTTP_PROXY unless NO_PROXY covers the host (urllib's rules, as requests and
        botocore read them), and its Proxy-Authorization from user:password in the proxy URL."""
        if not any(k.lower().endswith("_proxy") for k in os.environ):
            return None, {}
        import urllib.request

        if urllib.request.proxy_bypass(self.host):
            return None, {}
        proxy = urllib.request.getproxies().get(self.scheme)
        if not proxy:
            return None, {}
        url = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"{self.scheme}_proxy: {proxy!r}; allowed: an http://[user:password@]host:port proxy")
        headers = {}
        if url.username is not None:
            import base64

            pair = f"{urllib.parse.unquote(url.username)}:{urllib.parse.unquote(url.password or '')}"
            headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        return url, headers

    def _virtual(self, bucket: str) -> bool:
        return bool(bucket) and not self.path_style and virtual_host_ok(bucket)

    def address(self, bucket: str, key: str = "") -> tuple[str, str, str]:
        """(host to connect to, Host header, encoded path) of a request: virtual-hosted
        (<bucket>.<endpoint host>) unless path style is set or the bucket name cannot be a host label."""
        virtual = self._virtual(bucket)
        host = f"{bucket}.{self.host}" if virtual else self.host
        path = self.base_path + _quote(("" if virtual or not bucket else "/" + bucket) + ("/" + key if key else "")) or "/"
        return host, self._host_header(host), path

    def _host_header(self, host: str) -> str:
        """The Host header (and signed host): IPv6 literals in brackets, the port unless default."""
        shown = f"[{host}]" if ":" in host else host
        return shown if self.port == (443 if self.scheme == "https" else 80) else f"{shown}:{self.port}"

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            import ssl

            self._ssl = ssl.create_default_context(cafile=ca_bundle())
        return self._ssl

    def _connection(self, host: str) -> http.client.HTTPConnection:
        pool: dict[str, http.client.HTTPConnection] = self._local.__dict__.setdefault("pool", {})
        conn = pool.get(host)
        if conn is None:
            proxy = self._proxy
            if proxy is not None and self.scheme == "https":
                conn = http.client.HTTPSConnection(proxy.hostname or "", proxy.port or 80, timeout=self.connect_timeout, context=self._context(), blocksize=SEND_BLOCK)
                conn.set_tunnel(host, self.port, headers=self._proxy_headers)
            elif proxy is not None:
                conn = http.client.HTTPConnection(proxy.hostname or "", proxy.port or 80, timeout=self.connect_timeout, blocksize=SEND_BLOCK)
            elif self.scheme == "https":
                conn = http.client.HTTPSConnection(host, self.port, timeout=self.connect_timeout, context=self._context(), blocksize=SEND_BLOCK)
            else:
                conn = http.client.HTTPConnection(host, self.port, timeout=self.connect_timeout, blocksize=SEND_BLOCK)
            pool[host] = conn
        return conn

    def _drop(self, host: str) -> None:
        conn = self._local.__dict__.get("pool", {}).pop(host, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close this thread's connections (other threads' close when they are collected)."""
        for host in list(self._local.__dict__.get("pool", {})):
            self._drop(host)

    # ---- requests -----------------------------------------------------------------------

    def request(self, operation: str, method: str, bucket: str, key: str = "", *, query: dict[str, str] | None = None, headers: dict[str, str] | None = None,
                body: bytes | IO[bytes] | None = None, payload_sha256: str | None = None, ok: tuple[int, ...] = (200,)) -> Response:  # fmt: skip
        """One signed request with retries. `body`: bytes, or a seekable binary file (streamed; rewound
        per attempt) whose sha256 the caller passes as `payload_sha256`. A status outside `ok` -> S3Error."""
        query = dict(query or {})
        start = 0  # where a streamed body starts (rewound there for every try)
        if isinstance(body, bytes | bytearray):
            payload = payload_sha256 or hashlib.sha256(body).hexdigest()
            length = len(body)
        elif body is None:
            payload, length = EMPTY_SHA256, 0
        else:
            if payload_sha256 is None:
                raise ValueError("payload_sha256: None for a streamed body; allowed: the body's sha256 (hex)")
            payload = payload_sha256
            start = body.tell()
            length = os.fstat(body.fileno()).st_size - start
        host, host_header, path = self.address(bucket, key)
        target = path + ("?" + "&".join(f"{_quote(k, '')}={_quote(v, '')}" if v != "" else _quote(k, "") for k, v in sorted(query.items())) if query else "")
        extra: dict[str, str] = {}
        if self._proxy is not None and self.scheme == "http":  # absolute-form through an HTTP proxy
            target = f"http://{host_header}{target}"
            extra = self._proxy_headers
        last: BaseException | None = None
        for attempt in range(self.attempts):
            if attempt:
                backoff(attempt)
            signed = self.signer.sign(method, host_header, path, query, {**(headers or {}), "content-length": str(length)}, payload, self.credentials())
            signed.update({"user-agent": USER_AGENT, **extra})
            try:
                status, got, data = self._exchange(host, method, target, body, start, signed)
            except (OSError, http.client.HTTPException) as e:
                last = e
                continue
            if status in ok:
                return Response(status, got, data)
            err = parse_error(status, data if method != "HEAD" else b"", operation, got)
            err.retried = attempt > 0
            if status in RETRY_STATUS or err.code in RETRY_CODES:
                last = err
                continue
            raise err
        if isinstance(last, S3Error):
            raise last
        raise EndpointError(f"{self.scheme}://{host_header}: {type(last).__name__}: {last}") from last

    def _exchange(self, host: str, method: str, target: str, body: bytes | IO[bytes] | None, start: int, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """Send one request and read the whole response on this thread's connection to `host`.
        - A GET/HEAD on a kept-alive connection the server closed while idle is sent once more
          on a fresh one, not counted as an attempt (urllib3 and requests do the same). Writes are
          not: the first one may have been applied (the caller's retry, counted, decides).
        - A send cut short by the server (it answered early, e.g. 403, and closed): its answer
          is read and returned, so the error is S3's, not "connection reset".
        Any failure drops the connection."""
        while True:
            conn = self._connection(host)
            if conn.sock is not None and select.select([conn.sock], [], [], 0)[0]:
                # Readable while idle: the server closed it (or sent something unasked): never reuse.
                self._drop(host)
                conn = self._connection(host)
            reused = conn.sock is not None
            if body is not None and not isinstance(body, bytes | bytearray):
                body.seek(start)
            try:
                conn.timeout = self.connect_timeout
                if conn.sock is None:
                    conn.connect()
                conn.sock.settimeout(self.read_timeout)  # type: ignore[union-attr]
                try:
                    conn.request(method, target, body=body, headers=headers)
                except (BrokenPipeError, ConnectionResetError) as sent:
                    if not body:
                        raise
                    try:
                        early = conn.getresponse()
                    except (OSError, http.client.HTTPException):
                        raise sent from None
                    data = early.read()
                    self._drop(host)
                    return early.status, {k.lower(): v for k, v in early.getheaders()}, data
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self._drop(host)
                if reused and method in ("GET", "HEAD") and isinstance(e, http.client.RemoteDisconnected | BrokenPipeError | ConnectionResetError):
                    continue
                raise
            if resp.will_close:
                self._drop(host)
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data

    # ---- operations ---------------------------------------------------------------------

    def get_object(self, bucket: str, key: str) -> Response:
        return self.request("GetObject", "GET", bucket, key)

    def head_object(self, bucket: str, key: str) -> Response:
        return self.request("HeadObject", "HEAD", bucket, key)

    def put_object(self, bucket: str, key: str, body: bytes | IO[bytes], *, sha256_hex: str | None = None, content_type: str | None = None,
                   if_none_match: bool = False, if_match: str | None = None) -> Response:  # fmt: skip
        """PutObject with x-amz-checksum-sha256 (stored by S3 and checked against the body) and the
        same digest as the signed payload hash. `if_match` is an ETag without quotes."""
        if sha256_hex is None:
            if not isinstance(body, bytes | bytearray):
                raise ValueError("sha256_hex: None for a streamed body; allowed: the body's sha256 (hex)")
            sha256_hex = hashlib.sha256(body).hexdigest()
        headers = {"x-amz-checksum-sha256": _b64(sha256_hex), "x-amz-sdk-checksum-algorithm": "SHA256"}
        if content_type:
            headers["content-type"] = content_type
        if if_none_match:
            headers["if-none-match"] = "*"
        if if_match:
            headers["if-match"] = f'"{if_match}"'
        return self.request("PutObject", "PUT", bucket, key, headers=headers, body=body, payload_sha256=sha256_hex)

    def copy_object(self, bucket: str, key: str, source_bucket: str, source_key: str) -> Response:
        """Server-side copy; S3 computes and stores the SHA256 checksum of the copy."""
        headers = {"x-amz-copy-source": _quote(f"/{source_bucket}/{source_key}"), "x-amz-checksum-algorithm": "SHA256"}
        attempt = 0
        while True:
            resp = self.request("CopyObject", "PUT", bucket, key, headers=headers)
            err = copy_result_error(resp.body)
            if err is None:
                return resp
            attempt += 1
            if err.code not in RETRY_CODES or attempt >= self.attempts:
                raise err
            backoff(attempt)

    def list_objects_v2(self, bucket: str, prefix: str, *, delimiter: str | None = None, token: str | None = None, max_keys: int | None = None) -> Page:
        query = {"list-type": "2", "prefix": prefix, "encoding-type": "url"}
        if delimiter:
            query["delimiter"] = delimiter
        if token:
            query["continuation-token"] = token
        if max_keys is not None:
            query["max-keys"] = str(max_keys)
        body = self.request("ListObjectsV2", "GET", bucket, query=query).body
        try:
            return parse_list(body)
        except (XMLError, ValueError) as e:
            raise S3Error(200, "InvalidResponse", f"ListObjectsV2 answer is not S3 XML ({e})", "ListObjectsV2") from None

    def list_all(self, bucket: str, prefix: str, *, delimiter: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
        objects: list[dict[str, Any]] = []
        prefixes: list[str] = []
        token: str | None = None
        while True:
            page = self.list_objects_v2(bucket, prefix, delimiter=delimiter, token=token)
            objects += page.contents
            prefixes += page.prefixes
            if page.next_token is None:
                return objects, prefixes
            token = page.next_token

    def delete_objects(self, bucket: str, keys: list[str]) -> list[dict[str, str]]:
        """DeleteObjects (<= 1000 keys, quiet); returns the per-key errors."""
        from xml.sax.saxutils import escape

        body = ("<Delete><Quiet>true</Quiet>" + "".join(f"<Object><Key>{escape(k)}</Key></Object>" for k in keys) + "</Delete>").encode()
        digest = hashlib.sha256(body).hexdigest()
        headers = {"content-type": "application/xml", "x-amz-checksum-sha256": _b64(digest), "x-amz-sdk-checksum-algorithm": "SHA256",
                   "content-md5": _b64(hashlib.md5(body).hexdigest())}  # noqa: S324 - Content-MD5 is required by some servers, not a security use  # fmt: skip
        resp = self.request("DeleteObjects", "POST", bucket, query={"delete": ""}, headers=headers, body=body, payload_sha256=digest)
        failed: list[dict[str, str]] = []
        try:
            root = parse_xml(resp.body)
        except XMLError as e:
            raise S3Error(200, "InvalidResponse", f"DeleteObjects answer is not S3 XML ({e})", "DeleteObjects") from None
        for tag, node in _xml_children(root):
            if tag == "Error":
                failed.append({"Key": _xml_text(node, "Key") or "", "Code": _xml_text(node, "Code") or "", "Message": _xml_text(node, "Message") or ""})
        return failed


def _b64(hexdigest: str) -> str:
    import base64

    return base64.b64encode(bytes.fromhex(hexdigest)).decode()
