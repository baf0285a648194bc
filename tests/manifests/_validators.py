"""Validators for rendered manifests (tests/manifests).

- built-in kinds: kubernetes-validate, strict (unknown fields are errors), against the
  stack's Kubernetes version;
- prometheus-operator and cert-manager custom resources: the cloudcoil pydantic models
  generated from the CRDs, plus `unknown_fields()` (the models ignore unknown keys);
- Traefik custom resources: @kubernetes-models/traefik run by Node (CRD schema) and the
  TypeScript compiler's excess-property check over the same documents (unknown keys).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import types
import typing
from pathlib import Path
from typing import Any

import kubernetes_validate
import pydantic

NODE_DIR = Path(__file__).resolve().parent / "node"


def crd_model(doc: dict[str, Any]) -> type[pydantic.BaseModel] | None:
    """The cloudcoil model class for a prometheus-operator / cert-manager document."""
    group = doc["apiVersion"].split("/")[0]
    if group == "monitoring.coreos.com":
        from cloudcoil.models.prometheus_operator import v1 as prom
        return typing.cast(type[pydantic.BaseModel], getattr(prom, doc["kind"]))
    if group == "cert-manager.io":
        from cloudcoil.models.cert_manager import v1 as cm
        return typing.cast(type[pydantic.BaseModel], getattr(cm, doc["kind"]))
    return None


def _models_in(annotation: Any) -> list[Any]:
    """Model classes / containers reachable from a field annotation."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for a in typing.get_args(annotation):
            out += _models_in(a)
        return out
    return [annotation]


def unknown_fields(model: Any, value: Any, path: str = "") -> list[str]:
    """Paths of keys in `value` the pydantic model does not declare (recursively)."""
    problems: list[str] = []
    origin = typing.get_origin(model)
    if origin in (list, typing.List) and isinstance(value, list):  # noqa: UP006
        (item,) = typing.get_args(model) or (Any,)
        for i, v in enumerate(value):
            for cand in _models_in(item):
                problems += unknown_fields(cand, v, f"{path}[{i}]")
        return problems
    if origin in (dict, typing.Dict) and isinstance(value, dict):  # noqa: UP006
        args = typing.get_args(model)
        if len(args) == 2:
            for k, v in value.items():
                for cand in _models_in(args[1]):
                    problems += unknown_fields(cand, v, f"{path}.{k}")
        return problems
    if isinstance(model, type) and issubclass(model, pydantic.BaseModel) and isinstance(value, dict):
        by_key = {}
        for fname, f in model.model_fields.items():
            by_key[f.alias or fname] = f
            by_key[fname] = f
        for k, v in value.items():
            if k not in by_key:
                problems.append(f"{path}.{k}" if path else k)
                continue
            for cand in _models_in(by_key[k].annotation):
                problems += unknown_fields(cand, v, f"{path}.{k}" if path else k)
    return problems


def validate_builtin(doc: dict[str, Any], kubernetes_version: str) -> None:
    kubernetes_validate.validate(doc, kubernetes_version, strict=True)


def validate_crd(doc: dict[str, Any]) -> list[str]:
    model = crd_model(doc)
    assert model is not None, f"no CRD model for {doc['apiVersion']} {doc['kind']}"
    model.model_validate(doc)
    return unknown_fields(model, doc)


def node_available() -> bool:
    return shutil.which("node") is not None and (NODE_DIR / "node_modules" / "@kubernetes-models" / "traefik").is_dir()


def validate_traefik(docs: list[dict[str, Any]]) -> list[str]:
    """Schema errors and unknown keys of Traefik documents ([] = all valid)."""
    out = subprocess.run(["node", "validate.mjs"], input=json.dumps(docs), cwd=NODE_DIR, capture_output=True, text=True, timeout=120, check=True)
    problems = [f"{f['kind']} {f['name']}: {f['error']}" for f in json.loads(out.stdout)]
    check_dir = NODE_DIR / f".check-{os.getpid()}"
    check_dir.mkdir(exist_ok=True)
    try:
        lines = []
        kinds = sorted({d["kind"] for d in docs})
        for kind in kinds:
            lines.append(f'import type {{ I{kind} }} from "@kubernetes-models/traefik/traefik.io/v1alpha1/{kind}";')
        for i, d in enumerate(docs):
            lines.append(f"// {d['kind']} {d['metadata']['name']}")
            lines.append(f"export const doc{i}: I{d['kind']} = {json.dumps(d)};")
        (check_dir / "docs.ts").write_text("\n".join(lines) + "\n")
        tsc = subprocess.run(
            ["node", "node_modules/typescript/bin/tsc", "--noEmit", "--strict", "--skipLibCheck", "--module", "nodenext",
             "--moduleResolution", "nodenext", "--target", "es2022", f"{check_dir.name}/docs.ts"],
            cwd=NODE_DIR, capture_output=True, text=True, timeout=300, check=False)
        problems += [line for line in tsc.stdout.splitlines() if "error TS" in line]
    finally:
        shutil.rmtree(check_dir, ignore_errors=True)
    return problems
