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
The result, pass or fail, is recorded at audit/verifications/<model>/<N>.json
("model-sync.verification/v1", model_sync.manifest) with the kind of evidence used; `promote`
requires it to pass. Works from CI without network access to the cluster (evidence = replica
smoke inferences read from the bucket).
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

from model_sync import errors, layout, manifest, model_config

DEFAULT_STALENESS = 120.0  # seconds; agents report at least every --heartbeat (30 s), also while a load is awaited
DEFAULT_DEPARTED = 300.0  # seconds = 10 x the default heartbeat: a replica silent this long is gone (pod replaced)
EVIDENCE_REPLICAS = "replica-smoke"  # every fresh replica's agent ran the smoke inference on loopback
DEPARTED = "departed"

# Triton TYPE_* -> (numpy dtype name, KServe v2 datatype)
# ref: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#datatypes
_DTYPES = {
    "TYPE_BOOL": ("bool", "BOOL"),
    "TYPE_UINT8": ("uint8", "UINT8"),
    "TYPE_UINT16": ("uint16", "UINT16"),
    "TYPE_UINT32": ("uint32", "UINT32"),
    "TYPE_UINT64": ("uint64", "UINT64"),
    "TYPE_INT8": ("int8", "INT8"),
    "TYPE_INT16": ("int16", "INT16"),
    "TYPE_INT32": ("int32", "INT32"),
    "TYPE_INT64": ("int64", "INT64"),
    "TYPE_FP16": ("float16", "FP16"),
    "TYPE_FP32": ("float32", "FP32"),
    "TYPE_FP64": ("float64", "FP64"),
    "TYPE_BF16": ("bfloat16", "BF16"),  # numpy has no bfloat16: ml_dtypes.bfloat16 (what tritonclient expects); binary only over HTTP
    "TYPE_STRING": ("object", "BYTES"),
}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str  # KServe v2 datatype, e.g. FP32
    numpy_dtype: str
    shape: tuple[int, ...]  # full request shape; -1 = any


PASSED, FAILED, NOT_RUN = manifest.CHECK_RESULTS


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
        return [k for k, v in self.replicas.items() if v == "READY"]

    @property
    def passed(self) -> bool:
        return (
            not self.problems
            and self.smoke_inference
            and bool(self.ready_replicas)
            and all(v == "READY" or is_departed(v) for v in self.replicas.values())
        )


def is_departed(state: str) -> bool:
    return state.startswith(DEPARTED + ":")


