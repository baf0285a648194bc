"""model_sync/s3/clients.py: the botocore sessions and clients every command and the agent use,
configured from the environment and real AWS config files (tmp_path), and checked by what a real
S3 server process saw (moto_server's request log, the objects it stored) or how many connections
a closed endpoint was offered (tests/support/relays.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

import botocore.exceptions
import pytest

from model_sync import __version__, errors
from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.s3 import clients
from tests.support.relays import DroppingListener
from tests.support.s3_servers import REGION, S3Server


@pytest.fixture(autouse=True)
def _credentials(aws_env: dict[str, str]) -> None:
    """The test key through botocore's default chain, no config files, region us-east-1."""


def env_for(endpoint: str | None, region: str | None = None, name: str = "dev") -> Environment:
    return Environment(name, layout.Root("models"), endpoint_url=endpoint, region=region)


def aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, profile: str | None = None) -> None:
    path = tmp_path / "aws-config"
    path.write_text(body)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(path))
    if profile:
        monkeypatch.setenv("AWS_PROFILE", profile)


def test_a_custom_endpoint_client_talks_path_style_without_default_checksums(moto_s3: S3Server, s3_bucket: str) -> None:
    client = clients.create_client(clients.new_session(REGION), REGION, moto_s3.endpoint)
    before = len(moto_s3.requests())
    client.put_object(Bucket=s3_bucket, Key="repository/m/config.pbtxt", Body=b"pin")
    listed = client.list_objects_v2(Bucket=s3_bucket)
    assert moto_s3.requests()[before:][0].startswith(
        f"PUT /{s3_bucket}/repository/m/config.pbtxt "
    )  # path-style, not <bucket>.host
    head = moto_s3.client().head_object(Bucket=s3_bucket, Key="repository/m/config.pbtxt", ChecksumMode="ENABLED")
    assert not [
        k for k in head if k.startswith("Checksum")
    ]  # botocore's default CRC32 (aws-chunked trailer) was not sent
    assert isinstance(listed["Contents"][0]["LastModified"], str)  # timestamps left unparsed (new_session)
    assert moto_s3.get(s3_bucket, "repository/m/config.pbtxt") == b"pin"


@pytest.mark.parametrize(
    ("purpose", "attempts", "timeouts", "pool"), [(clients.CLI, 3, (5, 60), 64), (clients.AGENT, 2, (3, 30), 32)]
)
def test_each_purpose_has_its_tries_timeouts_and_pool(
    purpose: clients.Purpose, attempts: int, timeouts: tuple[int, int], pool: int
) -> None:
    config = clients.create_client(clients.new_session(REGION), REGION, "http://127.0.0.1:9", purpose).meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": attempts}
    assert (config.connect_timeout, config.read_timeout, config.max_pool_connections) == (*timeouts, pool)
    assert config.user_agent_extra == f"model-sync/{__version__}"


def test_the_agent_tries_a_request_twice_by_default() -> None:
    """Counted where the connections arrive (one per try); the CLI's 3 tries cost up to 3 s of
    botocore's backoff, so only the agent's 2 are counted here (AWS_MAX_ATTEMPTS: test_s3.py)."""
    dropping = DroppingListener()
    try:
        client = clients.create_client(
            clients.new_session(REGION), REGION, f"http://127.0.0.1:{dropping.port}", clients.AGENT
        )
        with pytest.raises(botocore.exceptions.ConnectionClosedError):
            client.get_object(Bucket="models", Key="k")
        assert dropping.accepted == 2
    finally:
        dropping.close()


def test_pooled_widens_the_pool_but_never_narrows_it() -> None:
    assert clients.CLI.pooled(200).max_pool == 200
    assert clients.CLI.pooled(8) == clients.CLI
    assert clients.AGENT.pooled(48).attempts == clients.AGENT.attempts
    client = clients.create_client(clients.new_session(REGION), REGION, "http://127.0.0.1:9", clients.AGENT.pooled(100))
    assert client.meta.config.max_pool_connections == 100


