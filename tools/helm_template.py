"""Render every Helm release a stack declares with helm and its pinned upstream chart.

Input: what tools/render.py wrote for the stack (`build/<stack>/helm/<release>.yaml`: chart,
version, namespace and exactly the values the program passes). Output, beside it:

  build/<stack>/charts/<release>.yaml   everything `helm install` would send for that release
                                        (hooks included, test hooks left out), except CRDs
  build/<stack>/crds/<release>.yaml     the CRDs it installs (from the chart's crds/ folder or
                                        its templates); apart because checkov has no check for
                                        them and spends ~25 s per stack parsing them

Each release is rendered with `helm template` on the cached archive (tools/charts.py), the
stack's Kubernetes version (`--kube-version`) and `--api-versions` for what the cluster will
serve: the GA API groups of that Kubernetes version (from the upstream OpenAPI schemas that
kubernetes-validate ships) plus every version of every CRD the stack's releases install. That
is where Helm enforces each chart's values.schema.json, and where a chart picks its API
versions. The CRDs are collected by a first pass with the built-in groups only.

Renders run in parallel and are cached in `.cache/helm-template/` by a hash of everything
that goes into them (archive digest, release, namespace, values, versions, flags), so an
unchanged release costs a file read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from components.upstream import versions
from tools import charts, yamlio

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_CACHE = ROOT / ".cache" / "helm-template"
_GA = re.compile(r"^v\d+$")


class RenderError(Exception):
    """A release helm refuses to render (schema violation, template failure)."""


@dataclass(frozen=True)
class Release:
    """One Helm release as the program records it."""

    key: str  # the file stem under build/<stack>/helm (the release resource's logical name)
    name: str
    namespace: str
    chart: versions.HelmChart
    values: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> Release:
        doc = yamlio.load(path.read_text())
        pinned = {(c.reference, c.version): c for c in charts.pinned_charts()}
        chart = pinned.get((doc["chart"], str(doc["version"])))
        if chart is None:
            raise RenderError(
                f"{path}: chart {doc['chart']} {doc['version']} is not pinned in components/upstream/versions.py"
            )
        return cls(path.stem, doc["name"], doc["namespace"], chart, normalise(doc.get("values") or {}))


def normalise(value: Any) -> Any:
    """Numbers as the Helm provider sends them: the mocks record every number as a float
    (a protobuf Struct), and the provider's JSON writes an integral float as an integer."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def load_releases(stack_dir: Path) -> list[Release]:
    return [Release.load(p) for p in sorted((stack_dir / "helm").glob("*.yaml"))]


def kubernetes_version(stack_dir: Path) -> str:
    """The EKS cluster's Kubernetes minor version, as the program records it (inventory.json)."""
    inventory = json.loads((stack_dir / "inventory.json").read_text())
    found = {r["inputs"].get("version") for r in inventory if r["type"] == "aws:eks/cluster:Cluster"}
    if len(found) != 1 or not isinstance(next(iter(found)), str):
        raise RenderError(
            f"{stack_dir}/inventory.json: expected one EKS cluster with a version, found {sorted(map(str, found))}"
        )
    return str(found.pop())


@cache
def builtin_api_versions(kubernetes_version: str) -> tuple[str, ...]:
    """`group/version` and `group/version/Kind` of every GA built-in API of that Kubernetes
    minor version, read from the OpenAPI schemas kubernetes-validate ships."""
    import importlib.resources

    root = (
        importlib.resources.files("kubernetes_validate")
        / "kubernetes-json-schema"
        / f"v{kubernetes_version}.0-local-strict"
    )
    defs = json.loads((root / "_definitions.json").read_text())["$defs"]
    out: set[str] = set()
    for schema in defs.values():
        if "kind" not in schema.get("properties", {}):
            continue
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            if not _GA.match(gvk["version"]) or gvk["kind"].endswith("List"):
                continue
            group_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            out.update((group_version, f"{group_version}/{gvk['kind']}"))
    if not out:
        raise RenderError(f"no built-in API versions found for Kubernetes {kubernetes_version}")
    return tuple(sorted(out))


def crd_api_versions(docs: Iterable[dict[str, Any]]) -> set[str]:
    """`group/version` and `group/version/Kind` of every served version of the CRDs in docs."""
    out: set[str] = set()
    for doc in docs:
        if doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for v in spec["versions"]:
            if v.get("served", True):
                out.update((f"{spec['group']}/{v['name']}", f"{spec['group']}/{v['name']}/{spec['names']['kind']}"))
    return out


@cache
def _digest(path: Path, mtime_ns: int) -> str:
    """An archive's sha256, once per file version (every release is rendered twice)."""
    del mtime_ns  # part of the cache key only
    return hashlib.sha256(path.read_bytes()).hexdigest()


@cache
def _helm_pin() -> str:
    """The pinned helm package (tools/helm/package-lock.json): a bump invalidates the cache."""
    return hashlib.sha256((ROOT / "tools" / "helm" / "package-lock.json").read_bytes()).hexdigest()


class _Loader(yamlio.Loader):
    """PyYAML's safe loader, except that a bare `=` is the string "=" (as in Kubernetes'
    YAML parser) rather than YAML 1.1's `value` tag, which CRD schemas use in enums."""


def _value_as_string(loader: _Loader, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.ScalarNode)  # the `value` tag is resolved for plain scalars only
    return loader.construct_scalar(node)


