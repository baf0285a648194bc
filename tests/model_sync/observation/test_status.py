"""model_sync.observation.status against a real moto_server: the pinned, previous and available versions,
what each replica reports serving (model_sync.observation.replicas) and the pin flagged when no replica
serves it READY; each deployment's planned GPU memory against its card (model_sync/admission/gpu_plan.py).
The tables and JSON of `model-sync status` are in test_lifecycle.py."""

from __future__ import annotations

import json
import re

import pytest

from model_sync.admission.gpu_plan import CUDA_CONTEXT_BYTES, human
from tests.model_sync.helpers import (
    TOY_GPUS,
    gpu_config,
    gpu_export,
    gpu_factories,
    manifest_doc,
    python_model,
    run_cli,
)
from tests.model_sync.observation.test_replicas import _report, two_versions


@pytest.fixture
def pushed(tmp_path, capsys, moto_s3, aws_env):
    return two_versions(tmp_path, capsys, moto_s3)


def test_model_status_shows_what_each_replica_serves(pushed) -> None:
    from model_sync.observation import status

    client, bucket, repo = pushed
    client.put_object(
        Bucket=bucket, Key="status/triton/pod-0.json", Body=_report("simple", [1], "FAILED", {"2": "boom"})
    )
    client.put_object(Bucket=bucket, Key="status/triton/pod-1.json", Body=b"{not json")  # unreadable: serves nothing
    s = status.model_status(repo, "simple")
    assert (s["pinned"], s["versions"], s["previous_pin"], s["incomplete"], s["verified"]) == (2, [1, 2], 1, [], None)
    assert s["replicas"] == {
        "triton/pod-0": {"serving": [1], "state": "FAILED", "error": "load failed: boom", "failed": [2]}
    }
    assert (s["pin_served"], status.served_cell(s)) == (False, "0/1 PIN NOT SERVED")
    client.put_object(Bucket=bucket, Key="status/triton/pod-0.json", Body=_report("simple", [2]))
    s = status.model_status(repo, "simple")
    assert (s["pin_served"], status.served_cell(s)) == (True, "1/1")


def test_status_shows_each_deployments_planned_gpu_memory(tmp_path, capsys, moto_s3, aws_env, monkeypatch) -> None:
    gpu_factories(tmp_path / "src", monkeypatch)
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = gpu_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{staging}", "prod": f"s3://{prod}"},
                     {"staging": TOY_GPUS})  # fmt: skip
    for model in (gpu_export(capsys, tmp_path / "out", "a", "narrow", 2), python_model(tmp_path / "hand", "c")):
        assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    r = run_cli(capsys, "status", "--config", cfg, "--output", "json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    per_instance = manifest_doc(moto_s3, staging, "a", 1)["gpu_memory"]["bytes_per_instance"]
    card, planned = 4 * CUDA_CONTEXT_BYTES, 2 * (per_instance + CUDA_CONTEXT_BYTES)  # TOY_GPUS; 2 instances of a
    assert report["staging"]["gpu_memory"] == {
        "known": True,
        "detail": None,
        "deployments": [
            {
                "deployment": "default", "gpu": "toy", "sharing": "whole", "memory_bytes": card, "allowed_bytes": int(0.9 * card),
                "planned_bytes": planned, "fits": True, "headroom": 0.9, "cuda_context_bytes": CUDA_CONTEXT_BYTES,
                "process_context_bytes": 0, "unknown": ["c v1"],
                "models": [{"model": "a", "version": 1, "instances_per_gpu": 2, "bytes_per_instance": per_instance,
                            "bytes": planned}],
            }
        ],
    }  # fmt: skip
    no_gpus = "the environment does not name its GPUs (tritonGpus in model-sync.yaml or the stack output)"
    assert report["prod"]["gpu_memory"] == {"known": False, "detail": no_gpus, "deployments": []}
    text = run_cli(capsys, "status", "--config", cfg).out
    row = ["staging", "default", f"toy {human(card)}", human(planned), human(int(0.9 * card)), "yes", "c v1"]
    assert re.search("^" + r"\s+".join(map(re.escape, row)) + "$", text, re.M), text
    assert f"gpu memory: not planned in prod: {no_gpus}\n" in text


def test_status_says_when_the_pin_index_and_the_pin_disagree(pushed, capsys, tmp_path, moto_s3) -> None:
    """A pin written without its pin-index entry (a crash between the two writes, another tool)
    reaches the agents only at their next full listing: status names the disagreement, in the
    JSON and in one line of the table's output."""
    from model_sync.observation import status

    client, bucket, repo = pushed
    assert status.model_status(repo, "simple")["pin_index"] == {"version": 2, "agrees": True, "detail": None}
    one = manifest_doc(moto_s3, bucket, "simple", 1)["config_pbtxt"]
    client.put_object(Bucket=bucket, Key="repository/simple/config.pbtxt", Body=one.encode())  # no index entry
    assert status.model_status(repo, "simple")["pin_index"] == {
        "version": 2,
        "agrees": False,
        "detail": "the pin names version 1, its pin-index entry version 2",
    }
    cfg = tmp_path / "status.yaml"
    env = {"bucket": f"s3://{bucket}", "endpointUrl": moto_s3.endpoint, "region": "us-east-1"}
    cfg.write_text(json.dumps({"environments": {"staging": env}}))
    out = run_cli(capsys, "status", "--config", str(cfg)).out
    assert (
        "PIN INDEX DISAGREES: simple in staging: the pin names version 1, its pin-index entry version 2; the agents "
        "pick the pin up at their next full listing (within --full-resync of the write, 300 s by default)"
    ) in out
    client.delete_object(Bucket=bucket, Key="manifests/_pins/simple.json")
    assert status.model_status(repo, "simple")["pin_index"]["detail"] == "the pin has no pin-index entry"
