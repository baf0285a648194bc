"""Who may do what, least privilege, no static keys.

- Serving role (every stack), bound with EKS Pod Identity to the service account of each
  Triton deployment (`naming.triton_service_account`) in `naming.TRITON_NAMESPACE`:
  reads `repository/` + `manifests/` (ListBucket only under those prefixes), writes and
  deletes only its OWN deployment's `status/<deployment>/` keys (`layout.status_key`), uses
  only this bucket's KMS key. One role serves every deployment: each deployment's status
  statement holds only for sessions whose Pod Identity session tags (`aws:PrincipalTag/...`,
  set by EKS, never by the pod) name this cluster, the Triton namespace and that deployment's
  service account, so the agent of deployment D cannot write or delete E's status.
  Trust (components/iam/pod_identity.py): `pods.eks.amazonaws.com` with
  `aws:SourceAccount`/`aws:SourceArn` = this cluster, and only sessions tagged with this
  cluster's ARN, the Triton namespace and one of this stack's `triton-<deployment>` service
  accounts. The associations keep session tags on (`disable_session_tags=False`): the
  trust and the status statements both need them.
  ref: https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html
- CI roles, assumed from GitHub Actions through OIDC (no access keys anywhere). Each role
  trusts exactly the workflow file(s) of its purpose, run from the stack's deploy refs, in
  the GitHub environment of its purpose (`github_environment`): nothing else can assume it.
  The subjects follow the customised template of components/iam/github_oidc.py (the workflow file
  and ref are IN `sub`, the only claim besides `aud` AWS IAM evaluates); until the repository
  applies it (docs/operations.md, "One-time setup") no role accepts GitHub's default subjects:
  the control fails closed.
  - deployer (every stack; `deploy.yml`, environment `deploy-<stack>`): runs `pulumi up`. Its
    permissions are the managed policies the stack config names (`deployerPolicyArns`,
    required, customer-managed only: no AWS managed policy is scoped to a stack): the account owners keep that
    policy next to their guard rails instead of this program granting itself power. It also gets a
    cluster-admin access entry (Helm releases install CRDs and cluster roles).
  - preview (every stack; `pull-request.yml`, environment `preview-<stack>`): read-only
    `pulumi preview` of a pull request. A pull request's token carries
    `@refs/pull/<number>/merge`, so this is the one trust with a wildcard, on the number only
    (StringLike); nothing but a `pull_request` run of `pull-request.yml` has such a ref.
  - publisher (staging stack only; `model-promote.yml` and `model-rollback.yml`, environment
    `models-staging`): reads the layout, writes `repository/`, `manifests/`, `audit/`
    (PUBLISHER_WRITE_PREFIXES); never deletes (versions are immutable).
  - promoter (prod stack only; the same two workflows, environment `models-prod`): reads the
    staging bucket's promotion prefixes (bucket and KMS key named in the prod config; for
    another account the staging stack grants it read through
    `modelRepositoryReadPrincipalArns`), writes prod's PUBLISHER_WRITE_PREFIXES.
  - The publisher and the promoter run gray releases (`model-sync canary`, and `promote --to prod`
    by default), whose analysis reads Prometheus through the EKS API server's service proxy with
    the role's IAM-derived bearer token (`aws eks get-token`). Each gets an EKS access entry with
    no access policy, only the Kubernetes group `prometheus_query_group`, which the monitoring
    namespace binds to `get` on Prometheus' service proxy and nothing else
    (components/monitoring/access.py): no other Kubernetes read or write.
- The GitHub OIDC provider is one per account and shared by the account's stacks (dev and
  staging share one): the account's bootstrap stack owns it (components/account_bootstrap.py,
  docs/bootstrap.md) and every stack names it (`github_oidc_provider_arn`, required).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.iam.arns import CLUSTER_ADMIN_POLICY_ARN, CLUSTER_VIEW_POLICY_ARN, is_customer_managed_policy
from components.iam.github_oidc import (
    GIT_REF,
    GITHUB_OIDC_HOST,
    GITHUB_REPO,
    PULL_REQUEST_REF,
    github_subject,
    github_trust_policy,
)
from components.iam.pod_identity import pod_identity_principal_condition, pod_identity_trust
from components.iam.promotion import PROMOTION_SOURCE_READ_PREFIXES
from components.kubernetes import naming
from components.stack_config.vocabulary import BUCKET_NAME, ENVIRONMENTS, GITHUB_OIDC_ARN, KMS_KEY_ARN
from model_sync.contract import layout
from model_sync.contract.dns_label import DNS_LABEL

# ref: https://docs.aws.amazon.com/aws-managed-policy/latest/reference/ViewOnlyAccess.html
PREVIEW_POLICY_ARN = "arn:aws:iam::aws:policy/job-function/ViewOnlyAccess"
ALL_PREFIXES = (layout.REPOSITORY_PREFIX, layout.MANIFESTS_PREFIX, layout.STATUS_PREFIX, layout.AUDIT_PREFIX)
# Maximum session of each CI role (IAM allows 3600..43200 s). Each is >= the credential
# duration (`role-duration-seconds`, itself >= `timeout-minutes`) of every workflow job that
# assumes the role, so credentials outlast the job (tests/workflows/test_credentials.py): the
# deployer's `up` jobs may run 3 h (an EKS upgrade rolling the GPU node groups); previews and
# model jobs stay within the 1 h default, so a pull request's credentials live no longer, except
# the prod promotion: it runs a gray release (`model-sync promote --to prod`), up to its deadline
# (1 h by default, tritonDeployments.<d>.canary.deadlineSeconds) after the copy and verification.
CI_SESSION_SECONDS: dict[str, int] = {"deployer": 10800, "preview": 3600, "publisher": 3600, "promoter": 7200}

# Which workflow files each CI role serves, and the purpose that names its GitHub environment.
CI_ROLE_WORKFLOWS: dict[str, tuple[str, ...]] = {
    "deployer": ("deploy.yml",),
    "preview": ("pull-request.yml",),
    "publisher": ("model-promote.yml", "model-rollback.yml"),
    "promoter": ("model-promote.yml", "model-rollback.yml"),
}
CI_ROLE_PURPOSES: dict[str, str] = {
    "deployer": "deploy",
    "preview": "preview",
    "publisher": "models",
    "promoter": "models",
}


@dataclass(frozen=True)
class IdentitiesArgs:
    """Inputs of `Identities`.

    environment: dev | staging | prod; names the roles and decides publisher (staging) /
        promoter (prod) (required).
    cluster_name: the EKS cluster the Pod Identity associations and deployer entry go to (required).
    cluster_arn: that cluster's ARN; the serving role's trust requires it (required).
    bucket_arn / kms_key_arn: this environment's model repository and its key (required).
    triton_deployments: Triton deployment names; each gets a Pod Identity association (required, >= 1).
    github_repository: `owner/name` whose workflows may assume the CI roles (required).
    github_deploy_refs: `refs/heads/<b>` or `refs/tags/<t>` the CI roles' workflow files must run from
        (their `job_workflow_ref` is `<file>@<ref>`); no wildcards, no `environment:` (each role's
        environment is fixed by its purpose: `github_environment`) (required, >= 1).
    deployer_policy_arns: managed policies of the deployer role (required, >= 1; customer-managed
        only, every AWS managed policy refused).
    github_oidc_provider_arn: the account's GitHub OIDC provider, created by the account's bootstrap
        stack (components/account_bootstrap.py) (required).
    promotion_source_bucket / promotion_source_kms_key_arn: the staging bucket and its key,
        required in prod, refused elsewhere.
    prometheus_query_group: the Kubernetes group the publisher (staging) / promoter (prod) access
        entry carries, for the gray release's Prometheus queries (naming.PROMETHEUS_QUERY_GROUP
        where monitoring runs); "" (default) gives those roles no access entry.
    tags: extra tags on every resource (default none).
    """

    environment: str
    cluster_name: pulumi.Input[str]
    cluster_arn: pulumi.Input[str]
    bucket_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    triton_deployments: Sequence[str]
    github_repository: str
    github_deploy_refs: Sequence[str]
    deployer_policy_arns: Sequence[str]
    github_oidc_provider_arn: str
    promotion_source_bucket: str = ""
    promotion_source_kms_key_arn: str = ""
    prometheus_query_group: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.environment not in ENVIRONMENTS:
            raise ValueError(
                f"IdentitiesArgs.environment: {self.environment!r} is not allowed; allowed: {' | '.join(ENVIRONMENTS)}"
            )
        if not self.triton_deployments or len(set(self.triton_deployments)) != len(self.triton_deployments):
            raise ValueError(
                f"IdentitiesArgs.triton_deployments: {list(self.triton_deployments)!r} is empty or repeats a name; "
                "allowed: one or more distinct deployment names"
            )
        for d in self.triton_deployments:
            if not DNS_LABEL.match(d):
                raise ValueError(
                    f"IdentitiesArgs.triton_deployments: {d!r} is not a DNS label; allowed: lowercase letters, "
                    "digits and '-'"
                )
        self._check_github()
        if self.prometheus_query_group and not naming.KUBERNETES_GROUP.fullmatch(self.prometheus_query_group):
            raise ValueError(
                f"IdentitiesArgs.prometheus_query_group: {self.prometheus_query_group!r} is not allowed; allowed: "
                f"{naming.KUBERNETES_GROUP_RULE}, or ''"
            )
        self._check_promotion_source()

    def _check_github(self) -> None:
        """The repository, the deploy refs, the deployer's policies and the account's OIDC provider."""
        if not GITHUB_REPO.match(self.github_repository):
            raise ValueError(
                f"IdentitiesArgs.github_repository: {self.github_repository!r} is not valid; allowed: a GitHub "
                "owner/name"
            )
        if not self.github_deploy_refs:
            raise ValueError(
                "IdentitiesArgs.github_deploy_refs: [] is empty; allowed: at least one ref such as refs/heads/main"
            )
        for ref in self.github_deploy_refs:
            if not GIT_REF.match(ref):
                raise ValueError(
                    f"IdentitiesArgs.github_deploy_refs: {ref!r} is not valid; allowed: refs/heads/<branch> or "
                    "refs/tags/<tag> "
                    "(no wildcards, no environment: each role's environment is fixed by its purpose, e.g. "
                    f"deploy-{self.environment})"
                )
        if not self.deployer_policy_arns:
            raise ValueError(
                "IdentitiesArgs.deployer_policy_arns: [] is empty; allowed: one or more IAM managed policy ARNs"
            )
        for arn in self.deployer_policy_arns:
            if not is_customer_managed_policy(arn):
                raise ValueError(
                    f"IdentitiesArgs.deployer_policy_arns: {arn!r} is not allowed; allowed: customer-managed "
                    "policies (arn:aws:iam::<account>:policy/<name>)"
                )
        if not GITHUB_OIDC_ARN.match(self.github_oidc_provider_arn):
            raise ValueError(
                f"IdentitiesArgs.github_oidc_provider_arn: {self.github_oidc_provider_arn!r} is not the GitHub OIDC "
                f"provider; allowed: arn:aws:iam::<account>:oidc-provider/{GITHUB_OIDC_HOST} or empty"
            )

    def _check_promotion_source(self) -> None:
        """The staging bucket and key prod promotes from: required in prod, refused elsewhere."""
        if self.environment == "prod":
            if not BUCKET_NAME.match(self.promotion_source_bucket):
                raise ValueError(
                    f"IdentitiesArgs.promotion_source_bucket: {self.promotion_source_bucket!r} is not a bucket name; "
                    "allowed: the staging model-repository bucket (required in prod)"
                )
            if not KMS_KEY_ARN.match(self.promotion_source_kms_key_arn):
                raise ValueError(
                    f"IdentitiesArgs.promotion_source_kms_key_arn: {self.promotion_source_kms_key_arn!r} is not a "
                    "KMS key ARN; allowed: the staging bucket's key ARN (required in prod)"
                )
        elif self.promotion_source_bucket or self.promotion_source_kms_key_arn:
            raise ValueError(
                "IdentitiesArgs.promotion_source_bucket: "
                f"{self.promotion_source_bucket or self.promotion_source_kms_key_arn!r} is set in "
                f"{self.environment}; allowed: empty outside prod"
            )


# --------------------------------------------------------------------------------------
# Policy builders (pure; unit-tested directly).
# --------------------------------------------------------------------------------------


def github_environment(role: str, environment: str) -> str:
    """The GitHub environment the jobs of CI role `role` in stack `environment` run in:
    `deploy-<env>`, `preview-<env>`, `models-<env>` (one per purpose and stack)."""
    if role not in CI_ROLE_PURPOSES:
        raise ValueError(f"role: {role!r} is not a CI role; allowed: {', '.join(CI_ROLE_PURPOSES)}")
    if environment not in ENVIRONMENTS:
        raise ValueError(f"environment: {environment!r} is not allowed; allowed: {' | '.join(ENVIRONMENTS)}")
    return f"{CI_ROLE_PURPOSES[role]}-{environment}"


def github_role_subjects(role: str, environment: str, repository: str, refs: Sequence[str]) -> list[str]:
    """Every subject CI role `role` of stack `environment` accepts: its workflow files x the
    deploy refs (pull-request.yml: PULL_REQUEST_REF), in its purpose's environment."""
    runs_from = [PULL_REQUEST_REF] if role == "preview" else list(refs)
    env = github_environment(role, environment)
    return sorted(github_subject(repository, wf, ref, env) for wf in CI_ROLE_WORKFLOWS[role] for ref in runs_from)


