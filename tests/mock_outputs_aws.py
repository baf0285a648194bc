"""Mock outputs for the AWS resource types and invokes of the AWS foundation components."""

from __future__ import annotations

from typing import Any  # noqa: F401

from tests.pulumi_kit import ACCOUNT, mock_invoke, mock_outputs  # noqa: F401
