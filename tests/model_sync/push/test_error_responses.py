"""model_sync/push/error_responses.py: which InferenceResponse calls of a model.py answer with an error
(Triton counts those as successes), read from the syntax tree, and the one warning line push prints
for a model (tests/model_sync/push/test_publish.py runs it through a real push)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from model_sync.push import error_responses
from model_sync.triton_model import model_directory
from tests.model_sync.helpers import python_model

SOURCE = textwrap.dedent(
    """\
    import triton_python_backend_utils as pb_utils
    from triton_python_backend_utils import InferenceResponse, TritonError

    def answers(out, err, kwargs, args):
        pb_utils.InferenceResponse(error=pb_utils.TritonError("boom"))  # 5: error keyword
        InferenceResponse(out, TritonError("boom"))  # 6: second positional
        pb_utils.InferenceResponse(output_tensors=out, error=err)  # 7: a variable may hold an error
        pb_utils.InferenceResponse(
            [], error=TritonError("on the call's first line")
        )
        pb_utils.InferenceResponse(output_tensors=out)  # 11..16: no error
        pb_utils.InferenceResponse(out, error=None)
        pb_utils.InferenceResponse(out, None)
        pb_utils.InferenceResponse(**kwargs)  # unknown: not named
        pb_utils.InferenceResponse(*args)
        pb_utils.InferenceRequest(model_name="m", requested_output_names=[], inputs=[], error=err)  # not a response
        text = "pb_utils.InferenceResponse(error=pb_utils.TritonError('in a string'))"
        # pb_utils.InferenceResponse(error=pb_utils.TritonError("in a comment"))
    """
)


def test_error_keywords_and_second_positionals_are_named_by_line_none_and_unknowns_are_not() -> None:
    """Every way of passing an error is found (a call spanning lines by its first), and nothing that
    passes none is: error=None, no error, **kwargs, another class, strings and comments."""
    assert error_responses.error_response_lines(SOURCE) == [5, 6, 7, 8]
    assert error_responses.error_response_lines(SOURCE.encode()) == [5, 6, 7, 8]


def test_source_that_does_not_parse_raises_for_the_caller() -> None:
    """The parser's error reaches the caller (warning() turns it into no warning, not a crash)."""
    with pytest.raises(SyntaxError):
        error_responses.error_response_lines("def execute(self, requests)\n    return []\n")


def test_the_warning_names_file_and_lines_and_only_for_a_python_models_model_py(tmp_path: Path) -> None:
    """One line per model naming model.py's path and every line; other files of the version, a
    model.py that does not parse and a model of another backend give none."""
    m = model_directory.load(
        str(python_model(tmp_path, "m", {"model.py": SOURCE.encode(), "helper.py": SOURCE.encode()}))
    )
    assert error_responses.warning(m) == (
        f"m: {tmp_path}/m/1/model.py:5 (and lines 6, 7, 8) answers requests with InferenceResponse(error=...): "
        "Triton counts those as successes, so the gray release and every alert on nv_inference_request_failure "
        "miss them; raise pb_utils.TritonModelException instead"
    )
    two = model_directory.load(str(python_model(tmp_path, "two", {"model.py": b"InferenceResponse(error=e)\n" * 2})))
    assert str(error_responses.warning(two)).startswith(f"two: {tmp_path}/two/1/model.py:1 (and line 2) answers ")
    # helper.py is not scanned; neither is a model.py that does not parse, nor another backend's files
    helper = model_directory.load(
        str(python_model(tmp_path, "h", {"model.py": b"# ok\n", "helper.py": SOURCE.encode()}))
    )
    broken = model_directory.load(
        str(python_model(tmp_path, "b", {"model.py": b"def execute(self\n" + SOURCE.encode()}))
    )
    onnx = python_model(tmp_path, "o", {"model.onnx": b"x", "model.py": SOURCE.encode()},
                        config='name: "o"\nplatform: "onnxruntime_onnx"\n')  # fmt: skip
    assert [error_responses.warning(x) for x in (helper, broken, model_directory.load(str(onnx)))] == [None, None, None]
