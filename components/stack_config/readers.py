"""The field readers: one value checked against its type and bounds, or a ConfigError naming its full key.

Values come as the strings Pulumi hands a program (JSON for lists and maps) or already typed
(YAML of the stack file, the tests); each reader accepts both. The account bootstrap's
config (components/account/bootstrap_config.py) is read with the same readers.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any

import yaml

from components.stack_config.errors import ConfigError
from components.stack_config.vocabulary import QUANTITY
from model_sync.contract.dns_label import DNS_LABEL, DNS_LABEL_RULE


def read_int(key: str, value: Any, lo: int, hi: int) -> int:
    """An integer from `lo` to `hi` (`"3"` and `3.0` read as 3; `true` and `2.5` are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, str, float)):
        raise ConfigError(key, value, "is not an integer", f"an integer from {lo} to {hi}")
    try:
        number = float(value) if isinstance(value, str) else value
        if number != int(number):
            raise ValueError
        result = int(number)
    except ValueError:
        raise ConfigError(key, value, "is not an integer", f"an integer from {lo} to {hi}") from None
    if not lo <= result <= hi:
        raise ConfigError(key, value, "is out of range", f"an integer from {lo} to {hi}")
    return result


def read_bool(key: str, value: Any) -> bool:
    """`true` / `false`, as a boolean or as Pulumi's string."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    raise ConfigError(key, value, "is not a boolean", "true or false")


def read_str(key: str, value: Any, pattern: re.Pattern[str] | None = None, allowed: str = "a non-empty string") -> str:
    """A non-empty string, matching `pattern` when one is given (`allowed` says what it accepts)."""
    if not isinstance(value, str) or not value or (pattern is not None and not pattern.match(value)):
        raise ConfigError(key, value, "is not valid", allowed)
    return value


def read_choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of `choices`."""
    if value not in choices:
        raise ConfigError(key, value, "is not allowed", " | ".join(choices))
    return str(value)


def read_list(key: str, value: Any) -> list[Any]:
    """A list, or the JSON of one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(key, value, "is not a list", "a YAML/JSON list") from None
    if not isinstance(value, list):
        raise ConfigError(key, value, "is not a list", "a YAML/JSON list")
    return value


def read_dns_label(key: str, value: Any) -> str:
    """A name that is a DNS label of at most 32 characters (node groups, deployments, clients)."""
    return read_str(
        key,
        value,
        DNS_LABEL,
        DNS_LABEL_RULE,
    )


def read_quantity(key: str, value: Any) -> str:
    """A Kubernetes quantity (`4`, `500m`, `16Gi`), numbers read as their string."""
    value = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    return read_str(key, value, QUANTITY, "a Kubernetes quantity such as 4, 500m, 16Gi")


def read_cidr(key: str, value: Any) -> ipaddress.IPv4Network:
    """An IPv4 network with its host bits zero."""
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except (ValueError, TypeError):
        raise ConfigError(key, value, "is not an IPv4 CIDR", "a CIDR such as 203.0.113.0/24 (host bits zero)") from None


def read_mapping(key: str, value: Any, fields: Mapping[str, bool]) -> dict[str, Any]:
    """A mapping whose keys are all in `fields` (name -> required), every required one present."""
    if not isinstance(value, dict):
        raise ConfigError(key, value, "is not a mapping", f"a mapping with keys {', '.join(fields)}")
    for name in value:
        if name not in fields:
            raise ConfigError(f"{key}.{name}", value[name], "is an unknown key", ", ".join(sorted(fields)))
    for name, required in fields.items():
        if required and name not in value:
            raise ConfigError(f"{key}.{name}", None, "is missing", "a value (this key is required)")
    return value


class DuplicateKeyError(yaml.YAMLError):
    """A mapping key given twice in YAML: its name and the line of its second copy (1-based)."""

    def __init__(self, name: Any, line: int) -> None:
        super().__init__(f"{name!r} appears twice (the second time on line {line})")
        self.name, self.line = name, line


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping key given twice (plain YAML keeps the last copy:
    a GPU group written twice silently became the second one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            name = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if name in seen:
                raise DuplicateKeyError(name, key_node.start_mark.line + 1)
            seen.add(name)
        return super().construct_mapping(node, deep)


def read_yaml_mapping(key: str, value: Any) -> dict[str, Any]:
    """A non-empty mapping of name -> settings (`nodeGroups`, `tritonDeployments`).

    Structured config, YAML of the stack file that Pulumi hands the program as JSON, is the
    spelling `pulumi config set --path` edits. The older spelling, a string holding the YAML
    mapping, is still read, with a name given twice refused."""
    if isinstance(value, str):
        try:
            value = yaml.load(value, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        except DuplicateKeyError as exc:
            raise ConfigError(
                key,
                exc.name,
                f"appears twice in the YAML (the second time on line {exc.line}); YAML would keep only the last",
                "each name once",
            ) from None
        except yaml.YAMLError as exc:
            raise ConfigError(
                key, "<yaml>", f"does not parse as YAML ({str(exc).splitlines()[0]})", "a YAML mapping"
            ) from None
    if not isinstance(value, dict) or not value:
        raise ConfigError(key, value, "is not a non-empty mapping", "a YAML mapping of name -> settings")
    return value
