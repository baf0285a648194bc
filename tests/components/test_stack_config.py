"""Every stack-config rule, one test each: the error is one line naming the key, the bad
value and what is allowed, and it is raised by parse() before any resource exists."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import stack_config as sc
from model_sync.contract.canary_policy import CanaryPolicy
from tests.pulumi_kit import ROOT, Run
from tests.pulumi_kit import stack_config as stack_file

K = "triton-platform:"


def raw(stack: str) -> dict[str, Any]:
    """The stack file's config (the two maps are structured YAML), copied for mutation."""
    return copy.deepcopy(stack_file(stack))


def parse(cfg: dict[str, Any], stack: str = "x") -> sc.StackConfig:
    return sc.parse(cfg, stack)


def fails(cfg: dict[str, Any], match: str) -> sc.ConfigError:
    with pytest.raises(sc.ConfigError, match=match) as info:
        parse(cfg)
    message = str(info.value)
    assert "\n" not in message
    assert "allowed:" in message
    return info.value


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_shipped_stacks_parse(stack: str) -> None:
    cfg = sc.parse(stack_file(stack), stack)
    assert cfg.environment == stack
    assert cfg.stack == stack
    assert cfg.gpu_node_groups
    assert cfg.triton_deployments


def test_string_encoded_values_parse_like_typed_ones() -> None:
    """Pulumi hands programs strings (JSON for arrays); both forms give the same model."""
    from tests.pulumi_kit import to_pulumi_strings

    typed = sc.parse(stack_file("prod"), "prod")
    stringly = sc.parse(to_pulumi_strings(stack_file("prod")), "prod")
    assert typed == stringly


# ---- environment rules ---------------------------------------------------------------


def test_prod_needs_three_azs() -> None:
    cfg = raw("prod")
    cfg[K + "availabilityZoneCount"] = 2
    err = fails(cfg, r"availabilityZoneCount: 2 is below the prod minimum; allowed: 3 to 6 in prod")
    assert err.key == K + "availabilityZoneCount"


def test_prod_needs_two_triton_replicas() -> None:
    cfg = raw("prod")
    cfg[K + "tritonDeployments"]["large"]["minReplicas"] = 1
    fails(cfg, r"tritonDeployments\.large\.minReplicas: 1 is below the prod minimum; allowed: 2 or more in prod")


def test_prod_refuses_single_nat() -> None:
    cfg = raw("prod")
    cfg[K + "natGatewayMode"] = "single"
    fails(cfg, r"natGatewayMode: 'single' is not allowed in prod")


def test_prod_refuses_spot_only_serving_group() -> None:
    cfg = raw("prod")
    cfg[K + "nodeGroups"]["gpu-l4"]["capacityType"] = "SPOT"
    fails(
        cfg, r"nodeGroups\.gpu-l4\.capacityType: 'SPOT' backs prod Triton deployment 'default' with spot capacity only"
    )


def test_prod_requires_audit_logs() -> None:
    cfg = raw("prod")
    cfg[K + "clusterLogTypes"] = ["api"]
    fails(cfg, r"clusterLogTypes: .* omits audit logs in prod")


def test_prod_refuses_staging_acme_issuer() -> None:
    cfg = raw("prod")
    cfg[K + "tlsIssuer"] = "letsencrypt-staging"
    fails(cfg, r"tlsIssuer: 'letsencrypt-staging' issues untrusted certificates in prod")


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_force_destroy_only_in_dev(stack: str) -> None:
    cfg = raw(stack)
    cfg[K + "modelRepositoryForceDestroy"] = True
    fails(cfg, rf"modelRepositoryForceDestroy: true is not allowed in {stack}; allowed: true in dev only")


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_agent_image_must_be_pinned_by_digest_outside_dev(stack: str) -> None:
    cfg = raw(stack)
    cfg[K + "agentImage"] = "registry.example.com/agent:0.1.0"
    fails(cfg, r"agentImage: 'registry.example.com/agent:0.1.0' is not valid; allowed: an image pinned by digest")


def test_agent_image_latest_refused() -> None:
    cfg = raw("dev")
    cfg[K + "agentImage"] = "registry.example.com/agent:latest"
    fails(cfg, r"agentImage: .* uses the mutable latest tag")


DIGEST = "@sha256:" + "0a" * 32
MIRROR = "111122223333.dkr.ecr.us-east-1.amazonaws.com/nvidia/tritonserver"


def test_triton_image_defaults_to_the_pinned_version_in_dev() -> None:
    from components import versions

    cfg = raw("dev")
    assert K + "tritonImage" not in cfg
    assert parse(cfg).triton_image == versions.TRITON_IMAGE


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_shipped_triton_images_are_digest_pinned_mirrors(stack: str) -> None:
    image = sc.parse(stack_file(stack), stack).triton_image
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


# ---- node groups ------------------------------------------------------------------------


def test_gpu_group_accepts_only_gpu_families() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["instanceTypes"] = ["g6.xlarge", "m5.large"]
    fails(cfg, r"nodeGroups\.gpu-l4\.instanceTypes: 'm5.large' is not a GPU instance type; allowed: families g4dn, g5")


