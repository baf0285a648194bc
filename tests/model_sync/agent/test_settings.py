"""The agent's settings are the one source of its defaults: the CLI's option defaults are
AgentSettings' own, and the package's re-exported names load lazily (building the CLI parser
reads the settings without importing the rest of the agent: the S3 layer, the records)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from model_sync import agent as ag
from model_sync.agent import settings as agent_settings
from model_sync.cli import build_parser
from model_sync.contract import layout
from tests.model_sync.helpers import settings_on

ROOT = Path(__file__).resolve().parents[3]


def test_cli_defaults_are_the_settings_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MODEL_SYNC_AGENT_INTERVAL", raising=False)
    args = build_parser().parse_args(["agent", "--env", "prod", "--repository", str(tmp_path / "m")])
    d = agent_settings.defaults()
    options = {"interval": args.interval, "ready_timeout": args.ready_timeout, "heartbeat": args.heartbeat,
               "backoff_max": args.backoff_max, "resync": args.full_resync,
               "keep_versions": args.keep_versions}  # fmt: skip
    assert options == {k: d[k] for k in options}
    assert d["ready_timeout"] == 300.0  # what the CLI and docs/agent.md have always said


def test_interval_environment_variable_overrides_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_SYNC_AGENT_INTERVAL", "7.5")
    args = build_parser().parse_args(["agent", "--env", "prod", "--repository", str(tmp_path / "m")])
    assert args.interval == 7.5


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
