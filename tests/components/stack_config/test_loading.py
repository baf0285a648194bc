"""Loading a stack file: a YAML mistake in it is the program's one-line ConfigError naming the file and the line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from components.stack_config.errors import ConfigError
from components.stack_config.loading import read_stack_file
from tests.pulumi_kit import ROOT
from tests.pulumi_kit import stack_config as stack_file


def one_line(info: pytest.ExceptionInfo[ConfigError]) -> str:
    message = str(info.value)
    assert "\n" not in message
    assert "; allowed: " in message
    return message


def test_a_name_given_twice_in_a_structured_stack_file_is_refused(tmp_path: Path) -> None:
    """Structured maps are YAML of the stack file itself: Pulumi's loader refuses a key given
    twice there, and so does the kit the renders and tests read stack files with."""
    text = (ROOT / "stacks" / "Pulumi.staging.yaml").read_text()
    anchor = "  triton-platform:nodeGroups:\n"
    assert anchor in text
    broken = tmp_path / "Pulumi.staging.yaml"
    broken.write_text(
        text.replace(
            anchor,
            anchor + "    gpu-l4:\n      kind: gpu\n      instanceTypes: [g6.2xlarge]\n"
            "      minSize: 0\n      desiredSize: 0\n      maxSize: 4\n",
            1,
        )
    )
    with pytest.raises(
        ConfigError, match=r"Pulumi.staging.yaml: 'gpu-l4' appears twice \(the second time on line \d+\)"
    ) as info:
        stack_file("staging", broken)
    assert one_line(info).endswith("; allowed: each name once")


def _with_tab(tmp_path: Path) -> tuple[Path, int]:
    """prod's stack file with its first `triton-platform:domain` line indented by a TAB; the line's number."""
    lines = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text().splitlines(keepends=True)
    (n,) = [i for i, line in enumerate(lines) if line.startswith("  triton-platform:domain:")]
    lines[n] = "\t" + lines[n].lstrip(" ")
    broken = tmp_path / "Pulumi.prod.yaml"
    broken.write_text("".join(lines))
    return broken, n + 1


def test_a_tab_in_the_stack_file_names_the_file_line_and_column(tmp_path: Path) -> None:
    """PyYAML's first line for a TAB ("while scanning for the next token") names neither the file nor
    the line: the error is one line with both, and says what YAML takes instead."""
    broken, line = _with_tab(tmp_path)
    with pytest.raises(ConfigError) as info:
        read_stack_file(broken)
    assert one_line(info) == (
        f"{broken}: '\\t' on line {line}, column 1 is a TAB character; allowed: spaces for indentation and separation "
        "(YAML takes no tabs there)"
    )
    assert info.value.key == str(broken)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(broken))}: '\\t' on line {line}, column 1"):
        stack_file("prod", broken)  # what the renders and tests read stack files with


def test_a_tab_between_a_key_and_its_value_is_named_too(tmp_path: Path) -> None:
    broken = tmp_path / "Pulumi.dev.yaml"
    broken.write_text("config:\n  aws:region: us-east-1\n  triton-platform:domain:\tdev.example.com\n")
    with pytest.raises(ConfigError, match=r"' on line 3, column 26 is a TAB character; allowed: spaces"):
        read_stack_file(broken)


def test_any_other_yaml_mistake_names_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "Pulumi.dev.yaml"
    broken.write_text("config:\n  aws:region: us-east-1\n  triton-platform:ingressClients: [default\n")
    with pytest.raises(ConfigError) as info:
        read_stack_file(broken)
    assert re.fullmatch(
        rf"{re.escape(str(broken))}: '<yaml>' does not parse as YAML on line \d+, column \d+ \(expected ',' or "
        r"'\]', but got '<stream end>'\); allowed: a YAML stack file",
        one_line(info),
    )


def test_render_refuses_a_tab_with_the_config_error_exit(tmp_path: Path) -> None:
    """The render's exit for a stack mistake (2, `render: invalid stack config: <the one line>`), not a
    kit failure."""
    broken, line = _with_tab(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "tools.render", "prod", "--stack-file", str(broken), "--out", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"render: invalid stack config: {broken}: '\\t' on line {line}, column 1 is a TAB character; allowed: spaces "
        "for indentation and separation (YAML takes no tabs there)"
    )
    assert not (tmp_path / "out").exists()
