"""Fixtures for model_sync tests: real S3 server processes (tests/support/s3_servers.py), and a
private model-sync cache directory per test (model_sync/push/skip_cache.py) so no test reads another's
(or the developer's) cached hashes or pinned manifests."""

import pytest

from tests.support.s3_servers import aws_env, moto_s3, rclone_s3, s3_bucket  # noqa: F401


@pytest.fixture(autouse=True)
def _model_sync_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_SYNC_CACHE_DIR", str(tmp_path_factory.mktemp("model-sync-cache")))
    monkeypatch.delenv("MODEL_SYNC_CACHE", raising=False)
