"""The one place model_sync builds botocore sessions and S3 clients.

Credentials come from botocore's default chain only (environment, profile, SSO, web identity,
Pod Identity, IMDS). Retries are botocore's own: standard mode unless AWS_RETRY_MODE or the
profile's `retry_mode` says otherwise (standard or adaptive), with AWS_MAX_ATTEMPTS / the profile's
`max_attempts` when set, else the purpose's default. Everything else botocore does for S3 stays on:
region redirects, S3 Express sessions, access-point ARNs, proxies, TLS verification.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from model_sync import __version__, errors
from model_sync.s3.endpoint import Endpoint

RETRY_MODES = ("standard", "adaptive")


@dataclass(frozen=True)
class Purpose:
    """How a client behaves for one kind of caller."""

    name: str
    attempts: int  # default tries per request (AWS_MAX_ATTEMPTS overrides)
    connect_timeout: float
    read_timeout: float
    max_pool: int

    def pooled(self, connections: int) -> Purpose:
        """The same purpose with room for `connections` concurrent requests."""
        return dataclasses.replace(self, max_pool=max(self.max_pool, connections))


# The CLI waits a little longer; the agent's own pass loop backs off between passes, so a request
# is tried twice before the pass reports S3 unavailable and keeps serving what is in place.
CLI = Purpose("cli", attempts=3, connect_timeout=5, read_timeout=60, max_pool=64)
AGENT = Purpose("agent", attempts=2, connect_timeout=3, read_timeout=30, max_pool=32)


def new_session(region: str | None = None) -> Any:
    """A botocore session (the chain boto3 uses, without importing boto3). Timestamps in responses
    stay strings: model_sync reads only LastModified (s3.modified_of), and botocore's dateutil
    parsing was a third of a no-op push's listing time (cProfile)."""
    import botocore.session

    session = botocore.session.get_session()
    share_data_loader(session)
    if region:
        session.set_config_variable("region", region)
    # ref: https://github.com/boto/botocore/blob/develop/botocore/parsers.py (ResponseParserFactory.set_parser_defaults)
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    return session


def share_data_loader(session: Any) -> Any:
    """Gives `session` the process's one botocore data loader for its data path, and returns it.
    botocore parses the S3 service model, endpoint rules and partitions once per loader, and a
    new session otherwise makes a new loader: ~0.15 s of CPU per session against ~0.02 s shared
    (measured). The loaded models are read-only to botocore, as between two clients of one session.
    A session whose profile cannot be read keeps its own loader: botocore raises that error where
    it always did (resolve_region, create_client)."""
    import botocore.exceptions

    try:
        data_path = session.get_config_variable("data_path")
    except botocore.exceptions.BotoCoreError:
        return session
    session.register_component("data_loader", _data_loader(data_path))
    return session


@functools.cache
def _data_loader(data_path: str | None) -> Any:
    from botocore.loaders import create_loader

    return create_loader(data_path)


def aws_hosted(env: Endpoint) -> bool:
    """True for AWS S3 itself: no custom endpoint, or one under amazonaws.com(.cn) (a VPC interface
    endpoint, a FIPS URL). Such endpoints verify checksums, have an STS identity and need a real
    region; S3-compatible servers do not."""
    if env.endpoint_url is None:
        return True
    host = (urllib.parse.urlsplit(env.endpoint_url).hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def resolve_region(env: Endpoint, session: Callable[[], Any]) -> str:
    """The request region: the environment's, else AWS_REGION / AWS_DEFAULT_REGION, else the
    profile's, else us-east-1 for a custom S3-compatible endpoint. AWS S3 without one: exit 2."""
    region = env.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        region = _profile_value(session(), "region")
    if not region and aws_hosted(env):
        raise errors.usage(
            f"region: none configured for environment {env.name}; allowed: `region` in model-sync.yaml, "
            "--region, AWS_REGION or a profile's region"
        )
    return str(region or "us-east-1")


def retries(session: Any, purpose: Purpose) -> dict[str, Any]:
    """botocore's `retries` config: mode and total attempts, from the environment or profile."""
    mode = os.environ.get("AWS_RETRY_MODE") or _profile_value(session, "retry_mode") or "standard"
    if mode not in RETRY_MODES:
        raise errors.usage(f"AWS_RETRY_MODE: {mode!r}; allowed: one of {', '.join(RETRY_MODES)}")
    raw = os.environ.get("AWS_MAX_ATTEMPTS") or _profile_value(session, "max_attempts") or purpose.attempts
    try:
        attempts = int(raw)
    except (TypeError, ValueError):
        attempts = 0
    if not 1 <= attempts <= 20:
        raise errors.usage(
            f"AWS_MAX_ATTEMPTS: {raw!r}; allowed: an integer 1..20 (tries per request, the first included)"
        )
    return {"mode": mode, "total_max_attempts": attempts}


def _profile_value(session: Any, name: str) -> Any:
    import botocore.exceptions

    try:
        return session.get_scoped_config().get(name)
    except botocore.exceptions.ProfileNotFound as e:
        raise errors.usage(f"AWS profile: {e}; allowed: a profile in ~/.aws/config, or unset AWS_PROFILE") from None


def create_client(
    session: Any, region: str, endpoint_url: str | None, purpose: Purpose = CLI, service: str = "s3"
) -> Any:
    """An S3 (or STS) client of `session` for `purpose`. Against a custom endpoint: path-style
    addressing, checksums only where an operation requires one or model_sync sets one (some
    S3-compatible servers reject the aws-chunked trailers of the default)."""
    from botocore.config import Config

    config = Config(
        retries=retries(session, purpose),  # type: ignore[arg-type]
        connect_timeout=purpose.connect_timeout,
        read_timeout=purpose.read_timeout,
        max_pool_connections=purpose.max_pool,
        user_agent_extra=f"model-sync/{__version__}",
        request_checksum_calculation="when_required" if endpoint_url else "when_supported",
        response_checksum_validation="when_required" if endpoint_url else "when_supported",
        s3={"addressing_style": "path"} if endpoint_url else None,
        # the endpoint is env.endpoint_url (environments.resolve reads AWS_ENDPOINT_URL_S3)
        ignore_configured_endpoint_urls=True,
    )
    return session.create_client(
        service, region_name=region, endpoint_url=endpoint_url if service == "s3" else None, config=config
    )
