"""The delivery keys: the GitHub repository and refs CI runs from, its OIDC provider, the deployer's
policies, and the promotion from staging to prod."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.iam.arns import POLICY_ARN, ROLE_ARN, is_customer_managed_policy, policy_identity
from components.iam.github_oidc import GIT_REF, GITHUB_REPO
from components.stack_config import rules
from components.stack_config.errors import ConfigError
from components.stack_config.readers import read_list, read_str
from components.stack_config.vocabulary import (
    BUCKET_NAME,
    GITHUB_OIDC_ARN,
    KMS_KEY_ARN,
    config_key,
)


def read_github(values: Mapping[str, Any], environment: str) -> dict[str, Any]:
    """`githubRepository` and `githubDeployRefs`: branch or tag refs, no wildcards and no environment (each
    CI role's environment is fixed by its purpose)."""
    repository = read_str(
        config_key("githubRepository"), values["githubRepository"], GITHUB_REPO, "a GitHub owner/name"
    )
    key = config_key("githubDeployRefs")
    refs = read_list(key, values["githubDeployRefs"])
    if not refs:
        raise ConfigError(key, refs, "is empty", "at least one ref such as refs/heads/main")
    for ref in refs:
        read_str(
            key,
            ref,
            GIT_REF,
            "refs/heads/<branch> or refs/tags/<tag> (no wildcards, no environment: each CI role's environment is "
            f"fixed by its purpose, e.g. deploy-{environment})",
        )
    return {"github_repository": repository, "github_deploy_refs": tuple(refs)}


def read_deployer(values: Mapping[str, Any]) -> dict[str, Any]:
    """`githubOidcProviderArn` and `deployerPolicyArns`: customer-managed policies of the stack's own
    account, each once."""
    oidc_arn = values["githubOidcProviderArn"]
    if not isinstance(oidc_arn, str) or not GITHUB_OIDC_ARN.match(oidc_arn):
        raise ConfigError(
            config_key("githubOidcProviderArn"),
            oidc_arn,
            "is not the GitHub OIDC provider",
            "arn:aws:iam::<account>:oidc-provider/token.actions.githubusercontent.com: the bootstrap stack's output "
            "githubOidcProviderArn (docs/bootstrap.md)",
        )
    key = config_key("deployerPolicyArns")
    arns = read_list(key, values["deployerPolicyArns"])
    if not arns:
        raise ConfigError(key, arns, "is empty", "one or more IAM managed policy ARNs")
    policies: dict[tuple[str, str], str] = {}
    for arn in arns:
        read_str(key, arn, POLICY_ARN, "IAM policy ARNs: arn:aws:iam::<account>:policy/<name>")
        if not is_customer_managed_policy(arn):
            # An allow-list, not a deny-list: no AWS managed policy is scoped to this stack
            # (PowerUserAccess, AdministratorAccess, IAMFullAccess... all reach every resource of
            # the account); the deployer's policy is the account's own, kept beside its guard rails.
            raise ConfigError(
                key,
                arn,
                "is an AWS managed policy, not scoped to this stack",
                "customer-managed policies of the stack's account (arn:aws:iam::<12-digit account>:policy/<name>; "
                "docs/stack-outputs.md)",
            )
        rules.check_policy_account(arn, oidc_arn)
        # Each policy is attached once (the attachment is named after the policy): one account's
        # policy, whatever the path or case of its ARN.
        same = policies.setdefault(policy_identity(arn), arn)
        if same != arn:
            raise ConfigError(
                key, arn, f"names the same policy as {same!r} (one account, one name)", "each policy ARN once"
            )
        if arns.count(arn) > 1:
            raise ConfigError(key, arn, "is listed twice", "each policy ARN once")
    return {"github_oidc_provider_arn": oidc_arn, "deployer_policy_arns": tuple(arns)}


def read_promotion(values: Mapping[str, Any], environment: str) -> dict[str, Any]:
    """`promotionSourceBucket` / `promotionSourceKmsKeyArn` (prod's staging source) and
    `modelRepositoryReadPrincipalArns` (staging's grant to the prod promoter)."""
    source_bucket = values["promotionSourceBucket"] or ""
    source_key = values["promotionSourceKmsKeyArn"] or ""
    rules.check_promotion_source(source_bucket, source_key, environment)
    if environment == "prod":
        read_str(
            config_key("promotionSourceBucket"),
            source_bucket,
            BUCKET_NAME,
            "the staging model-repository bucket name (required in prod)",
        )
        read_str(
            config_key("promotionSourceKmsKeyArn"),
            source_key,
            KMS_KEY_ARN,
            "arn:aws:kms:<region>:<account>:key/<key id> of the staging bucket (required in prod)",
        )
    key = config_key("modelRepositoryReadPrincipalArns")
    readers = read_list(key, values["modelRepositoryReadPrincipalArns"])
    for arn in readers:
        read_str(key, arn, ROLE_ARN, "IAM role ARNs: arn:aws:iam::<12-digit account>:role/<name>")
    rules.check_read_principals(readers, environment)
    return {
        "promotion_source_bucket": source_bucket,
        "promotion_source_kms_key_arn": source_key,
        "model_repository_read_principal_arns": tuple(readers),
    }