def test_system_group_refuses_gpu_instances() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["system"]["instanceTypes"] = ["g5.xlarge"]
    fails(cfg, r"nodeGroups\.system\.instanceTypes: 'g5.xlarge' is a GPU instance type in the system group")


def test_instance_type_shape() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["instanceTypes"] = ["bigbox"]
    fails(cfg, r"instanceTypes: 'bigbox' is not an EC2 instance type")


@pytest.mark.parametrize(("mn", "desired", "mx"), [(2, 1, 3), (1, 4, 3), (3, 3, 2)])
def test_node_group_min_desired_max(mn: int, desired: int, mx: int) -> None:
    cfg = raw("staging")
    cfg[K + "nodeGroups"]["gpu-l4"].update(minSize=mn, desiredSize=desired, maxSize=mx)
    fails(cfg, r"nodeGroups\.gpu-l4\.desiredSize: .* breaks minSize <= desiredSize <= maxSize")


def test_system_group_cannot_scale_to_zero() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["system"].update(minSize=0, desiredSize=0)
    fails(cfg, r"nodeGroups\.system\.minSize: 0 is out of range; allowed: an integer from 1 to 1000")


def test_gpu_group_may_scale_to_zero() -> None:
    assert parse(raw("dev")).node_group("gpu-l4").min_size == 0


def test_exactly_one_system_group() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["system2"] = dict(cfg[K + "nodeGroups"]["system"])
    fails(cfg, r"nodeGroups: .* must contain exactly one system group")


def test_at_least_one_gpu_group() -> None:
    cfg = raw("dev")
    del cfg[K + "nodeGroups"]["gpu-l4"]
    fails(cfg, r"nodeGroups: .* has no GPU group")


def test_capacity_type_choices() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["capacityType"] = "spot"
    fails(cfg, r"capacityType: 'spot' is not allowed; allowed: ON_DEMAND \| SPOT")


def test_gpu_ami_type_choices() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["amiType"] = "AL2023_x86_64_STANDARD"
    fails(
        cfg,
        r"amiType: 'AL2023_x86_64_STANDARD' is not allowed; allowed: AL2023_x86_64_NVIDIA \| "
        r"BOTTLEROCKET_x86_64_NVIDIA",
    )


def test_reserved_label_prefix_refused() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["labels"] = {"triton-platform.io/node-role": "system"}
    fails(cfg, r"labels\.triton-platform\.io/node-role: 'system' is not allowed")


# ---- names --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["GPU", "gpu_l4", "-gpu", "g" * 40, "gpu.l4"])
def test_node_group_names_are_dns_safe(bad: str) -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"][bad] = cfg[K + "nodeGroups"].pop("gpu-l4")
    fails(cfg, r"nodeGroups\.<name>: .* is not valid; allowed: a DNS label")


def test_triton_deployment_names_are_dns_safe() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["Default"] = cfg[K + "tritonDeployments"].pop("default")
    fails(cfg, r"tritonDeployments\.<name>: 'Default' is not valid; allowed: a DNS label")


def test_model_names_checked() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["models"] = ["ResNet 18"]
    fails(
        cfg, r"tritonDeployments\.default\.models: 'ResNet 18' is not valid; allowed: model names of lowercase letters"
    )


def test_model_listed_twice() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["models"] = ["a", "a"]
    fails(cfg, r"models: .* lists a model twice")


# ---- endpoint exposure ------------------------------------------------------------------


