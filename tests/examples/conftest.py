"""The model_sync tests' fixtures: the local S3 server and a private model-sync cache per test."""

from tests.model_sync.conftest import _model_sync_cache  # noqa: F401
from tests.support.s3_servers import aws_env, moto_s3  # noqa: F401
