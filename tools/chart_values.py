"""Values the program sets that its pinned chart does not have: `unknown_keys(...)`.

Helm ignores a values key that no template reads, silently: a renamed key (traefik 41 turned
`logs.general` into `log`) keeps rendering and the setting is simply lost. So every key path
the program sets must exist in the chart's default values: the chart's values.yaml merged
over its subcharts' own (under each dependency's alias or name), as Helm merges them.

Below a free-form map (`FREE_FORM`) keys are the user's, not the chart's: labels, annotations,
node selectors, Kubernetes objects copied verbatim into a pod spec (resources, affinity,
security contexts), command-line flag maps and configuration files. Each is listed once here,
with its reason; the map's own key must still exist in the defaults. Whatever a free-form map
holds reaches the cluster through the rendered objects, which tests/manifests validate against
the upstream schemas.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tools import yamlio

# (chart, dotted path pattern) -> why keys below it are not the chart's. `**` matches any
# number of leading segments, `*` exactly one.
FREE_FORM: dict[tuple[str, str], str] = {
    ("*", "**.nodeSelector"): "a node label map, copied into the pod spec",
    ("*", "**.resources"): "a Kubernetes ResourceRequirements, copied into the container spec",
    ("*", "**.affinity"): "a Kubernetes Affinity, copied into the pod spec",
    ("*", "**.securityContext"): "a Kubernetes (Pod)SecurityContext, copied into the spec",
    ("*", "**.containerSecurityContext"): "a Kubernetes SecurityContext, copied into the container spec",
    ("*", "**.podSecurityContext"): "a Kubernetes PodSecurityContext, copied into the pod spec",
    ("*", "**.livenessProbe"): "a Kubernetes Probe, copied into the container spec",
    ("*", "**.additionalLabels"): "a label map",
    ("cluster-autoscaler", "extraArgs"): "cluster-autoscaler flags (--<key>=<value>), one per key",
    ("cluster-autoscaler", "expanderPriorities"): "the priority expander's ConfigMap: priority -> node-group regexes",
    ("kube-prometheus-stack", "alertmanager.config"): "Alertmanager's own configuration file, written as-is",
    (
        "kube-prometheus-stack",
        "prometheus.prometheusSpec.storageSpec",
    ): "the operator's StorageSpec (a PVC template), copied into the Prometheus resource",
    ("loki", "loki.schemaConfig"): "Loki's schema_config block, written into its configuration file",
    ("loki", "loki.limits_config"): "Loki's limits_config block, written into its configuration file",
    ("loki", "loki.compactor"): "Loki's compactor block, written into its configuration file",
    ("loki", "loki.storage"): "the chart's storage block; the filesystem type takes no bucket names",
    (
        "prometheus-adapter",
        "rules.custom",
    ): "prometheus-adapter discovery rules (a list), written into its configuration file",
    ("cert-manager", "config"): "the controller's ControllerConfiguration, written as-is into its config file",
}


@dataclass(frozen=True)
class Unknown:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v)
        return out
    return base if over is None and base is not None else over


def _chart_defaults(files: dict[str, bytes], prefix: str) -> dict[str, Any]:
    values = yamlio.load(files.get(f"{prefix}values.yaml", b"")) or {}
    meta = yamlio.load(files[f"{prefix}Chart.yaml"]) or {}
    subcharts: dict[str, str] = {}
    for name in files:
        rest = name[len(prefix) :] if name.startswith(f"{prefix}charts/") else None
        parts = rest.split("/") if rest else []
        if len(parts) == 3 and parts[2] == "Chart.yaml":
            sub_meta = yamlio.load(files[name]) or {}
            subcharts[str(sub_meta.get("name"))] = f"{prefix}charts/{parts[1]}/"
    for dep in meta.get("dependencies") or []:
        sub = subcharts.get(dep["name"])
        if sub is None:
            raise ValueError(f"{prefix}Chart.yaml: dependency {dep['name']!r} is not packaged under {prefix}charts/")
        key = dep.get("alias") or dep["name"]
        values[key] = _merge(_chart_defaults(files, sub), values.get(key))
        # Helm itself reads a dependency's `condition` paths (the first one set wins), so
        # they are keys of the chart even where values.yaml leaves them out.
        for condition in filter(None, (c.strip() for c in str(dep.get("condition") or "").split(","))):
            *parents, leaf = condition.split(".")
            node = values
            for part in parents:
                if node.get(part) is None:
                    node[part] = {}
                if not isinstance(node[part], dict):
                    break
                node = node[part]
            else:
                node.setdefault(leaf, None)
    return values


@cache
def default_values(archive: Path) -> dict[str, Any]:
    """The chart's default values with its subcharts' merged in, read from the packaged archive."""
    files: dict[str, bytes] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.isfile() and member.name.rsplit("/", 1)[-1] in ("values.yaml", "Chart.yaml"):
                handle = tar.extractfile(member)
                if handle is not None:
                    files[member.name] = handle.read()
    tops = {n.split("/", 1)[0] for n in files}
    if len(tops) != 1:
        raise ValueError(f"{archive}: expected one chart folder, found {sorted(tops)}")
    return _chart_defaults(files, f"{tops.pop()}/")


def matches(pattern: list[str], path: list[str]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(matches(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return bool(path) and pattern[0] in ("*", path[0]) and matches(pattern[1:], path[1:])


def free_form_reason(chart: str, path: list[str]) -> str | None:
    for (owner, pattern), reason in FREE_FORM.items():
        if owner in ("*", chart) and matches(pattern.split("."), path):
            return reason
    return None


def unknown_keys(chart: str, values: Any, defaults: Any, path: list[str] | None = None) -> list[Unknown]:
    """Every key path in `values` that `defaults` lacks (free-form maps excepted)."""
    path = path or []
    if not isinstance(values, dict) or free_form_reason(chart, path) is not None:
        return []
    if not isinstance(defaults, dict):
        if path and defaults is not None:
            return [
                Unknown(".".join(path), f"a map where the chart's default is {type(defaults).__name__} {defaults!r}")
            ]
        defaults = {}
    out: list[Unknown] = []
    for key, value in values.items():
        here = [*path, str(key)]
        if key not in defaults:
            out.append(Unknown(".".join(here), "not in the chart's default values (Helm ignores it)"))
            continue
        out += unknown_keys(chart, value, defaults[key], here)
    return out
