"""The key declarations: unknown and missing keys, declared choices and bounds, and Pulumi.yaml generated from them."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from components.stack_config.declarations import (
    KEYS,
    KEYS_BY_NAME,
    NODE_GROUP_FIELDS,
    TRITON_FIELDS,
    check_declared,
    pulumi_yaml_config,
)
from components.stack_config.errors import ConfigError
from components.stack_config.model import StackConfig
from components.stack_config.vocabulary import PROVIDER_NAMESPACES
from tests.components.stack_config._helpers import K, fails, parse, raw
from tests.pulumi_kit import ROOT
from tests.pulumi_kit import stack_config as stack_file


def test_unknown_top_level_key_rejected() -> None:
    cfg = raw("dev")
    cfg[K + "availabilityZoneCont"] = 3
    fails(cfg, r"triton-platform:availabilityZoneCont: 3 is an unknown config key; allowed: .*availabilityZoneCount")


def test_a_key_in_a_namespace_nothing_reads_is_refused_and_the_providers_settings_pass() -> None:
    """A misspelled project namespace was ignored: the key's value silently never applied."""
    cfg = raw("dev")
    cfg["triton-platfrom:platformReplicas"] = 9
    fails(cfg, r"^triton-platfrom:platformReplicas: 9 is in namespace 'triton-platfrom', which nothing reads; "
               r"allowed: triton-platform:<key>, or the settings of aws, kubernetes, random, pulumi$")  # fmt: skip
    cfg = raw("dev")
    cfg.update(
        {"aws:profile": "ops", "kubernetes:enableServerSideApply": "true", "pulumi:disable-default-providers": "[]"}
    )
    parse(cfg)


def test_the_provider_namespaces_are_the_providers_the_program_pins() -> None:
    pinned = {line.split("==")[0].removeprefix("pulumi-") for line in (ROOT / "requirements.txt").read_text().splitlines()
              if line.startswith("pulumi-")}  # fmt: skip
    assert set(PROVIDER_NAMESPACES) == pinned | {"pulumi"}


def test_missing_required_key() -> None:
    cfg = raw("dev")
    del cfg[K + "domain"]
    fails(cfg, r"triton-platform:domain: <unset> is missing")


def test_environment_choices() -> None:
    cfg = raw("dev")
    cfg[K + "environment"] = "production"
    fails(cfg, r"environment: 'production' is not allowed; allowed: dev \| staging \| prod")


def test_pulumi_yaml_declares_every_key_with_type_and_description() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "triton-platform"
    assert project["stackConfigDir"] == "stacks"
    assert project["runtime"]["name"] == "python"
    declared = project["config"]
    # Pulumi's schema has no object type: the structured maps are documented, not declared.
    structured = {k.name for k in KEYS if k.type == "object"}
    assert structured == {"nodeGroups", "tritonDeployments"}
    assert set(declared) == {k.name for k in KEYS} - structured
    for name, decl in declared.items():
        assert decl["type"] in ("string", "integer", "boolean", "array"), name
        assert len(decl["description"]) > 20, name
        if decl["type"] == "array":
            assert decl["items"]["type"] == "string", name


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_stack_files_use_only_declared_keys_and_no_plaintext_secrets(stack: str) -> None:
    cfg = stack_file(stack)
    secret_keys = {K + k.name for k in KEYS if k.secret}
    for key, value in cfg.items():
        namespace, _, name = key.partition(":")
        assert namespace in ("aws", "triton-platform"), key
        if namespace == "triton-platform":
            assert name in {k.name for k in KEYS}, key
        if key in secret_keys:
            assert isinstance(value, dict), f"{key} must be set with `pulumi config set --secret`"
            assert "secure" in value, f"{key} must be set with `pulumi config set --secret`"


def test_scale_down_minutes_in_range() -> None:
    cfg = raw("dev")
    cfg[K + "scaleDownUnneededMinutes"] = 0
    fails(cfg, r"scaleDownUnneededMinutes: 0 is out of range; allowed: an integer from 1 to 1440")


