"""The S3 model-repository layout: one bucket per environment. Dependency-free, so the
Pulumi program (IAM policies) and model_sync share the same prefixes and key builders.

All keys are relative to the environment's repository root `s3://bucket[/prefix]/`
(see `model_sync.environments`; `Root.key()` joins the prefix).

    repository/<model>/config.pbtxt        the pin: the version's config with
                                            version_policy { specific { versions: [N] } }.
                                            Rewriting it (one conditional PUT) is a version's
                                            commit point (a gray release's: the canary record).
    repository/<model>/<N>/<file>          immutable version files (never overwritten)
    manifests/_pins/<model>.json           pin index: rewritten after every flip, so an agent
                                            lists one object per model to see what changed
                                            (`_` cannot start a model name: no collision)
    manifests/_canary/<model>.json         the model's gray release (schema "model-sync.canary/v1"):
                                            the canary version, the replicas serving it, each
                                            step's verdict; rewritten (If-Match) at every step,
                                            never deleted, state running | promoted | aborted
    manifests/<model>/<N>.json             per-version manifest (schema "model-sync.manifest/v4";
                                            every record's schema: model_sync.records.schemas; v1
                                            to v3 are still read): sha256 + size of every
                                            file, the pinned config text, source, exporter and
                                            framework versions, who, when
    status/<deployment>/<replica>.json     what each serving replica's agent has loaded / failed
    audit/allocations/<model>/<N>.json     version allocation marker, written first with
                                            If-None-Match: * (who/when/why); never deleted, so a
                                            version number is never reused, even after prune
    audit/pins/<model>/<stamp>-<N>.json    pin history, one record per flip (push, promote,
                                            rollback); <stamp> = UTC %Y%m%dT%H%M%S%fZ sorts in time
    audit/verifications/<model>/<N>/<stamp>-<hex>.json
                                            one record per `verify` attempt of version N in this
                                            environment, never overwritten (schema
                                            "model-sync.verification/v2"); the promotion gate
                                            reads the latest attempt made while N was pinned.
                                            (<N>.json: the single v1 record of older releases)
    audit/promotions/<model>/<N>.json      provenance of a promoted version N in the TARGET env
                                            (schema "model-sync.promotion/v2")
    audit/canaries/<model>/<id>.json       the final record of one gray release (its decision,
                                            thresholds and figures), written once at its end
    audit/.conditional-write-probe         constant key used to detect servers that ignore
                                            If-None-Match (rclone serve s3)

Serving pods read `repository/` and `manifests/` and write only `status/`; the CI
publisher writes `repository/`, `manifests/`, `audit/` in staging; the promoter reads
staging and writes `repository/`, `manifests/`, `audit/` in prod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REPOSITORY_PREFIX = "repository/"
MANIFESTS_PREFIX = "manifests/"
STATUS_PREFIX = "status/"
AUDIT_PREFIX = "audit/"

# What each identity may touch (used by components/identities and model_sync alike).
SERVING_READ_PREFIXES = (REPOSITORY_PREFIX, MANIFESTS_PREFIX)
SERVING_WRITE_PREFIXES = (STATUS_PREFIX,)
PUBLISHER_WRITE_PREFIXES = (REPOSITORY_PREFIX, MANIFESTS_PREFIX, AUDIT_PREFIX)

CONFIG_FILE = "config.pbtxt"
ALLOCATIONS_PREFIX = AUDIT_PREFIX + "allocations/"
PINS_PREFIX = AUDIT_PREFIX + "pins/"
VERIFICATIONS_PREFIX = AUDIT_PREFIX + "verifications/"
PROMOTIONS_PREFIX = AUDIT_PREFIX + "promotions/"
PROBE_KEY = AUDIT_PREFIX + ".conditional-write-probe"
PIN_INDEX_PREFIX = MANIFESTS_PREFIX + "_pins/"
CANARY_PREFIX = MANIFESTS_PREFIX + "_canary/"  # read by the agents (serving reads manifests/)
SIGNALS_PREFIX = MANIFESTS_PREFIX + "_"  # _pins/ and _canary/: what an agent lists every pass (one request)
CANARY_AUDIT_PREFIX = AUDIT_PREFIX + "canaries/"
CANARY_ID_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{8}$")  # <stamp>-<8 hex>: sorts in time
# A replica's id, its status record's name (status/<deployment>/<replica>.json): its pod's name
# (the agent's --replica-id, $POD_NAME) lower-cased into a DNS subdomain.
REPLICA_ID_RE = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")

# The contract between the stacks (components/) and model_sync, defined here once and imported by both:
# the model-name rule, the agent's entry point and the prefixes above.
# Model names become S3 key segments, Triton model names, directory names, the ingress's paths and a
# stack's `tritonDeployments.<d>.models`: one rule for all of them, the strictest (lower case, 63).
MODEL_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
MODEL_NAME_ALLOWED = "1-63 characters of a-z 0-9 _ -, starting with a letter or digit"
# The repository agent's command (the Deployment's init container and sidecar; the image's ENTRYPOINT).
AGENT_COMMAND = ("python", "-m", "model_sync", "agent")
# Version-relative file paths: one or more segments, no '..', no leading '/', no hidden files.
FILE_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$")
MAX_VERSION = 2**63 - 1  # Triton versions are int64


# Bucket names (S3 Express directory buckets and access-point aliases included) and access-point
# ARNs, which botocore turns into the access point's endpoint.
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
ACCESS_POINT_RE = re.compile(r"^arn:aws[a-z-]*:s3:[a-z0-9-]+:\d{12}:accesspoint/[a-z0-9][a-z0-9-]{1,48}[a-z0-9]$")


class LayoutError(ValueError):
    """A model name, version or file path that cannot be part of the layout."""


def check_model_name(name: str) -> str:
    if not isinstance(name, str) or not MODEL_NAME_RE.match(name):
        raise LayoutError(f"model name: {name!r}; allowed: {MODEL_NAME_ALLOWED}")
    return name


def check_version(version: int) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
        raise LayoutError(f"version: {version!r}; allowed: an integer 1..{MAX_VERSION}")
    return version


def check_file_path(path: str) -> str:
    """A file path relative to a version directory, '/'-separated."""
    parts = path.split("/") if isinstance(path, str) else [""]
    if not all(FILE_SEGMENT_RE.match(p) for p in parts):
        raise LayoutError(
            f"file path: {path!r}; allowed: '/'-separated segments of A-Z a-z 0-9 _ . + - not starting with '.' or '-'"
        )
    return path


# ---- key builders (relative to the repository root) ------------------------------------


def _under(prefix: str, model: str) -> str:
    """<prefix><model>/: one model's folder under one of the prefixes above."""
    return f"{prefix}{check_model_name(model)}/"


