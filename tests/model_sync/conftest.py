"""Fixtures for model_sync tests: real S3 server processes (tests/support/s3_servers.py)."""

from tests.support.s3_servers import aws_env, moto_s3, rclone_s3, s3_bucket  # noqa: F401