@pytest.mark.parametrize(
    "cidrs", [["0.0.0.0/0"], ["0.0.0.0/1", "128.0.0.0/1"], ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2"], ["16.0.0.0/7"]]
)
def test_world_open_endpoint_refused_by_default(cidrs: list[str]) -> None:
    """judged by the union of the CIDRs, not their spelling."""
    cfg = raw("dev")
    cfg[K + "clusterEndpointPublicAccessCidrs"] = cidrs
    fails(
        cfg,
        r"clusterEndpointPublicAccessCidrs: '"
        + re.escape(", ".join(cidrs))
        + r" \(their union .*% of IPv4\)' opens the cluster API to the internet; "
        r"allowed: specific CIDRs whose union is at most a /8, or set "
        r"triton-platform:allowWorldOpenClusterEndpoint=true",
    )


def test_a_specific_endpoint_allowlist_passes() -> None:
    cfg = raw("dev")
    cfg[K + "clusterEndpointPublicAccessCidrs"] = ["198.51.100.0/24", "203.0.113.0/24", "16.0.0.0/9"]
    assert parse(cfg).cluster_endpoint_public_access_cidrs == ("198.51.100.0/24", "203.0.113.0/24", "16.0.0.0/9")


def test_the_ingress_allowlist_is_judged_by_its_union_and_prod_must_name_it() -> None:
    cfg = raw("staging")
    cfg[K + "ingressAllowedCidrs"] = ["0.0.0.0/1", "128.0.0.0/1"]
    fails(
        cfg,
        r"ingressAllowedCidrs: '0\.0\.0\.0/1, 128\.0\.0\.0/1 \(their union 0\.0\.0\.0/0: 100% of IPv4\)' lets "
        r"\(almost\) every client through under another spelling; "
        r"allowed: \[0\.0\.0\.0/0\] written as such for a public API",
    )
    cfg[K + "ingressAllowedCidrs"] = ["0.0.0.0/0"]
    assert parse(cfg).ingress_allowed_cidrs == ("0.0.0.0/0",)
    prod = raw("prod")
    del prod[K + "ingressAllowedCidrs"]
    fails(
        prod,
        r"ingressAllowedCidrs: <unset> is not set in prod \(the default lets any client through\); allowed: the "
        r"client CIDRs, or \[0\.0\.0\.0/0\] for a public API",
    )


def test_world_open_endpoint_allowed_only_explicitly() -> None:
    cfg = raw("dev")
    cfg[K + "clusterEndpointPublicAccessCidrs"] = ["0.0.0.0/0"]
    cfg[K + "allowWorldOpenClusterEndpoint"] = True
    assert parse(cfg).cluster_endpoint_public_access_cidrs == ("0.0.0.0/0",)


def test_endpoint_cidr_must_be_a_network() -> None:
    cfg = raw("dev")
    cfg[K + "clusterEndpointPublicAccessCidrs"] = ["198.51.100.7/24"]
    fails(cfg, r"clusterEndpointPublicAccessCidrs: '198.51.100.7/24' is not an IPv4 CIDR")


def test_prod_endpoint_private_only() -> None:
    assert parse(raw("prod")).cluster_endpoint_public_access_cidrs == ()


def test_vpc_cidr_private_range() -> None:
    cfg = raw("dev")
    cfg[K + "vpcCidr"] = "8.8.0.0/16"
    fails(cfg, r"vpcCidr: '8.8.0.0/16' is not a private /16-/20 range")


def test_admin_role_arns_required_and_shaped() -> None:
    cfg = raw("dev")
    cfg[K + "clusterAdminRoleArns"] = ["arn:aws:iam::1234:user/bob"]
    fails(cfg, r"clusterAdminRoleArns: 'arn:aws:iam::1234:user/bob' is not valid; allowed: IAM role ARNs")
    cfg[K + "clusterAdminRoleArns"] = []
    fails(cfg, r"clusterAdminRoleArns: .* is empty")


def test_github_refs_have_no_wildcards() -> None:
    cfg = raw("dev")
    cfg[K + "githubDeployRefs"] = ["refs/heads/*"]
    fails(
        cfg,
        r"githubDeployRefs: 'refs/heads/\*' is not valid; allowed: refs/heads/<branch> or refs/tags/<tag> \(no "
        r"wildcards, no environment",
    )
    cfg[K + "githubDeployRefs"] = ["environment:prod"]  # an environment is the role's purpose, not a stack setting
    fails(
        cfg,
        r"githubDeployRefs: 'environment:prod' is not valid; allowed: refs/heads/<branch> or refs/tags/<tag> .* "
        r"e\.g\. deploy-dev",
    )


def test_github_repository_shape() -> None:
    cfg = raw("dev")
    cfg[K + "githubRepository"] = "just-a-name"
    fails(cfg, r"githubRepository: 'just-a-name' is not valid; allowed: a GitHub owner/name")


# ---- triton deployments ------------------------------------------------------------------


def test_triton_node_group_must_be_a_gpu_group() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["nodeGroup"] = "system"
    fails(
        cfg, r"tritonDeployments\.default\.nodeGroup: 'system' is not a GPU node group of this stack; allowed: gpu-l4"
    )


def test_triton_min_replicas_not_above_max() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"].update(minReplicas=3, maxReplicas=2)
    fails(cfg, r"minReplicas: .* exceeds maxReplicas")


def test_triton_quantities() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["memory"] = "lots"
    fails(cfg, r"tritonDeployments\.default\.memory: 'lots' is not valid; allowed: a Kubernetes quantity")


def test_triton_numbers_in_range() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["gpusPerReplica"] = 0
    fails(cfg, r"gpusPerReplica: 0 is out of range; allowed: an integer from 1 to 16")


def test_integer_fields_refuse_non_integers() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["maxReplicas"] = 2.5
    fails(cfg, r"maxReplicas: 2.5 is not an integer")


# ---- typos and missing keys -------------------------------------------------------------


def test_unknown_top_level_key_rejected() -> None:
    cfg = raw("dev")
    cfg[K + "availabilityZoneCont"] = 3
    fails(cfg, r"triton-platform:availabilityZoneCont: 3 is an unknown config key; allowed: .*availabilityZoneCount")


def test_unknown_node_group_field_rejected() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["maxSise"] = 4
    fails(cfg, r"nodeGroups\.gpu-l4\.maxSise: 4 is an unknown key; allowed: .*maxSize")


def test_unknown_triton_field_rejected() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["readynessProbe"] = {}
    fails(cfg, r"tritonDeployments\.default\.readynessProbe: .* is an unknown key")


# ---- tritonDeployments.<d>.canary (model_sync/contract/canary_policy.py) -------------------------


def test_canary_policy_is_parsed_per_deployment_with_defaults_for_what_is_left_out() -> None:
    cfg = sc.parse(stack_file("prod"), "prod")
    policies = {d.name: d.canary for d in cfg.triton_deployments}
    assert policies["default"] == CanaryPolicy()  # no `canary` key: the defaults
    assert "canary" not in stack_file("prod")[K + "tritonDeployments"]["default"]
    assert policies["large"] == CanaryPolicy(step_seconds=900, deadline_seconds=5400)
    custom = raw("dev")
    custom[K + "tritonDeployments"]["default"]["canary"] = {
        "steps": [5, 20, 50],
        "stepSeconds": 120,
        "deadlineSeconds": 1800,
        "minRequests": 50,
        "maxP99Ratio": 1.2,
    }
    (d,) = parse(custom).triton_deployments
    assert d.canary == CanaryPolicy(
        steps=(5, 20, 50), step_seconds=120, deadline_seconds=1800, min_requests=50, max_p99_ratio=1.2
    )
    assert d.canary.to_mapping()["steps"] == [5, 20, 50]
    # Pulumi's spelling (the map as a JSON string) reads the same.
    from tests.pulumi_kit import to_pulumi_strings

    (same,) = parse(to_pulumi_strings(custom)).triton_deployments
    assert same.canary == d.canary
    empty = raw("dev")
    empty[K + "tritonDeployments"]["default"]["canary"] = {}
    assert parse(empty).triton_deployments[0].canary == CanaryPolicy()


@pytest.mark.parametrize(
    ("canary", "match"),
    [
        (
            {"stepSecond": 60},
            r"^triton-platform:tritonDeployments\.default\.canary\.stepSecond: 60 is an unknown key; "
            r"allowed: deadlineSeconds, .*stepSeconds, steps$",
        ),
        (
            {"stepSeconds": 0},
            r"^triton-platform:tritonDeployments\.default\.canary\.stepSeconds: 0 is not allowed; allowed: 1\.\.86400$",
        ),
        (
            {"maxErrorRatioIncrease": 1.5},
            r"canary\.maxErrorRatioIncrease: 1\.5 is not allowed; allowed: 0\.\.1$",
        ),
        (
            {"steps": [25, 10]},
            r"canary\.steps: \[25, 10\] is not allowed; allowed: increasing percentages 1\.\.50",
        ),
        (
            {"steps": [10, 60]},
            r"canary\.steps: \[10, 60\] is not allowed; allowed: increasing percentages 1\.\.50",
        ),
        (
            {"minRequests": "many"},
            r"canary\.minRequests: 'many' is not allowed; allowed: an integer$",
        ),
        # A cross-check broken by a key left out: the default it takes is named.
        (
            {"stepSeconds": 2000},
            r"canary\.deadlineSeconds: 3600 is not allowed; allowed: at least len\(steps\) x stepSeconds \(6000\)$",
        ),
        (
            "fast",
            r"^triton-platform:tritonDeployments\.default\.canary: 'fast' is not a mapping; allowed: a mapping of ",
        ),
    ],
)
def test_canary_policy_refused_in_one_line(canary: Any, match: str) -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["canary"] = canary
    err = fails(cfg, match)
    assert err.key.startswith(K + "tritonDeployments.default.canary")


def test_missing_required_key() -> None:
    cfg = raw("dev")
    del cfg[K + "domain"]
    fails(cfg, r"triton-platform:domain: <unset> is missing")


def test_missing_required_nested_field() -> None:
    cfg = raw("dev")
    del cfg[K + "nodeGroups"]["gpu-l4"]["maxSize"]
    fails(cfg, r"nodeGroups\.gpu-l4\.maxSize: <unset> is missing")


def test_node_groups_yaml_must_parse() -> None:
    cfg = stack_file("dev")
    cfg[K + "nodeGroups"] = "system: [unclosed"
    with pytest.raises(sc.ConfigError, match=r"nodeGroups: '<yaml>' does not parse as YAML"):
        sc.parse(cfg, "dev")


def test_environment_choices() -> None:
    cfg = raw("dev")
    cfg[K + "environment"] = "production"
    fails(cfg, r"environment: 'production' is not allowed; allowed: dev \| staging \| prod")


def test_region_shape() -> None:
    cfg = raw("dev")
    cfg["aws:region"] = "moon-1"
    fails(cfg, r"aws:region: 'moon-1' is not valid; allowed: an AWS region")


def test_kubernetes_version_choices() -> None:
    cfg = raw("dev")
    cfg[K + "kubernetesVersion"] = "1.20"
    fails(
        cfg,
        r"kubernetesVersion: '1.20' has no pinned EKS add-on versions and Cluster Autoscaler image; allowed: 1.32 \| "
        r"1.33 \| 1.34 \(pin",
    )


@pytest.mark.parametrize("version", ["1.31", "1.35", 1.33])
def test_kubernetes_version_needs_every_pinned_addon_and_autoscaler_image(version: Any) -> None:
    """1.31 has an autoscaler image nowhere and no EKS add-on pins: refused before any resource exists."""
    from components import versions

    cfg = raw("dev")
    cfg[K + "kubernetesVersion"] = version
    fails(cfg, r"kubernetesVersion: .* has no pinned EKS add-on versions and Cluster Autoscaler image")
    assert sc.KUBERNETES_VERSIONS == versions.KUBERNETES_VERSIONS == ("1.32", "1.33", "1.34")
    for v in sc.KUBERNETES_VERSIONS:
        assert v in versions.EKS_ADDON_VERSIONS
        assert "aws-ebs-csi-driver" in versions.EKS_ADDON_VERSIONS[v]
        assert v in versions.CLUSTER_AUTOSCALER_IMAGE_TAGS


def test_domain_shape() -> None:
    cfg = raw("dev")
    cfg[K + "domain"] = "Not A Domain"
    fails(cfg, r"domain: 'Not A Domain' is not valid; allowed: a lowercase DNS name")


def test_booleans_are_booleans() -> None:
    cfg = raw("dev")
    cfg[K + "monitoringEnabled"] = "yes"
    fails(cfg, r"monitoringEnabled: 'yes' is not a boolean; allowed: true or false")


def test_slack_webhook_value_never_echoed() -> None:
    cfg = raw("dev")
    cfg[K + "alertmanagerSlackWebhookUrl"] = "http://example.com/secret-token"
    err = fails(cfg, r"alertmanagerSlackWebhookUrl: '<secret>' is not a Slack webhook URL")
    assert "secret-token" not in str(err)


def test_config_is_frozen() -> None:
    cfg = parse(raw("dev"))
    with pytest.raises(AttributeError):
        cfg.environment = "prod"  # type: ignore[misc]


# ---- Pulumi.yaml declares exactly KEYS -----------------------------------------------------


def test_pulumi_yaml_declares_every_key_with_type_and_description() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "triton-platform"
    assert project["stackConfigDir"] == "stacks"
    assert project["runtime"]["name"] == "python"
    declared = project["config"]
    # Pulumi's schema has no object type: the structured maps are documented, not declared.
    structured = {k.name for k in sc.KEYS if k.type == "object"}
    assert structured == {"nodeGroups", "tritonDeployments"}
    assert set(declared) == {k.name for k in sc.KEYS} - structured
    for name, decl in declared.items():
        assert decl["type"] in ("string", "integer", "boolean", "array"), name
        assert len(decl["description"]) > 20, name
        if decl["type"] == "array":
            assert decl["items"]["type"] == "string", name


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_stack_files_use_only_declared_keys_and_no_plaintext_secrets(stack: str) -> None:
    cfg = stack_file(stack)
    secret_keys = {K + k.name for k in sc.KEYS if k.secret}
    for key, value in cfg.items():
        namespace, _, name = key.partition(":")
        assert namespace in ("aws", "triton-platform"), key
        if namespace == "triton-platform":
            assert name in {k.name for k in sc.KEYS}, key
        if key in secret_keys:
            assert isinstance(value, dict), f"{key} must be set with `pulumi config set --secret`"
            assert "secure" in value, f"{key} must be set with `pulumi config set --secret`"


# ---- GPU capacity (node autoscaling can only add what the group's limits allow) ----------


def test_gpu_pool_limit_must_hold_max_replicas() -> None:
    cfg = raw("prod")
    cfg[K + "tritonDeployments"]["default"]["maxReplicas"] = 9
    fails(
        cfg,
        r"nodeGroups\.gpu-l4\.maxSize: 8 holds 8 GPU\(s\) but "
        r"triton-platform:tritonDeployments\.default\.maxReplicas x gpusPerReplica need 9; allowed: maxSize >= 9",
    )


def test_gpu_pool_limit_counts_gpus_per_instance() -> None:
    cfg = raw("prod")
    cfg[K + "nodeGroups"]["gpu-l4"]["instanceTypes"] = ["g6.12xlarge"]
    cfg[K + "nodeGroups"]["gpu-l4"].update(minSize=1, desiredSize=1, maxSize=2)
    cfg[K + "tritonDeployments"]["default"]["gpusPerReplica"] = 1
    cfg[K + "tritonDeployments"]["default"]["maxReplicas"] = 8
    assert parse(cfg).node_group("gpu-l4").max_size == 2  # 2 nodes x 4 GPUs hold 8 replicas


def test_replica_must_fit_on_one_node() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["gpusPerReplica"] = 2
    fails(
        cfg,
        r"tritonDeployments\.default\.gpusPerReplica: 2 does not fit on one node of "
        r"triton-platform:nodeGroups\.gpu-l4 \(1 GPU\(s\) per node\); allowed: at most 1",
    )


def test_prod_on_demand_floor_holds_min_replicas() -> None:
    cfg = raw("prod")
    cfg[K + "nodeGroups"]["gpu-a10g"].update(minSize=1, desiredSize=2)
    fails(
        cfg,
        r"nodeGroups\.gpu-a10g\.minSize: 1 keeps 1 on-demand GPU\(s\) but "
        r"triton-platform:tritonDeployments\.large\.minReplicas x gpusPerReplica need 2; allowed: minSize >= 2 in "
        r"prod",
    )


def test_gpu_size_must_have_known_gpu_count() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["instanceTypes"] = ["g6.96xlarge"]
    fails(cfg, r"instanceTypes: 'g6.96xlarge' is not a GPU instance size with a known GPU count")


def test_scale_down_minutes_in_range() -> None:
    cfg = raw("dev")
    cfg[K + "scaleDownUnneededMinutes"] = 0
    fails(cfg, r"scaleDownUnneededMinutes: 0 is out of range; allowed: an integer from 1 to 1440")


def test_triton_min_replicas_at_least_one() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["minReplicas"] = 0
    fails(cfg, r"tritonDeployments\.default\.minReplicas: 0 is out of range; allowed: an integer from 1 to 1000")


def test_triton_image_reaches_the_pods_and_the_export(any_stack: Run) -> None:
    """The image model_sync aligns against (export `tritonImage`) is the one the pods run."""
    configured = sc.parse(stack_file(any_stack.stack), any_stack.stack).triton_image
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


def test_a_name_given_twice_in_the_yaml_maps_is_refused_not_kept_last() -> None:
    """in staging a second `gpu-l4:` entry (spot, minSize 0) silently replaced the
    on-demand one; YAML keeps the last copy, the stack model refuses it."""
    # The older spelling, a string holding the YAML mapping: the stack model refuses the copy.
    cfg = stack_file("staging")
    text = yaml.safe_dump(cfg[K + "nodeGroups"], sort_keys=False)
    cfg[K + "nodeGroups"] = text + (
        "gpu-l4:\n  kind: gpu\n  instanceTypes: [g6.2xlarge]\n  capacityType: SPOT\n"
        "  minSize: 0\n  desiredSize: 0\n  maxSize: 4\n"
    )
    line = len(text.splitlines()) + 1
    fails(
        cfg,
        rf"nodeGroups: 'gpu-l4' appears twice in the YAML \(the second time on line {line}\); YAML would keep only "
        r"the last; allowed: each name once",
    )
    cfg = stack_file("staging")
    text = yaml.safe_dump(cfg[K + "tritonDeployments"], sort_keys=False)
    cfg[K + "tritonDeployments"] = text.replace("maxReplicas:", "maxReplicas: 9\n  maxReplicas:", 1)
    fails(cfg, r"tritonDeployments: 'maxReplicas' appears twice in the YAML")


def test_a_name_given_twice_in_a_structured_stack_file_is_refused(tmp_path: Path) -> None:
    """Structured maps are YAML of the stack file itself: Pulumi's loader refuses a key given
    twice there, and so does the kit the renders and tests read stack files with."""
    from tests.pulumi_kit import KitError

    text = (ROOT / "stacks" / "Pulumi.staging.yaml").read_text()
    anchor = "  triton-platform:nodeGroups:\n"
    assert anchor in text
    broken = tmp_path / "Pulumi.staging.yaml"
    broken.write_text(
        text.replace(
            anchor,
            anchor + "    gpu-l4:\n      kind: gpu\n      instanceTypes: [g6.2xlarge]\n"
            "      minSize: 0\n      desiredSize: 0\n      maxSize: 4\n",
            1,
        )
    )
    with pytest.raises(KitError, match=r"Pulumi.staging.yaml: 'gpu-l4' appears twice \(the second time on line \d+\)"):
        stack_file("staging", broken)


def test_structured_maps_are_edited_with_config_set_path() -> None:
    """`pulumi config set --path triton-platform:tritonDeployments.default.maxReplicas 8` needs
    the map to be YAML of the stack file (a string cannot be addressed by path); Pulumi then
    hands the program the whole map as JSON, with the number set as a number."""
    import json

    from tests.pulumi_kit import to_pulumi_strings

    for stack in ("dev", "staging", "prod"):
        cfg = stack_file(stack)
        assert isinstance(cfg[K + "nodeGroups"], dict)
        assert isinstance(cfg[K + "tritonDeployments"], dict)
    cfg = stack_file("staging")
    cfg[K + "tritonDeployments"]["default"]["maxReplicas"] = 3  # what `config set --path ... 3` writes
    passed = to_pulumi_strings(cfg)
    assert json.loads(passed[K + "tritonDeployments"])["default"]["maxReplicas"] == 3
    assert next(t for t in sc.parse(passed, "staging").triton_deployments if t.name == "default").max_replicas == 3
    cfg[K + "tritonDeployments"]["default"]["maxReplicas"] = "3"  # `--type string`, or a quoted value
    assert next(t for t in sc.parse(cfg, "staging").triton_deployments if t.name == "default").max_replicas == 3


@pytest.mark.parametrize(("stack", "environment", "ok"), [
    ("dev", "prod", False), ("acme/triton-platform/dev", "prod", False), ("prod-eu", "staging", False),
    ("prod", "prod", True), ("acme/triton-platform/prod-eu", "prod", True), ("sandbox", "dev", True),
    ("devices", "prod", True),
])  # fmt: skip
def test_a_stack_named_after_another_environment_is_refused(stack: str, environment: str, ok: bool) -> None:
    """a stack called `dev` whose file says `environment: prod` was accepted."""
    cfg = raw(environment)
    if ok:
        assert sc.parse(cfg, stack).environment == environment
        return
    with pytest.raises(
        sc.ConfigError,
        match=(
            rf"environment: '{environment}' differs from the stack name '{re.escape(stack)}'; allowed: the "
            r"environment the stack is named after"
        ),
    ):
        sc.parse(cfg, stack)


# ---- every rule a component enforces is a rule of the stack model ------------------


def test_config_error_is_a_run_error() -> None:
    """Under `pulumi preview` / `up` a RunError prints its one line, without a traceback."""
    import pulumi

    assert issubclass(sc.ConfigError, pulumi.RunError)


def test_a_model_in_two_deployments_is_refused_before_any_resource() -> None:
    """It used to pass the stack model and raise inside IngressArgs after 153 resources."""
    from tests.pulumi_kit import run_program

    cfg = raw("prod")
    cfg[K + "tritonDeployments"]["large"]["models"] = ["reranker-large", "resnet18"]
    err = fails(
        cfg,
        r"tritonDeployments\.large\.models: 'resnet18' is already served by deployment 'default'; allowed: each "
        r"model in one deployment",
    )
    assert err.key == K + "tritonDeployments.large.models"
    with pytest.raises(sc.ConfigError, match="already served by deployment 'default'"):
        run_program("prod", {K + "tritonDeployments": yaml.safe_dump(cfg[K + "tritonDeployments"])})


def test_admin_roles_compared_by_account_and_name() -> None:
    cfg = raw("prod")
    other_account = "arn:aws:iam::777788889999:role/platform-admins"
    cfg[K + "clusterAdminRoleArns"] = [*cfg[K + "clusterAdminRoleArns"], other_account]
    assert other_account in parse(cfg).cluster_admin_role_arns  # same name, another account: another role
    cfg[K + "clusterAdminRoleArns"] = [
        "arn:aws:iam::444455556666:role/platform-admins",
        "arn:aws:iam::444455556666:role/team/Platform-Admins",
    ]
    fails(
        cfg,
        r"clusterAdminRoleArns: 'arn:aws:iam::444455556666:role/team/Platform-Admins' names the same role as "
        r"'arn:aws:iam::444455556666:role/platform-admins' \(one account, one name\); allowed: each role once",
    )
    cfg[K + "clusterAdminRoleArns"] = ["arn:aws:iam::444455556666:role/platform-admins"] * 2
    fails(cfg, r"clusterAdminRoleArns: .* names the same role")


@pytest.mark.parametrize("days", [2, 100, 3650])
def test_log_retention_is_one_cloudwatch_offers(days: int) -> None:
    cfg = raw("prod")
    cfg[K + "clusterLogRetentionDays"] = days
    fails(
        cfg,
        rf"clusterLogRetentionDays: {days} is not a retention CloudWatch Logs offers; allowed: 1, 3, 5, 7, 14, 30, "
        r"60, 90,",
    )
    cfg[K + "clusterLogRetentionDays"] = 400
    assert parse(cfg).cluster_log_retention_days == 400


def test_zone_count_checked_against_the_regions_zones() -> None:
    from tests.pulumi_kit import run_program

    cfg = raw("staging")
    zones = ["us-west-1c", "us-west-1a"]
    cfg[K + "availabilityZoneCount"] = 3
    with pytest.raises(
        sc.ConfigError,
        match=r"availabilityZoneCount: 3 exceeds the 2 EKS-capable zones us-east-1 offers this account "
        r"\(us-west-1a, us-west-1c\); allowed: at most 2 in us-east-1",
    ):
        sc.parse(cfg, "x", zones=zones)
    cfg[K + "availabilityZoneCount"] = 2
    assert sc.parse(cfg, "x", zones=zones).availability_zones == ("us-west-1a", "us-west-1c")
    # The program asks AWS before the first resource: the mocked us-east-1 has 5 EKS-capable zones.
    with pytest.raises(sc.ConfigError, match=r"availabilityZoneCount: 6 exceeds the 5 EKS-capable zones"):
        run_program("staging", {K + "availabilityZoneCount": 6})


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::aws:policy/PowerUserAccess",
        "arn:aws:iam::aws:policy/AdministratorAccess",
        "arn:aws:iam::aws:policy/IAMFullAccess",
        "arn:aws:iam::aws:policy/job-function/SystemAdministrator",
    ],
)
def test_deployer_policies_are_an_allow_list(arn: str) -> None:
    cfg = raw("prod")
    cfg[K + "deployerPolicyArns"] = ["arn:aws:iam::444455556666:policy/triton-platform-deployer", arn]
    fails(
        cfg,
        rf"deployerPolicyArns: '{re.escape(arn)}' is an AWS managed policy, not scoped to this stack; allowed: "
        r"customer-managed policies",
    )


