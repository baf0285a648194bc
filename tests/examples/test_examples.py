"""examples/: each model-sync.yaml is exercised. The sandbox's is used by the CLI's commands (push,
promote, status) against the test suite's local S3, its endpoint's port the only change; the cloud
one is read by the strict reader the CLI uses (model_sync.environments.load_config), and each of its
environments resolved from the outputs the stack's program records, as `pulumi stack output --json`
would print them."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from model_sync import environments
from model_sync.contract import stack_outputs
from tests.model_sync.helpers import pinned_version, python_model, run_cli
from tests.support.s3_servers import S3Server

ROOT = Path(__file__).resolve().parents[2]
SANDBOX = ROOT / "examples" / "sandbox" / "model-sync.yaml"
CLOUD = ROOT / "examples" / "cloud" / "model-sync.yaml"
SANDBOX_ENDPOINT = "http://127.0.0.1:9000"


def test_the_sandbox_example_pushes_promotes_and_shows_a_version(
    tmp_path: Path, moto_s3: S3Server, aws_env, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SANDBOX.read_text()
    envs = environments.load_config(str(SANDBOX))
    assert set(envs) == {"staging", "prod"}
    assert {e["endpointUrl"] for e in envs.values()} == {SANDBOX_ENDPOINT}
    config = tmp_path / "model-sync.yaml"
    config.write_text(text.replace(SANDBOX_ENDPOINT, moto_s3.endpoint))  # the port the test's S3 listens on
    buckets = {name: e["bucket"].removeprefix("s3://") for name, e in envs.items()}
    for bucket in buckets.values():
        if bucket not in {b["Name"] for b in moto_s3.client().list_buckets().get("Buckets", [])}:
            moto_s3.make_bucket(bucket)
    model = python_model(tmp_path / "models", "demo-mlp")

    pushed = run_cli(capsys, "push", str(model), "--env", "staging", "--config", str(config))
    assert pushed.code == 0, pushed.err
    promoted = run_cli(capsys, "promote", "demo-mlp", "--model-version", "1", "--from", "staging", "--to", "prod",
                       "--no-canary", "--skip-verification", "--config", str(config))  # fmt: skip
    assert promoted.code == 0, promoted.err
    shown = run_cli(capsys, "status", "demo-mlp", "--env", "prod", "--config", str(config), "--output", "json")
    assert shown.code == 0, shown.err
    assert (
        pinned_version(moto_s3, buckets["staging"], "demo-mlp"),
        pinned_version(moto_s3, buckets["prod"], "demo-mlp"),
    ) == (1, 1)
    assert json.loads(shown.out)  # status answers for prod
    # The prod environment's gray release policy is the example's, read strictly.
    resolved = environments.resolve("prod", str(config))
    assert resolved.canary_policy("demo-mlp").steps == (50,)


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_cloud_example_resolves_each_environment_from_its_stacks_outputs(
    stack: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import stack_run

    envs = environments.load_config(str(CLOUD))  # the CLI's strict reader
    assert envs[stack] == {**envs[stack], "pulumiStack": f"acme/triton-platform/{stack}"}
    outputs = stack_run(stack).exports
    recorded = tmp_path / "outputs.json"
    recorded.write_text(json.dumps(outputs, default=str))
    pulumi = tmp_path / "pulumi"  # `pulumi stack output --json --stack <stack>`, answered from the record
    pulumi.write_text(f"#!/bin/sh\ncat {recorded}\n")
    pulumi.chmod(pulumi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PULUMI", str(pulumi))
    monkeypatch.delenv("MODEL_SYNC_CONFIG", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)

    env = environments.resolve(stack, str(CLOUD))
    assert (
        env.root.uri() == f"s3://{outputs['modelRepositoryBucket']}"
        or env.root.bucket == outputs["modelRepositoryBucket"]
    )
    assert env.triton_image == outputs["tritonImage"]
    assert env.source == f"pulumi stack acme/triton-platform/{stack}"
    gpus = outputs[stack_outputs.TRITON_GPUS]
    assert {d.deployment for d in env.triton_gpus or ()} == set(gpus) == set(outputs["tritonDeployments"])
    assert {m for m, _ in env.canary_policies} == set(outputs[stack_outputs.CANARY_POLICIES])
    assert os.path.basename(str(CLOUD)) == environments.CONFIG_NAME
