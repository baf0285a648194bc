"""`verify`: is version N of a model really served in an environment?

Passes only when
  1. the bucket's pin for the model is version N and its manifest exists (its sha256 is recorded,
     `promote` checks it against the manifest it copies);
  2. every replica status file (status/<deployment>/<replica>.json, written by the agents) of the
     deployment(s) serving the model that reported within `departed` seconds reports version N
     READY, within `staleness` seconds, with a passing smoke inference of N run by the agent on
     the replica's loopback (inputs of the declared shape/dtype, outputs checked against the
     pinned config); at least one replica does. A replica silent for longer than `departed`
     (default 10 x the agents' 30 s heartbeat) is listed as departed and does not fail the check
     (pods are replaced on every rollout; a cleanly stopped agent deletes its own report);
  3. when a Triton endpoint is given (local demo, tests, an operator with network access),
     additionally a smoke inference through tritonclient over HTTP and over gRPC returns every
     declared output with the declared shape and dtype.
Every attempt, pass or fail, is recorded as a new audit/verifications/<model>/<N>/<stamp>-<hex>.json
("model-sync.verification/v2", model_sync.records.codec) with the kind of evidence used, never
overwriting an earlier one; `promote` requires the latest attempt made while N was pinned to
have passed (promote.gate_record). Works from CI without network access to the cluster
(evidence = replica smoke inferences read from the bucket). The replica status records are read
with model_sync.records.codec's strict reader (model_sync.observation.replicas, which also tells `status` and
--wait what the replicas serve).
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from model_sync import errors
from model_sync.contract import layout
from model_sync.observation import replicas, smoke
from model_sync.records import codec
from model_sync.records.codec import ReplicaState
from model_sync.s3.bucket import Bucket, who
from model_sync.triton_model import model_config
from model_sync.ui import Console
from model_sync.versions import catalog

if TYPE_CHECKING:
    from model_sync.environments import Environment

DEFAULT_STALENESS = 120.0  # seconds; agents report at least every --heartbeat (30 s), also while a load is awaited
EVIDENCE_REPLICAS = "replica-smoke"  # every fresh replica's agent ran the smoke inference on loopback
DEPARTED = "departed"
PASSED, FAILED, NOT_RUN = codec.CHECK_RESULTS


@dataclass
class Verification:
    model: str
    version: int
    replicas: dict[str, str] = field(default_factory=dict)  # "<deployment>/<replica>" -> READY | problem
    problems: list[str] = field(default_factory=list)
    smoke_inference: bool = False
    manifest_sha256: str | None = None
    pinned: bool = False  # the version was the pinned one when verify ran
    checks: dict[str, str] = field(default_factory=lambda: {"replicas": FAILED, "http": NOT_RUN, "grpc": NOT_RUN})

    @property
    def evidence(self) -> str:
        direct = "-".join(name for name in ("http", "grpc") if self.checks[name] != NOT_RUN)
        return f"{EVIDENCE_REPLICAS}+direct-{direct}" if direct else EVIDENCE_REPLICAS

    @property
    def ready_replicas(self) -> list[str]:
        return [k for k, v in self.replicas.items() if v == ReplicaState.READY]

    @property
    def passed(self) -> bool:
        return (
            not self.problems
            and self.smoke_inference
            and bool(self.ready_replicas)
            and all(v == ReplicaState.READY or is_departed(v) for v in self.replicas.values())
        )


def is_departed(state: str) -> bool:
    return state.startswith(DEPARTED + ":")


def replica_states(
    status_docs: dict[str, dict[str, Any]],
    model: str,
    version: int,
    staleness: float,
    now: _dt.datetime,
    departed: float = replicas.DEFAULT_DEPARTED,
) -> dict[str, str]:
    """'<deployment>/<replica>' -> 'READY', 'departed: ...' (silent > `departed` s: gone, not a
    failure) or what is wrong, for every replica that serves `model`. READY needs the version
    READY and the agent's passing smoke inference of it."""
    out: dict[str, str] = {}
    for key, doc in sorted(status_docs.items()):
        entry = (doc.get("models") or {}).get(model)
        if not isinstance(entry, dict):
            continue  # this deployment does not serve the model
        reported = replicas.reported_at(doc)
        agent_smoke: dict[str, Any] = entry["smoke"] if isinstance(entry.get("smoke"), dict) else {}
        if reported is None:
            out[key] = "no reported_at"
        elif (age := (now - reported).total_seconds()) > departed:
            out[key] = f"{DEPARTED}: last reported {age:.0f}s ago (> {departed:.0f}s)"
        elif age > staleness:
            out[key] = f"stale: reported {age:.0f}s ago (> {staleness:.0f}s)"
        elif entry.get("serving") != [version]:
            out[key] = (
                f"serving {entry.get('serving')} ({entry.get('state')}: {entry.get('error') or 'pin not applied yet'})"
            )
        elif entry.get("state") != ReplicaState.READY:
            out[key] = f"{entry.get('state')}: {entry.get('error') or 'not ready'}"
        elif agent_smoke.get("version") != version:
            out[key] = f"READY, smoke inference of {version}: not run yet by the agent"
        elif agent_smoke.get("ok") is not True:
            out[key] = f"READY, smoke inference of {version} failed: {agent_smoke.get('detail')}"
        else:
            out[key] = ReplicaState.READY
    return out