def test_deployer_policies_are_the_stacks_own_account() -> None:
    cfg = raw("prod")  # account 444455556666 (its githubOidcProviderArn)
    cfg[K + "deployerPolicyArns"] = ["arn:aws:iam::111122223333:policy/triton-platform-deployer"]
    fails(
        cfg,
        r"deployerPolicyArns: 'arn:aws:iam::111122223333:policy/triton-platform-deployer' belongs to another account "
        r"than the stack's "
        r"\(444455556666, from githubOidcProviderArn\); allowed: customer-managed policies of the stack's own account",
    )


def test_a_plaintext_secret_is_refused_and_the_fix_named() -> None:
    from tests.pulumi_kit import run_program

    cfg = raw("prod")
    cfg[K + "alertmanagerSlackWebhookUrl"] = "https://hooks.slack.com/services/T0/B0/plaintext-token"
    with pytest.raises(sc.ConfigError) as info:
        sc.parse(cfg, "x", secret_keys=set())
    assert str(info.value) == (
        "triton-platform:alertmanagerSlackWebhookUrl: '<redacted>' is stored in plaintext in the stack file; "
        "allowed: an encrypted value: pulumi config set --secret triton-platform:alertmanagerSlackWebhookUrl <value>"
    )
    assert "plaintext-token" not in str(info.value)
    assert sc.parse(cfg, "x", secret_keys={K + "alertmanagerSlackWebhookUrl"}).alertmanager_slack_webhook_url.endswith(
        "plaintext-token"
    )
    with pytest.raises(sc.ConfigError, match="is stored in plaintext"):
        run_program(
            "prod", {K + "alertmanagerSlackWebhookUrl": "https://hooks.slack.com/services/T0/B0/plaintext-token"}
        )
    # The README's way (`pulumi config set --secret`, an encrypted value in the stack file) renders.
    assert run_program("prod", {K + "alertmanagerSlackWebhookUrl": {"secure": "v1:AAAA"}}).resources


