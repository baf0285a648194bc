"""The stack config's one error, ConfigError: a one-line message naming the key, the value and what is allowed."""

from __future__ import annotations

import json
from typing import Any

import pulumi


class ConfigError(ValueError, pulumi.RunError):
    """A stack-config value that is not allowed. The message is one line:
    `<key>: <bad value> <what is wrong>; allowed: <what is allowed>`. A `pulumi.RunError`, so
    `pulumi preview` / `up` print that line alone, without a traceback."""

    def __init__(self, key: str, value: Any, problem: str, allowed: str) -> None:
        self.key = key
        self.value = value
        shown = (
            "<unset>" if value is None else repr(value) if isinstance(value, str) else json.dumps(value, default=str)
        )
        super().__init__(f"{key}: {shown} {problem}; allowed: {allowed}".replace("\n", " "))
