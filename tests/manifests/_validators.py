"""Validators for the whole rendered cluster (tests/manifests).

- built-in kinds: kubernetes-validate, strict (unknown fields are errors), against the
  stack's Kubernetes version;
- custom resources: the `openAPIV3Schema` of the CRDs the pinned charts themselves ship
  (rendered with the stack's values), made strict the way the API server's strict field
  validation is: an object schema without `x-kubernetes-preserve-unknown-fields` takes no
  other keys. `metadata` goes through the built-in ObjectMeta schema. Then the schema's CEL
  rules (`x-kubernetes-validations`), as the API server runs them on a create: over the object
  with the schema's defaults applied, each rule with `self` bound to the value at its node.
  Transition rules (those reading `oldSelf`) only run on an update and are left out; a rule the
  CEL library cannot evaluate (a Kubernetes-only function) is reported as such, never passed.
ref: https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import cel
import jsonschema
import kubernetes_validate
import kubernetes_validate.utils

_OPENAPI_ONLY = ("nullable", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")

# kubernetes-validate reads and parses its schema files on every call, the 2 MB
# _definitions.json included (~15 ms a document); they never change, so read each once.
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)


def validate_builtin(doc: dict[str, Any], kubernetes_version: str) -> None:
    kubernetes_validate.validate(doc, kubernetes_version, strict=True)


def strict_schema(schema: Any) -> Any:
    """An OpenAPI v3 (structural) CRD schema as a JSON schema that refuses unknown fields."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: strict_schema(v) if k in ("items", "not", "allOf", "anyOf", "oneOf") else v
        for k, v in schema.items()
        if k not in _OPENAPI_ONLY
    }
    if "properties" in schema:
        out["properties"] = {k: strict_schema(v) for k, v in schema["properties"].items()}
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = strict_schema(schema["additionalProperties"])
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in schema and "additionalProperties" not in schema and not preserve:
        out["additionalProperties"] = False
    return out


def defaulted(schema: dict[str, Any], value: Any) -> Any:
    """`value` with the structural schema's defaults filled in, as the API server stores it."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for k, v in value.items():
            sub = props.get(k) or (extra if isinstance(extra, dict) else None)
            out[k] = defaulted(sub, v) if sub else v
        for k, p in props.items():
            if k not in out and "default" in p:
                out[k] = defaulted(p, copy.deepcopy(p["default"]))
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [defaulted(schema["items"], v) for v in value]
    return value


def cel_problems(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Every CEL rule of `schema` that `value` (already defaulted) breaks, or that cannot be evaluated."""
    problems = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue
        try:
            ok = cel.evaluate(rule["rule"], {"self": value})
        except Exception as exc:
            problems.append(f"{path or '<root>'}: CEL rule not evaluable ({type(exc).__name__}: {exc}): {rule['rule']}")
            continue
        if ok is not True:
            problems.append(f"{path or '<root>'}: {rule.get('message') or rule['rule']}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                problems += cel_problems(sub, v, f"{path}.{k}" if path else k)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            problems += cel_problems(schema["items"], v, f"{path}.{i}")
    return problems


@dataclass(frozen=True)
class CrdVersion:
    kind: str
    namespaced: bool
    validator: jsonschema.protocols.Validator
    schema: dict[str, Any]


class CrdSchemas:
    """Custom-resource validation against the CRDs found in a render."""

    def __init__(self, crds: Iterable[dict[str, Any]]) -> None:
        self.versions: dict[tuple[str, str], CrdVersion] = {}
        for crd in crds:
            spec = crd["spec"]
            for version in spec["versions"]:
                if not version.get("served", True):
                    continue
                schema = copy.deepcopy(version.get("schema", {}).get("openAPIV3Schema", {}))
                schema.setdefault("properties", {})["metadata"] = {"type": "object"}
                validator = jsonschema.Draft4Validator(strict_schema(schema))
                api_version = f"{spec['group']}/{version['name']}"
                self.versions[(api_version, spec["names"]["kind"])] = CrdVersion(
                    spec["names"]["kind"], spec["scope"] == "Namespaced", validator, schema
                )

    def validate(self, doc: dict[str, Any], kubernetes_version: str) -> list[str]:
        """Problems with a custom resource ([] = valid): no CRD, schema errors, bad metadata."""
        crd = self.versions.get((doc.get("apiVersion"), doc.get("kind")))  # type: ignore[arg-type]
        if crd is None:
            return [f"no CRD in the render serves {doc.get('apiVersion')} {doc.get('kind')}"]
        problems = [
            f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in sorted(crd.validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
        ]
        if not problems:
            problems = cel_problems(crd.schema, defaulted(crd.schema, doc))
        meta = doc.get("metadata") or {}
        if crd.namespaced != ("namespace" in meta):
            problems.append(
                f"metadata.namespace: {'required' if crd.namespaced else 'not allowed'} for a "
                f"{'namespaced' if crd.namespaced else 'cluster-scoped'} {crd.kind}"
            )
        try:
            validate_builtin({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}, kubernetes_version)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"metadata: {exc.message}")
        return problems
