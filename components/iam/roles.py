"""An IAM role with its AWS managed policies attached: the one way a component builds one.

The role's logical name is the caller's (`<component>-role`, `<component>-node-role`); each
attachment is `<role's logical name>-<the policy's name>` (the ARN's last segment), so the
children keep stable names whatever the order of the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws


def role_with_policies(
    logical_name: str, policy_arns: Sequence[str], opts: pulumi.ResourceOptions, **role_args: Any
) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
    """The role `logical_name` (`role_args`: its name or name_prefix, trust policy, tags) and one
    attachment per managed policy in `policy_arns`, all with `opts` (the component as parent)."""
    role = aws.iam.Role(logical_name, **role_args, opts=opts)
    attachments = [
        aws.iam.RolePolicyAttachment(
            f"{logical_name}-{arn.rsplit('/', 1)[-1]}", role=role.name, policy_arn=arn, opts=opts
        )
        for arn in policy_arns
    ]
    return role, attachments
