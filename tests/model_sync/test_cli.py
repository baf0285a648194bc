"""The CLI's help text as users read it: `model-sync COMMAND --help`."""

from __future__ import annotations

import re

import pytest

from model_sync import cli


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main([*argv, "--help"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_help_names_env_and_model_apart_and_cites_no_source_file(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    text = _help(capsys, command)
    cited = [
        hit for hit in re.findall(r"[\w/]+\.py\b", text) if not hit.endswith("model.py")
    ]  # model.py: a file users write
    assert cited == [], text
    assert "--env NAME" not in text
    if "--env" in text:
        assert "--env ENV" in text


@pytest.mark.parametrize("command", ["rollback", "prune", "verify", "agent"])
def test_triton_image_is_offered_only_where_it_is_checked(capsys: pytest.CaptureFixture[str], command: str) -> None:
    assert "--triton-image" not in _help(capsys, command)


def test_push_keeps_triton_image_and_verify_has_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--triton-image" in _help(capsys, "push")
    assert "--quiet" in _help(capsys, "verify")


def test_commands_are_listed_in_the_order_of_a_models_life(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    listed = re.findall(r"^    ([a-z]+) ", text, re.MULTILINE)
    assert listed == [
        "export",
        "push",
        "verify",
        "canary",
        "promote",
        "rollback",
        "status",
        "prune",
        "plan",
        "agent",
    ], text


def test_an_option_means_one_thing_across_commands() -> None:
    """`--version` is model-sync's own version (top level) and nothing else; the version of a
    model is `--model-version N` wherever a command takes one (verify, canary, promote, rollback); `--to`
    is promote's target environment only."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.choices and "push" in a.choices)  # argparse keeps the subparsers there
    meanings: dict[str, set[str]] = {}
    for name, p in sub.choices.items():
        for action in p._actions:
            for opt in action.option_strings:
                meanings.setdefault(opt, set()).add(f"{name}:{action.metavar or action.dest}")
    assert "--version" not in meanings
    assert meanings["--model-version"] == {"verify:N", "canary:N", "promote:N", "rollback:N"}
    assert meanings["--to"] == {"promote:ENV"}
    assert any(a.option_strings == ["--version"] for a in parser._actions)  # the tool's version, top level
