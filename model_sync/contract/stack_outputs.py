"""The stack outputs model_sync reads by name, named once: `__main__.py` exports them under these names
and model_sync/environments.py reads them (from `pulumi stack output`, and as the keys of the same
name in model-sync.yaml). What each holds: docs/stack-outputs.md."""

from __future__ import annotations

CANARY_POLICIES = "canaryPolicies"  # model -> {deployment, the gray release's policy} (canary_policy.py)
TRITON_GPUS = "tritonGpus"  # deployment -> {gpu, memoryGiB, models, architectures}: GPU memory planning
