"""Entry file of the triton-platform policy pack (`pulumi preview --policy-pack policy`).

Constructing `PolicyPack` starts the analyzer's gRPC server and blocks forever, so it
happens only here; the policies live in policies.py and are unit-tested there
(tests/policy/, run by `make policy-test` in `.venv-policy`).
"""

from policies import POLICIES
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(
    name="triton-platform",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=list(POLICIES),
)