def tensor_specs(cfg: Any) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Request inputs and expected outputs of a ModelConfig (batch dim 1 prepended when batching)."""
    pb2 = model_config.pb2
    batch = (1,) if cfg.max_batch_size > 0 else ()

    def spec(t: Any) -> TensorSpec:
        type_name = pb2.DataType.Name(t.data_type)
        if type_name not in _DTYPES:
            raise ValueError(f"config.pbtxt tensor {t.name} data_type: {type_name}; allowed: one of {sorted(_DTYPES)} (verify cannot build a smoke input for it)")
        np_dtype, v2 = _DTYPES[type_name]
        return TensorSpec(t.name, v2, np_dtype, batch + tuple(int(d) for d in t.dims))

    return [spec(t) for t in cfg.input], [spec(t) for t in cfg.output]


def smoke_inputs(specs: list[TensorSpec]) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    for s in specs:
        shape = tuple(1 if d < 0 else d for d in s.shape)
        if s.numpy_dtype == "object":
            out[s.name] = np.full(shape, b"smoke", dtype=object)
        elif s.numpy_dtype == "bool":
            out[s.name] = np.zeros(shape, dtype=bool)
        elif s.numpy_dtype == "bfloat16":
            import ml_dtypes

            out[s.name] = np.ones(shape, dtype=ml_dtypes.bfloat16)
        else:
            out[s.name] = np.ones(shape, dtype=s.numpy_dtype)
    return out


def check_outputs(protocol: str, outputs: dict[str, tuple[str, tuple[int, ...]]], expected: list[TensorSpec]) -> list[str]:
    """Problems with what came back: outputs = name -> (datatype, shape)."""
    problems = []
    for s in expected:
        if s.name not in outputs:
            problems.append(f"smoke inference ({protocol}) output {s.name}: missing; allowed: every output declared in config.pbtxt")
            continue
        datatype, shape = outputs[s.name]
        if datatype != s.datatype:
            problems.append(f"smoke inference ({protocol}) output {s.name} datatype: {datatype}; allowed: {s.datatype}")
        if len(shape) != len(s.shape) or any(e >= 0 and e != a for e, a in zip(s.shape, shape, strict=False)):
            problems.append(f"smoke inference ({protocol}) output {s.name} shape: {list(shape)}; allowed: {list(s.shape)}")
    return problems


API_KEY_ENV = "MODEL_SYNC_TRITON_API_KEY"  # CLIENT:KEY, an ingressApiKeys entry (the ingress's basic auth)


def client_headers() -> dict[str, str]:
    """The ingress credentials for verify's own smoke inferences, from $MODEL_SYNC_TRITON_API_KEY
    (never a flag: a command line is visible to every user of the machine)."""
    import base64
    import os

    value = os.environ.get(API_KEY_ENV, "")
    if not value:
        return {}
    if ":" not in value:
        raise errors.usage(f"${API_KEY_ENV}: not CLIENT:KEY; allowed: an ingress client name and its API key (stack output ingressApiKeys)")
    return {"authorization": "Basic " + base64.b64encode(value.encode()).decode()}


def smoke_http(url: str, model: str, version: int, inputs: list[TensorSpec], outputs: list[TensorSpec], timeout: float = 30.0) -> list[str]:
    import tritonclient.http as httpclient

    host = url.split("://", 1)[-1].rstrip("/")
    data = smoke_inputs(inputs)
    try:
        client = httpclient.InferenceServerClient(host, ssl=url.startswith("https://"), connection_timeout=timeout, network_timeout=timeout)
        reqs = []
        for s in inputs:
            t = httpclient.InferInput(s.name, list(data[s.name].shape), s.datatype)
            t.set_data_from_numpy(data[s.name], binary_data=True)
            reqs.append(t)
        result = client.infer(model, reqs, model_version=str(version), outputs=[httpclient.InferRequestedOutput(o.name, binary_data=True) for o in outputs],
                              headers=client_headers())  # fmt: skip
        got = {}
        for o in outputs:
            meta = result.get_output(o.name)
            if meta is not None:
                got[o.name] = (str(meta["datatype"]), tuple(int(d) for d in meta["shape"]))
        client.close()
    except Exception as e:
        return [f"smoke inference (http) {model} {version}: {type(e).__name__}: {' '.join(str(e).split())[:200]}; allowed: a successful inference"]
    return check_outputs("http", got, outputs)


def smoke_grpc(url: str, model: str, version: int, inputs: list[TensorSpec], outputs: list[TensorSpec], timeout: float = 30.0) -> list[str]:
    import tritonclient.grpc as grpcclient

    data = smoke_inputs(inputs)
    try:
        client = grpcclient.InferenceServerClient(url, ssl=url.endswith(":443"))  # the ingress serves gRPC over TLS on :443
        reqs = []
        for s in inputs:
            t = grpcclient.InferInput(s.name, list(data[s.name].shape), s.datatype)
            t.set_data_from_numpy(data[s.name])
            reqs.append(t)
        result = client.infer(model, reqs, model_version=str(version), outputs=[grpcclient.InferRequestedOutput(o.name) for o in outputs], client_timeout=timeout,
                              headers=client_headers())  # fmt: skip
        got = {}
        for o in outputs:
            meta = result.get_output(o.name)
            if meta is not None:
                got[o.name] = (str(meta.datatype), tuple(int(d) for d in meta.shape))
        client.close()
    except Exception as e:
        return [f"smoke inference (grpc) {model} {version}: {type(e).__name__}: {' '.join(str(e).split())[:200]}; allowed: a successful inference"]
    return check_outputs("grpc", got, outputs)


def _tensor_bytes(array: Any) -> bytes:
    """Raw binary-extension bytes of a smoke input: BYTES elements are 4-byte little-endian length + data."""
    import struct

    if array.dtype == object:
        return b"".join(struct.pack("<I", len(x)) + x for x in array.reshape(-1))
    return bytes(array.tobytes())


def smoke_request(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> tuple[bytes, int]:
    """A binary-tensor inference request body and its JSON header length (stdlib + numpy only:
    the agent image has neither tritonclient[http] nor gRPC)."""
    # ref: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
    data = smoke_inputs(inputs)
    raw = {s.name: _tensor_bytes(data[s.name]) for s in inputs}
    header = {
        "inputs": [{"name": s.name, "shape": list(data[s.name].shape), "datatype": s.datatype, "parameters": {"binary_data_size": len(raw[s.name])}} for s in inputs],
        "outputs": [{"name": o.name, "parameters": {"binary_data": True}} for o in outputs],
    }
    head = json.dumps(header).encode()
    return head + b"".join(raw[s.name] for s in inputs), len(head)


def parse_reply(body: bytes, header_length: int | None) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (datatype, shape) of the outputs of a (binary-extension) inference reply."""
    doc = json.loads(body[:header_length] if header_length else body)
    return {str(o["name"]): (str(o["datatype"]), tuple(int(d) for d in o["shape"])) for o in doc.get("outputs", [])}


