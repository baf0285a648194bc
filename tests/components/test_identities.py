"""Identities: serving role + Pod Identity, GitHub OIDC trust, publisher/promoter/deployer.
The job-by-job trust matrix over the workflow files is tests/workflows/test_trust_matrix.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from components.iam.github_oidc import GITHUB_OIDC_HOST
from components.identities import (
    CI_SESSION_SECONDS,
    IdentitiesArgs,
    _build_promoter_policy,
    _build_serving_policy,
    github_environment,
    github_role_subjects,
)
from components.kubernetes import naming
from components.stack_config.errors import ConfigError
from model_sync.contract import layout
from tests.components._helpers import (
    as_list,
    assert_children_prefixed,
    assert_no_wildcards,
    policy,
    registered_outputs,
    statements,
)
from tests.pulumi_kit import ACCOUNT, Run, run_program, stack_config

IDENTITIES = "triton-platform:iam:Identities"
DEPLOYMENTS = {"dev": ["default", "light"], "staging": ["default"], "prod": ["default", "large"]}
REPO = "example-org/triton-platform"


def _sub(environment: str, workflow: str, ref: str = "refs/heads/main") -> str:
    """The subject GitHub issues under the template repo, context, job_workflow_ref (written out
    here, not built with the code under test)."""
    return f"repo:{REPO}:environment:{environment}:job_workflow_ref:{REPO}/.github/workflows/{workflow}@{ref}"


# Each CI role: exactly its workflow file(s) on main, in its purpose's environment.
SUBJECTS = {
    ("dev", "deployer"): [_sub("deploy-dev", "deploy.yml")],
    ("staging", "deployer"): [_sub("deploy-staging", "deploy.yml")],
    ("prod", "deployer"): [_sub("deploy-prod", "deploy.yml")],
    ("staging", "publisher"): [
        _sub("models-staging", "model-promote.yml"),
        _sub("models-staging", "model-rollback.yml"),
    ],
    ("prod", "promoter"): [_sub("models-prod", "model-promote.yml"), _sub("models-prod", "model-rollback.yml")],
}
PREVIEW_SUBJECTS = {s: [_sub(f"preview-{s}", "pull-request.yml", "refs/pull/*/merge")] for s in DEPLOYMENTS}


def _bucket_arn(stack: str) -> str:
    return f"arn:aws:s3:::triton-platform-{stack}-models-{ACCOUNT}"


def _key_arn(run: Run) -> str:
    return run.one("aws:kms/key:Key", "model-repository-key").state["arn"]


def _role(run: Run, role: str):
    return run.one("aws:iam/role:Role", f"identities-{role}-role")


# ---- serving role ----------------------------------------------------------------------


def test_serving_role_trusts_pod_identity_of_this_cluster_namespace_and_service_accounts(any_stack: Run) -> None:
    role = _role(any_stack, "serving")
    assert role.inputs["name"] == f"triton-platform-{any_stack.stack}-serving"
    [st] = policy(role, "assumeRolePolicy")["Statement"]
    assert st["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(st["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    cluster_arn = any_stack.one("aws:eks/cluster:Cluster", "cluster-cluster").state["arn"]
    assert cluster_arn == f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/triton-{any_stack.stack}"
    assert st["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": ACCOUNT,
            "aws:RequestTag/eks-cluster-arn": cluster_arn,
            "aws:RequestTag/kubernetes-namespace": naming.TRITON_NAMESPACE,
            "aws:RequestTag/kubernetes-service-account": sorted(f"triton-{d}" for d in DEPLOYMENTS[any_stack.stack]),
        },
        "ArnEquals": {"aws:SourceArn": cluster_arn},
    }
    # Exactly the service accounts the Pod Identity associations bind.
    bound = sorted(
        r.inputs["serviceAccount"]
        for r in any_stack.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.name.startswith("identities-serving-")
    )
    assert st["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == bound
    assert any_stack.exports["servingRoleArn"] == role.state["arn"]


def test_serving_policy_read_repository_write_status_only(any_stack: Run) -> None:
    doc = policy(any_stack.one("aws:iam/rolePolicy:RolePolicy", "identities-serving-policy"))
    assert_no_wildcards(doc)
    bucket = _bucket_arn(any_stack.stack)
    s = statements(doc)
    assert s["ListRepository"]["Action"] == "s3:ListBucket"
    assert s["ListRepository"]["Resource"] == bucket
    assert s["ListRepository"]["Condition"] == {"StringLike": {"s3:prefix": ["repository/*", "manifests/*"]}}
    assert s["ReadRepository"]["Action"] == "s3:GetObject"
    assert s["ReadRepository"]["Resource"] == [f"{bucket}/repository/*", f"{bucket}/manifests/*"]
    assert s["UseRepositoryKey"]["Resource"] == _key_arn(any_stack)
    cluster_arn = any_stack.one("aws:eks/cluster:Cluster", "cluster-cluster").state["arn"]
    writes = [
        st
        for st in doc["Statement"]
        if any(a.startswith("s3:Put") or a.startswith("s3:Delete") for a in as_list(st["Action"]))
    ]
    # One statement per deployment: its own status/<deployment>/ prefix, only for its own
    # service account's Pod Identity sessions (delete: its own status on SIGTERM).
    assert writes == [
        {
            "Sid": f"WriteStatus{i}",
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:DeleteObject"],
            "Resource": f"{bucket}/status/{d}/*",
            "Condition": {
                "StringEquals": {
                    "aws:PrincipalTag/eks-cluster-arn": cluster_arn,
                    "aws:PrincipalTag/kubernetes-namespace": naming.TRITON_NAMESPACE,
                    "aws:PrincipalTag/kubernetes-service-account": f"triton-{d}",
                }
            },
        }
        for i, d in enumerate(sorted(DEPLOYMENTS[any_stack.stack]), start=1)
    ]


def _allows(doc: dict[str, Any], action: str, resource: str, tags: dict[str, str]) -> bool:
    """IAM evaluation of an identity policy of Allow statements for one request: an action and
    resource that match (`*` wildcards) and every StringEquals on `aws:PrincipalTag/<key>` met by
    the session's tags. Any other condition operator or key fails the test (never guessed)."""

    def like(pattern: str, value: str) -> bool:
        return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), value) is not None

    for st in doc["Statement"]:
        assert st["Effect"] == "Allow"
        if action not in as_list(st["Action"]) or not any(like(r, resource) for r in as_list(st["Resource"])):
            continue
        conditions = st.get("Condition", {})
        assert set(conditions) <= {"StringEquals"}, conditions
        wanted = conditions.get("StringEquals", {})
        assert all(k.startswith("aws:PrincipalTag/") for k in wanted), wanted
        if all(tags.get(k.removeprefix("aws:PrincipalTag/")) in as_list(v) for k, v in wanted.items()):
            return True
    return False


