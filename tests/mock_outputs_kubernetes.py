"""Mock outputs for the Kubernetes resource types of the serving plane.

None are needed today: the serving-plane components read back only `metadata.name` of
objects they create (the mocks echo every input into the state) and `result` of
RandomPassword (tests/mock_outputs.py). A component that starts reading a server-side
field (`status`, `spec.clusterIP`, a Helm release's `status`) registers it here; the kit
fails the run until it does.
"""

from __future__ import annotations

from typing import Any  # noqa: F401

from tests.pulumi_kit import mock_outputs  # noqa: F401