def _build_serving_trust(cluster_arn: str, deployments: Sequence[str]) -> dict[str, Any]:
    """Pod Identity trust: this cluster, the Triton namespace, this stack's Triton service accounts."""
    return pod_identity_trust(
        cluster_arn, naming.TRITON_NAMESPACE, [naming.triton_service_account(d) for d in deployments]
    )


def _objects(bucket_arn: str, prefixes: Sequence[str]) -> list[str]:
    return [f"{bucket_arn}/{p}*" for p in prefixes]


def _list_statement(sid: str, bucket_arn: str, prefixes: Sequence[str]) -> dict[str, Any]:
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": bucket_arn,
        "Condition": {"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
    }


def _status_statement(index: int, bucket_arn: str, cluster_arn: str, deployment: str) -> dict[str, Any]:
    """Deployment `deployment`'s agents write and delete `status/<deployment>/*` only (DeleteObject:
    an agent removes its own status/<deployment>/<pod>.json on SIGTERM). The condition is the
    session's Pod Identity tags, so only that deployment's service account matches."""
    prefix = layout.status_key(deployment, "x").rsplit("/", 1)[0] + "/"  # status/<deployment>/
    return {
        "Sid": f"WriteStatus{index}",
        "Effect": "Allow",
        "Action": ["s3:PutObject", "s3:DeleteObject"],
        "Resource": f"{bucket_arn}/{prefix}*",
        "Condition": pod_identity_principal_condition(
            cluster_arn, naming.TRITON_NAMESPACE, naming.triton_service_account(deployment)
        ),
    }