@pytest.mark.parametrize("action", ["s3:PutObject", "s3:DeleteObject"])
def test_an_agent_writes_and_deletes_only_its_own_deployments_status(any_stack: Run, action: str) -> None:
    """Evaluate the recorded serving policy for the Pod Identity session of each deployment's agent:
    it may write/delete layout.status_key(<its deployment>, ...) and nobody else's."""
    doc = policy(any_stack.one("aws:iam/rolePolicy:RolePolicy", "identities-serving-policy"))
    bucket = _bucket_arn(any_stack.stack)
    cluster_arn = any_stack.one("aws:eks/cluster:Cluster", "cluster-cluster").state["arn"]
    deployments = DEPLOYMENTS[any_stack.stack]
    others = [*deployments, "other", f"{deployments[0]}-x"]  # another stack's name; a longer name with the same start
    for d in deployments:
        tags = {
            "eks-cluster-arn": cluster_arn,
            "kubernetes-namespace": naming.TRITON_NAMESPACE,
            "kubernetes-service-account": naming.triton_service_account(d),
        }
        may = {e for e in others if _allows(doc, action, f"{bucket}/{layout.status_key(e, 'triton-x-0')}", tags)}
        assert may == {d}
        assert not _allows(
            doc, action, f"{bucket}/{layout.status_key(d, 'triton-x-0')}", {**tags, "kubernetes-namespace": "default"}
        )
        assert not _allows(
            doc,
            action,
            f"{bucket}/{layout.status_key(d, 'triton-x-0')}",
            {**tags, "eks-cluster-arn": cluster_arn + "-other"},
        )
        for key in (
            layout.config_key("resnet18"),
            layout.manifest_key("resnet18", 1),
            layout.promotion_key("resnet18", 1),
        ):
            assert not _allows(doc, action, f"{bucket}/{key}", tags)
    assert not _allows(
        doc, action, f"{bucket}/{layout.status_key(deployments[0], 'triton-x-0')}", {}
    )  # no session tags: nothing


