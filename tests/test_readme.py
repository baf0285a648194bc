"""The README's examples are executed so they cannot drift: every `make` target it names
exists, every `model-sync` line parses with the real CLI, the example config error is what
the config module prints for that input, and every linked file exists."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from components.stack_config.declarations import KEYS
from components.stack_config.errors import ConfigError
from components.stack_config.parser import parse
from tests.pulumi_kit import ROOT
from tests.pulumi_kit import stack_config as stack_file

README = (ROOT / "README.md").read_text()


def _all_blocks() -> list[tuple[str, str]]:
    """(info string, body) of every fenced block, in order."""
    blocks, lang, body, inside = [], "", [], False
    for line in README.splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append((lang, "\n".join(body) + "\n"))
                inside, body = False, []
            else:
                inside, lang = True, line[3:].strip()
        elif inside:
            body.append(line)
    assert not inside, "unclosed code fence in README.md"
    return blocks


def _blocks(lang: str) -> list[str]:
    return [body for info, body in _all_blocks() if info == lang]


def _lines(prefix: str) -> list[list[str]]:
    out = []
    for block in _blocks("console"):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(prefix + " "):
                out.append(shlex.split(line)[1:])
    return out


def test_make_targets_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, flags=re.M))
    named = [argv[0] for argv in _lines("make")]
    assert {"demo", "test", "render"} <= set(named)
    for target in named:
        assert target in targets, f"README names `make {target}`, which the Makefile does not define"


def test_model_sync_lines_parse_with_the_real_cli() -> None:
    from model_sync.cli import build_parser

    parser = build_parser()
    lines = _lines("model-sync")
    assert {argv[0] for argv in lines} >= {"export", "push", "verify", "promote", "status", "rollback"}
    for argv in lines:
        args = parser.parse_args(argv)
        assert args.command == argv[0]


def test_pulumi_config_lines_name_real_keys_and_paths() -> None:
    """Every `pulumi config set` line names a declared key; a `--path` line addresses a field the
    dev stack file really has (a structured map, so the path exists), and the stack it leaves
    behind still passes the stack model."""
    keys = {k.name: k for k in KEYS}
    lines = [argv for argv in _lines("pulumi") if argv[:2] == ["config", "set"]]
    assert any("--path" in argv for argv in lines)
    for argv in lines:
        key, value = [a for a in argv[2:] if not a.startswith("--")]
        namespace, _, path = key.partition(":")
        assert namespace == "triton-platform"
        name, *fields = path.split(".")
        assert name in keys, key
        if "--path" in argv:
            assert keys[name].type == "object", key
            cfg = stack_file("dev")
            node: Any = cfg[f"{namespace}:{name}"]
            for field in fields[:-1]:
                assert isinstance(node, dict), key
                node = node[field]
            assert isinstance(node, dict), key
            assert fields[-1] in node, key
            node[fields[-1]] = int(value) if value.isdigit() else value  # what `config set --path` writes
            parse(cfg, "dev")
        else:
            assert not fields, key


def test_the_example_config_error_is_real() -> None:
    (example,) = [b.strip() for b in _blocks("text")]
    cfg: dict[str, Any] = stack_file("dev")
    cfg["triton-platform:nodeGroups"]["gpu-l4"]["instanceTypes"] = ["m5.large"]
    with pytest.raises(ConfigError) as info:
        parse(cfg, "dev")
    assert str(info.value) == example


def test_linked_files_exist() -> None:
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links
    for link in links:
        assert (ROOT / link).exists(), link


def test_layout_lists_real_folders() -> None:
    (layout,) = [b for b in _blocks("") if b.startswith("Pulumi.yaml")]
    for line in layout.splitlines():
        path = line.split()[0]
        assert (ROOT / path.rstrip("/")).exists(), path


def test_the_readme_and_the_operations_guide_tell_one_backend_story() -> None:
    """Pulumi Cloud holds state and the stack secrets (docs/operations.md): the README's commands
    neither log in to another backend nor pick a secrets provider the CI roles cannot decrypt."""
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "State backend: **Pulumi Cloud**" in operations
    lines = _lines("pulumi")
    assert ["login"] in lines
    for argv in lines:
        assert not any(a.startswith(("--secrets-provider", "s3://", "file://", "azblob://", "gs://")) for a in argv), (
            argv
        )