def _build_serving_policy(
    bucket_arn: str, key_arn: str, cluster_arn: str, deployments: Sequence[str]
) -> dict[str, Any]:
    if not deployments or len(set(deployments)) != len(deployments):
        raise ValueError(
            f"deployments: {list(deployments)!r} is empty or repeats a name; allowed: one or more distinct "
            "deployment names"
        )
    return {
        "Version": "2012-10-17",
        "Statement": [
            _list_statement("ListRepository", bucket_arn, layout.SERVING_READ_PREFIXES),
            {
                "Sid": "ReadRepository",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": _objects(bucket_arn, layout.SERVING_READ_PREFIXES),
            },
            # One statement per deployment, numbered in name order (a Sid is alphanumeric only).
            *(_status_statement(i, bucket_arn, cluster_arn, d) for i, d in enumerate(sorted(deployments), start=1)),
            # GenerateDataKey: the status writes are encrypted with the bucket key.
            {
                "Sid": "UseRepositoryKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                "Resource": key_arn,
            },
        ],
    }


def _write_statements(sid: str, bucket_arn: str, key_arn: str) -> list[dict[str, Any]]:
    return [
        _list_statement(f"List{sid}", bucket_arn, ALL_PREFIXES),
        {
            "Sid": f"Read{sid}",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": _objects(bucket_arn, ALL_PREFIXES),
        },
        # PutObject covers the multipart calls; no DeleteObject: versions are immutable.
        {
            "Sid": f"Write{sid}",
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
            "Resource": _objects(bucket_arn, layout.PUBLISHER_WRITE_PREFIXES),
        },
        {
            "Sid": f"Use{sid}Key",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": key_arn,
        },
    ]


