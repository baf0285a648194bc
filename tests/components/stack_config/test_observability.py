"""The observability keys: the Slack webhook, a secret never echoed in an error."""

from __future__ import annotations

from tests.components.stack_config._helpers import K, fails, raw


def test_slack_webhook_value_never_echoed() -> None:
    cfg = raw("dev")
    cfg[K + "alertmanagerSlackWebhookUrl"] = "http://example.com/secret-token"
    err = fails(cfg, r"alertmanagerSlackWebhookUrl: '<secret>' is not a Slack webhook URL")
    assert "secret-token" not in str(err)
