"""model_sync/errors.py: the documented exit codes (docs/model-sync.md agrees), the SyncError that
carries them and its one-line messages, as `model-sync` prints them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from model_sync import errors
from model_sync.agent.exceptions import PassError, VersionRejected
from model_sync.cli import main
from model_sync.errors import Abandoned

DOC = Path(__file__).resolve().parents[2] / "docs" / "model-sync.md"


def test_exit_codes_are_the_documented_numbers() -> None:
    assert (
        errors.OK,
        errors.UNEXPECTED,
        errors.USAGE,
        errors.NOT_FOUND,
        errors.REFUSED,
        errors.S3,
        errors.CHECK_FAILED,
        errors.INCOMPATIBLE,
        errors.INTERRUPTED,
    ) == tuple(range(9))
    assert sorted(errors.EXIT_CODES) == list(range(9))


def test_docs_table_lists_exactly_these_exit_codes() -> None:
    text = DOC.read_text()
    section = text[text.index("## Exit codes (`model_sync/errors.py`)") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|$", section, re.M)
    assert [int(code) for code, _ in rows] == sorted(errors.EXIT_CODES)
    meaning = {int(code): text.lower() for code, text in rows}
    # each code's name in EXIT_CODES (the --help epilog) shares a word with its documented meaning
    for code, name in errors.EXIT_CODES.items():
        assert set(re.findall(r"[a-z0-9]+", name)) & set(re.findall(r"[a-z0-9]+", meaning[code])), (
            code,
            name,
            meaning[code],
        )
    assert "Every failure is one line on stderr: `model-sync: <what>: <bad value>; <what is allowed>`." in section


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (errors.usage, errors.USAGE),
        (errors.not_found, errors.NOT_FOUND),
        (errors.refused, errors.REFUSED),
        (errors.s3, errors.S3),
        (errors.incompatible, errors.INCOMPATIBLE),
    ],
)
def test_each_helper_carries_its_exit_code(make, code: int) -> None:
    err = make("thing: 'x'; allowed: y")
    assert isinstance(err, errors.SyncError)
    assert (err.code, str(err), err.message_kind, err.run_wide, err.s3_kind) == (
        code,
        "thing: 'x'; allowed: y",
        "",
        False,
        None,
    )


def test_s3_errors_name_what_failed() -> None:
    assert errors.s3("S3 endpoint: x unreachable", kind="unreachable").message_kind == "unreachable"


def test_a_message_is_always_one_line() -> None:
    err = errors.SyncError(errors.REFUSED, "pin: m\n   moved\tfrom 1\n\nto 2;  allowed: re-run")
    assert str(err) == "pin: m moved from 1 to 2; allowed: re-run"


@pytest.mark.parametrize("code", [errors.OK, 9, -1, "2"])
def test_ok_and_undocumented_codes_are_not_errors(code: object) -> None:
    with pytest.raises(ValueError, match=r"^exit code: .*; allowed: one of \[1, 2, 3, 4, 5, 6, 7, 8\]$"):
        errors.SyncError(code, "x")  # type: ignore[arg-type]


def test_one_line_folds_whitespace_and_truncates() -> None:
    assert errors.one_line("a\n b\t\tc ") == "a b c"
    assert errors.one_line("x" * 400) == "x" * 297 + "..."
    assert len(errors.one_line("word " * 100, limit=50)) == 50
    assert errors.one_line("short", limit=5) == "short"


def test_the_cli_prints_one_line_and_exits_with_the_errors_code(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A SyncError raised by a command (here: a model directory that does not exist) reaches the
    user as `model-sync: <message>` on one stderr line and its code."""
    missing = tmp_path / "nope"
    code = main(
        [
            "push",
            str(missing),
            "--env",
            "x",
            "--bucket",
            "s3://models-x",
            "--endpoint-url",
            "http://127.0.0.1:9",
            "--region",
            "us-east-1",
        ]
    )
    out, err = capsys.readouterr()
    assert code == errors.USAGE
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"model-sync: model directory: {str(missing)!r} is not a directory; allowed: ")


def test_usage_errors_from_argparse_are_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["push", "--no-such-flag"]) == errors.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("model-sync: ")


def test_describe_folds_a_multi_line_reason_and_names_the_type() -> None:
    err = VersionRejected("load failed:\n  Traceback (most recent call last):\n\tRuntimeError: boom\n")
    assert errors.describe(err) == "VersionRejected: load failed: Traceback (most recent call last): RuntimeError: boom"


def test_describe_caps_a_long_message_at_300_characters() -> None:
    text = errors.describe(PassError("x" * 400))
    assert text == "PassError: " + "x" * 297 + "..."
    assert "\n" not in text


def test_describe_of_an_exception_without_a_message() -> None:
    assert errors.describe(Abandoned()) == "Abandoned: "
    assert errors.describe(OSError(28, "No space left on device")) == "OSError: [Errno 28] No space left on device"
