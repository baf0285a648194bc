"""model_sync/records/compatibility.py: the compatibility record's one writer and strict reader."""

from __future__ import annotations

import pytest

from model_sync.records import codec, compatibility
from model_sync.records.compatibility import Result

IMAGE = "nvcr.io/nvidia/tritonserver:25.10-py3"


def test_the_writer_builds_what_the_reader_accepts() -> None:
    doc = compatibility.record(IMAGE, "2.9.0a0", Result.COMPATIBLE, None)
    assert doc == {"triton_image": IMAGE, "libtorch_version": "2.9.0a0", "result": "compatible", "detail": None}
    assert compatibility.read(doc) == doc
    assert [r.value for r in Result] == ["compatible", "exempt", "skew-allowed"]  # the schema's enum


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"result": "maybe"}, r"^compatibility\.result: 'maybe'; allowed: one of"),
        ({"extra": 1}, r"^compatibility"),
        ({"detail": 3}, r"^compatibility\.detail: 3"),
    ],
)
def test_the_reader_refuses_what_the_schema_does_not_allow(change, match) -> None:
    doc = {**compatibility.record(IMAGE, None, Result.EXEMPT, "python backend"), **change}
    with pytest.raises(codec.RecordError, match=match):
        compatibility.read(doc)
    without = {k: v for k, v in compatibility.record(IMAGE, None, Result.EXEMPT, None).items() if k != "detail"}
    with pytest.raises(codec.RecordError, match=r"detail"):
        compatibility.read(without)
