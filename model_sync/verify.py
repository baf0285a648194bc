"""`verify`: is version N of a model really served in an environment?

Passes only when
  1. the bucket's pin for the model is version N and its manifest exists (its sha256 is recorded,
     `promote` checks it against the manifest it copies);
  2. every replica status file (status/<deployment>/<replica>.json, written by the agents) of the
     deployment(s) serving the model reports version N READY, reported within `staleness`
     seconds, and there is at least one such replica;
  3. a smoke inference through tritonclient over HTTP and over gRPC returns every declared
     output with the declared shape and dtype (from the pinned config.pbtxt).
The result, pass or fail, is recorded at audit/verifications/<model>/<N>.json
("model-sync.verification/v1", model_sync.manifest), which `promote` requires to pass.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

from model_sync import layout, manifest, model_config

DEFAULT_STALENESS = 120.0  # seconds; agents report at least every --heartbeat (30 s)

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
    "TYPE_STRING": ("object", "BYTES"),
}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str  # KServe v2 datatype, e.g. FP32
    numpy_dtype: str
    shape: tuple[int, ...]  # full request shape; -1 = any


@dataclass
class Verification:
    model: str
    version: int
    replicas: dict[str, str] = field(default_factory=dict)  # "<deployment>/<replica>" -> READY | problem
    problems: list[str] = field(default_factory=list)
    smoke_inference: bool = False
    manifest_sha256: str | None = None

    @property
    def passed(self) -> bool:
        return not self.problems and self.smoke_inference and bool(self.replicas) and all(v == "READY" for v in self.replicas.values())


def tensor_specs(cfg: Any) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Request inputs and expected outputs of a ModelConfig (batch dim 1 prepended when batching)."""
    pb2 = model_config.pb2
    batch = (1,) if cfg.max_batch_size > 0 else ()

    def spec(t: Any) -> TensorSpec:
        type_name = pb2.DataType.Name(t.data_type)
        if type_name not in _DTYPES:
            raise ValueError(f"{t.name} data_type: {type_name}; allowed: one of {sorted(_DTYPES)}")
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
        result = client.infer(model, reqs, model_version=str(version), outputs=[httpclient.InferRequestedOutput(o.name, binary_data=True) for o in outputs])
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
        client = grpcclient.InferenceServerClient(url)
        reqs = []
        for s in inputs:
            t = grpcclient.InferInput(s.name, list(data[s.name].shape), s.datatype)
            t.set_data_from_numpy(data[s.name])
            reqs.append(t)
        result = client.infer(model, reqs, model_version=str(version), outputs=[grpcclient.InferRequestedOutput(o.name) for o in outputs], client_timeout=timeout)
        got = {}
        for o in outputs:
            meta = result.get_output(o.name)
            if meta is not None:
                got[o.name] = (str(meta.datatype), tuple(int(d) for d in meta.shape))
        client.close()
    except Exception as e:
        return [f"smoke inference (grpc) {model} {version}: {type(e).__name__}: {' '.join(str(e).split())[:200]}; allowed: a successful inference"]
    return check_outputs("grpc", got, outputs)


def _parse_time(value: Any) -> _dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return _dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.UTC)
    except ValueError:
        return None


def replica_states(status_docs: dict[str, dict[str, Any]], model: str, version: int, staleness: float, now: _dt.datetime) -> dict[str, str]:
    """'<deployment>/<replica>' -> 'READY' or what is wrong, for every replica that serves `model`."""
    out: dict[str, str] = {}
    for key, doc in sorted(status_docs.items()):
        entry = (doc.get("models") or {}).get(model)
        if not isinstance(entry, dict):
            continue  # this deployment does not serve the model
        reported = _parse_time(doc.get("reported_at"))
        if reported is None:
            out[key] = "no reported_at"
        elif (age := (now - reported).total_seconds()) > staleness:
            out[key] = f"stale: reported {age:.0f}s ago (> {staleness:.0f}s)"
        elif entry.get("serving") != [version]:
            out[key] = f"serving {entry.get('serving')} ({entry.get('state')}: {entry.get('error') or 'pin not applied yet'})"
        elif entry.get("state") != "READY":
            out[key] = f"{entry.get('state')}: {entry.get('error') or 'not ready'}"
        else:
            out[key] = "READY"
    return out


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
) -> Verification:
    from model_sync import repository

    layout.check_model_name(model)
    layout.check_version(version)
    result = Verification(model, version)
    pin = repository.read_pin(repo, model)
    if pin.version != version:
        result.problems.append(f"pin {repo.uri(layout.config_key(model))}: version {pin.version}; allowed: {version} (verify the pinned version)")
    raw = repo.get(layout.manifest_key(model, version))
    if raw is None:
        result.problems.append(f"manifest {repo.uri(layout.manifest_key(model, version))}: missing; allowed: a published version")
        return result
    doc = manifest.read_manifest(raw, model, version)
    result.manifest_sha256 = manifest.sha256_bytes(raw)
    result.replicas = replica_states(read_status_docs(repo, deployments), model, version, staleness, now or _dt.datetime.now(_dt.UTC))
    if not result.replicas:
        result.problems.append(f"replicas: none report {model} under {repo.uri(layout.STATUS_PREFIX)}; allowed: at least one agent serving the model")
    result.problems += [f"replica {k}: {v}" for k, v in result.replicas.items() if v != "READY"]
    cfg = model_config.parse(doc["config_pbtxt"], f"manifest {model} {version} config_pbtxt")
    inputs, outputs = tensor_specs(cfg)
    smoke: list[str] = []
    if http_url:
        smoke += smoke_http(http_url, model, version, inputs, outputs)
    if grpc_url:
        smoke += smoke_grpc(grpc_url, model, version, inputs, outputs)
    if not http_url and not grpc_url:
        smoke.append("smoke inference: no Triton endpoint; allowed: --triton-url / --grpc-url or tritonUrl in model-sync.yaml")
    result.problems += smoke
    result.smoke_inference = not smoke
    return result


def record(repo: Any, result: Verification, by: str) -> str:
    """Write audit/verifications/<model>/<N>.json; returns its key."""
    doc: dict[str, Any] = {
        "schema": "model-sync.verification/v1",
        "model": result.model,
        "version": result.version,
        "passed": result.passed,
        "replicas": result.replicas,
        "smoke_inference": result.smoke_inference,
        "manifest_sha256": result.manifest_sha256 or "0" * 64,
        "verified_by": by,
        "verified_at": manifest.now(),
        "detail": "; ".join(result.problems)[:2000] if result.problems else "every replica READY, smoke inference http+grpc ok",
    }
    key = layout.verification_key(result.model, result.version)
    repo.put(key, manifest.dumps(doc))
    return key
