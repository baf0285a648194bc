"""model_sync.lifecycle.promote's command function against a real moto_server (staging and prod buckets):
two environments of one repository are refused, a promotion copies the pinned version and pins
it in the target, and a re-run is a no-op; GPU memory planning against the TARGET's GPUs refuses a
version that would overcommit them before anything is copied. The verification gate and the
checksum checks are in test_lifecycle.py."""

from __future__ import annotations

import json

import pytest

from model_sync.contract import layout
from tests.model_sync.helpers import (
    TOY_GPUS,
    gpu_config,
    gpu_export,
    gpu_factories,
    manifest_doc,
    pinned_version,
    promote_args,
    python_model,
    run_cli,
    write_config,
)


def _promote(cfg: str, source: str = "staging", target: str = "prod", **kw: bool) -> dict:
    from model_sync.lifecycle import promote

    flags = {
        "skip_verification": True,
        "dry_run": False,
        "allow_version_skew": False,
        "allow_local_target": False,
        "canary": False,
        **kw,
    }
    return promote.command("simple", 1, source, target, cfg, quiet=True, wait=lambda *a: None, **flags)


def test_promote_copies_pins_and_is_idempotent(tmp_path, capsys, moto_s3, aws_env) -> None:
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = write_config(
        tmp_path / "model-sync.yaml",
        moto_s3,
        {"staging": f"s3://{staging}", "prod": f"s3://{prod}", "twin": f"s3://{staging}"},
    )
    model = python_model(tmp_path / "src", "simple")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    from model_sync import errors

    with pytest.raises(
        errors.SyncError,
        match=r"^--to: 'twin' has the same repository as 'staging' \(s3://.*\); allowed: two different repositories$",
    ):
        _promote(cfg, target="twin")
    with pytest.raises(errors.SyncError, match=r"^--to: 'staging' equals --from; allowed: two different environments$"):
        _promote(cfg, target="staging")
    assert _promote(cfg, dry_run=True) == {
        "model": "simple",
        "from": {"env": "staging", "version": 1},
        "to": {"env": "prod", "version": 1},
        "dry_run": True,
        "canary": None,
    }
    assert moto_s3.keys(prod) == []
    doc = _promote(cfg)
    assert doc == {
        "model": "simple",
        "from": {"env": "staging", "version": 1},
        "to": {"env": "prod", "version": 1},
        "dry_run": False,
        "canary": None,
        "served": None,
    }
    assert pinned_version(moto_s3, prod, "simple") == 1
    for rel in ("model.py", "model.pt"):
        assert moto_s3.get(prod, f"repository/simple/1/{rel}") == moto_s3.get(staging, f"repository/simple/1/{rel}")
    keys = moto_s3.keys(prod)
    assert _promote(cfg)["to"] == {"env": "prod", "version": 1}
    assert moto_s3.keys(prod) == keys


