"""Loading a stack: its config from the Pulumi runtime (the program's only config read), or its stack file.

`load_from_pulumi()` is what __main__.py calls: the config Pulumi passes, the keys it holds
encrypted, and the zones AWS offers the account, parsed before any resource exists.
`read_stack_file()` reads a `stacks/Pulumi.<stack>.yaml` the way Pulumi's own loader would,
for the renders and tests that run the program without Pulumi (tests/pulumi_kit.py): a YAML
mistake in it is a ConfigError naming the file and the line, like any other config mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.stack_config.errors import ConfigError
from components.stack_config.model import StackConfig
from components.stack_config.parser import parse
from components.stack_config.readers import DuplicateKeyError, UniqueKeyLoader
from components.stack_config.zones import eks_zone_names


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


def read_stack_file(path: Path) -> dict[str, Any]:
    """The raw `config:` mapping of stack file `path`.

    Pulumi's stack-file loader refuses a mapping key given twice; so does this one. A YAML error
    is one line naming the file, the line and the column: a TAB where YAML takes only spaces
    (PyYAML's own message names no line on its first), a name given twice, anything else."""
    text = path.read_text()
    try:
        loaded = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKeyError as exc:
        raise ConfigError(
            str(path), exc.name, f"appears twice (the second time on line {exc.line})", "each name once"
        ) from None
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(path, text, exc) from None
    except yaml.YAMLError as exc:  # no position (a character YAML cannot read at all)
        raise ConfigError(
            str(path), "<yaml>", f"does not parse as YAML ({str(exc).splitlines()[0]})", "a YAML stack file"
        ) from None
    return dict(loaded["config"])


def _yaml_error(path: Path, text: str, exc: yaml.MarkedYAMLError) -> ConfigError:
    """The one line of a YAML syntax error at its mark (1-based line and column)."""
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return ConfigError(str(path), "<yaml>", f"does not parse as YAML ({exc.problem})", "a YAML stack file")
    where = f"on line {mark.line + 1}, column {mark.column + 1}"
    lines = text.splitlines()
    if mark.line < len(lines) and lines[mark.line][mark.column : mark.column + 1] == "\t":
        return ConfigError(
            str(path),
            "\t",
            f"{where} is a TAB character",
            "spaces for indentation and separation (YAML takes no tabs there)",
        )
    return ConfigError(str(path), "<yaml>", f"does not parse as YAML {where} ({exc.problem})", "a YAML stack file")
