"""Every `model-sync ...` / `python -m model_sync ...` command line in a fenced code block of
docs/*.md parses with the real CLI parser (model_sync.cli.build_parser), so documented commands
cannot drift from the flags (e.g. `verify` requires --model-version). Optional parts written as
`[--flag VALUE]` are parsed with the brackets removed; `# comments` are ignored."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from model_sync.cli import build_parser

DOCS = Path(__file__).resolve().parents[3] / "docs"
PREFIX = re.compile(r"^(?:\$\s+)?(?:\.venv/bin/)?(?:model-sync|python -m model_sync)\s+(?!\.)")


def command_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command) for each model-sync command in fenced code blocks; joins `\\` continuations."""
    out: list[tuple[int, str]] = []
    in_block = False
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("```"):
            in_block, pending = not in_block, None
            continue
        if not in_block:
            continue
        if pending is not None:
            start, head = pending
            line = head + " " + line
            number = start
        elif not PREFIX.match(line):
            continue
        if line.endswith("\\"):
            pending = (number, line[:-1].strip())
            continue
        pending = None
        out.append((number, line))
    return out


def argv_of(line: str) -> list[str]:
    words = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)
    words = words[1:] if words[0] == "$" else words  # a shell prompt
    start = 1 if words[0] == "model-sync" or words[0].endswith("/model-sync") else 3  # python -m model_sync
    return words[start:]


CASES = [
    (f"{path.name}:{n}", line) for path in sorted(DOCS.glob("*.md")) for n, line in command_lines(path.read_text())
]


def test_the_docs_contain_command_lines_to_check() -> None:
    names = {case.split(":")[0] for case, _ in CASES}
    assert {"model-sync.md", "agent.md"} <= names
    assert any(" verify " in line for _, line in CASES)


@pytest.mark.parametrize(("where", "line"), CASES, ids=[c for c, _ in CASES])
def test_documented_command_line_parses(where: str, line: str) -> None:
    argv = argv_of(line)
    try:
        args = build_parser(argv[0]).parse_args(argv)
    except SystemExit as e:
        raise AssertionError(f"{where}: `{line}` does not parse (exit {e.code})") from None
    assert args.command == argv[0]


def test_extractor_joins_continuations_and_skips_prose_and_the_local_module() -> None:
    text = (
        "model-sync verify x\n```\nmodel-sync verify m --env e \\\n    [--model-version 3]   # note\npython -m "
        "model_sync.sandbox demo\n```\n"
    )
    assert command_lines(text) == [(3, "model-sync verify m --env e [--model-version 3]   # note")]
    assert argv_of(command_lines(text)[0][1]) == ["verify", "m", "--env", "e", "--model-version", "3"]
    for prompt in ("$ model-sync", "$ .venv/bin/model-sync", "$ python -m model_sync"):  # a shell prompt is not a word
        assert argv_of(f"{prompt} status --env prod") == ["status", "--env", "prod"]
