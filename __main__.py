"""triton-platform: one stack = one environment (dev, staging, prod).

Wiring only: load the validated stack config, build the components in dependency order,
export the documented outputs (README, "Stack outputs"). No resource is created here
directly and nothing here reads `pulumi.Config()`: see components/stack_config.py.
"""

import pulumi

from components.stack_config import load_from_pulumi

config = load_from_pulumi()

# ---- AWS foundation (DESIGN.md items 1-6) -------------------------------------------

# ---- Kubernetes serving plane (DESIGN.md items 7-9) ---------------------------------

# ---- Stack outputs -------------------------------------------------------------------
pulumi.export("environment", config.environment)
