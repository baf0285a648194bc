"""A customer-managed KMS key with its alias: the one way a component builds one.

Every key rotates yearly and waits 30 days before it is deleted; the alias is the name people
find it by in the console. Logical names: the caller's for the key, `<key's>-alias` for the alias.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

DELETION_WINDOW_DAYS = 30


def key_with_alias(
    logical_name: str, alias: str, description: str, opts: pulumi.ResourceOptions, **key_args: Any
) -> aws.kms.Key:
    """The key `logical_name` (`key_args`: its policy, tags) and its alias `alias/<alias>`."""
    key = aws.kms.Key(
        logical_name,
        description=description,
        enable_key_rotation=True,
        deletion_window_in_days=DELETION_WINDOW_DAYS,
        **key_args,
        opts=opts,
    )
    aws.kms.Alias(f"{logical_name}-alias", name=f"alias/{alias}", target_key_id=key.key_id, opts=opts)
    return key