def test_promote_refuses_a_version_that_overcommits_the_targets_gpu(tmp_path, capsys, moto_s3, aws_env,
                                                                    monkeypatch) -> None:  # fmt: skip
    gpu_factories(tmp_path / "src", monkeypatch)
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = gpu_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{staging}", "prod": f"s3://{prod}"},
                     {"prod": TOY_GPUS})  # fmt: skip
    for name, factory in (("a", "narrow"), ("b", "wide")):
        r = run_cli(capsys, "push", str(gpu_export(capsys, tmp_path / "out", name, factory, 2)), "--env", "staging",
                    "--config", cfg)  # fmt: skip
        assert r.code == 0, r.err
        assert r.out.startswith("gpu memory: not checked in staging: the environment does not name its GPUs")
    r = run_cli(capsys, *promote_args("a", 1, cfg, "--skip-verification"))
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == (
        "gpu memory: deployment default in prod plans 1.3 GiB of the 2.4 GiB allowed on one toy (2.7 GiB)"
    )
    assert manifest_doc(moto_s3, prod, "a", 1)["gpu_memory"] == manifest_doc(moto_s3, staging, "a", 1)["gpu_memory"]
    keys, before = moto_s3.keys(prod), len(moto_s3.requests())
    for extra in ([], ["--dry-run"]):
        r = run_cli(capsys, *promote_args("b", 1, cfg, "--skip-verification", *extra))
        assert r.code == 7, r.err
        assert r.err.splitlines() == [
            "model-sync: b version 1 -> prod: gpu memory: deployment default would plan 2.7 GiB on one toy (2.7 GiB), "
            "more than the 2.4 GiB allowed (90% of it); largest: b (promoted v1) 2 x 686.0 MiB = 1.3 GiB, a v1 2 x "
            "686.0 MiB = 1.3 GiB (each python-backend instance + 686.0 MiB CUDA context); allowed: fewer GPU instances "
            "(instance_group count), a smaller max_batch_size, or a bigger GPU"
        ]
    assert moto_s3.keys(prod) == keys
    assert [q for q in moto_s3.requests()[before:] if q.split()[0] in ("PUT", "POST", "DELETE")] == []
    assert pinned_version(moto_s3, prod, "b") is None
    # a version 2 fits prod alone, not beside a v1 while it loads there: the plan's line says so, and
    # the promotion goes on (such a load fails safe: v1 keeps serving).
    a = tmp_path / "out" / "a"
    with (a / "1" / "model.py").open("a") as f:
        f.write("# version 2\n")
    assert run_cli(capsys, "push", str(a), "--env", "staging", "--config", cfg).code == 0
    r = run_cli(capsys, *promote_args("a", 2, cfg, "--skip-verification"))
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == (
        "gpu memory: deployment default in prod plans 1.3 GiB of the 2.4 GiB allowed on one toy (2.7 GiB); but 2.7 GiB "
        "while the new version loads beside the one served now (Triton unloads the old one only once the new one is "
        "READY): that load may run out of GPU memory and fail, and the replicas then keep serving the old version"
    )
    assert pinned_version(moto_s3, prod, "a") == 2


def test_promote_of_a_v2_manifest_writes_v3_with_its_gpu_memory_unknown(tmp_path, capsys, moto_s3, aws_env) -> None:
    """A version published before GPU memory planning (its staging manifest is v2) still promotes:
    its GPU memory is unknown, named, and not a reason to refuse; prod gets a v3 manifest."""
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = gpu_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{staging}", "prod": f"s3://{prod}"},
                     {"prod": {"default": {"gpu": "toy", "memoryGiB": 1, "models": ["simple"]}}})  # fmt: skip
    model = python_model(tmp_path / "src", "simple", config='name: "simple"\nbackend: "python"\n'
                         "instance_group [{kind: KIND_GPU, count: 64}]\n")  # fmt: skip
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    v4 = manifest_doc(moto_s3, staging, "simple", 1)
    v2 = {
        **{k: v for k, v in v4.items() if k not in ("gpu_memory", "instance_groups")},
        "schema": "model-sync.manifest/v2",
        "exporter": {k: v for k, v in v4["exporter"].items()
                     if k not in ("format", "device", "gpu_architectures", "onnx_opset", "onnx_ir_version")},
    }  # fmt: skip
    moto_s3.client().put_object(Bucket=staging, Key=layout.manifest_key("simple", 1), Body=json.dumps(v2).encode())
    assert manifest_doc(moto_s3, staging, "simple", 1)["schema"] == "model-sync.manifest/v2"
    r = run_cli(capsys, *promote_args("simple", 1, cfg, "--skip-verification"))
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == (
        "gpu memory: deployment default in prod plans 0 B of the 921.6 MiB allowed on one toy (1.0 GiB); not counted "
        "(GPU memory unknown): simple (promoted v1)"
    )
    target = manifest_doc(moto_s3, prod, "simple", 1)
    assert (target["schema"], target["gpu_memory"]) == ("model-sync.manifest/v4", None)
    assert target["instance_groups"] == [{"kind": "KIND_GPU", "count": 64, "gpus": []}]  # from its config.pbtxt
