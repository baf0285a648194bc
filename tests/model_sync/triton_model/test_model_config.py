"""model_sync/triton_model/model_config.py: config.pbtxt through Triton's ModelConfig protobuf: parsing, the
rules model_sync adds, the pin (version_policy specific [N]) and the backend file contract."""

from __future__ import annotations

import pytest

from model_sync.triton_model import model_config


def test_pin_round_trip_through_the_protobuf() -> None:
    cfg = model_config.parse(
        'name: "m"\nbackend: "python"\nmax_batch_size: 4\nversion_policy { latest { num_versions: 2 } }\n'
    )
    assert model_config.pinned_version(cfg) is None
    text = model_config.pinned_text(cfg, 7, "m")
    again = model_config.parse(text)
    assert model_config.pinned_version(again) == 7
    assert again.max_batch_size == 4
    assert again.version_policy.WhichOneof("policy_choice") == "specific"
    assert model_config.required_files(again) == ("model.py",)
    assert model_config.required_files(model_config.parse('platform: "pytorch_libtorch"')) == ("model.pt",)
    assert model_config.required_files(
        model_config.parse('platform: "onnxruntime_onnx"\ndefault_model_filename: "x.onnx"')
    ) == ("x.onnx",)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('nmae: "x"', r"config.pbtxt: does not parse .*no field named \"nmae\""),
        ('max_batch_size: -1\nbackend: "python"', r"max_batch_size: -1; allowed: >= 0"),
        ('name: "a b"\nbackend: "python"', r"model name: 'a b'"),
        ('name: "m"', r"neither backend nor platform set"),
    ],
)
def test_config_rules(text, match) -> None:
    with pytest.raises(model_config.ConfigPbtxtError, match=match):
        model_config.check(model_config.parse(text), "config.pbtxt")


def test_config_name_must_match_the_model() -> None:
    with pytest.raises(model_config.ConfigPbtxtError, match=r"name: 'a'; allowed: 'b'"):
        model_config.check(model_config.parse('name: "a"\nbackend: "python"'), "config.pbtxt", "b")


def test_write_file_is_atomic_and_parses(tmp_path) -> None:
    path = tmp_path / "config.pbtxt"
    model_config.write_file(str(path), model_config.pin(model_config.parse('backend: "python"'), 2))
    assert model_config.pinned_version(model_config.read_file(str(path))) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["config.pbtxt"]


@pytest.mark.parametrize(
    ("text", "files"),
    [('platform: "pytorch"', ("model.pt",)), ('platform: "onnxruntime"', ("model.onnx",)),
     ('platform: "tensorrt_plan"', ("model.plan",)),
     ('platform: "tensorrt"\ndefault_model_filename: "e.plan"', ("e.plan",)),
     ('backend: "python"\ndefault_model_filename: "x.py"', ("model.py",)), ('backend: "custom"', ()),
     ('backend: "custom"\ndefault_model_filename: "lib.so"', ("lib.so",)), ('backend: "onnxruntime"', ("model.onnx",))],
)  # fmt: skip
def test_required_files_per_backend(text: str, files: tuple[str, ...]) -> None:
    assert model_config.required_files(model_config.parse(text)) == files


@pytest.mark.parametrize(
    ("policy", "version"),
    [("", None), ("version_policy { all { } }", None), ("version_policy { latest { num_versions: 1 } }", None),
     ("version_policy { specific { versions: [4] } }", 4), ("version_policy { specific { versions: [4, 5] } }", None)],
)  # fmt: skip
def test_pinned_version_is_exactly_one_specific_version(policy: str, version: int | None) -> None:
    assert model_config.pinned_version(model_config.parse(f'backend: "python"\n{policy}')) == version


def test_pin_replaces_any_policy_leaves_the_input_alone_and_checks_the_version() -> None:
    cfg = model_config.parse('backend: "python"\nversion_policy { specific { versions: [1, 2] } }')
    pinned = model_config.pin(cfg, 9)
    assert list(pinned.version_policy.specific.versions) == [9]
    assert list(cfg.version_policy.specific.versions) == [1, 2]
    assert model_config.parse(model_config.pinned_text(cfg, 9, "renamed")).name == "renamed"
    from model_sync.contract import layout

    with pytest.raises(layout.LayoutError, match=r"version: 0"):
        model_config.pin(cfg, 0)


