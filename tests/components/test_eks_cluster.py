"""EKS cluster: access entries, endpoint access, logging, encryption, add-ons, provider."""

from __future__ import annotations

import json

import pytest

from components.eks.addons import AFTER_COMPUTE_ADDONS, BEFORE_COMPUTE_ADDONS, EksAddonsArgs, _build_addon_configuration
from components.eks_cluster import (
    EksClusterArgs,
    _build_kubeconfig,
    _build_vpc_config,
    role_key,
)
from components.iam.arns import CLUSTER_ADMIN_POLICY_ARN
from components.upstream import versions
from tests.components._helpers import assert_children_prefixed, policy, registered_outputs
from tests.pulumi_kit import Run, run_program, stack_config

CLUSTER = "triton-platform:eks:EksCluster"
ADDONS = "triton-platform:eks:EksAddons"


def _cluster(run: Run):
    return run.one("aws:eks/cluster:Cluster", "cluster-cluster")


def test_authentication_mode_api_without_creator_admin(any_stack: Run) -> None:
    c = _cluster(any_stack)
    assert c.inputs["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    assert c.inputs["name"] == f"triton-{any_stack.stack}"
    assert c.inputs["version"] == "1.33"
    assert c.inputs["bootstrapSelfManagedAddons"] is False
    assert c.inputs["deletionProtection"] is (any_stack.stack != "dev")


def test_admin_access_entries_match_config(any_stack: Run) -> None:
    admins = set(stack_config(any_stack.stack)["triton-platform:clusterAdminRoleArns"])
    entries = [e for e in any_stack.of_type("aws:eks/accessEntry:AccessEntry") if e.name.startswith("cluster-admin-")]
    assert {e.inputs["principalArn"] for e in entries} == admins
    assert all(e.inputs["type"] == "STANDARD" for e in entries)
    assocs = [
        a
        for a in any_stack.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
        if a.name.startswith("cluster-admin-")
    ]
    assert {a.inputs["principalArn"] for a in assocs} == admins
    for a in assocs:
        assert a.inputs["policyArn"] == CLUSTER_ADMIN_POLICY_ARN
        assert a.inputs["accessScope"] == {"type": "cluster"}
        assert a.inputs["clusterName"] == f"triton-{any_stack.stack}"


def test_admin_children_keep_their_urns_and_one_name_in_two_accounts_is_two_roles() -> None:
    """Access entries are keyed by account and role name; a name unique in the list is aliased to
    the child name it had when keys were the role name alone (an existing stack keeps its URNs)."""
    admins = [
        "arn:aws:iam::111122223333:role/admins",
        "arn:aws:iam::444455556666:role/admins",
        "arn:aws:iam::111122223333:role/ops",
    ]
    run = run_program("dev", {"triton-platform:clusterAdminRoleArns": admins})
    entries = {e.name: e for e in run.of_type("aws:eks/accessEntry:AccessEntry") if e.name.startswith("cluster-admin-")}
    assert {e.inputs["principalArn"] for e in entries.values()} == set(admins)
    assert sorted(entries) == [
        "cluster-admin-111122223333-admins",
        "cluster-admin-111122223333-ops",
        "cluster-admin-444455556666-admins",
    ]
    assert entries["cluster-admin-111122223333-ops"].aliases == ("cluster-admin-ops",)
    assert entries["cluster-admin-111122223333-admins"].aliases == ()  # two "admins": neither takes the old URN
    policy_assoc = run.one(
        "aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "cluster-admin-111122223333-ops-policy"
    )
    assert policy_assoc.aliases == ("cluster-admin-ops-policy",)


def test_endpoint_access_per_stack(any_stack: Run) -> None:
    vpc = _cluster(any_stack).inputs["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True
    cidrs = stack_config(any_stack.stack)["triton-platform:clusterEndpointPublicAccessCidrs"]
    if any_stack.stack == "prod":
        assert cidrs == []
        assert vpc["endpointPublicAccess"] is False
        assert "publicAccessCidrs" not in vpc
    else:
        assert vpc["endpointPublicAccess"] is True
        assert vpc["publicAccessCidrs"] == ["198.51.100.0/24"]
    assert all("0.0.0.0/0" not in c for c in vpc.get("publicAccessCidrs", []))
    private = sorted(
        s.state["id"] for s in any_stack.of_type("aws:ec2/subnet:Subnet") if s.inputs["tags"]["tier"] == "private"
    )
    assert sorted(vpc["subnetIds"]) == private


def test_control_plane_logging_with_retention(any_stack: Run) -> None:
    cfg = stack_config(any_stack.stack)
    c = _cluster(any_stack)
    expected_types = cfg.get(
        "triton-platform:clusterLogTypes", ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    )
    assert c.inputs["enabledClusterLogTypes"] == expected_types
    assert "audit" in c.inputs["enabledClusterLogTypes"]
    lg = any_stack.one("aws:cloudwatch/logGroup:LogGroup", "cluster-logs")
    assert lg.inputs["name"] == f"/aws/eks/triton-{any_stack.stack}/cluster"
    assert lg.inputs["retentionInDays"] == cfg.get("triton-platform:clusterLogRetentionDays", 90)


def test_secrets_envelope_encryption_with_rotating_key(any_stack: Run) -> None:
    key = any_stack.one("aws:kms/key:Key", "cluster-secrets-key")
    assert key.inputs["enableKeyRotation"] is True
    enc = _cluster(any_stack).inputs["encryptionConfig"]
    assert enc["resources"] == ["secrets"]
    assert enc["provider"]["keyArn"] == key.state["arn"]
    role_policy = policy(any_stack.one("aws:iam/rolePolicy:RolePolicy", "cluster-role-encryption"))
    assert [s["Resource"] for s in role_policy["Statement"]] == [key.state["arn"]]


def test_cluster_role_trusts_eks_only(any_stack: Run) -> None:
    role = any_stack.one("aws:iam/role:Role", "cluster-role")
    trust = policy(role, "assumeRolePolicy")
    assert [s["Principal"] for s in trust["Statement"]] == [{"Service": "eks.amazonaws.com"}]
    attached = {
        a.inputs["policyArn"]
        for a in any_stack.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.name.startswith("cluster-role-")
    }
    assert attached == {"arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"}


def test_managed_addons_pinned_and_ordered(any_stack: Run) -> None:
    pinned = versions.EKS_ADDON_VERSIONS["1.33"]
    addons = {a.inputs["addonName"]: a for a in any_stack.of_type("aws:eks/addon:Addon")}
    assert set(addons) == {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "aws-ebs-csi-driver"}
    for name, a in addons.items():
        assert a.inputs["addonVersion"] == pinned[name]
        assert a.inputs["resolveConflictsOnUpdate"] == "OVERWRITE"
    assert json.loads(addons["vpc-cni"].inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
    # Before-compute add-ons live in the cluster; coredns waits for the node groups.
    cluster_addons = any_stack.one(ADDONS, "cluster-addons")
    assert cluster_addons.parent == any_stack.one(CLUSTER, "cluster").urn
    assert {c.inputs["addonName"] for c in any_stack.children_of(cluster_addons)} == set(BEFORE_COMPUTE_ADDONS)
    post = any_stack.one(ADDONS, "post-compute-addons")
    assert {c.inputs["addonName"] for c in any_stack.children_of(post)} == set(AFTER_COMPUTE_ADDONS)


def test_kubernetes_provider_uses_get_token(any_stack: Run) -> None:
    provider = any_stack.one("pulumi:providers:kubernetes", "cluster-k8s")
    assert provider.parent == any_stack.one(CLUSTER, "cluster").urn
    kubeconfig = json.loads(provider.inputs["kubeconfig"])
    c = _cluster(any_stack)
    assert kubeconfig["clusters"][0]["cluster"] == {
        "server": c.state["endpoint"],
        "certificate-authority-data": c.state["certificateAuthority"]["data"],
    }
    exec_ = kubeconfig["users"][0]["user"]["exec"]
    assert exec_["command"] == "aws"
    assert exec_["args"][:4] == ["eks", "get-token", "--cluster-name", f"triton-{any_stack.stack}"]
    assert "token" not in kubeconfig["users"][0]["user"]  # no static credential
    assert any_stack.exports["kubeconfig"] == provider.inputs["kubeconfig"]


def test_component_shape(any_stack: Run) -> None:
    comp = any_stack.one(CLUSTER, "cluster")
    assert_children_prefixed(any_stack, comp, min_children=8)
    outputs = registered_outputs(any_stack, comp)
    c = _cluster(any_stack)
    assert outputs["securityGroupId"] == c.state["vpcConfig"]["clusterSecurityGroupId"]
    assert outputs["clusterName"] == any_stack.exports["clusterName"] == f"triton-{any_stack.stack}"
    for name in ("cluster-addons", "post-compute-addons"):
        addons = any_stack.one(ADDONS, name)
        assert_children_prefixed(any_stack, addons, min_children=1)
        assert registered_outputs(any_stack, addons)["addonVersions"]


# ---- builders and validation -----------------------------------------------------------


def test_vpc_config_private_only_omits_public_cidrs() -> None:
    private = _build_vpc_config(["subnet-a"], ())
    assert private.endpoint_public_access is False
    assert private.public_access_cidrs is None


def test_kubeconfig_builder() -> None:
    cfg = json.loads(_build_kubeconfig("c", "https://x", "Q0E=", "eu-west-1"))
    assert cfg["users"][0]["user"]["exec"]["args"][-4:] == ["--region", "eu-west-1", "--output", "json"]


def test_role_key() -> None:
    assert role_key("arn:aws:iam::111122223333:role/team/Platform.Admins") == "111122223333-platform-admins"
    with pytest.raises(ValueError, match=r"role ARN: 'arn:aws:iam::111122223333:user/bob' is not an IAM role ARN"):
        role_key("arn:aws:iam::111122223333:user/bob")


def test_coredns_configuration_spreads_replicas() -> None:
    cfg = _build_addon_configuration("coredns")
    assert cfg is not None
    assert cfg["replicaCount"] == 2
    assert _build_addon_configuration("kube-proxy") is None


_ADMIN = "arn:aws:iam::111122223333:role/admins"


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"cluster_name": "-bad"}, r"EksClusterArgs.cluster_name: '-bad' is not valid"),
        ({"region": "useast1"}, r"EksClusterArgs.region: 'useast1' is not an AWS region"),
        ({"kubernetes_version": "1.29"}, r"EksClusterArgs.kubernetes_version: '1.29' has no pinned add-on versions"),
        ({"cluster_admin_role_arns": []}, r"EksClusterArgs.cluster_admin_role_arns: \[\] is empty"),
        ({"cluster_admin_role_arns": ["arn:aws:iam::111122223333:user/x"]}, r"role ARN: .* is not an IAM role ARN"),
        (
            {"cluster_admin_role_arns": [_ADMIN, "arn:aws:iam::111122223333:role/team/Admins"]},
            r"cluster_admin_role_arns: .* names a role twice",
        ),
        ({"public_access_cidrs": ["10.0.0.1"]}, r"EksClusterArgs.public_access_cidrs: '10.0.0.1' is not an IPv4 CIDR"),
        (
            {"public_access_cidrs": ["0.0.0.0/0"]},
            (
                r"EksClusterArgs.public_access_cidrs: 0.0.0.0/0 \(their union 0.0.0.0/0: 100% of IPv4\) opens the "
                r"API to the internet"
            ),
        ),
        (
            {"public_access_cidrs": ["0.0.0.0/1", "128.0.0.0/1"]},
            (
                r"EksClusterArgs.public_access_cidrs: 0.0.0.0/1, 128.0.0.0/1 \(their union 0.0.0.0/0: 100% of IPv4\) "
                r"opens the API"
            ),
        ),
        ({"log_types": ["kubelet"]}, r"EksClusterArgs.log_types: 'kubelet' is not a log type"),
        ({"log_retention_days": 10}, r"EksClusterArgs.log_retention_days: 10 is not a CloudWatch retention"),
    ],
)
def test_cluster_args_validation(changes: dict, match: str) -> None:
    base = {
        "cluster_name": "triton-dev",
        "region": "us-east-1",
        "kubernetes_version": "1.33",
        "subnet_ids": ["subnet-a", "subnet-b"],
        "cluster_admin_role_arns": [_ADMIN],
    }
    with pytest.raises(ValueError, match=match):
        EksClusterArgs(**{**base, **changes})