def smoke_loopback(probe: Any, model: str, version: int, config_text: str) -> list[str]:
    """The agent's smoke inference of `model` `version` through its TritonProbe (loopback HTTP);
    inputs and expected outputs from the pinned config text. Problems (empty: passed)."""
    cfg = model_config.parse(config_text, f"{model} config.pbtxt")
    try:
        inputs, outputs = tensor_specs(cfg)
    except ValueError as e:
        return [f"smoke inference (agent): {e}"]
    body, header_length = smoke_request(inputs, outputs)
    code, reply, reply_header = probe.infer(model, version, body, header_length)
    if code != 200:
        return [f"smoke inference (agent) {model} {version}: HTTP {code} {' '.join(reply.decode(errors='replace').split())[:200]}; allowed: a successful inference"]
    try:
        got = parse_reply(reply, reply_header)
    except (ValueError, KeyError, TypeError) as e:
        return [f"smoke inference (agent) {model} {version}: unreadable reply ({e}); allowed: a KServe v2 inference response"]
    return check_outputs("agent", got, outputs)


def _parse_time(value: Any) -> _dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return _dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.UTC)
    except ValueError:
        return None


def replica_states(
    status_docs: dict[str, dict[str, Any]], model: str, version: int, staleness: float, now: _dt.datetime, departed: float = DEFAULT_DEPARTED
) -> dict[str, str]:
    """'<deployment>/<replica>' -> 'READY', 'departed: ...' (silent > `departed` s: gone, not a
    failure) or what is wrong, for every replica that serves `model`. READY needs the version
    READY and the agent's passing smoke inference of it."""
    out: dict[str, str] = {}
    for key, doc in sorted(status_docs.items()):
        entry = (doc.get("models") or {}).get(model)
        if not isinstance(entry, dict):
            continue  # this deployment does not serve the model
        reported = _parse_time(doc.get("reported_at"))
        smoke: dict[str, Any] = entry["smoke"] if isinstance(entry.get("smoke"), dict) else {}
        if reported is None:
            out[key] = "no reported_at"
        elif (age := (now - reported).total_seconds()) > departed:
            out[key] = f"{DEPARTED}: last reported {age:.0f}s ago (> {departed:.0f}s)"
        elif age > staleness:
            out[key] = f"stale: reported {age:.0f}s ago (> {staleness:.0f}s)"
        elif entry.get("serving") != [version]:
            out[key] = f"serving {entry.get('serving')} ({entry.get('state')}: {entry.get('error') or 'pin not applied yet'})"
        elif entry.get("state") != "READY":
            out[key] = f"{entry.get('state')}: {entry.get('error') or 'not ready'}"
        elif smoke.get("version") != version:
            out[key] = f"READY, smoke inference of {version}: not run yet by the agent"
        elif smoke.get("ok") is not True:
            out[key] = f"READY, smoke inference of {version} failed: {smoke.get('detail')}"
        else:
            out[key] = "READY"
    return out


def served(status_docs: dict[str, dict[str, Any]], model: str, now: _dt.datetime, departed: float = DEFAULT_DEPARTED) -> dict[str, dict[str, Any]]:
    """'<deployment>/<replica>' -> {serving, state, error, failed (versions)} for every replica that reported `model`
    within `departed` seconds (what `status` shows: what is served, not what is pinned)."""
    out: dict[str, dict[str, Any]] = {}
    for key, doc in sorted(status_docs.items()):
        entry = (doc.get("models") or {}).get(model)
        reported = _parse_time(doc.get("reported_at"))
        if not isinstance(entry, dict) or reported is None or (now - reported).total_seconds() > departed:
            continue
        serving = entry.get("serving") if isinstance(entry.get("serving"), list) else []
        error = errors.one_line(str(entry.get("error") or "")) or None
        failed = sorted(int(v) for v in (entry.get("failed") or {}) if str(v).isdigit()) if isinstance(entry.get("failed"), dict) else []
        out[key] = {"serving": serving, "state": str(entry.get("state")), "error": error, "failed": failed}
    return out


def serves(replica: dict[str, Any], version: int | None) -> bool:
    """A replica (an entry of served()) serves exactly `version`, READY."""
    return replica["serving"] == [version] and replica["state"] == "READY"


