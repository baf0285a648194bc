"""model_sync.agent.pins: the versions a config.pbtxt pins and the files its backend needs, on
real config texts parsed through model_sync.triton_model.model_config (Triton's protobuf model config)."""

from __future__ import annotations

import pytest

from model_sync.agent.exceptions import VersionRejected
from model_sync.agent.pins import backend_files, pinned_versions
from model_sync.triton_model import model_config

PYTHON = 'name: "add"\nbackend: "python"\nmax_batch_size: 0\n'
LIBTORCH = 'name: "lt"\nplatform: "pytorch_libtorch"\nmax_batch_size: 0\n'


def pinned(text: str, version: int) -> str:
    return str(model_config.pinned_text(model_config.parse(text), version))


def test_pinned_versions_of_a_config_pinned_by_model_config() -> None:
    assert pinned_versions(pinned(PYTHON, 7)) == (7,)


def test_pinned_versions_are_sorted() -> None:
    text = PYTHON + "version_policy { specific { versions: [ 3, 1, 2 ] } }\n"
    assert pinned_versions(text) == (1, 2, 3)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (PYTHON, "version_policy: not 'specific'"),
        (PYTHON + "version_policy { latest { num_versions: 1 } }\n", "version_policy: not 'specific'"),
        (PYTHON + "version_policy { all { } }\n", "version_policy: not 'specific'"),
        (PYTHON + "version_policy { specific { } }\n", "version_policy: not 'specific'"),
        (PYTHON + "max_batch_sise: 4\n", "max_batch_sise"),
    ],
    ids=["no-policy", "latest", "all", "empty-specific", "misspelled-field"],
)
def test_pinned_versions_rejects_a_config_that_pins_nothing_or_does_not_parse(text: str, match: str) -> None:
    with pytest.raises(VersionRejected, match=match):
        pinned_versions(text)


@pytest.mark.parametrize(
    ("text", "files"),
    [
        (PYTHON, ("model.py",)),
        (LIBTORCH, ("model.pt",)),
        (LIBTORCH + 'default_model_filename: "net.pt"\n', ("net.pt",)),
        ('name: "o"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\n', ("model.onnx",)),
        ('name: "t"\nbackend: "tensorrt"\nmax_batch_size: 0\n', ("model.plan",)),
        ('name: "c"\nbackend: "custom"\nmax_batch_size: 0\n', ()),
    ],
    ids=["python", "libtorch", "libtorch-named", "onnx", "tensorrt", "unknown-backend"],
)
def test_backend_files_of_a_pinned_config(text: str, files: tuple[str, ...]) -> None:
    assert backend_files(pinned(text, 1)) == files


def test_backend_files_rejects_an_unparsable_config() -> None:
    with pytest.raises(VersionRejected, match="backend"):
        backend_files('name: "add"\nbackend: python\n')