def verify(
    repo: Any,
    model: str,
    version: int,
    http_url: str | None,
    grpc_url: str | None,
    staleness: float = DEFAULT_STALENESS,
    deployments: tuple[str, ...] = (),
    now: _dt.datetime | None = None,
    departed: float = replicas.DEFAULT_DEPARTED,
) -> Verification:

    layout.check_model_name(model)
    layout.check_version(version)
    result = Verification(model, version)
    pin = catalog.read_pin(repo, model)
    result.pinned = pin.version == version
    if not result.pinned:
        result.problems.append(
            f"pin {repo.uri(layout.config_key(model))}: version {pin.version}; allowed: {version} (verify the "
            "pinned version)"
        )
    raw = repo.get(layout.manifest_key(model, version))
    if raw is None:
        result.problems.append(
            f"manifest {repo.uri(layout.manifest_key(model, version))}: missing; allowed: a published version"
        )
        return result
    doc = codec.read_manifest(raw, model, version)
    result.manifest_sha256 = codec.sha256_bytes(raw)
    result.replicas = replica_states(
        replicas.read_status_docs(repo, deployments),
        model,
        version,
        staleness,
        now or _dt.datetime.now(_dt.UTC),
        departed,
    )
    if not result.ready_replicas:
        result.problems.append(
            f"replicas: none reports {model} {version} READY with a passing smoke inference under "
            f"{repo.uri(layout.STATUS_PREFIX)} "
            f"(within {departed:.0f}s); allowed: at least one fresh replica serving the version"
        )
    problems = [
        f"replica {k}: {v}" for k, v in result.replicas.items() if v != ReplicaState.READY and not is_departed(v)
    ]
    result.problems += problems
    replicas_ok = bool(result.ready_replicas) and not problems
    cfg = model_config.parse(doc["config_pbtxt"], f"manifest {model} {version} config_pbtxt")
    try:
        inputs, outputs = smoke.tensor_specs(cfg)
    except ValueError as e:
        inputs, outputs = [], []
        result.problems.append(f"smoke inference: {e}")
        replicas_ok = False
    result.checks["replicas"] = PASSED if replicas_ok else FAILED
    # A direct check runs only with an endpoint: without one it is "not run", never "failed".
    # gRPC through the ingress names the deployment that serves the model (the replicas that report it).
    deployment = min((k.split("/", 1)[0] for k in result.ready_replicas), default=None)
    for name, url, direct_smoke in (
        ("http", http_url, smoke.smoke_http),
        ("grpc", grpc_url, functools.partial(smoke.smoke_grpc, deployment=deployment)),
    ):
        if url and inputs:
            direct = direct_smoke(url, model, version, inputs, outputs)
            result.checks[name] = FAILED if direct else PASSED
            result.problems += direct
    result.smoke_inference = replicas_ok and FAILED not in (result.checks["http"], result.checks["grpc"])
    return result


def check_line(result: Verification) -> str:
    """`replicas passed, http passed, grpc not run` (printed and recorded)."""
    return ", ".join(f"{name} {state.replace('-', ' ')}" for name, state in result.checks.items())


def summary(result: Verification) -> str:
    """One line for a passed verification (printed and recorded)."""
    gone = sum(1 for v in result.replicas.values() if is_departed(v))
    text = f"{len(result.ready_replicas)} replica(s) READY with a passing agent smoke inference"
    direct = [name for name in ("http", "grpc") if result.checks[name] == PASSED]
    if direct:
        text += f", smoke inference {'+'.join(direct)} ok"
    not_run = [name for name in ("http", "grpc") if result.checks[name] == NOT_RUN]
    if not_run:
        text += f", {'+'.join(not_run)} not run (no endpoint)"
    return text + (f", {gone} departed replica(s) ignored" if gone else "")