def _record(prefix: str, model: str, version: int) -> str:
    """<prefix><model>/<N>.json: the one record of a version under a record prefix."""
    return f"{_under(prefix, model)}{check_version(version)}.json"


def model_prefix(model: str) -> str:
    return _under(REPOSITORY_PREFIX, model)


def config_key(model: str) -> str:
    """The pin: repository/<model>/config.pbtxt."""
    return model_prefix(model) + CONFIG_FILE


def version_prefix(model: str, version: int) -> str:
    return f"{model_prefix(model)}{check_version(version)}/"


def version_file_key(model: str, version: int, path: str) -> str:
    return version_prefix(model, version) + check_file_path(path)


def manifests_prefix(model: str) -> str:
    return _under(MANIFESTS_PREFIX, model)


def manifest_key(model: str, version: int) -> str:
    return _record(MANIFESTS_PREFIX, model, version)


def pin_index_key(model: str) -> str:
    return f"{PIN_INDEX_PREFIX}{check_model_name(model)}.json"


def model_from_pin_index_key(rel: str) -> str | None:
    """'manifests/_pins/resnet.json' -> 'resnet'; anything else -> None."""
    leaf = rel[len(PIN_INDEX_PREFIX) :] if rel.startswith(PIN_INDEX_PREFIX) else ""
    name = leaf[:-5] if leaf.endswith(".json") else ""
    return name if MODEL_NAME_RE.match(name) else None


def canary_key(model: str) -> str:
    """manifests/_canary/<model>.json: the model's gray release, read by every agent."""
    return f"{CANARY_PREFIX}{check_model_name(model)}.json"


def model_from_canary_key(rel: str) -> str | None:
    """'manifests/_canary/resnet.json' -> 'resnet'; anything else -> None."""
    leaf = rel[len(CANARY_PREFIX) :] if rel.startswith(CANARY_PREFIX) else ""
    name = leaf[:-5] if leaf.endswith(".json") else ""
    return name if MODEL_NAME_RE.match(name) else None


def canary_audit_key(model: str, canary_id: str) -> str:
    if not isinstance(canary_id, str) or not CANARY_ID_RE.match(canary_id):
        raise LayoutError(f"canary id: {canary_id!r}; allowed: UTC %Y%m%dT%H%M%S%fZ-<8 hex digits>")
    return f"{_under(CANARY_AUDIT_PREFIX, model)}{canary_id}.json"


def allocations_prefix(model: str) -> str:
    return _under(ALLOCATIONS_PREFIX, model)