def test_bytes_that_are_not_utf8_or_a_missing_file_are_one_line_errors(tmp_path) -> None:
    with pytest.raises(
        model_config.ConfigPbtxtError,
        match=r"^m/config.pbtxt: not UTF-8 text; allowed: a protobuf text-format ModelConfig$",
    ):
        model_config.parse(b"\xff\xfe", "m/config.pbtxt")
    missing = tmp_path / "config.pbtxt"
    with pytest.raises(
        model_config.ConfigPbtxtError,
        match=r"cannot read \(No such file or directory\); allowed: a readable config.pbtxt$",
    ):
        model_config.read_file(str(missing))
    with pytest.raises(model_config.ConfigPbtxtError) as e:
        model_config.parse('backend: "python"\n\nnmae: "x"\n', "src")
    assert "\n" not in str(e.value)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path) -> None:
    path = tmp_path / "config.pbtxt"
    path.write_text("old")

    class NotAMessage:  # dumps() raises inside the write, after the temporary file was made
        pass

    with pytest.raises(AttributeError, match="DESCRIPTOR"):
        model_config.write_file(str(path), NotAMessage())
    assert [p.name for p in tmp_path.iterdir()] == ["config.pbtxt"]
    assert path.read_text() == "old"


def _warmups(cfg) -> list[tuple[str, int, list[tuple[str, str, list[int], str | None]]]]:
    """model_warmup as (name, batch_size, [(input, dtype, dims, data oneof)]), read back through the protobuf."""
    return [
        (
            w.name,
            w.batch_size,
            [
                (k, model_config.pb2.DataType.Name(v.data_type), list(v.dims), v.WhichOneof("input_data_type"))
                for k, v in sorted(w.inputs.items())
            ],
        )
        for w in cfg.model_warmup
    ]


IO = (
    'input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [3, 8] }, '
    '{ name: "INPUT__1" data_type: TYPE_INT64 dims: [5] }]\n'
)


@pytest.mark.parametrize(
    ("batching", "sizes"),
    [
        ("max_batch_size: 8\ndynamic_batching { preferred_batch_size: [2, 4] }", (1, 4)),
        (
            "max_batch_size: 8\ndynamic_batching { }",
            (1, 8),
        ),  # no preferred sizes: the batcher fills up to max_batch_size
        ("max_batch_size: 16", (1, 16)),  # batching without the dynamic batcher: clients send up to max_batch_size
        ("max_batch_size: 8\ndynamic_batching { preferred_batch_size: [1] }", (1,)),
        ("max_batch_size: 0", (1,)),  # Triton requires batch_size 1 for a model that does not batch
    ],
)
def test_warmup_samples_cover_batch_one_and_the_largest_batch(batching: str, sizes: tuple[int, ...]) -> None:
    cfg = model_config.parse(f'name: "m"\nbackend: "python"\n{batching}\n{IO}')
    assert model_config.warmup_batch_sizes(cfg) == sizes
    model_config.add_warmup(cfg)
    model_config.add_warmup(cfg)  # replaces, never appends twice
    back = model_config.parse(model_config.dumps(cfg))
    inputs = [("INPUT__0", "TYPE_FP32", [3, 8], "zero_data"), ("INPUT__1", "TYPE_INT64", [5], "zero_data")]
    assert _warmups(back) == [(f"batch_{n}", n, inputs) for n in sizes]
    assert all(v.zero_data for w in back.model_warmup for v in w.inputs.values())


def test_warmup_refuses_variable_dims() -> None:
    cfg = model_config.parse(
        'name: "m"\nbackend: "python"\nmax_batch_size: 4\n'
        'input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [-1, 3] }]\n'
    )
    with pytest.raises(
        model_config.ConfigPbtxtError, match=r"input INPUT__0 dims: \[-1, 3\]; allowed: fixed dims for model_warmup"
    ):
        model_config.add_warmup(cfg)
    assert len(cfg.model_warmup) == 0