def _build_publisher_policy(bucket_arn: str, key_arn: str) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": _write_statements("Repository", bucket_arn, key_arn)}


def _build_promoter_policy(bucket_arn: str, key_arn: str, source_bucket: str, source_key_arn: str) -> dict[str, Any]:
    source_arn = f"arn:aws:s3:::{source_bucket}"
    return {
        "Version": "2012-10-17",
        "Statement": [
            _list_statement("ListSource", source_arn, PROMOTION_SOURCE_READ_PREFIXES),
            {
                "Sid": "ReadSource",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectTagging"],
                "Resource": _objects(source_arn, PROMOTION_SOURCE_READ_PREFIXES),
            },
            {"Sid": "DecryptSource", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": source_key_arn},
            *_write_statements("Target", bucket_arn, key_arn),
        ],
    }


def _role_prefix(args: IdentitiesArgs) -> str:
    """The names of this environment's roles start with it: `triton-platform-<environment>-<role>`."""
    return f"triton-platform-{args.environment}"


# --------------------------------------------------------------------------------------
# The component.
# --------------------------------------------------------------------------------------


class Identities(pulumi.ComponentResource):
    """Serving, CI (publisher / promoter / deployer) roles and their bindings."""

    serving_role_arn: pulumi.Output[str]
    deployer_role_arn: pulumi.Output[str]
    preview_role_arn: pulumi.Output[str]
    publisher_role_arn: pulumi.Output[str] | None
    promoter_role_arn: pulumi.Output[str] | None
    github_oidc_provider_arn: pulumi.Output[str]
    pod_identity_association_ids: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: IdentitiesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:iam:Identities", name, None, opts)
        # The account's GitHub OIDC provider, owned by its bootstrap stack (components/account_bootstrap.py).
        self.github_oidc_provider_arn = pulumi.Output.from_input(args.github_oidc_provider_arn)
        serving = self._serving(name, args)
        self._model_roles(name, args)
        self._prometheus_access(name, args)
        deployer, preview = self._deployer_and_preview(name, args)

        self.serving_role_arn = serving.arn
        self.deployer_role_arn = deployer.arn
        self.preview_role_arn = preview.arn

        outputs: dict[str, Any] = {
            "servingRoleArn": self.serving_role_arn,
            "deployerRoleArn": self.deployer_role_arn,
            "previewRoleArn": self.preview_role_arn,
            "githubOidcProviderArn": self.github_oidc_provider_arn,
            "podIdentityAssociationIds": self.pod_identity_association_ids,
        }
        if self.publisher_role_arn is not None:
            outputs["publisherRoleArn"] = self.publisher_role_arn
        if self.promoter_role_arn is not None:
            outputs["promoterRoleArn"] = self.promoter_role_arn
        self.register_outputs(outputs)

    def _serving(self, name: str, args: IdentitiesArgs) -> aws.iam.Role:
        """The serving role and one Pod Identity association per Triton deployment."""
        child = pulumi.ResourceOptions(parent=self)
        serving = aws.iam.Role(
            f"{name}-serving-role",
            name=f"{_role_prefix(args)}-serving",
            description="Triton pods: read the model repository, write replica status",
            assume_role_policy=pulumi.Output.from_input(args.cluster_arn).apply(
                lambda arn: json.dumps(_build_serving_trust(arn, args.triton_deployments))
            ),
            tags=dict(args.tags),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-serving-policy",
            role=serving.id,
            policy=pulumi.Output.all(args.bucket_arn, args.kms_key_arn, args.cluster_arn).apply(
                lambda v: json.dumps(_build_serving_policy(v[0], v[1], v[2], args.triton_deployments))
            ),
            opts=child,
        )
        self.pod_identity_association_ids = {}
        for deployment in args.triton_deployments:
            assoc = aws.eks.PodIdentityAssociation(
                f"{name}-serving-{deployment}",
                cluster_name=args.cluster_name,
                namespace=naming.TRITON_NAMESPACE,
                service_account=naming.triton_service_account(deployment),
                role_arn=serving.arn,
                disable_session_tags=False,  # the trust and the status statements read the session tags
                tags=dict(args.tags),
                opts=child,
            )
            self.pod_identity_association_ids[deployment] = assoc.association_id
        return serving

    def _ci_role(self, name: str, args: IdentitiesArgs, role: str, description: str) -> aws.iam.Role:
        """The CI role `role`, trusted by the GitHub OIDC provider for its workflow's subjects only."""
        subjects = github_role_subjects(role, args.environment, args.github_repository, args.github_deploy_refs)
        trust = self.github_oidc_provider_arn.apply(lambda arn: json.dumps(github_trust_policy(arn, subjects)))
        return aws.iam.Role(
            f"{name}-{role}-role",
            name=f"{_role_prefix(args)}-{role}",
            description=description,
            assume_role_policy=trust,
            max_session_duration=CI_SESSION_SECONDS[role],
            tags=dict(args.tags),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _model_roles(self, name: str, args: IdentitiesArgs) -> None:
        """The publisher (staging) or the promoter (prod), with its bucket policy."""
        child = pulumi.ResourceOptions(parent=self)
        self.publisher_role_arn = None
        self.promoter_role_arn = None
        if args.environment == "staging":
            publisher = self._ci_role(name, args, "publisher", "CI: publish model versions to the staging repository")
            aws.iam.RolePolicy(
                f"{name}-publisher-policy",
                role=publisher.id,
                policy=pulumi.Output.all(args.bucket_arn, args.kms_key_arn).apply(
                    lambda v: json.dumps(_build_publisher_policy(v[0], v[1]))
                ),
                opts=child,
            )
            self.publisher_role_arn = publisher.arn
        if args.environment == "prod":
            promoter = self._ci_role(name, args, "promoter", "CI: promote verified model versions from staging to prod")
            aws.iam.RolePolicy(
                f"{name}-promoter-policy",
                role=promoter.id,
                policy=pulumi.Output.all(args.bucket_arn, args.kms_key_arn).apply(
                    lambda v: json.dumps(
                        _build_promoter_policy(
                            v[0], v[1], args.promotion_source_bucket, args.promotion_source_kms_key_arn
                        )
                    )
                ),
                opts=child,
            )
            self.promoter_role_arn = promoter.arn

    def _prometheus_access(self, name: str, args: IdentitiesArgs) -> None:
        """The gray release's Prometheus queries (publisher / promoter): an access entry with no access
        policy, so the role authenticates to the cluster as a member of `prometheus_query_group`, which
        only the monitoring namespace's Role binds."""
        canary_roles = {"publisher": self.publisher_role_arn, "promoter": self.promoter_role_arn}
        for role_name, role_arn in canary_roles.items():
            if role_arn is None or not args.prometheus_query_group:
                continue
            aws.eks.AccessEntry(
                f"{name}-{role_name}-access",
                cluster_name=args.cluster_name,
                principal_arn=role_arn,
                type="STANDARD",
                kubernetes_groups=[args.prometheus_query_group],
                tags=dict(args.tags),
                opts=pulumi.ResourceOptions(parent=self),
            )

    def _cluster_access(
        self, name: str, args: IdentitiesArgs, role_name: str, role: aws.iam.Role, policy_arn: str
    ) -> None:
        """An EKS access entry for `role` with one cluster-scoped access policy."""
        child = pulumi.ResourceOptions(parent=self)
        entry = aws.eks.AccessEntry(
            f"{name}-{role_name}-access",
            cluster_name=args.cluster_name,
            principal_arn=role.arn,
            type="STANDARD",
            tags=dict(args.tags),
            opts=child,
        )
        aws.eks.AccessPolicyAssociation(
            f"{name}-{role_name}-access-policy",
            cluster_name=args.cluster_name,
            principal_arn=entry.principal_arn,
            policy_arn=policy_arn,
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            opts=child,
        )

    def _deployer_and_preview(self, name: str, args: IdentitiesArgs) -> tuple[aws.iam.Role, aws.iam.Role]:
        """The deployer (pulumi up: its policies, cluster admin) and the preview role (pull requests)."""
        child = pulumi.ResourceOptions(parent=self)
        deployer = self._ci_role(name, args, "deployer", "CI: pulumi up for this stack")
        for arn in args.deployer_policy_arns:
            aws.iam.RolePolicyAttachment(
                f"{name}-deployer-{arn.rsplit('/', 1)[-1].lower()}", role=deployer.name, policy_arn=arn, opts=child
            )
        self._cluster_access(name, args, "deployer", deployer, CLUSTER_ADMIN_POLICY_ARN)

        # `pulumi preview` on a pull request runs the PR's code, so its role can only read:
        # AWS's ViewOnlyAccess (describe/list, no object or secret reads) and the EKS view
        # policy. Trusted only for pull_request runs of pull-request.yml in preview-<stack>.
        preview = self._ci_role(name, args, "preview", "CI: read-only pulumi preview for pull requests")
        aws.iam.RolePolicyAttachment(
            f"{name}-preview-viewonly", role=preview.name, policy_arn=PREVIEW_POLICY_ARN, opts=child
        )
        self._cluster_access(name, args, "preview", preview, CLUSTER_VIEW_POLICY_ARN)
        return deployer, preview
