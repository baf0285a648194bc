"""--env resolution: model-sync.yaml search order, pulumi stack outputs (a stub `pulumi` on PATH
printing JSON: the thing under test is model_sync's parsing), flag overrides, bad configs."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from model_sync import environments, errors


def _yaml(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _stub_pulumi(tmp_path: Path, body: str, rc: int = 0) -> Path:
    stub = tmp_path / "bin" / "pulumi"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/pulumi-args\ncat <<'JSON'\n{body}\nJSON\nexit {rc}\n")
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return stub.parent


def test_config_file_search_order(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MODEL_SYNC_CONFIG", raising=False)
    _yaml(tmp_path / "model-sync.yaml", "environments:\n  staging:\n    bucket: s3://cwd-bucket\n")
    assert environments.resolve("staging").bucket == "cwd-bucket"
    monkeypatch.setenv(
        "MODEL_SYNC_CONFIG", _yaml(tmp_path / "env.yaml", "environments:\n  staging:\n    bucket: s3://env-bucket/p\n")
    )
    env = environments.resolve("staging")
    assert (env.bucket, env.root.prefix, env.source) == ("env-bucket", "p", str(tmp_path / "env.yaml"))
    flag = _yaml(
        tmp_path / "flag.yaml",
        "environments:\n  staging:\n    bucket: s3://flag-bucket\n    endpointUrl: http://127.0.0.1:9\n    "
        "region: eu-west-1\n",
    )
    env = environments.resolve("staging", flag)
    assert (env.bucket, env.endpoint_url, env.region) == ("flag-bucket", "http://127.0.0.1:9", "eu-west-1")
    env = environments.resolve("staging", flag, bucket="s3://override", region="us-east-2")
    assert (env.bucket, env.region, env.endpoint_url) == ("override", "us-east-2", "http://127.0.0.1:9")


def test_pulumi_stack_outputs(tmp_path, monkeypatch) -> None:
    bindir = _stub_pulumi(
        tmp_path,
        '{"modelRepositoryUri": "s3://triton-models-prod-abc/", "region": "eu-central-1", "tritonEndpoints": '
        '{"http": "https://triton.example.com", "grpc": "grpc.example.com:443"}}',
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PULUMI", raising=False)
    cfg = _yaml(
        tmp_path / "m.yaml",
        "environments:\n  prod:\n    pulumiStack: acme/triton-platform/prod\n    region: us-west-2\n",
    )
    env = environments.resolve("prod", cfg)
    assert (env.bucket, env.root.prefix, env.region, env.triton_url, env.grpc_url) == (
        "triton-models-prod-abc",
        "",
        "us-west-2",
        "https://triton.example.com",
        "grpc.example.com:443",
    )
    assert env.source == "pulumi stack acme/triton-platform/prod"
    assert (tmp_path / "pulumi-args").read_text().split() == [
        "stack",
        "output",
        "--json",
        "--stack",
        "acme/triton-platform/prod",
    ]
    assert env.triton_image is None


def test_pulumi_stack_outputs_of_the_real_program(tmp_path, monkeypatch, prod) -> None:
    """what __main__.py really exports (the recorded prod run under mocks, as
    `pulumi stack output --json` prints it) fills the environment: root, region, both Triton
    endpoints and the image."""
    import json

    body = json.dumps(prod.exports, default=str)
    monkeypatch.setenv("PULUMI", str(_stub_pulumi(tmp_path, body) / "pulumi"))
    cfg = _yaml(tmp_path / "m.yaml", "environments:\n  prod:\n    pulumiStack: acme/triton-platform/prod\n")
    env = environments.resolve("prod", cfg)
    endpoints = prod.exports["tritonEndpoints"]
    assert (env.triton_url, env.grpc_url) == (endpoints["http"], endpoints["grpc"])
    assert env.triton_url.startswith("https://")
    assert env.root.uri() == f"s3://{prod.exports['modelRepositoryBucket']}/"
    assert (env.region, env.triton_image) == (prod.exports["region"], prod.exports["tritonImage"])


@pytest.mark.parametrize(
    ("outputs", "root"),
    [
        # What __main__.py exports: the bucket (the root) and the Triton tree under it.
        (
            {"modelRepositoryBucket": "tp-prod-models-1", "modelRepositoryUri": "s3://tp-prod-models-1/repository"},
            "s3://tp-prod-models-1/",
        ),
        (
            {"modelRepositoryUri": "s3://tp-prod-models-1/repository/"},
            "s3://tp-prod-models-1/",
        ),  # never repository/repository/
        ({"modelRepositoryUri": "s3://tp-prod-models-1/team-a"}, "s3://tp-prod-models-1/team-a/"),
    ],
)
def test_pulumi_outputs_give_the_root_and_the_triton_image(tmp_path, monkeypatch, outputs, root) -> None:
    body = {**outputs, "tritonImage": "nvcr.io/nvidia/tritonserver:25.10-py3"}
    monkeypatch.setenv("PULUMI", str(_stub_pulumi(tmp_path, __import__("json").dumps(body)) / "pulumi"))
    cfg = _yaml(tmp_path / "m.yaml", "environments:\n  prod:\n    pulumiStack: acme/p/prod\n")
    env = environments.resolve("prod", cfg)
    assert (env.root.uri(), env.triton_image) == (root, "nvcr.io/nvidia/tritonserver:25.10-py3")
    # The file and then the flag override the stack output.
    cfg = _yaml(
        tmp_path / "m.yaml",
        "environments:\n  prod:\n    pulumiStack: acme/p/prod\n    tritonImage: "
        "nvcr.io/nvidia/tritonserver:25.09-py3\n",
    )
    assert environments.resolve("prod", cfg).triton_image == "nvcr.io/nvidia/tritonserver:25.09-py3"
    assert environments.resolve(
        "prod", cfg, triton_image="nvcr.io/nvidia/tritonserver:25.11-py3"
    ).triton_image.endswith("25.11-py3")


@pytest.mark.parametrize(
    ("body", "rc", "code", "match"),
    [
        ("error: no stack named 'x'", 255, errors.NOT_FOUND, r"pulumi stack output --stack acme/p/prod: exit 255"),
        ("not json", 0, errors.USAGE, r"not JSON"),
        ("[1, 2]", 0, errors.USAGE, r"list; allowed: a JSON object"),
        ("{}", 0, errors.USAGE, r"bucket: missing for environment 'prod'"),
    ],
)
def test_pulumi_failures(tmp_path, monkeypatch, body, rc, code, match) -> None:
    monkeypatch.setenv("PULUMI", str(_stub_pulumi(tmp_path, body, rc) / "pulumi"))
    cfg = _yaml(tmp_path / "m.yaml", "environments:\n  prod:\n    pulumiStack: acme/p/prod\n")
    with pytest.raises(errors.SyncError, match=match) as info:
        environments.resolve("prod", cfg)
    assert info.value.code == code


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[]", r"top-level keys \[\]; allowed: a mapping with only 'environments'"),
        ("environments:\n  Prod:\n    bucket: s3://x-y\n", r"environment name: 'Prod'"),
        ("environments:\n  prod:\n    bukcet: s3://x-y\n", r"environments\.prod\.bukcet: unknown key"),
        ("environments:\n  prod:\n    region: eu-west-1\n", r"environments\.prod: no bucket"),
        ("environments:\n  prod:\n    bucket: 3\n", r"environments\.prod\.bucket: 3; allowed: a non-empty string"),
        (
            "environments:\n  prod:\n    bucket: s3://x-y\n    unenforcedConditionalWrites: yes-please\n",
            r"unenforcedConditionalWrites: 'yes-please'; allowed: 'accepted'",
        ),
        ("environments:\n  prod:\n    bucket: bucket-without-scheme\n", r"bucket URI: 'bucket-without-scheme'"),
        ("environments:\n  prod:\n    bucket: s3://ok-b\n    endpointUrl: ftp://x\n", r"endpoint URL: 'ftp://x'"),
        ("environments: [\n", r"cannot be read as YAML"),
    ],
)
def test_bad_config_files(tmp_path, text, match) -> None:
    with pytest.raises(errors.SyncError, match=match) as info:
        environments.resolve("prod", _yaml(tmp_path / "m.yaml", text))
    assert info.value.code == errors.USAGE


def test_unknown_env_and_missing_config(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MODEL_SYNC_CONFIG", raising=False)
    with pytest.raises(
        errors.SyncError, match=r"environment: 'prod' is not configured; allowed: none \(no model-sync.yaml found\)"
    ):
        environments.resolve("prod")
    with pytest.raises(errors.SyncError, match=r"--config: '/nope.yaml' does not exist"):
        environments.resolve("prod", "/nope.yaml")
    monkeypatch.setenv("MODEL_SYNC_CONFIG", "/also-nope.yaml")
    with pytest.raises(errors.SyncError, match=r"\$MODEL_SYNC_CONFIG: '/also-nope.yaml' does not exist"):
        environments.resolve("prod")
    monkeypatch.delenv("MODEL_SYNC_CONFIG")
    assert environments.resolve("adhoc-env", bucket="s3://b-1").bucket == "b-1"


def test_no_credential_flags_exist() -> None:
    from model_sync.cli import build_parser

    help_text = " ".join(a.format_help() for a in build_parser()._subparsers._group_actions[0].choices.values())  # type: ignore[union-attr]
    for flag in ("--access-key", "--secret", "--aws-access-key-id", "--aws-secret-access-key", "--session-token"):
        assert flag not in help_text


def test_sdk_endpoint_variables_fill_in_a_missing_endpoint(tmp_path, monkeypatch) -> None:
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no model-sync.yaml: flags only
    monkeypatch.delenv("MODEL_SYNC_CONFIG", raising=False)
    resolve = lambda *flags: environments.resolve(None, None, "s3://models", *flags)  # noqa: E731
    assert resolve().endpoint_url is None
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    assert resolve().endpoint_url == "http://127.0.0.1:9000"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9001")  # the service-specific one wins, as in the SDKs
    assert resolve().endpoint_url == "http://127.0.0.1:9001"
    assert resolve("http://127.0.0.1:9002").endpoint_url == "http://127.0.0.1:9002"  # --endpoint-url wins over both
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert resolve().endpoint_url is None
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "false")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "ftp://nope")
    with pytest.raises(errors.SyncError, match=r"^endpoint URL: 'ftp://nope'; allowed: http\(s\)://host\[:port\]$"):
        resolve()


# ---- tritonGpus: each deployment's GPU, for GPU memory planning (model_sync/admission/gpu_plan.py) ------------

GPUS_YAML = (
    "environments:\n  prod:\n    bucket: s3://models-p\n    tritonGpus:\n"
    "      default: {gpu: H100, memoryGiB: 80, models: [resnet, bert]}\n"
    "      small: {gpu: L4, memoryGiB: 22.5, models: []}\n"
)


def test_triton_gpus_from_the_config_file(tmp_path) -> None:
    env = environments.resolve("prod", _yaml(tmp_path / "m.yaml", GPUS_YAML))
    assert env.triton_gpus == (
        environments.DeploymentGpu("default", "H100", 80.0, ("resnet", "bert")),
        environments.DeploymentGpu("small", "L4", 22.5, ()),
    )
    assert env.triton_gpus[0].memory_bytes == 80 * 2**30
    assert env.triton_gpus[1].memory_bytes == int(22.5 * 2**30)
    assert (env.deployment_of("bert").deployment, env.deployment_of("t5")) == ("default", None)
    bare = environments.resolve("prod", _yaml(tmp_path / "b.yaml", "environments:\n  prod:\n    bucket: s3://m-p\n"))
    assert (bare.triton_gpus, bare.deployment_of("resnet")) == (None, None)  # does not know its GPUs


def test_triton_gpus_from_the_stack_output_unless_the_file_sets_them(tmp_path, monkeypatch) -> None:
    import json

    outputs = {
        "modelRepositoryBucket": "tp-prod-models-1",
        "tritonGpus": {"default": {"gpu": "H200", "memoryGiB": 141, "models": ["resnet"]}},
    }
    monkeypatch.setenv("PULUMI", str(_stub_pulumi(tmp_path, json.dumps(outputs)) / "pulumi"))
    cfg = _yaml(tmp_path / "m.yaml", "environments:\n  prod:\n    pulumiStack: acme/p/prod\n")
    env = environments.resolve("prod", cfg)
    assert env.triton_gpus == (environments.DeploymentGpu("default", "H200", 141.0, ("resnet",)),)
    cfg = _yaml(
        tmp_path / "m.yaml",
        "environments:\n  prod:\n    pulumiStack: acme/p/prod\n    tritonGpus:\n"
        "      default: {gpu: L4, memoryGiB: 24, models: [resnet]}\n",
    )
    assert environments.resolve("prod", cfg).triton_gpus[0].gpu == "L4"  # the file wins, as for canaryPolicies
    outputs["tritonGpus"] = {"default": {"gpu": "H200", "memoryGiB": "141", "models": ["resnet"]}}
    monkeypatch.setenv("PULUMI", str(_stub_pulumi(tmp_path, json.dumps(outputs)) / "pulumi"))
    cfg = _yaml(tmp_path / "m.yaml", "environments:\n  prod:\n    pulumiStack: acme/p/prod\n")
    with pytest.raises(
        errors.SyncError, match=r"^pulumi stack acme/p/prod\.tritonGpus\.default\.memoryGiB: '141'; "
    ) as info:
        environments.resolve("prod", cfg)
    assert info.value.code == errors.USAGE


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("[H100]", r"\.tritonGpus: \['H100'\]; allowed: a mapping of deployment name -> \{gpu, memoryGiB, models\}"),
        ("{}", r"\.tritonGpus: \{\}; allowed: a mapping of deployment name -> .*, at least one$"),
        (
            "{Default: {gpu: H100, memoryGiB: 80, models: []}}",
            r"\.tritonGpus: 'Default'; allowed: deployment names \(a DNS label",
        ),
        ("{default: H100}", r"\.tritonGpus\.default: 'H100'; allowed: a mapping of gpu, memoryGiB, models$"),
        (
            "{default: {gpu: H100, memoryGiB: 80, models: [], count: 2}}",
            r"\.tritonGpus\.default\.count: unknown key; allowed: gpu, memoryGiB, models, architectures, sharing$",
        ),
        (
            "{default: {gpu: H100, models: []}}",
            r"\.tritonGpus\.default\.memoryGiB: missing; allowed: every one of gpu, memoryGiB, models$",
        ),
        (
            "{default: {gpu: '', memoryGiB: 80, models: []}}",
            r"\.tritonGpus\.default\.gpu: ''; allowed: the GPU's model",
        ),
        (
            "{default: {gpu: H100, memoryGiB: 0, models: []}}",
            r"\.tritonGpus\.default\.memoryGiB: 0; allowed: the memory of one GPU in GiB, a number in \(0, 1024\]",
        ),
        ("{default: {gpu: H100, memoryGiB: true, models: []}}", r"\.tritonGpus\.default\.memoryGiB: True; allowed:"),
        ("{default: {gpu: H100, memoryGiB: 2048, models: []}}", r"\.tritonGpus\.default\.memoryGiB: 2048; allowed:"),
        (
            "{default: {gpu: H100, memoryGiB: 80, models: resnet}}",
            r"\.tritonGpus\.default\.models: 'resnet'; allowed: a list of model names \(1-63 characters",
        ),
        ("{default: {gpu: H100, memoryGiB: 80, models: [ResNet]}}", r"\.tritonGpus\.default\.models: \['ResNet'\]"),
        (
            "{a: {gpu: H100, memoryGiB: 80, models: [resnet]}, b: {gpu: L4, memoryGiB: 24, models: [resnet]}}",
            r"\.tritonGpus\.b\.models: 'resnet' is also served by deployment 'a'; allowed: a model in one deployment$",
        ),
    ],
)
def test_bad_triton_gpus_are_usage_errors_naming_the_key(tmp_path, body, match) -> None:
    path = _yaml(tmp_path / "m.yaml", f"environments:\n  prod:\n    bucket: s3://models-p\n    tritonGpus: {body}\n")
    with pytest.raises(errors.SyncError, match=rf"^{re.escape(path)} environments\.prod{match}") as info:
        environments.resolve("prod", path)
    assert info.value.code == errors.USAGE
    assert "\n" not in str(info.value)


def test_the_documented_model_sync_yaml_is_valid(tmp_path) -> None:
    """docs/model-sync.md's example model-sync.yaml, its tritonGpus included, passes the strict reader."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "model-sync.md").read_text()
    section = doc[doc.index("## Environments (`model-sync.yaml`)") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    envs = environments.load_config(_yaml(tmp_path / "model-sync.yaml", section[start : section.index("\n```", start)]))
    assert envs["local"]["tritonGpus"] == (environments.DeploymentGpu("default", "L4", 24.0, ("resnet",)),)