def test_pod_identity_association_per_deployment(any_stack: Run) -> None:
    identities = any_stack.one("triton-platform:iam:Identities")
    assocs = [
        a
        for a in any_stack.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if a.name.startswith("identities-")
    ]
    assert all(a.parent == identities.urn for a in assocs)
    assert sorted(a.name for a in assocs) == [f"identities-serving-{d}" for d in DEPLOYMENTS[any_stack.stack]]
    serving = _role(any_stack, "serving").state["arn"]
    for a in assocs:
        d = a.name.removeprefix("identities-serving-")
        assert a.inputs["namespace"] == naming.TRITON_NAMESPACE
        assert a.inputs["serviceAccount"] == naming.triton_service_account(d)
        assert a.inputs["roleArn"] == serving
        assert a.inputs["clusterName"] == f"triton-{any_stack.stack}"
        assert a.inputs["disableSessionTags"] is False  # the trust and the status statements read them


# ---- GitHub OIDC + CI roles ------------------------------------------------------------


def test_no_stack_owns_the_accounts_github_oidc_provider(any_stack: Run) -> None:
    """The provider is one per account and dev and staging share one: the account's bootstrap
    stack owns it (destroying dev must not cut staging's CI off), every stack trusts it by ARN."""
    assert any_stack.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider") == []
    named = stack_config(any_stack.stack)["triton-platform:githubOidcProviderArn"]
    assert named.endswith(f":oidc-provider/{GITHUB_OIDC_HOST}")
    for role in any_stack.of_type("aws:iam/role:Role"):
        if role.name in (
            "identities-deployer-role",
            "identities-preview-role",
            "identities-publisher-role",
            "identities-promoter-role",
        ):
            assert {st["Principal"]["Federated"] for st in policy(role, "assumeRolePolicy")["Statement"]} == {named}


def test_ci_roles_per_stack(any_stack: Run) -> None:
    roles = {r.name for r in any_stack.of_type("aws:iam/role:Role") if r.name.startswith("identities-")}
    extra = {"dev": set(), "staging": {"identities-publisher-role"}, "prod": {"identities-promoter-role"}}[
        any_stack.stack
    ]
    assert roles == {"identities-serving-role", "identities-deployer-role", "identities-preview-role"} | extra
    assert ("publisherRoleArn" in any_stack.exports) is (any_stack.stack == "staging")
    assert ("promoterRoleArn" in any_stack.exports) is (any_stack.stack == "prod")
    assert any_stack.exports["deployerRoleArn"] == _role(any_stack, "deployer").state["arn"]


def test_ci_trust_is_exact_workflow_ref_and_environment_per_role(any_stack: Run) -> None:
    cfg = stack_config(any_stack.stack)
    provider_arn = cfg["triton-platform:githubOidcProviderArn"]
    ci = {
        r.name.removeprefix("identities-").removesuffix("-role"): r
        for r in any_stack.of_type("aws:iam/role:Role")
        if r.name in ("identities-deployer-role", "identities-publisher-role", "identities-promoter-role")
    }
    assert set(ci) == {role for stack, role in SUBJECTS if stack == any_stack.stack}
    for name, role in ci.items():
        [st] = policy(role, "assumeRolePolicy")["Statement"]
        assert st["Principal"] == {"Federated": provider_arn}
        assert st["Action"] == "sts:AssumeRoleWithWebIdentity"
        assert set(st["Condition"]) == {"StringEquals"}  # no StringLike: no wildcards possible
        cond = st["Condition"]["StringEquals"]
        assert cond[f"{GITHUB_OIDC_HOST}:aud"] == "sts.amazonaws.com"
        assert cond[f"{GITHUB_OIDC_HOST}:sub"] == SUBJECTS[(any_stack.stack, name)]
        assert (
            role.inputs["maxSessionDuration"] == CI_SESSION_SECONDS[name]
        )  # sized to the jobs: tests/workflows/test_credentials.py
    # No two roles of the stack accept a common subject.
    subs = [
        s for (stack, _), subjects in SUBJECTS.items() if stack == any_stack.stack for s in subjects
    ] + PREVIEW_SUBJECTS[any_stack.stack]
    assert len(subs) == len(set(subs))