def read_status_docs(repo: Any, deployments: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    objects, _ = repo.list(layout.STATUS_PREFIX)
    docs: dict[str, dict[str, Any]] = {}
    for obj in objects:
        rel = obj["Key"][len(layout.STATUS_PREFIX) :]
        if not rel.endswith(".json") or rel.count("/") != 1:
            continue
        deployment, replica = rel[:-5].split("/")
        if deployments and deployment not in deployments:
            continue
        data = repo.get(obj["Key"])
        if data is None:
            continue
        try:
            doc = json.loads(data)
        except ValueError:
            doc = {}
        docs[f"{deployment}/{replica}"] = doc if isinstance(doc, dict) else {}
    return docs


def verify(
    repo: Any,
    model: str,
    version: int,
    http_url: str | None,
    grpc_url: str | None,
    staleness: float = DEFAULT_STALENESS,
    deployments: tuple[str, ...] = (),
    now: _dt.datetime | None = None,
    departed: float = DEFAULT_DEPARTED,
) -> Verification:
    from model_sync import repository

    layout.check_model_name(model)
    layout.check_version(version)
    result = Verification(model, version)
    pin = repository.read_pin(repo, model)
    result.pinned = pin.version == version
    if not result.pinned:
        result.problems.append(f"pin {repo.uri(layout.config_key(model))}: version {pin.version}; allowed: {version} (verify the pinned version)")
    raw = repo.get(layout.manifest_key(model, version))
    if raw is None:
        result.problems.append(f"manifest {repo.uri(layout.manifest_key(model, version))}: missing; allowed: a published version")
        return result
    doc = manifest.read_manifest(raw, model, version)
    result.manifest_sha256 = manifest.sha256_bytes(raw)
    result.replicas = replica_states(read_status_docs(repo, deployments), model, version, staleness, now or _dt.datetime.now(_dt.UTC), departed)
    if not result.ready_replicas:
        result.problems.append(
            f"replicas: none reports {model} {version} READY with a passing smoke inference under {repo.uri(layout.STATUS_PREFIX)} "
            f"(within {departed:.0f}s); allowed: at least one fresh replica serving the version"
        )
    problems = [f"replica {k}: {v}" for k, v in result.replicas.items() if v != "READY" and not is_departed(v)]
    result.problems += problems
    replicas_ok = bool(result.ready_replicas) and not problems
    cfg = model_config.parse(doc["config_pbtxt"], f"manifest {model} {version} config_pbtxt")
    try:
        inputs, outputs = tensor_specs(cfg)
    except ValueError as e:
        inputs, outputs = [], []
        result.problems.append(f"smoke inference: {e}")
        replicas_ok = False
    result.checks["replicas"] = PASSED if replicas_ok else FAILED
    # A direct check runs only with an endpoint: without one it is "not run", never "failed".
    for name, url, smoke in (("http", http_url, smoke_http), ("grpc", grpc_url, smoke_grpc)):
        if url and inputs:
            direct = smoke(url, model, version, inputs, outputs)
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
        "schema": manifest.VERIFICATION_V2,
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
        "verified_at": manifest.now(),
        "detail": "; ".join(result.problems)[:2000] if result.problems else summary(result),
    }
    key = layout.verification_attempt_key(result.model, result.version, manifest.stamp(), secrets.token_hex(4))
    repo.put(key, manifest.dumps(doc))
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
        doc = manifest.read_verification(data, model, version)
        if doc.get("pinned", True):
            return key, doc
    legacy = layout.verification_key(model, version)
    data = repo.get(legacy)
    return (legacy, manifest.read_verification(data, model, version)) if data is not None else None


def wait_served(repo: Any, model: str, version: int, timeout: float, console: Any, interval: float = 2.0) -> dict[str, str]:
    """Poll the replicas' status reports until every replica serving `model` (reported within
    DEFAULT_DEPARTED) serves `version` READY, at least one; '<deployment>/<replica>' -> 'READY'.
    A replica that reports the version failed ends the wait at once. Raises CHECK_FAILED (exit 6)
    naming the replicas that do not serve it."""
    import time

    deadline = time.monotonic() + timeout
    console.line(f"waiting: {model} version {version} on every replica (up to {timeout:.0f}s)")
    while True:
        replicas = served(read_status_docs(repo), model, _dt.datetime.now(_dt.UTC))
        states = {key: "READY" if serves(r, version) else f"serving {r['serving'] or 'nothing'} ({r['state']}: {r['error'] or 'not switched yet'})"
                  for key, r in replicas.items()}  # fmt: skip
        lagging = {k: v for k, v in states.items() if v != "READY"}
        failed = {k: v for k, v in lagging.items() if version in replicas[k]["failed"]}
        if states and not lagging:
            console.line(f"served: {model} version {version} READY on {len(states)} replica(s)")
            return states
        if failed or time.monotonic() >= deadline:
            why = "; ".join(f"{k}: {v}" for k, v in (failed or lagging).items()) or f"no replica reports {model}"
            raise errors.SyncError(errors.CHECK_FAILED, f"wait: {model} version {version} is not served by every replica ({why}); allowed: replicas that load it (see `model-sync status`)")
        time.sleep(interval)
