"""The cross-key and environment rules: each refused in one line naming the key to change, before any resource exists."""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.stack_config import parser
from components.stack_config.errors import ConfigError
from tests.components.stack_config._helpers import K, fails, parse, raw
from tests.pulumi_kit import ROOT
from tests.pulumi_kit import stack_config as stack_file


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
        r"allowed: specific CIDRs whose union is at most a /8, or none \(a private endpoint, reached from inside "
        r"the VPC\)$",
    )


def test_no_key_opens_the_endpoint_to_the_world() -> None:
    """The policy pack refuses a world-open endpoint at every preview and up, whatever the stack says: the
    stack file has no opt-in that would pass the parser and then fail the pack."""
    cfg = raw("dev")
    cfg[K + "clusterEndpointPublicAccessCidrs"] = ["0.0.0.0/0"]
    cfg[K + "allowWorldOpenClusterEndpoint"] = True
    fails(cfg, r"allowWorldOpenClusterEndpoint")


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


@pytest.mark.parametrize(("stack", "environment", "ok"), [
    ("dev", "prod", False), ("acme/triton-platform/dev", "prod", False), ("prod-eu", "staging", False),
    ("prod", "prod", True), ("acme/triton-platform/prod-eu", "prod", True), ("sandbox", "dev", True),
    ("devices", "prod", True),
])  # fmt: skip
def test_a_stack_named_after_another_environment_is_refused(stack: str, environment: str, ok: bool) -> None:
    """a stack called `dev` whose file says `environment: prod` was accepted."""
    cfg = raw(environment)
    if ok:
        assert parser.parse(cfg, stack).environment == environment
        return
    with pytest.raises(
        ConfigError,
        match=(
            rf"environment: '{environment}' differs from the stack name '{re.escape(stack)}'; allowed: the "
            r"environment the stack is named after"
        ),
    ):
        parser.parse(cfg, stack)


def test_zone_count_checked_against_the_regions_zones() -> None:
    from tests.pulumi_kit import run_program

    cfg = raw("staging")
    zones = ["us-west-1c", "us-west-1a"]
    cfg[K + "availabilityZoneCount"] = 3
    with pytest.raises(
        ConfigError,
        match=r"availabilityZoneCount: 3 exceeds the 2 EKS-capable zones us-east-1 offers this account "
        r"\(us-west-1a, us-west-1c\); allowed: at most 2 in us-east-1",
    ):
        parser.parse(cfg, "x", zones=zones)
    cfg[K + "availabilityZoneCount"] = 2
    assert parser.parse(cfg, "x", zones=zones).availability_zones == ("us-west-1a", "us-west-1c")
    # The program asks AWS before the first resource: the mocked us-east-1 has 5 EKS-capable zones.
    with pytest.raises(ConfigError, match=r"availabilityZoneCount: 6 exceeds the 5 EKS-capable zones"):
        run_program("staging", {K + "availabilityZoneCount": 6})


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
    with pytest.raises(ConfigError) as info:
        parser.parse(cfg, "x", secret_keys=set())
    assert str(info.value) == (
        "triton-platform:alertmanagerSlackWebhookUrl: '<redacted>' is stored in plaintext in the stack file; "
        "allowed: an encrypted value: pulumi config set --secret triton-platform:alertmanagerSlackWebhookUrl <value>"
    )
    assert "plaintext-token" not in str(info.value)
    assert parser.parse(
        cfg, "x", secret_keys={K + "alertmanagerSlackWebhookUrl"}
    ).alertmanager_slack_webhook_url.endswith("plaintext-token")
    with pytest.raises(ConfigError, match="is stored in plaintext"):
        run_program(
            "prod", {K + "alertmanagerSlackWebhookUrl": "https://hooks.slack.com/services/T0/B0/plaintext-token"}
        )
    # The README's way (`pulumi config set --secret`, an encrypted value in the stack file) renders.
    assert run_program("prod", {K + "alertmanagerSlackWebhookUrl": {"secure": "v1:AAAA"}}).resources


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


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_capacity_table_lists_every_gpu_group_of_the_stacks_as_the_stack_files_size_it(stack: str) -> None:
    """docs/node-autoscaling.md's "Capacity settings per stack": a GPU group added to a stack file (dev's
    shared L4s were) shows there, with its capacity type, sizes and deployments."""
    table = (ROOT / "docs" / "node-autoscaling.md").read_text()
    cfg = parser.parse(stack_file(stack), stack)
    for group in (g for g in cfg.node_groups if g.kind == "gpu"):
        rows = [line for line in table.splitlines() if line.startswith(f"| {stack} | {group.name} (")]
        assert len(rows) == 1, (stack, group.name)
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        assert cells[2:4] == [group.capacity_type, f"{group.min_size} / {group.desired_size} / {group.max_size}"]
        served = {f"{d.name} {d.min_replicas}..{d.max_replicas}" for d in cfg.triton_deployments
                  if d.node_group == group.name}  # fmt: skip
        assert set(cells[5].split(", ")) == served
