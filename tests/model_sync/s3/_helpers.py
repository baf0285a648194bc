"""What the S3 layer's tests share: model_sync's own client for a real server, a separate client
that reads objects back, and moto's request log."""

from __future__ import annotations

import functools
from typing import Any

from model_sync.contract import layout
from model_sync.s3 import clients, transfer
from tests.support.s3_servers import REGION, S3Server

KEY = layout.version_file_key("m", 1, "model.pt")

PART = 5 * transfer.MB  # S3's (and moto's) smallest part but the last


@functools.cache
def session() -> Any:
    return clients.new_session(REGION)


def client_for(server: S3Server) -> Any:
    """model_sync's own client (model_sync.s3.clients), the one every transfer runs on."""
    return clients.create_client(session(), REGION, server.endpoint, clients.AGENT)


@functools.cache
def observer(server: S3Server) -> Any:
    """A separate boto3 client that stores and reads back objects (one per server: ~0.3 s each)."""
    return server.client()


def server_get(server: S3Server, bucket: str, key: str) -> bytes:
    return bytes(observer(server).get_object(Bucket=bucket, Key=key)["Body"].read())


def seen_since(server: S3Server, before: int) -> list[str]:
    """moto's request lines after `before`, as 'METHOD /path?query' without the protocol."""
    return [r.rsplit(" ", 1)[0] for r in server.requests()[before:]]