def test_publisher_writes_staging_prefixes_only(staging: Run) -> None:
    doc = policy(staging.one("aws:iam/rolePolicy:RolePolicy", "identities-publisher-policy"))
    assert_no_wildcards(doc)
    bucket = _bucket_arn("staging")
    s = statements(doc)
    assert s["WriteRepository"]["Action"] == ["s3:PutObject", "s3:AbortMultipartUpload"]
    assert s["WriteRepository"]["Resource"] == [f"{bucket}/repository/*", f"{bucket}/manifests/*", f"{bucket}/audit/*"]
    assert not any("s3:DeleteObject" in as_list(st["Action"]) for st in doc["Statement"])
    for st in doc["Statement"]:
        for r in as_list(st["Resource"]):
            assert r.startswith(bucket) or r == _key_arn(staging)


def test_promoter_reads_staging_and_writes_prod(prod: Run) -> None:
    cfg = stack_config("prod")
    source = f"arn:aws:s3:::{cfg['triton-platform:promotionSourceBucket']}"
    doc = policy(prod.one("aws:iam/rolePolicy:RolePolicy", "identities-promoter-policy"))
    assert_no_wildcards(doc)
    s = statements(doc)
    assert s["ReadSource"]["Resource"] == [f"{source}/{p}*" for p in ("repository/", "manifests/", "status/", "audit/")]
    assert s["ListSource"]["Resource"] == source
    assert s["DecryptSource"] == {
        "Sid": "DecryptSource",
        "Effect": "Allow",
        "Action": "kms:Decrypt",
        "Resource": cfg["triton-platform:promotionSourceKmsKeyArn"],
    }
    bucket = _bucket_arn("prod")
    assert s["WriteTarget"]["Resource"] == [f"{bucket}/repository/*", f"{bucket}/manifests/*", f"{bucket}/audit/*"]
    # Nothing is ever written to the source bucket.
    for st in doc["Statement"]:
        if any(a.startswith("s3:Put") for a in as_list(st["Action"])):
            assert all(r.startswith(bucket) for r in as_list(st["Resource"]))


def test_deployer_policies_and_cluster_access(any_stack: Run) -> None:
    expected = set(stack_config(any_stack.stack)["triton-platform:deployerPolicyArns"])
    attached = {
        a.inputs["policyArn"]
        for a in any_stack.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.name.startswith("identities-deployer-")
    }
    assert attached == expected
    assert not any(a.endswith("/AdministratorAccess") for a in attached)
    deployer = _role(any_stack, "deployer").state["arn"]
    entry = any_stack.one("aws:eks/accessEntry:AccessEntry", "identities-deployer-access")
    assert entry.inputs["principalArn"] == deployer
    assoc = any_stack.one(
        "aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "identities-deployer-access-policy"
    )
    assert assoc.inputs["policyArn"].endswith("/AmazonEKSClusterAdminPolicy")