_Loader.add_constructor("tag:yaml.org,2002:value", _value_as_string)


def _dump(docs: list[dict[str, Any]]) -> str:
    """YAML documents through libyaml's emitter (PyYAML's own is ~25x slower on the CRDs)."""
    return str(yaml.dump_all(docs, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False))


def parse(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=_Loader) if d]


@dataclass(frozen=True)
class Renderer:
    """helm template with one cache; `jobs` renders at a time."""

    helm: Path = charts.HELM
    chart_cache: Path = charts.CACHE
    cache_dir: Path = TEMPLATE_CACHE
    jobs: int = max(2, os.cpu_count() or 2)

    def template(self, release: Release, kubernetes_version: str, api_versions: Iterable[str]) -> str:
        archive = charts.archive_path(release.chart, self.chart_cache)
        if not archive.is_file():
            raise RenderError(f"{archive} is missing; run `make charts`")
        apis = sorted(set(api_versions))
        key = hashlib.sha256(
            json.dumps(
                {
                    "archive": _digest(archive, archive.stat().st_mtime_ns),
                    "helm": _helm_pin(),
                    "name": release.name,
                    "namespace": release.namespace,
                    "values": release.values,
                    "kube": kubernetes_version,
                    "apis": apis,
                    "flags": ["--include-crds", "--skip-tests"],
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()
        cached = self.cache_dir / f"{key}.yaml"
        if cached.is_file():
            return cached.read_text()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=self.cache_dir, prefix=".values-", delete=False) as f:
            yaml.safe_dump(release.values, f, sort_keys=True)
            values_file = f.name
        try:
            done = subprocess.run(
                [
                    str(self.helm),
                    "template",
                    release.name,
                    str(archive),
                    "--namespace",
                    release.namespace,
                    "--values",
                    values_file,
                    "--kube-version",
                    f"{kubernetes_version}.0",
                    "--api-versions",
                    ",".join(apis),
                    "--include-crds",
                    "--skip-tests",
                ],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
                env=charts.helm_env(),
            )
        finally:
            os.unlink(values_file)
        if done.returncode != 0:
            raise RenderError(
                f"{release.key} ({release.chart.chart} {release.chart.version}): {' '.join(done.stderr.split())}"
            )
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}")
        tmp.write_text(done.stdout)
        os.replace(tmp, cached)
        return done.stdout

    def objects(self, release: Release, kubernetes_version: str, api_versions: Iterable[str]) -> list[dict[str, Any]]:
        """`template`'s output as objects; parsed once per output and kept as JSON beside it
        (a YAML parse of the CRDs costs ~1 s a stack, the JSON read ~50 ms)."""
        text = self.template(release, kubernetes_version, api_versions)
        cached = self.cache_dir / f"{hashlib.sha256(text.encode()).hexdigest()}.objects.json"
        if cached.is_file():
            docs: list[dict[str, Any]] = json.loads(cached.read_text())
            return docs
        docs = parse(text)
        try:
            encoded = json.dumps(docs)
        except TypeError:  # a YAML-only value (a timestamp): not kept, parsed again next time
            return docs
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}")
        tmp.write_text(encoded)
        os.replace(tmp, cached)
        return docs

    def render_all(self, releases: list[Release], kubernetes_version: str) -> Rendered:
        """Every release rendered against the built-in APIs plus all the releases' CRDs."""
        builtin = builtin_api_versions(kubernetes_version)

        def attempt(release: Release, apis: Iterable[str]) -> list[dict[str, Any]] | str:
            try:
                return self.objects(release, kubernetes_version, apis)
            except RenderError as exc:
                return str(exc)

        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            first = list(pool.map(lambda r: attempt(r, builtin), releases))
            apis = set(builtin) | crd_api_versions(d for docs in first if isinstance(docs, list) for d in docs)
            final = list(pool.map(lambda r: attempt(r, apis), releases))
        return Rendered(
            objects={r.key: docs for r, docs in zip(releases, final, strict=True) if isinstance(docs, list)},
            errors={r.key: docs for r, docs in zip(releases, final, strict=True) if isinstance(docs, str)},
            api_versions=tuple(sorted(apis)),
        )


@dataclass(frozen=True)
class Rendered:
    """What a stack's releases render to: objects per release key, helm's refusal per key."""

    objects: dict[str, list[dict[str, Any]]]
    errors: dict[str, str]
    api_versions: tuple[str, ...]


def render_stack(stack_dir: Path, renderer: Renderer | None = None) -> Rendered:
    """Render the releases recorded under stack_dir into stack_dir/charts and stack_dir/crds
    (raises RenderError naming every release helm refuses, after writing the others)."""
    renderer = renderer or Renderer()
    rendered = renderer.render_all(load_releases(stack_dir), kubernetes_version(stack_dir))
    for folder in ("charts", "crds"):
        (stack_dir / folder).mkdir(exist_ok=True)
        for stale in (stack_dir / folder).glob("*.yaml"):
            stale.unlink()
    for key, docs in rendered.objects.items():
        objects = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
        crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
        (stack_dir / "charts" / f"{key}.yaml").write_text(_dump(objects))
        if crds:
            (stack_dir / "crds" / f"{key}.yaml").write_text(_dump(crds))
    if rendered.errors:
        raise RenderError("; ".join(rendered.errors[k] for k in sorted(rendered.errors)))
    return rendered