# ---- a replica that cannot fit its node group is a config error ---------------------


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        (
            "cpu",
            "4",
            (
                r"tritonDeployments\.default\.cpu: '4' needs 4100m per replica \(with the agent sidecar\) but a "
                r"g6\.xlarge node of group 'gpu-l4' leaves pods 3220m"
            ),
        ),
        (
            "memory",
            "15Gi",
            (
                r"tritonDeployments\.default\.memory: '15Gi' needs 15\.2Gi per replica .* a g6\.xlarge node of group "
                r"'gpu-l4' leaves pods 13\.2Gi"
            ),
        ),
        (
            "modelVolumeGiB",
            80,
            r"tritonDeployments\.default\.modelVolumeGiB: 80 needs 82Gi of disk per replica .* leaves pods 60Gi; "
            r"allowed: requests that fit "
            r"triton-platform:nodeGroups\.gpu-l4\.diskSizeGiB",
        ),
    ],
)
def test_a_replica_must_fit_every_instance_type_of_its_group(field: str, value: Any, match: str) -> None:
    cfg = raw("dev")  # gpu-l4: g6.xlarge (4 vCPU, 16 GiB) and g6.2xlarge, 100 GiB disks
    cfg[K + "tritonDeployments"]["default"][field] = value
    fails(cfg, match)
    cfg[K + "nodeGroups"]["gpu-l4"]["instanceTypes"] = ["g6.2xlarge"]  # the larger size alone fits cpu and memory
    cfg[K + "nodeGroups"]["gpu-l4"]["diskSizeGiB"] = 200
    assert parse(cfg).triton_deployments[0].node_group == "gpu-l4"


