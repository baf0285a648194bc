"""IAM ARNs the stack config names: their shapes and what makes two of them the same role or policy.

A role is identified by its partition, account and name; IAM role names are unique per
account regardless of the path and of case. So `role/team/Admins` and `role/admins` in one
account are the same role, while the same name in two accounts is two roles. A managed
policy likewise, by its account and name.
# ref: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns
"""

from __future__ import annotations

import re

ROLE_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):iam::(?P<account>[0-9]{12}):role/(?:[\w+=,.@-]+/)*(?P<name>[\w+=,.@-]{1,64})$"
)
POLICY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>aws|[0-9]{12}):policy/[\w+=,.@/-]{1,512}$")
# The EKS access policies the access entries bind: the cluster's admins and the deployer get
# the first (components/eks_cluster.py, components/identities.py), the preview role the second.
CLUSTER_ADMIN_POLICY_ARN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
CLUSTER_VIEW_POLICY_ARN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"


def policy_account(policy_arn: str) -> str | None:
    """The account of a managed policy ARN (`aws` for AWS managed ones); None for anything else."""
    m = POLICY_ARN.match(policy_arn)
    return m.group("account") if m else None


def is_customer_managed_policy(policy_arn: str) -> bool:
    """A policy an account owns (`arn:aws:iam::<account>:policy/...`), not an AWS managed one
    (`arn:aws:iam::aws:policy/...`, none of which is scoped to one stack)."""
    return policy_account(policy_arn) not in (None, "aws")


def policy_identity(policy_arn: str) -> tuple[str, str]:
    """(account, lower-cased name): equal for two ARNs of one managed policy (`policy/team/Deployer` and
    `policy/deployer` of one account), the name a stack's policy attachment is keyed by."""
    account = policy_account(policy_arn)
    if account is None:
        raise ValueError(
            f"policy ARN: {policy_arn!r} is not an IAM policy ARN; allowed: arn:aws:iam::<account>:policy/<name>"
        )
    return account, policy_arn.rsplit("/", 1)[-1].lower()


def role_identity(role_arn: str) -> tuple[str, str, str]:
    """(partition, account, lower-cased name): equal for two ARNs of one role."""
    m = ROLE_ARN.match(role_arn)
    if m is None:
        raise ValueError(
            f"role ARN: {role_arn!r} is not an IAM role ARN; allowed: arn:aws:iam::<12-digit account>:role/<name>"
        )
    return m.group("partition"), m.group("account"), m.group("name").lower()


def role_key(role_arn: str) -> str:
    """A stable, readable child-name key for a role ARN: `<account>-<role name>` with the name's
    punctuation turned into '-' (`.../role/team/Platform.Admins` -> `111122223333-platform-admins`)."""
    _, account, name = role_identity(role_arn)
    return f"{account}-{re.sub(r'[^a-z0-9-]', '-', name)}"


def role_name_key(role_arn: str) -> str:
    """The key of the role before it carried its account (`platform-admins`): the alias that
    keeps an existing access entry's URN when its name is unique in the list."""
    return role_key(role_arn).split("-", 1)[1]