def allocation_key(model: str, version: int) -> str:
    return _record(ALLOCATIONS_PREFIX, model, version)


def pins_prefix(model: str) -> str:
    return _under(PINS_PREFIX, model)


def pin_record_key(model: str, stamp: str, version: int) -> str:
    if not re.match(r"^\d{8}T\d{12}Z$", stamp):
        raise LayoutError(f"pin stamp: {stamp!r}; allowed: UTC %Y%m%dT%H%M%S%fZ")
    return f"{pins_prefix(model)}{stamp}-{check_version(version)}.json"


def verification_key(model: str, version: int) -> str:
    """The single v1 verification record of older releases (read by the gate when no attempt exists)."""
    return _record(VERIFICATIONS_PREFIX, model, version)


def verification_attempts_prefix(model: str, version: int) -> str:
    return f"{_under(VERIFICATIONS_PREFIX, model)}{check_version(version)}/"


def verification_attempt_key(model: str, version: int, stamp: str, nonce: str) -> str:
    """One verify attempt; <stamp> (UTC %Y%m%dT%H%M%S%fZ) sorts attempts in time, <nonce> keeps
    two attempts of the same microsecond apart."""
    if not re.match(r"^\d{8}T\d{12}Z$", stamp) or not re.match(r"^[0-9a-f]{8}$", nonce):
        raise LayoutError(f"verification stamp: {stamp!r}-{nonce!r}; allowed: UTC %Y%m%dT%H%M%S%fZ and 8 hex digits")
    return f"{verification_attempts_prefix(model, version)}{stamp}-{nonce}.json"


def promotion_key(model: str, version: int) -> str:
    return _record(PROMOTIONS_PREFIX, model, version)


def status_key(deployment: str, replica: str) -> str:
    for what, value in (("deployment", deployment), ("replica", replica)):
        if not re.match(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$", value or ""):
            raise LayoutError(f"{what}: {value!r}; allowed: a Kubernetes DNS subdomain name")
    return f"{STATUS_PREFIX}{deployment}/{replica}.json"


# ---- key parsers ------------------------------------------------------------------------


def version_from_dir(segment: str) -> int | None:
    """'12/' or '12' -> 12; anything else (config.pbtxt, 'latest/', '012/') -> None."""
    seg = segment.rstrip("/")
    if re.match(r"^[1-9]\d{0,18}$", seg) and int(seg) <= MAX_VERSION:
        return int(seg)
    return None


def version_from_json_key(key: str) -> int | None:
    """'.../12.json' -> 12 (manifests, allocations, verifications, promotions)."""
    leaf = key.rsplit("/", 1)[-1]
    return version_from_dir(leaf[:-5]) if leaf.endswith(".json") else None


@dataclass(frozen=True)
class Root:
    """An environment's repository root: bucket + optional key prefix (no leading/trailing '/')."""

    bucket: str
    prefix: str = ""

    def __post_init__(self) -> None:
        if not (BUCKET_RE.match(self.bucket or "") or ACCESS_POINT_RE.match(self.bucket or "")):
            raise LayoutError(
                f"bucket: {self.bucket!r}; allowed: an S3 bucket name (3-63 of a-z 0-9 . -) or an access-point "
                "ARN (arn:aws:s3:REGION:ACCOUNT:accesspoint/NAME)"
            )
        if self.prefix.startswith("/") or self.prefix.endswith("/") or "//" in self.prefix:
            raise LayoutError(f"bucket prefix: {self.prefix!r}; allowed: key segments without leading/trailing '/'")

    @classmethod
    def parse(cls, uri: str) -> Root:
        """'s3://bucket', 's3://bucket/some/prefix[/]' or 's3://arn:aws:s3:REGION:ACCOUNT:accesspoint/NAME[/prefix]'
        -> Root."""
        if not isinstance(uri, str) or not uri.startswith("s3://"):
            raise LayoutError(f"bucket URI: {uri!r}; allowed: s3://bucket[/prefix]")
        rest = uri[5:]
        if rest.startswith("arn:"):  # the ARN holds one '/': accesspoint/NAME
            kind, _, after = rest.partition("/")
            name, _, prefix = after.partition("/")
            return cls(f"{kind}/{name}", prefix.rstrip("/"))
        bucket, _, prefix = rest.partition("/")
        return cls(bucket, prefix.rstrip("/"))

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def relative(self, key: str) -> str:
        if not self.prefix:
            return key
        head = self.prefix + "/"
        if not key.startswith(head):
            raise LayoutError(f"key: {key!r}; allowed: keys under {head!r}")
        return key[len(head) :]

    def uri(self, relative: str = "") -> str:
        return f"s3://{self.bucket}/{self.key(relative)}"
