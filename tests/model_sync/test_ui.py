"""model_sync/ui.py: operation lines on stdout (none with --quiet or --output json, whose commands
build a quiet Console), warnings and errors as one line on stderr, progress bars on stderr only
when asked (a TTY), and confirmation that refuses without a terminal."""

from __future__ import annotations

import json

import pytest

from model_sync import errors, ui


def test_lines_go_to_stdout_and_warnings_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    console = ui.Console(progress=False)
    console.line("upload: m/1/model.pt to s3://b/repository/m/1/model.pt")
    console.warn("s3://b ignores If-None-Match")
    out, err = capsys.readouterr()
    assert out == "upload: m/1/model.pt to s3://b/repository/m/1/model.pt\n"
    assert err == "model-sync: warning: s3://b ignores If-None-Match\n"


def test_quiet_prints_no_lines_but_still_warns(capsys: pytest.CaptureFixture[str]) -> None:
    """--quiet and --output json: stdout carries nothing but what the command prints itself (the JSON document)."""
    console = ui.Console(quiet=True)
    assert console.show_progress is False
    console.line("pushed: m v1")
    print(json.dumps({"models": []}))
    console.warn("careful")
    out, err = capsys.readouterr()
    assert json.loads(out) == {"models": []}
    assert err == "model-sync: warning: careful\n"


def test_progress_defaults_to_off_without_a_terminal_and_quiet_wins(capsys: pytest.CaptureFixture[str]) -> None:
    assert ui.Console().show_progress is False  # pytest's captured stderr is no TTY
    assert ui.Console(quiet=True).show_progress is False
    assert ui.Console(quiet=True, progress=True).show_progress is True  # an explicit choice is kept as given
    with ui.Console(progress=False).progress() as progress:
        task = progress.task("m", 100)
        progress.advance(task, 50)
    assert task is None
    assert capsys.readouterr() == ("", "")


def test_progress_draws_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    console = ui.Console(progress=True)
    with console.progress() as progress:
        task = progress.task("resnet v3", 2048)
        assert task is not None
        progress.advance(task, 2048)
    out, err = capsys.readouterr()
    assert out == ""
    assert "resnet v3" in err
    assert "2.0/2.0 kB" in err
    assert console._progress is None  # the bar is gone after the block


def test_lines_stay_on_stdout_while_a_progress_bar_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    console = ui.Console(progress=True)
    with console.progress() as progress:
        progress.task("m", 10)
        console.line("upload: a to s3://b/a")
    out, _ = capsys.readouterr()
    assert "upload: a to s3://b/a" in out


def test_error_is_one_line_with_the_program_name(capsys: pytest.CaptureFixture[str]) -> None:
    ui.error("bucket: 'x' does not exist; allowed: an existing bucket")
    assert capsys.readouterr() == ("", "model-sync: bucket: 'x' does not exist; allowed: an existing bucket\n")


def test_confirm_without_a_terminal_refuses_naming_yes() -> None:
    with pytest.raises(errors.SyncError) as e:
        ui.confirm("Prune 3 versions?", "prune")
    assert (e.value.code, str(e.value)) == (
        errors.USAGE,
        "prune: needs confirmation and stdin is not a terminal; allowed: --yes (CI: after the environment's approval)",
    )