def test_world_open_endpoint_is_refused_and_specific_cidrs_are_taken() -> None:
    """The component refuses what the policy pack refuses: a public endpoint whose CIDRs span the internet."""
    base = {"cluster_name": "c", "region": "us-east-1", "kubernetes_version": "1.33", "subnet_ids": [],
            "cluster_admin_role_arns": [_ADMIN]}  # fmt: skip
    assert EksClusterArgs(**base, public_access_cidrs=["198.51.100.0/24"]).public_access_cidrs == ["198.51.100.0/24"]
    with pytest.raises(ValueError, match=r"public_access_cidrs: .* opens the API to the internet; allowed: .* or none"):
        EksClusterArgs(**base, public_access_cidrs=["0.0.0.0/0"])


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"kubernetes_version": "1.30"}, r"EksAddonsArgs.kubernetes_version: '1.30' has no pinned add-on versions"),
        ({"addons": []}, r"EksAddonsArgs.addons: \[\] is empty or lists an add-on twice"),
        ({"addons": ["coredns", "coredns"]}, r"EksAddonsArgs.addons: .* is empty or lists an add-on twice"),
        ({"addons": ["aws-ebs-csi-driver"]}, r"EksAddonsArgs.addons: 'aws-ebs-csi-driver' is not a known add-on"),
    ],
)
def test_addons_args_validation(changes: dict, match: str) -> None:
    base = {"cluster_name": "c", "kubernetes_version": "1.33", "addons": ["coredns"]}
    with pytest.raises(ValueError, match=match):
        EksAddonsArgs(**{**base, **changes})


def test_every_kubernetes_version_pins_every_addon() -> None:
    for version, pins in versions.EKS_ADDON_VERSIONS.items():
        assert set(pins) == {*BEFORE_COMPUTE_ADDONS, *AFTER_COMPUTE_ADDONS, "aws-ebs-csi-driver"}, version
        assert all(v.startswith("v") and "-eksbuild." in v for v in pins.values()), version
