"""Alignment per export format, refused before any S3 request (exit 7, one line): a .pt2 compiled by
another torch than the target image's or for another GPU architecture than the deployment's, and
an ONNX model whose opset or IR version the image's ONNX Runtime does not implement.

The model directories are the ones `model-sync export` writes for each format (config.pbtxt with
the format's platform, the model file, export.json with what the server must match); the refusal
reads only export.json and the environment, so the .pt2 compiled for a GPU needs no GPU here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from model_sync import errors
from model_sync.triton_model import model_config
from tests.model_sync.helpers import run_cli
from tests.support.s3_servers import S3Server

AOTI_IMAGE = "nvcr.io/nvidia/tritonserver:26.04-py3"  # torch_aoti (beta), PyTorch 2.12.0a0
OLD_ORT_IMAGE = "nvcr.io/nvidia/tritonserver:24.01-py3"  # ONNX Runtime 1.16.3: opset <= 19, IR <= 9


def _model_dir(root: Path, name: str, platform: str, filename: str, meta: dict) -> Path:
    """A model directory as `export --format <fmt> --target cloud` writes it."""
    cfg = model_config.ModelConfig()
    cfg.name, cfg.platform, cfg.max_batch_size = name, platform, 8
    io = cfg.input.add()
    io.name, io.data_type = "INPUT__0", model_config.pb2.DataType.Value("TYPE_FP32")
    io.dims.extend([4])
    io = cfg.output.add()
    io.name, io.data_type = "OUTPUT__0", model_config.pb2.DataType.Value("TYPE_FP32")
    io.dims.extend([3])
    group = cfg.instance_group.add()
    group.kind, group.count = model_config.pb2.ModelInstanceGroup.Kind.Value("KIND_GPU"), 1
    (root / name / "1").mkdir(parents=True)
    model_config.write_file(str(root / name / "config.pbtxt"), cfg)
    (root / name / "1" / filename).write_bytes(b"exported model bytes")
    (root / name / "export.json").write_text(json.dumps({"target": "cloud", **meta}))
    return root / name


def _config(path: Path, server: S3Server, bucket: str, image: str, gpus: dict | None = None) -> str:
    body = {"bucket": f"s3://{bucket}", "endpointUrl": server.endpoint, "region": "us-east-1", "tritonImage": image}
    if gpus is not None:
        body["tritonGpus"] = gpus
    path.write_text(yaml.safe_dump({"environments": {"prod": body}}))
    return str(path)


def _refused_before_any_request(capsys, server: S3Server, bucket: str, model: Path, cfg: str) -> str:
    before = len(server.requests())
    r = run_cli(capsys, "push", str(model), "--env", "prod", "--config", cfg)
    assert r.code == errors.INCOMPATIBLE == 7, (r.code, r.err)
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert server.requests()[before:] == []  # nothing read, nothing written
    assert server.keys(bucket) == []
    return r.err.strip()


def test_a_pt2_compiled_by_another_torch_than_the_images_is_refused(tmp_path, capsys, moto_s3, aws_env) -> None:
    bucket = moto_s3.make_bucket()
    model = _model_dir(tmp_path, "m", "torch_aoti", "model.pt2",
                       {"format": "pt2", "torch_version": "2.13.0+cu130", "device": "cuda",
                        "gpu_architectures": ["sm_90"]})  # fmt: skip
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, bucket, AOTI_IMAGE)  # the torch is checked first
    err = _refused_before_any_request(capsys, moto_s3, bucket, model, cfg)
    assert err.startswith("model-sync: m -> prod: torch version: model.pt2 compiled by torch 2.13.0+cu130, ")
    assert f"{AOTI_IMAGE} runs torch 2.12.0a0; allowed: " in err


def test_a_pt2_compiled_for_another_gpu_architecture_is_refused(tmp_path, capsys, moto_s3, aws_env) -> None:
    bucket = moto_s3.make_bucket()
    model = _model_dir(tmp_path, "m", "torch_aoti", "model.pt2",
                       {"format": "pt2", "torch_version": "2.12.0+cu130", "device": "cuda",
                        "gpu_architectures": ["sm_80"]})  # fmt: skip
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, bucket, AOTI_IMAGE,
                  {"default": {"gpu": "H100", "memoryGiB": 80, "models": ["m"], "architectures": ["sm_90"]}})  # fmt: skip
    err = _refused_before_any_request(capsys, moto_s3, bucket, model, cfg)
    assert err.startswith("model-sync: m -> prod: gpu architecture: model.pt2 compiled for sm_80, ")
    assert "deployment default runs sm_90 (H100); allowed: " in err


def test_an_onnx_opset_newer_than_the_images_onnx_runtime_is_refused(tmp_path, capsys, moto_s3, aws_env) -> None:
    bucket = moto_s3.make_bucket()
    model = _model_dir(tmp_path, "m", "onnxruntime_onnx", "model.onnx",
                       {"format": "onnx", "torch_version": "2.13.0+cpu", "onnx_opset": 20, "onnx_ir_version": 10})  # fmt: skip
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, bucket, OLD_ORT_IMAGE)
    err = _refused_before_any_request(capsys, moto_s3, bucket, model, cfg)
    assert err.startswith("model-sync: m -> prod: onnx opset: model.onnx needs opset 20 (IR 10), ")
    assert f"ONNX Runtime 1.16.3 in {OLD_ORT_IMAGE} runs opsets up to 19 (IR up to 9); allowed: " in err


@pytest.mark.parametrize("ir", [10, 11])
def test_an_onnx_ir_version_newer_than_the_images_onnx_runtime_is_refused(
    tmp_path, capsys, moto_s3, aws_env, ir
) -> None:
    bucket = moto_s3.make_bucket()
    model = _model_dir(tmp_path, "m", "onnxruntime_onnx", "model.onnx",
                       {"format": "onnx", "torch_version": "2.13.0+cpu", "onnx_opset": 19, "onnx_ir_version": ir})  # fmt: skip
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, bucket, OLD_ORT_IMAGE)
    err = _refused_before_any_request(capsys, moto_s3, bucket, model, cfg)
    assert err.startswith(f"model-sync: m -> prod: onnx opset: model.onnx needs opset 19 (IR {ir}), ")


def test_a_pt2_for_the_images_torch_and_the_deployments_gpus_is_published_compatible(
    tmp_path, capsys, moto_s3, aws_env
) -> None:
    from tests.model_sync.helpers import manifest_doc

    bucket = moto_s3.make_bucket()
    model = _model_dir(tmp_path, "m", "torch_aoti", "model.pt2",
                       {"format": "pt2", "method": "export", "torch_version": "2.12.0+cu130", "device": "cuda",
                        "gpu_architectures": ["sm_90"]})  # fmt: skip
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, bucket, AOTI_IMAGE,
                  {"default": {"gpu": "H100|H200", "memoryGiB": 80, "models": ["m"], "architectures": ["sm_90"]}})  # fmt: skip
    r = run_cli(capsys, "push", str(model), "--env", "prod", "--config", cfg)
    assert r.code == 0, r.err
    doc = manifest_doc(moto_s3, bucket, "m", 1)
    assert doc["compatibility"] == {"triton_image": AOTI_IMAGE, "libtorch_version": "2.12.0a0", "result": "compatible",
                                    "detail": None}  # fmt: skip
    assert {k: doc["exporter"][k] for k in ("format", "method", "device", "gpu_architectures")} == {
        "format": "pt2", "method": "export", "device": "cuda", "gpu_architectures": ["sm_90"]}  # fmt: skip


def test_promote_checks_the_onnx_opset_against_the_targets_image(tmp_path, capsys, moto_s3, aws_env) -> None:
    """staging's 25.10 (ONNX Runtime 1.23.1) takes opset 20; prod's 24.01 (1.16.3) does not: the
    promote is refused before it writes anything to prod, from what the source manifest records."""
    from tests.model_sync.helpers import promote_args

    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    model = _model_dir(tmp_path, "m", "onnxruntime_onnx", "model.onnx",
                       {"format": "onnx", "method": "export", "torch_version": "2.13.0+cpu", "onnx_opset": 20,
                        "onnx_ir_version": 10})  # fmt: skip
    envs = {name: {"bucket": f"s3://{b}", "endpointUrl": moto_s3.endpoint, "region": "us-east-1", "tritonImage": img}
            for name, b, img in (("staging", staging, "nvcr.io/nvidia/tritonserver:25.10-py3"),
                                 ("prod", prod, OLD_ORT_IMAGE))}  # fmt: skip
    (tmp_path / "model-sync.yaml").write_text(yaml.safe_dump({"environments": envs}))
    cfg = str(tmp_path / "model-sync.yaml")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    r = run_cli(capsys, *promote_args("m", 1, cfg, "--skip-verification"))
    assert r.code == 7, r.err
    assert r.err.strip().splitlines() == [
        f"model-sync: m version 1 -> prod: onnx opset: model.onnx needs opset 20 (IR 10), ONNX Runtime 1.16.3 in "
        f"{OLD_ORT_IMAGE} runs opsets up to 19 (IR up to 9); allowed: export with --onnx-opset 19 or lower (the IR "
        "version follows the opset), an image with a newer ONNX Runtime, or --allow-version-skew"
    ]
    assert moto_s3.keys(prod) == []


@pytest.mark.parametrize(
    ("exporter", "platform", "image", "loads"),
    [
        ({"format": "onnx", "onnx_opset": 20, "onnx_ir_version": 10}, "onnxruntime_onnx", OLD_ORT_IMAGE, "no"),
        ({"format": "onnx", "onnx_opset": 20, "onnx_ir_version": 10}, "onnxruntime_onnx", AOTI_IMAGE, "yes"),
        ({"format": "onnx"}, "onnxruntime_onnx", AOTI_IMAGE, "unknown"),  # no opset recorded
        ({"format": "pt2", "torch_version": "2.13.0", "device": "cpu"}, "torch_aoti", AOTI_IMAGE, "no"),
        ({"format": "pt2", "torch_version": "2.12.0", "device": "cpu"}, "torch_aoti", AOTI_IMAGE, "yes"),
        ({"format": "pt2", "torch_version": "2.12.0", "device": "cpu"}, "torch_aoti", OLD_ORT_IMAGE, "no"),  # no aoti
        ({"format": "onnx", "onnx_opset": 20, "onnx_ir_version": 10}, "onnxruntime_onnx", None, "unknown"),
    ],
)
def test_status_says_whether_each_image_loads_a_version_in_its_format(exporter, platform, image, loads) -> None:
    from model_sync.admission import alignment

    doc = {"platform": platform, "backend": "", "exporter": exporter,
           "instance_groups": [{"kind": "KIND_CPU", "count": 1, "gpus": []}]}  # fmt: skip
    assert alignment.loadable(doc, image) == loads
