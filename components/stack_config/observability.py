"""The observability keys' own reader: the Slack webhook Alertmanager notifies, a secret never echoed."""

from __future__ import annotations

from typing import Any

from components.stack_config.errors import ConfigError
from components.stack_config.vocabulary import config_key


def read_slack_webhook(value: Any) -> str:
    """`alertmanagerSlackWebhookUrl`: a Slack incoming-webhook URL, or empty (alerts stay in Alertmanager)."""
    webhook = value or ""
    if webhook and not str(webhook).startswith("https://hooks.slack.com/"):
        raise ConfigError(
            config_key("alertmanagerSlackWebhookUrl"),
            "<secret>",
            "is not a Slack webhook URL",
            "https://hooks.slack.com/... or empty",
        )
    return str(webhook)
