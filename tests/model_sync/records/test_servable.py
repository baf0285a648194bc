"""model_sync.records.servable, the one rule the agent applies before it places a pinned version
and every command that pins applies before it writes: a version is servable under a pin of its
own config (one version: the manifest's own text and number) whose backend's files the manifest
lists; each refusal names its bounded reason."""

from __future__ import annotations

from typing import Any

import pytest

from model_sync.records.servable import Reason, unservable
from model_sync.triton_model import model_config

CONFIG = 'name: "m"\nbackend: "python"\nmax_batch_size: 0\n'


def _pin(version: int, text: str = CONFIG) -> str:
    return str(model_config.pinned_text(model_config.parse(text), version, "m"))


def _doc(version: int, files: tuple[str, ...] = ("model.py",), text: str | None = None) -> dict[str, Any]:
    return {
        "version": version,
        "config_pbtxt": _pin(version) if text is None else text,
        "files": {f: {"sha256": "0" * 64, "size": 1} for f in files},
    }


def test_a_version_pinned_by_its_own_config_with_its_backends_files_is_servable() -> None:
    assert unservable(_doc(3), _pin(3), "manifests/m/3.json", "repository/m/config.pbtxt") is None
    libtorch = 'name: "m"\nplatform: "pytorch_libtorch"\nmax_batch_size: 0\n'
    assert unservable(_doc(3, ("model.pt",), _pin(3, libtorch)), _pin(3, libtorch), "x", "y") is None


@pytest.mark.parametrize(
    ("doc", "pin", "reason", "message"),
    [
        (_doc(3, ("model.pt",)), _pin(3), Reason.BACKEND_FILES_MISSING,
         "manifest manifests/m/3.json: lists no model.py; allowed: a version with every file its backend needs "
         "(model_config.required_files)"),
        (_doc(3), _pin(3, CONFIG.replace("max_batch_size: 0", "max_batch_size: 4")), Reason.CONFIG_MISMATCH,
         "pin repository/m/config.pbtxt: differs from manifest config_pbtxt (pins version(s) [3], manifest version "
         "3); allowed: the config text recorded in manifests/m/3.json"),
        (_doc(3, text=_pin(4)), _pin(4), Reason.CONFIG_MISMATCH, "(pins version(s) [4], manifest version 3)"),
        (_doc(3), "name: \"m\"\nbakend: \"python\"\n", Reason.PIN_INVALID, "allowed: a config.pbtxt Triton parses"),
    ],
)  # fmt: skip
def test_each_refusal_names_its_reason(doc: dict[str, Any], pin: str, reason: Reason, message: str) -> None:
    problem = unservable(doc, pin, "manifests/m/3.json", "repository/m/config.pbtxt")
    assert problem is not None
    assert problem.reason is reason
    assert message in str(problem)
    assert "\n" not in str(problem)


def test_a_pin_of_several_versions_is_not_compared_with_each_manifests_own_text() -> None:
    """The agent reads each version's manifest of a multi-version pin: no manifest holds that text."""
    both = _pin(3).replace("versions: 3", "versions: [3, 4]")
    assert unservable(_doc(3), both, "x", "y") is None
    assert unservable(_doc(3, ("model.pt",)), both, "x", "y") is not None
