"""The agent's settings are the one source of its defaults and its command line: every flag is
declared once (settings.OPTIONS) with the environment variable that sets it, named in --help
and docs/agent.md; the CLI's defaults are AgentSettings' own; and the package's re-exported
names load lazily (building the CLI parser reads the settings without importing the rest of the
agent: the S3 layer, the records)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from model_sync import agent as ag
from model_sync.agent import settings as agent_settings
from model_sync.cli import build_parser
from model_sync.commands import agent as agent_cmd
from model_sync.contract import layout
from tests.model_sync.helpers import settings_on

ROOT = Path(__file__).resolve().parents[3]


def _parsed(tmp_path: Path, *flags: str) -> object:
    return build_parser().parse_args(["agent", *flags])


def test_cli_defaults_are_the_settings_defaults(tmp_path: Path) -> None:
    values = agent_cmd.options(_parsed(tmp_path, "--env", "prod", "--repository", str(tmp_path / "m")), {})
    d = agent_settings.defaults()
    by_setting = {o.setting: values[o.dest] for o in agent_settings.OPTIONS if o.setting in d}
    assert by_setting == {k: d[k] for k in by_setting}
    assert len(by_setting) >= 12
    assert d["ready_timeout"] == 300.0  # what the CLI and docs/agent.md have always said
    assert (values["deployment"], values["log_level"], values["once"], values["max_failures"]) == (
        "default",
        "INFO",
        False,
        5,
    )


# A valid value of each option through its environment variable, and what it reads as.
FROM_ENVIRONMENT = {
    "--env": ("staging", "staging"), "--config": ("/etc/m.yaml", Path("/etc/m.yaml")),
    "--bucket": ("s3://b/p", "s3://b/p"), "--endpoint-url": ("http://s3:9000", "http://s3:9000"),
    "--region": ("eu-west-1", "eu-west-1"), "--repository": ("/models", Path("/models")),
    "--staging-dir": ("/s", Path("/s")), "--once": ("true", True), "--interval": ("7.5", 7.5),
    "--triton-url": ("http://t:8000", "http://t:8000"), "--triton-header": ("a:1, b:2", ["a:1", "b:2"]),
    "--ready-timeout": ("9", 9.0), "--deployment": ("d2", "d2"), "--replica-id": ("r9", "r9"),
    "--model": ("m1,m2", ["m1", "m2"]), "--ready-file": ("/r", Path("/r")), "--heartbeat": ("11", 11.0),
    "--backoff-max": ("12", 12.0), "--full-resync": ("13", 13.0), "--keep-versions": ("4", 4),
    "--max-failures": ("3", 3), "--metrics-port": ("8003", 8003), "--metrics-address": ("127.0.0.1", "127.0.0.1"),
    "--log-level": ("DEBUG", "DEBUG"),
}  # fmt: skip


def test_every_flag_reads_the_environment_variable_its_help_names() -> None:
    """git-sync's shape for a sidecar: every flag from the environment, named in --help; the flag wins."""
    assert sorted(FROM_ENVIRONMENT) == sorted(o.flag for o in agent_settings.OPTIONS)
    environ = {o.variable: FROM_ENVIRONMENT[o.flag][0] for o in agent_settings.OPTIONS}
    values = agent_cmd.options(build_parser().parse_args(["agent"]), environ)
    assert {o.flag: values[o.dest] for o in agent_settings.OPTIONS} == {f: v for f, (_, v) in FROM_ENVIRONMENT.items()}
    flagged = agent_cmd.options(build_parser().parse_args(["agent", "--interval", "2", "--model", "x"]), environ)
    assert (flagged["interval"], flagged["model"]) == (2.0, ["x"])
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["agent"].format_help().split())  # type: ignore[union-attr]
    for o in agent_settings.OPTIONS:
        assert f"${o.variable})" in help_text, o.flag
    assert "$MODEL_SYNC_AGENT_INTERVAL" in help_text
    assert "$MODEL_SYNC_CONFIG" in help_text


def test_every_setting_but_the_bucket_root_and_env_name_has_one_flag() -> None:
    fields = {f.name for f in dataclasses.fields(agent_settings.AgentSettings)} - {"root", "env"}
    settings = [o.setting for o in agent_settings.OPTIONS if o.setting is not None]
    assert sorted(settings) == sorted(fields)


@pytest.mark.parametrize(
    ("environ", "flags", "message"),
    [
        ({"MODEL_SYNC_AGENT_INTERVAL": "soon"}, [],
         "$MODEL_SYNC_AGENT_INTERVAL: 'soon'; allowed: a number (--interval)"),
        ({"MODEL_SYNC_AGENT_ONCE": "maybe"}, [],
         "$MODEL_SYNC_AGENT_ONCE: 'maybe'; allowed: true or false (1/0, yes/no) (--once)"),
        ({"MODEL_SYNC_AGENT_LOG_LEVEL": "LOUD"}, [],
         "$MODEL_SYNC_AGENT_LOG_LEVEL: 'LOUD'; allowed: DEBUG, INFO, WARNING, ERROR (--log-level)"),
        ({}, ["--env", "x"], "--repository: missing; allowed: PATH, or $MODEL_SYNC_AGENT_REPOSITORY"),
    ],
)  # fmt: skip
def test_a_bad_variable_or_a_missing_option_is_one_usage_line(
    environ: dict[str, str], flags: list[str], message: str
) -> None:
    from model_sync import errors

    base = {"MODEL_SYNC_AGENT_ENV": "prod", "MODEL_SYNC_AGENT_REPOSITORY": "/m"} if not flags else {}
    with pytest.raises(errors.SyncError) as e:
        agent_cmd.options(build_parser().parse_args(["agent", *flags]), {**base, **environ})
    assert (e.value.code, str(e.value)) == (errors.USAGE, message)