def test_retry_settings_come_from_the_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    aws_config(
        tmp_path,
        monkeypatch,
        "[profile ci]\nretry_mode = adaptive\nmax_attempts = 7\nregion = eu-west-2\n",
        profile="ci",
    )
    session = clients.new_session()
    assert clients.retries(session, clients.CLI) == {"mode": "adaptive", "total_max_attempts": 7}
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "4")  # the environment wins over the profile
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    assert clients.retries(session, clients.CLI) == {"mode": "standard", "total_max_attempts": 4}


def test_bad_retry_settings_in_the_profile_are_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    aws_config(
        tmp_path, monkeypatch, "[profile ci]\nretry_mode = legacy\n[profile many]\nmax_attempts = 21\n", profile="ci"
    )
    with pytest.raises(errors.SyncError) as e:
        clients.retries(clients.new_session(), clients.CLI)
    assert (e.value.code, str(e.value)) == (
        errors.USAGE,
        "AWS_RETRY_MODE: 'legacy'; allowed: one of standard, adaptive",
    )
    monkeypatch.setenv("AWS_PROFILE", "many")
    with pytest.raises(errors.SyncError, match=r"^AWS_MAX_ATTEMPTS: '21'; allowed: an integer 1\.\.20"):
        clients.retries(clients.new_session(), clients.CLI)


def test_an_unknown_profile_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    aws_config(tmp_path, monkeypatch, "[profile ci]\nregion = eu-west-2\n", profile="nope")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(errors.SyncError) as e:
        clients.resolve_region(env_for(None), clients.new_session)
    assert e.value.code == errors.USAGE
    assert str(e.value) == (
        "AWS profile: The config profile (nope) could not be found; allowed: a profile in ~/.aws/config, or "
        "unset AWS_PROFILE"
    )


def test_region_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    aws_config(tmp_path, monkeypatch, "[profile ci]\nregion = eu-west-2\n", profile="ci")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "sa-east-1")
    assert clients.resolve_region(env_for(None, "eu-north-1"), clients.new_session) == "eu-north-1"
    assert clients.resolve_region(env_for(None), clients.new_session) == "ap-south-1"
    monkeypatch.delenv("AWS_REGION")
    assert clients.resolve_region(env_for(None), clients.new_session) == "sa-east-1"
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert clients.resolve_region(env_for(None), clients.new_session) == "eu-west-2"
    monkeypatch.delenv("AWS_PROFILE")
    assert (
        clients.resolve_region(env_for("http://127.0.0.1:9000"), clients.new_session) == "us-east-1"
    )  # an S3-compatible server
    with pytest.raises(errors.SyncError) as e:
        clients.resolve_region(env_for(None, name="prod"), clients.new_session)
    assert (e.value.code, str(e.value)) == (
        errors.USAGE,
        "region: none configured for environment prod; allowed: `region` in model-sync.yaml, --region, "
        "AWS_REGION or a profile's region",
    )
    with pytest.raises(errors.SyncError, match=r"^region: none configured for environment dev;"):
        clients.resolve_region(env_for("https://bucket.vpce-1a2b.s3.eu-west-1.vpce.amazonaws.com"), clients.new_session)


def test_new_session_sets_the_region() -> None:
    assert clients.new_session("eu-central-1").get_config_variable("region") == "eu-central-1"
    assert clients.new_session().get_config_variable("region") == REGION  # the chain's (aws_env)


def test_configured_endpoint_urls_are_ignored_by_the_client(
    moto_s3: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """environments.resolve reads AWS_ENDPOINT_URL_S3 once; the client never reads it again."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    session = clients.new_session(REGION)
    key = f"k-{uuid.uuid4().hex}"
    clients.create_client(session, REGION, moto_s3.endpoint).put_object(Bucket=s3_bucket, Key=key, Body=b"x")
    assert moto_s3.keys(s3_bucket) == [key]
    assert clients.create_client(session, "eu-west-1", None).meta.endpoint_url == "https://s3.eu-west-1.amazonaws.com"


def test_an_sts_client_uses_the_regional_aws_endpoint_even_beside_a_custom_s3_endpoint() -> None:
    sts = clients.create_client(clients.new_session(), "eu-west-1", "http://127.0.0.1:9000", service="sts")
    assert sts.meta.service_model.service_name == "sts"
    assert sts.meta.endpoint_url == "https://sts.eu-west-1.amazonaws.com"