def test_shm_must_be_below_the_container_memory() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["shmSizeGiB"] = 12
    fails(
        cfg,
        r"tritonDeployments\.default\.shmSizeGiB: 12 is not below the container's memory \(12Gi; /dev/shm is charged "
        r"to it\); "
        r"allowed: less than triton-platform:tritonDeployments\.default\.memory",
    )


def test_memory_without_a_unit_is_refused() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["memory"] = 16
    fails(
        cfg,
        r"tritonDeployments\.default\.memory: '16' is less than 1Gi \(a quantity without a unit counts bytes\); "
        r"allowed: at least 1Gi",
    )
    cfg[K + "tritonDeployments"]["default"]["memory"] = "12Gi"
    cfg[K + "tritonDeployments"]["default"]["cpu"] = "100m"
    fails(cfg, r"tritonDeployments\.default\.cpu: '100m' is too little for tritonserver; allowed: at least 500m")


def test_every_stack_names_its_accounts_oidc_provider() -> None:
    """The account's bootstrap stack owns the provider (dev and staging share one); a stack file
    without it is refused instead of creating a second owner."""
    cfg = raw("prod")
    del cfg[K + "githubOidcProviderArn"]
    fails(
        cfg,
        r"githubOidcProviderArn: <unset> is missing; allowed: a string value \(The AWS account's GitHub Actions OIDC "
        r"provider",
    )
    cfg[K + "githubOidcProviderArn"] = ""
    fails(
        cfg,
        r"githubOidcProviderArn: '' is not the GitHub OIDC provider; allowed: .* the bootstrap stack's output "
        r"githubOidcProviderArn",
    )


@pytest.mark.parametrize("name", ["ResNet", "m" * 64, "-m", "a.b", "resnet-18_v2", "m" * 63])
def test_a_stack_accepts_exactly_the_model_names_model_sync_accepts(name: str) -> None:
    """One rule for a stack's models and every bucket key (model_sync.contract.layout): a stack never lists
    a model that `push` refuses, nor the other way round."""
    from model_sync.contract import layout

    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["models"] = [name]
    try:
        layout.check_model_name(name)
    except layout.LayoutError:
        fails(cfg, r"tritonDeployments\.default\.models: .* is not valid; allowed: model names of lowercase letters")
    else:
        parse(cfg)