def record(repo: Any, result: Verification, by: str) -> str:
    """Append this attempt as audit/verifications/<model>/<N>/<stamp>-<hex>.json (a new key per
    attempt: earlier records are never overwritten); returns its key."""
    import secrets

    doc: dict[str, Any] = {
        "schema": codec.VERIFICATION_V2,
        "model": result.model,
        "version": result.version,
        "passed": result.passed,
        "pinned": result.pinned,
        "checks": dict(result.checks),
        "replicas": result.replicas,
        "smoke_inference": result.smoke_inference,
        "evidence": result.evidence,
        "manifest_sha256": result.manifest_sha256 or "0" * 64,
        "verified_by": by,
        "verified_at": codec.now(),
        "detail": "; ".join(result.problems)[:2000] if result.problems else summary(result),
    }
    key = layout.verification_attempt_key(result.model, result.version, codec.stamp(), secrets.token_hex(4))
    repo.put(key, codec.dumps(doc))
    return key


def gate_record(repo: Any, model: str, version: int) -> tuple[str, dict[str, Any]] | None:
    """(key, record) the promotion gate judges: the latest attempt made while `version` was
    pinned (attempts of an unpinned version never count), else the single v1 record of an
    older release; None when there is neither. Raises manifest.RecordError on a bad record."""
    objects, _ = repo.list(layout.verification_attempts_prefix(model, version))
    for key in sorted((o["Key"] for o in objects if o["Key"].endswith(".json")), reverse=True):
        data = repo.get(key)
        if data is None:
            continue
        doc = codec.read_verification(data, model, version)
        if doc.get("pinned", True):
            return key, doc
    legacy = layout.verification_key(model, version)
    data = repo.get(legacy)
    return (legacy, codec.read_verification(data, model, version)) if data is not None else None


def default_grpc_url(http_url: str | None) -> str | None:
    """The gRPC endpoint beside Triton's default HTTP port: host:8001 for http(s)://host:8000."""
    m = re.match(r"^https?://([^/:]+):8000/?$", http_url or "")
    return f"{m.group(1)}:8001" if m else None


def command(
    model: str, version: int, resolve: Callable[[], Environment], *, triton_url: str | None, grpc_url: str | None,
    deployments: tuple[str, ...],
    staleness: float | None, departed: float | None, record_attempt: bool, quiet: bool,
) -> tuple[dict[str, Any], errors.SyncError | None]:  # fmt: skip
    """`model-sync verify`: check, print each replica's state and the checks, record the attempt
    (unless not `record_attempt`). Returns the JSON document and the error to exit with (None:
    passed); a bad window, API key or unknown version raises before anything is recorded."""

    fresh = DEFAULT_STALENESS if staleness is None else staleness
    if fresh <= 0:
        raise errors.usage(f"--staleness: {staleness!r}; allowed: seconds > 0")
    gone = replicas.DEFAULT_DEPARTED if departed is None else departed
    if gone <= fresh:
        raise errors.usage(f"--departed: {gone!r}; allowed: seconds > --staleness ({fresh:g})")
    env = resolve()
    smoke.client_headers()  # malformed or doubled ingress credentials are a usage error (exit 2), before any check
    http_url = triton_url or env.triton_url
    grpc = grpc_url or env.grpc_url or default_grpc_url(http_url)
    repo = Bucket(env)
    console = Console(quiet)
    result = verify(repo, model, version, http_url, grpc, staleness=fresh, deployments=deployments, departed=gone)
    if result.manifest_sha256 is None:
        raise errors.not_found(result.problems[0])
    for replica, state in result.replicas.items():
        console.line(f"replica {replica}: {state}")
    console.line(f"checks: {check_line(result)}")
    key = record(repo, result, who(env, repo.session)) if record_attempt else None
    doc = {"env": env.name, "model": model, "version": version, "passed": result.passed, "pinned": result.pinned,
           "checks": result.checks,
           "replicas": result.replicas, "problems": result.problems,
           "record": repo.uri(key) if key else None}  # fmt: skip
    if result.passed:
        console.line(
            f"verified: {model} version {version} in {env.name}: {summary(result)}"
            + (f" (recorded {repo.uri(key)})" if key else "")
        )
        return doc, None
    more = f" (+{len(result.problems) - 1} more, recorded {repo.uri(key)})" if key else ""
    return doc, errors.SyncError(
        errors.CHECK_FAILED, f"verify {model} {version} in {env.name}: {result.problems[0]}{more}"
    )