def test_docs_list_every_flag_with_its_default_and_variable() -> None:
    """docs/agent.md's flag table is the declaration's: one row per option, its variable beside it."""
    text = (ROOT / "docs" / "agent.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(--[a-z-]+)[^|]*\|.*$", text, re.M)}
    for o in agent_settings.OPTIONS:
        assert o.flag in rows, o.flag
        assert f"`${o.variable}`" in rows[o.flag], rows[o.flag]


def test_defaults_list_only_fields_with_a_default() -> None:
    d = agent_settings.defaults()
    assert not {"root", "repository", "staging", "deployment", "replica"} & set(d)
    assert d["keep_versions"] == 2


@pytest.mark.parametrize("name", sorted(ag._EXPORTS))
def test_every_re_exported_name_resolves_to_its_module(name: str) -> None:
    module, attribute = ag._EXPORTS[name]
    assert getattr(ag, name) is getattr(__import__(f"model_sync.agent.{module}", fromlist=[attribute]), attribute)


def test_states_are_the_replica_status_states() -> None:
    from model_sync.records.codec import ReplicaState

    assert [ag.READY, ag.LOADING, ag.FAILED, ag.PLACED, ag.PENDING] == [
        ReplicaState[s] for s in ("READY", "LOADING", "FAILED", "PLACED", "PENDING")
    ]
    with pytest.raises(AttributeError, match=r"has no attribute 'settings_replace'"):
        _ = ag.settings_replace


def test_building_the_parser_loads_only_the_settings() -> None:
    code = (
        "import sys; from model_sync.cli import build_parser; build_parser()\n"
        "print(sorted(m for m in sys.modules if m.startswith('model_sync.agent.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True, timeout=60)
    assert out.stdout.strip() == "['model_sync.agent.exceptions', 'model_sync.agent.settings']", out.stderr


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"interval": 0}, r"^interval: 0; allowed: a number of seconds > 0$"),
        ({"interval": True}, r"^interval: True; allowed"),
        ({"ready_timeout": -1}, r"^ready_timeout: -1; allowed"),
        ({"heartbeat": 0.0}, r"^heartbeat: 0.0; allowed"),
        ({"backoff_max": "5"}, r"^backoff_max: '5'; allowed"),
        ({"keep_versions": -1}, r"^keep_versions: -1; allowed: an integer >= 0$"),
        ({"resync": 0}, r"^resync: 0; allowed: a number of seconds > 0$"),
        (
            {"triton_url": "127.0.0.1:8000"},
            r"^triton_url: '127.0.0.1:8000'; allowed: http\(s\)://host:port without a path$",
        ),
        ({"triton_url": "http://h:8000/v2"}, r"^triton_url: .*allowed"),
        ({"max_failures": 0}, r"^max_failures: 0; allowed: an integer >= 1$"),
        ({"metrics_port": 70000}, r"^metrics_port: 70000; allowed: a TCP port 1-65535, or none$"),
        ({"metrics_address": "pod"}, r"^metrics_address: 'pod'; allowed: an IP address"),
    ],
)
def test_settings_reject_bad_values(tmp_path: Path, overrides: dict[str, object], match: str) -> None:
    with pytest.raises(ag.AgentError, match=match):
        settings_on(tmp_path, **overrides)


def test_staging_inside_or_equal_or_containing_the_repository_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ag.AgentError, match=r"^staging: .*allowed: a directory outside the repository root"):
        settings_on(tmp_path, staging=tmp_path / "models" / ".staging")
    with pytest.raises(ag.AgentError, match=r"^staging: .*allowed: a directory outside the repository root"):
        settings_on(tmp_path, staging=tmp_path / "models")
    with pytest.raises(
        ag.AgentError, match=r"^staging: .*allowed: a directory that does not contain the repository root"
    ):
        settings_on(tmp_path, staging=tmp_path)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("deployment", "Bad_Name", r"^deployment: 'Bad_Name'"), ("replica", "", r"^replica: ''")],
)
def test_status_names_must_be_dns_names(tmp_path: Path, field: str, value: str, match: str) -> None:
    with pytest.raises(layout.LayoutError, match=match):
        settings_on(tmp_path, **{field: value})


def test_model_filter_names_are_validated(tmp_path: Path) -> None:
    with pytest.raises(layout.LayoutError, match=r"^model name: '\.\./x'"):
        settings_on(tmp_path, models=("../x",))


def test_default_staging_is_a_hidden_sibling(tmp_path: Path) -> None:
    assert ag.default_staging(tmp_path / "models") == tmp_path / ".models.staging"
    settings_on(tmp_path, staging=ag.default_staging(tmp_path / "models"))  # accepted


def test_default_replica_id_prefers_pod_name_and_is_dns_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "Triton-Default_7f9c.X")
    assert ag.default_replica_id() == "triton-default-7f9c.x"
    monkeypatch.delenv("POD_NAME")
    layout.status_key("default", ag.default_replica_id())  # hostname fallback is valid too
