"""mypy skips the subpackages of the Pulumi providers the program does not use, and torch, onnx
and moto whole (pyproject.toml's overrides: a cold run over all of them was most of make test's
typecheck). A skipped module is Any to mypy, so these tests protect what it still checks: every
subpackage of pulumi_aws and pulumi_kubernetes the typed code names, and every top-level module of
each installed provider, is followed; the rest stays skipped."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What `make typecheck` checks (the Makefile's two mypy runs).
TYPED = ("components", "model_sync", "tools", "__main__.py", "bootstrap/__main__.py")
# provider package -> the alias the code imports it as, and subpackages the program certainly calls
PROVIDERS = {"pulumi_aws": ("aws", {"ec2", "eks", "iam", "s3"}), "pulumi_kubernetes": ("k8s", {"core", "helm"})}
SKIPPED_WHOLE = {"moto.*", "torch", "torch.*", "onnx", "onnx.*", "onnxscript.*", "onnxruntime.*", "matplotlib.*"}


def _follow(setting: str) -> set[str]:
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    return {module for o in overrides if o.get("follow_imports") == setting for module in o["module"]}


def _typed_sources() -> list[Path]:
    files: list[Path] = []
    for name in TYPED:
        path = ROOT / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _package(provider: str) -> Path:
    return Path(str(importlib.import_module(provider).__file__)).parent


def _subpackages_used(provider: str) -> set[str]:
    alias = PROVIDERS[provider][0]
    uses = re.compile(
        rf"\b{alias}\.([a-z][a-z0-9_]*)\b|\b{provider}\.([a-z][a-z0-9_]*)|from {provider} import ([a-z0-9_, ]+)"
    )
    subpackages = {p.name for p in _package(provider).iterdir() if (p / "__init__.py").is_file()}
    used: set[str] = set()
    for path in _typed_sources():
        for match in uses.finditer(path.read_text()):
            names = match.group(1) or match.group(2) or match.group(3)
            used |= {n.strip() for n in names.split(",")} & subpackages
    return used


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_provider_subpackage_the_typed_code_uses_is_followed_by_mypy(provider: str) -> None:
    used = _subpackages_used(provider)
    assert PROVIDERS[provider][1] <= used, used  # the reader finds the program's calls
    followed = _follow("normal")
    missing = sorted(s for s in used if not {f"{provider}.{s}", f"{provider}.{s}.*"} <= followed)
    assert not missing, f"add {provider}.<name> and {provider}.<name>.* to pyproject's followed list: {missing}"


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_the_package_and_every_top_level_module_of_each_provider_are_followed(provider: str) -> None:
    modules = {provider} | {f"{provider}.{p.stem}" for p in _package(provider).glob("*.py") if p.stem != "__init__"}
    assert len(modules) > 4, modules
    assert not sorted(modules - _follow("normal"))


def test_everything_else_of_the_providers_and_the_heavy_libraries_is_skipped() -> None:
    assert {f"{p}.*" for p in PROVIDERS} | SKIPPED_WHOLE <= _follow("skip")