def test_the_canary_roles_authenticate_to_the_cluster_only_as_the_prometheus_query_group(any_stack: Run) -> None:
    """The roles that run gray releases (staging publisher, prod promoter) get an EKS access entry
    carrying one Kubernetes group, bound only to `get` on Prometheus' service proxy
    (tests/components/monitoring/test_access.py), and no access policy: no other cluster right."""
    role = {"dev": None, "staging": "publisher", "prod": "promoter"}[any_stack.stack]
    entries = {e.name: e for e in any_stack.of_type("aws:eks/accessEntry:AccessEntry")}
    associations = {a.name for a in any_stack.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")}
    for other in {"publisher", "promoter"} - {role}:
        assert f"identities-{other}-access" not in entries
    if role is None:
        return
    entry = entries[f"identities-{role}-access"]
    assert entry.inputs["principalArn"] == _role(any_stack, role).state["arn"]
    assert entry.inputs["type"] == "STANDARD"
    assert entry.inputs["kubernetesGroups"] == [naming.PROMETHEUS_QUERY_GROUP]
    assert f"identities-{role}-access-policy" not in associations
    assert not [a for a in associations if role in a]
    # The other CI entries carry no group (their rights come from their access policies).
    assert [e.name for e in entries.values() if e.inputs.get("kubernetesGroups")] == [entry.name]


def test_the_promoter_session_covers_a_gray_release() -> None:
    """`model-sync promote --to prod` runs a gray release up to its deadline after the copy:
    the longest prod deadline plus 30 minutes (copy, verification, the canary's load) fits the
    promoter's maximum session (the workflow's job and credentials: tests/workflows)."""
    from components.stack_config.parser import parse

    prod = parse(stack_config("prod"), "prod")
    longest = max(d.canary.deadline_seconds for d in prod.triton_deployments)
    assert longest == 5400  # the `large` deployment's canary.deadlineSeconds
    assert longest + 1800 <= CI_SESSION_SECONDS["promoter"] == 7200
    assert CI_SESSION_SECONDS["publisher"] == 3600  # no workflow runs a staging canary


def test_no_static_keys_anywhere(any_stack: Run) -> None:
    assert not [r for r in any_stack.resources if r.type in ("aws:iam/accessKey:AccessKey", "aws:iam/user:User")]


def test_component_shape(any_stack: Run) -> None:
    comp = any_stack.one(IDENTITIES, "identities")
    assert_children_prefixed(any_stack, comp, min_children=6)
    outputs = registered_outputs(any_stack, comp)
    assert set(outputs["podIdentityAssociationIds"]) == set(DEPLOYMENTS[any_stack.stack])


# ---- builders --------------------------------------------------------------------------


def test_github_environment_is_one_per_purpose_and_stack() -> None:
    assert [github_environment(r, "prod") for r in ("deployer", "preview", "publisher", "promoter")] == [
        "deploy-prod",
        "preview-prod",
        "models-prod",
        "models-prod",
    ]
    with pytest.raises(ValueError, match=r"role: 'serving' is not a CI role"):
        github_environment("serving", "prod")
    with pytest.raises(ValueError, match=r"environment: 'qa' is not allowed"):
        github_environment("deployer", "qa")


def test_github_role_subjects() -> None:
    assert github_role_subjects("deployer", "staging", REPO, ["refs/heads/main", "refs/tags/v1"]) == [
        _sub("deploy-staging", "deploy.yml"),
        _sub("deploy-staging", "deploy.yml", "refs/tags/v1"),
    ]
    assert github_role_subjects("promoter", "prod", REPO, ["refs/heads/main"]) == SUBJECTS[("prod", "promoter")]
    assert (
        github_role_subjects("preview", "dev", REPO, ["refs/heads/main"]) == PREVIEW_SUBJECTS["dev"]
    )  # refs do not apply


def test_serving_policy_builder_refuses_no_or_repeated_deployments() -> None:
    arn = "arn:aws:eks:us-east-1:111122223333:cluster/c"
    for bad in ([], ["a", "a"]):
        with pytest.raises(ValueError, match=r"deployments: .* is empty or repeats a name"):
            _build_serving_policy("arn:aws:s3:::b", "k", arn, bad)
    with pytest.raises(layout.LayoutError, match=r"deployment: 'A'; allowed: a Kubernetes DNS subdomain name"):
        _build_serving_policy("arn:aws:s3:::b", "k", arn, ["A"])


def test_promoter_policy_builder_has_no_delete() -> None:
    doc = _build_promoter_policy("arn:aws:s3:::p", "arn:k", "s", "arn:sk")
    assert not any(a.startswith("s3:Delete") for st in doc["Statement"] for a in as_list(st["Action"]))


# ---- validation: component args --------------------------------------------------------

_KEY = "arn:aws:kms:us-east-1:111122223333:key/0d3c6f1e-8a2b-4c5d-9e7f-1a2b3c4d5e6f"
_BASE: dict[str, Any] = {
    "environment": "staging",
    "cluster_name": "c",
    "cluster_arn": "arn:aws:eks:us-east-1:111122223333:cluster/c",
    "bucket_arn": "arn:aws:s3:::b",
    "kms_key_arn": "k",
    "triton_deployments": ["default"],
    "github_repository": "o/r",
    "github_deploy_refs": ["refs/heads/main"],
    "deployer_policy_arns": ["arn:aws:iam::111122223333:policy/deployer"],
    "github_oidc_provider_arn": f"arn:aws:iam::111122223333:oidc-provider/{GITHUB_OIDC_HOST}",
}


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"environment": "qa"}, r"IdentitiesArgs.environment: 'qa' is not allowed"),
        ({"triton_deployments": []}, r"IdentitiesArgs.triton_deployments: \[\] is empty or repeats a name"),
        ({"triton_deployments": ["Big"]}, r"IdentitiesArgs.triton_deployments: 'Big' is not a DNS label"),
        ({"github_repository": "no-slash"}, r"IdentitiesArgs.github_repository: 'no-slash' is not valid"),
        ({"github_deploy_refs": []}, r"IdentitiesArgs.github_deploy_refs: \[\] is empty"),
        ({"github_deploy_refs": ["refs/heads/*"]}, r"IdentitiesArgs.github_deploy_refs: 'refs/heads/\*' is not valid"),
        (
            {"github_deploy_refs": ["environment:prod"]},
            r"IdentitiesArgs.github_deploy_refs: 'environment:prod' is not valid; allowed: refs/heads/<branch> or "
            r"refs/tags/<tag> "
            r"\(no wildcards, no environment: each role's environment is fixed by its purpose, e.g. deploy-staging\)",
        ),
        ({"deployer_policy_arns": []}, r"IdentitiesArgs.deployer_policy_arns: \[\] is empty"),
        (
            {"deployer_policy_arns": ["arn:aws:iam::aws:policy/AdministratorAccess"]},
            r"deployer_policy_arns: '.*AdministratorAccess' is not allowed",
        ),
        (
            {"deployer_policy_arns": ["arn:aws:iam::aws:policy/PowerUserAccess"]},
            r"deployer_policy_arns: '.*PowerUserAccess' is not allowed; allowed: customer-managed",
        ),
        (
            {"github_oidc_provider_arn": "arn:aws:iam::111122223333:oidc-provider/example.com"},
            r"IdentitiesArgs.github_oidc_provider_arn: .* is not the GitHub OIDC provider",
        ),
        (
            {"promotion_source_bucket": "b-staging"},
            r"IdentitiesArgs.promotion_source_bucket: 'b-staging' is set in staging",
        ),
        ({"environment": "prod"}, r"IdentitiesArgs.promotion_source_bucket: '' is not a bucket name"),
        (
            {"environment": "prod", "promotion_source_bucket": "b-staging"},
            r"IdentitiesArgs.promotion_source_kms_key_arn: '' is not a KMS key ARN",
        ),
        (
            {"prometheus_query_group": "system:masters"},
            r"IdentitiesArgs.prometheus_query_group: 'system:masters' is not allowed; allowed: a group name .* or ''",
        ),
        ({"prometheus_query_group": "Query Group"}, r"IdentitiesArgs.prometheus_query_group: 'Query Group' is not"),
    ],
)
def test_args_validation(changes: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        IdentitiesArgs(**{**_BASE, **changes})


def test_prod_args_accept_a_promotion_source() -> None:
    args = IdentitiesArgs(
        **{**_BASE, "environment": "prod", "promotion_source_bucket": "b-staging", "promotion_source_kms_key_arn": _KEY}
    )
    assert args.promotion_source_bucket == "b-staging"


# ---- validation: the stack-config keys this area added ---------------------------------


@pytest.mark.parametrize(
    ("stack", "overrides", "remove", "match"),
    [
        (
            "prod",
            {},
            ("triton-platform:promotionSourceBucket",),
            r"triton-platform:promotionSourceBucket: <unset> is missing \(prod promotes from staging\)",
        ),
        (
            "prod",
            {"triton-platform:promotionSourceBucket": "Bad_Bucket"},
            (),
            r"triton-platform:promotionSourceBucket: 'Bad_Bucket' is not valid",
        ),
        (
            "prod",
            {},
            ("triton-platform:promotionSourceKmsKeyArn",),
            r"triton-platform:promotionSourceKmsKeyArn: <unset> is missing",
        ),
        (
            "prod",
            {"triton-platform:promotionSourceKmsKeyArn": "alias/x"},
            (),
            r"triton-platform:promotionSourceKmsKeyArn: 'alias/x' is not valid",
        ),
        (
            "staging",
            {"triton-platform:promotionSourceBucket": "b"},
            (),
            r"triton-platform:promotionSourceBucket: 'b' is set in staging",
        ),
        (
            "dev",
            {"triton-platform:promotionSourceKmsKeyArn": _KEY},
            (),
            r"triton-platform:promotionSourceKmsKeyArn: .* is set in dev",
        ),
        ("dev", {}, ("triton-platform:deployerPolicyArns",), r"triton-platform:deployerPolicyArns: <unset> is missing"),
        ("dev", {"triton-platform:deployerPolicyArns": []}, (), r"triton-platform:deployerPolicyArns: .* is empty"),
        (
            "dev",
            {"triton-platform:deployerPolicyArns": ["arn:aws:iam::aws:policy/AdministratorAccess"]},
            (),
            r"deployerPolicyArns: '.*AdministratorAccess' is an AWS managed policy, not scoped to this stack",
        ),
        (
            "dev",
            {"triton-platform:deployerPolicyArns": ["policy/x"]},
            (),
            r"triton-platform:deployerPolicyArns: 'policy/x' is not valid",
        ),
        (
            "dev",
            {"triton-platform:githubOidcProviderArn": "arn:aws:iam::111122223333:oidc-provider/x"},
            (),
            r"githubOidcProviderArn: .* is not the GitHub OIDC provider",
        ),
        (
            "prod",
            {"triton-platform:modelRepositoryReadPrincipalArns": ["arn:aws:iam::111122223333:role/x"]},
            (),
            r"modelRepositoryReadPrincipalArns: .* is set in prod",
        ),
        (
            "staging",
            {"triton-platform:modelRepositoryReadPrincipalArns": ["arn:aws:iam::1:role/x"]},
            (),
            r"modelRepositoryReadPrincipalArns: 'arn:aws:iam::1:role/x' is not valid",
        ),
    ],
)
def test_config_validation(stack: str, overrides: dict, remove: tuple, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        run_program(stack, overrides=overrides, remove=remove)


def test_preview_role_is_read_only_and_pull_request_only(any_stack: Run) -> None:
    role = any_stack.one("aws:iam/role:Role", "identities-preview-role")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    # Only pull_request runs of pull-request.yml (ref refs/pull/<n>/merge) in preview-<stack>.
    assert statement["Condition"] == {
        "StringEquals": {"token.actions.githubusercontent.com:aud": "sts.amazonaws.com"},
        "StringLike": {"token.actions.githubusercontent.com:sub": PREVIEW_SUBJECTS[any_stack.stack]},
    }
    assert role.inputs["maxSessionDuration"] == 3600
    attachments = [
        r
        for r in any_stack.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("identities-preview")
    ]
    assert [a.inputs["policyArn"] for a in attachments] == ["arn:aws:iam::aws:policy/job-function/ViewOnlyAccess"]
    assert not [
        r for r in any_stack.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.startswith("identities-preview")
    ]
    access = any_stack.one(
        "aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "identities-preview-access-policy"
    )
    assert access.inputs["policyArn"].endswith("/AmazonEKSViewPolicy")
    assert any_stack.exports["previewRoleArn"] == role.state["arn"]
