"""mypy skips the pulumi_aws subpackages the program does not use (pyproject.toml's overrides: a
cold run over all of them was most of make test's typecheck). A skipped module is Any to mypy, so
these tests protect what it still checks: every pulumi_aws subpackage the typed code names, and
every top-level module of the installed pulumi_aws, is followed; anything else stays skipped."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pulumi_aws

ROOT = Path(__file__).resolve().parents[1]
# What `make typecheck` checks (the Makefile's two mypy runs).
TYPED = ("components", "model_sync", "tools", "__main__.py", "bootstrap/__main__.py")
PACKAGE = Path(pulumi_aws.__file__).parent
USES = re.compile(r"\baws\.([a-z][a-z0-9_]*)\b|\bpulumi_aws\.([a-z][a-z0-9_]*)|from pulumi_aws import ([a-z0-9_, ]+)")


def _follow(setting: str) -> set[str]:
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    return {module for o in overrides if o.get("follow_imports") == setting for module in o["module"]}


def _typed_sources() -> list[Path]:
    files: list[Path] = []
    for name in TYPED:
        path = ROOT / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _subpackages_used() -> set[str]:
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    used: set[str] = set()
    for path in _typed_sources():
        for match in USES.finditer(path.read_text()):
            names = match.group(1) or match.group(2) or match.group(3)
            used |= {n.strip() for n in names.split(",")} & subpackages
    return used


def test_every_pulumi_aws_subpackage_the_typed_code_uses_is_followed_by_mypy() -> None:
    used = _subpackages_used()
    assert {"ec2", "eks", "iam", "s3"} <= used, used  # the reader finds the program's calls
    followed = _follow("normal")
    missing = sorted(s for s in used if not {f"pulumi_aws.{s}", f"pulumi_aws.{s}.*"} <= followed)
    assert not missing, f"add pulumi_aws.<name> and pulumi_aws.<name>.* to pyproject's followed list: {missing}"


def test_the_package_and_every_top_level_module_of_pulumi_aws_are_followed() -> None:
    modules = {"pulumi_aws"} | {f"pulumi_aws.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert len(modules) > 10, modules
    assert not sorted(modules - _follow("normal"))


def test_everything_else_of_pulumi_aws_and_moto_is_skipped() -> None:
    assert {"pulumi_aws.*", "moto.*"} <= _follow("skip")
