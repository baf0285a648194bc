"""Loading a stack: its config from the Pulumi runtime (the program's only config read).

`load_from_pulumi()` is what __main__.py calls: the config Pulumi passes, the keys it holds
encrypted, and the zones AWS offers the account, parsed before any resource exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pulumi

from components.network import eks_zone_names
from components.stack_config.model import StackConfig
from components.stack_config.parser import parse


def load_from_pulumi(get_env: Callable[[], Mapping[str, str]] | None = None) -> StackConfig:
    """Read this stack's config from the Pulumi runtime (the program's only config read)."""
    from pulumi.runtime.config import CONFIG, get_config_env, get_config_secret_keys_env, is_config_secret

    if get_env is not None:
        raw = dict(get_env())
    else:
        # The language host passes config either in PULUMI_CONFIG or through
        # set_all_config (also what the mocks use); explicit settings win.
        raw = {**get_config_env(), **CONFIG.get()}
    secrets = {k for k in raw if is_config_secret(k)} | set(get_config_secret_keys_env())
    return parse(raw, pulumi.get_stack(), secret_keys=secrets, zones=eks_zone_names())