def test_pulumi_yaml_is_generated_from_the_declarations() -> None:
    """Pulumi.yaml's `config:` section is exactly what `make pulumi-yaml` writes from KEYS."""
    from tools.pulumi_yaml import render

    assert (ROOT / "Pulumi.yaml").read_text() == render()
    assert yaml.safe_load(render())["config"] == pulumi_yaml_config()


def test_every_declared_bound_is_in_the_description() -> None:
    """The description Pulumi.yaml shows and the bound the parser checks come from one declaration: every
    range and every choice of a key is written in its description."""
    bounded = [k for k in KEYS if k.choices or k.minimum is not None]
    assert {k.name for k in bounded} >= {"environment", "kubernetesVersion", "clusterLogRetentionDays", "tlsIssuer"}
    for k in bounded:
        assert "{bounds}" not in k.description, k.name
        if k.choices:
            assert all(str(c) in k.description for c in k.choices), k.name
        else:
            assert f"({k.minimum}-{k.maximum}" in k.description, k.name


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("availabilityZoneCount", 7, r"availabilityZoneCount: 7 is out of range; allowed: an integer from 2 to 6$"),
        (
            "ingressRateLimitRps",
            100_001,
            r"ingressRateLimitRps: 100001 is out of range; allowed: an integer from 1 to ",
        ),
        ("prometheusStorageGiB", 9, r"prometheusStorageGiB: 9 is out of range; allowed: an integer from 10 to 10000$"),
        ("natGatewayMode", "perAZ", r"natGatewayMode: 'perAZ' is not allowed; allowed: single \| perAz$"),
        ("tlsIssuer", "zerossl", r"tlsIssuer: 'zerossl' is not allowed; allowed: letsencrypt \| letsencrypt-staging$"),
    ],
)
def test_the_parser_checks_the_declared_bounds(name: str, value: object, match: str) -> None:
    """What parse() allows of a key is its declaration's range or choices (the ones its description names)."""
    cfg = raw("dev")
    cfg[K + name] = value
    fails(cfg, match)


def test_every_key_fills_its_field_of_the_model() -> None:
    """A key's StackConfig field is named after it (`ingressRequestBodyLimitMiB` -> `ingress_request_body_limit_mib`)."""
    fields = {f.name for f in dataclasses.fields(StackConfig)}
    assert {k.attribute for k in KEYS} == fields - {"stack", "region", "availability_zones"}
    assert KEYS_BY_NAME["ingressRequestBodyLimitMiB"].attribute == "ingress_request_body_limit_mib"


def test_the_structured_keys_list_their_declared_fields() -> None:
    """The nodeGroups / tritonDeployments descriptions (the missing-key error shows them) name exactly
    the fields the parser reads, in order."""
    assert KEYS_BY_NAME["nodeGroups"].description.startswith(
        "Mapping of node group name -> {kind: system|gpu, instanceTypes, capacityType, amiType, minSize, desiredSize, "
        "maxSize, diskSizeGiB, labels, gpuSharing}. "
    )
    assert KEYS_BY_NAME["tritonDeployments"].description.startswith(
        f"Mapping of deployment name -> {{{', '.join(f.name for f in TRITON_FIELDS)}}}; canary: "
    )
    assert [f.name for f in NODE_GROUP_FIELDS["gpu"]] == [f.name for f in NODE_GROUP_FIELDS["system"]]


def test_an_args_field_is_held_to_the_bounds_of_the_key_it_comes_from() -> None:
    check_declared("IngressArgs.rate_limit_rps", "ingressRateLimitRps", 100_000)
    check_declared("IngressArgs.tls_issuer", "tlsIssuer", "letsencrypt-staging")
    with pytest.raises(
        ConfigError,
        match=r"^IngressArgs\.rate_limit_rps: 100001 is out of range; allowed: an integer from 1 to 100000$",
    ):
        check_declared("IngressArgs.rate_limit_rps", "ingressRateLimitRps", 100_001)
    with pytest.raises(
        ConfigError,
        match=r"^IngressArgs\.tls_issuer: 'zerossl' is not allowed; allowed: letsencrypt \| letsencrypt-staging$",
    ):
        check_declared("IngressArgs.tls_issuer", "tlsIssuer", "zerossl")
    with pytest.raises(TypeError, match="does not say how to read it"):
        check_declared("IngressArgs.domain", "domain", "example.com")
