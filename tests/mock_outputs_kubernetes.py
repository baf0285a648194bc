"""Mock outputs for the Kubernetes resource types of the serving plane."""

from __future__ import annotations

from typing import Any  # noqa: F401

from tests.pulumi_kit import mock_outputs  # noqa: F401
