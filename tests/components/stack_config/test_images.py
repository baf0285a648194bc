"""The image keys: a Triton image model_sync knows, the agent's, each pinned by digest outside dev, and what the pods run."""

from __future__ import annotations

import pytest

from components.stack_config import parser
from tests.components.stack_config._helpers import K, fails, parse, raw
from tests.pulumi_kit import Run
from tests.pulumi_kit import stack_config as stack_file


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_agent_image_must_be_pinned_by_digest_outside_dev(stack: str) -> None:
    cfg = raw(stack)
    cfg[K + "agentImage"] = "registry.example.com/agent:0.1.0"
    fails(cfg, r"agentImage: 'registry.example.com/agent:0.1.0' is not valid; allowed: an image pinned by digest")


def test_dev_takes_an_agent_image_by_tag_or_pinned_by_digest_and_nothing_else() -> None:
    """dev may use a tag; a digest-pinned reference, what staging and prod need, is accepted there too."""
    cfg = raw("dev")
    for image in ("registry.example.com/agent:0.1.0", "registry.example.com/agent:0.1.0" + DIGEST):
        cfg[K + "agentImage"] = image
        assert parse(cfg).agent_image == image
    cfg[K + "agentImage"] = "registry.example.com/agent"
    fails(
        cfg,
        r"agentImage: 'registry.example.com/agent' is not valid; allowed: registry/repo:tag\[@sha256:<64 hex>\] in dev",
    )


def test_agent_image_latest_refused() -> None:
    cfg = raw("dev")
    cfg[K + "agentImage"] = "registry.example.com/agent:latest"
    fails(cfg, r"agentImage: .* uses the mutable latest tag")


DIGEST = "@sha256:" + "0a" * 32


MIRROR = "111122223333.dkr.ecr.us-east-1.amazonaws.com/nvidia/tritonserver"


def test_triton_image_defaults_to_the_pinned_version_in_dev() -> None:
    from components.upstream import versions

    cfg = raw("dev")
    assert K + "tritonImage" not in cfg
    assert parse(cfg).triton_image == versions.TRITON_IMAGE


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_shipped_triton_images_are_digest_pinned_mirrors(stack: str) -> None:
    image = parser.parse(stack_file(stack), stack).triton_image
    assert "/tritonserver:25.10-py3@sha256:" in image
    assert ".dkr.ecr." in image


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_triton_image_must_be_pinned_by_digest_outside_dev(stack: str) -> None:
    cfg = raw(stack)
    cfg.pop(K + "tritonImage")  # the default (a tag) is not enough outside dev
    fails(
        cfg,
        rf"tritonImage: 'nvcr.io/nvidia/tritonserver:25.10-py3' is not pinned by digest in {stack}; allowed: "
        r".*@sha256:<64 hex> outside dev",
    )
    cfg[K + "tritonImage"] = f"{MIRROR}:25.10-py3{DIGEST}"
    assert parse(cfg).triton_image == f"{MIRROR}:25.10-py3{DIGEST}"


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/tritonserver:latest",
        "nvcr.io/nvidia/tritonserver",
        "nvcr.io/nvidia/pytorch:25.10-py3",
        "nvcr.io/nvidia/tritonserver:25.10-py3-sdk@sha256:short",
        "NVCR.io/nvidia/tritonserver:25.10-py3",
        "tritonserver:25.10-py3",
    ],
)
def test_triton_image_must_be_a_tritonserver_reference(image: str) -> None:
    cfg = raw("dev")
    cfg[K + "tritonImage"] = image
    fails(
        cfg,
        r"tritonImage: .* is not a tritonserver image reference; allowed: "
        r"<registry>\[/<path>\]/tritonserver:<YY.MM>-py3",
    )


def test_triton_image_release_must_be_known_to_model_sync() -> None:
    cfg = raw("dev")
    cfg[K + "tritonImage"] = "nvcr.io/nvidia/tritonserver:23.01-py3"
    fails(
        cfg,
        r"tritonImage: 'nvcr.io/nvidia/tritonserver:23.01-py3' has release 23.01 with no LibTorch entry in "
        r"model_sync/contract/compat.py; allowed: releases 24.01, ",
    )


def test_triton_image_variants_and_digests_accepted_in_dev() -> None:
    cfg = raw("dev")
    for image in (
        "nvcr.io/nvidia/tritonserver:25.11-py3-igpu",
        f"{MIRROR}:25.09-py3{DIGEST}",
        "registry.local:5000/tritonserver:25.10-py3",
    ):
        cfg[K + "tritonImage"] = image
        assert parse(cfg).triton_image == image


def test_triton_image_reaches_the_pods_and_the_export(any_stack: Run) -> None:
    """The image model_sync aligns against (export `tritonImage`) is the one the pods run."""
    configured = parser.parse(stack_file(any_stack.stack), any_stack.stack).triton_image
    images = [
        c["image"]
        for r in any_stack.kubernetes_objects()
        if r.inputs.get("kind") == "Deployment"
        for c in r.inputs["spec"]["template"]["spec"]["containers"]
        if c["name"] == "tritonserver"
    ]
    assert images
    assert set(images) == {configured}
    assert any_stack.exports["tritonImage"] == configured
