"""Observation: what the serving replicas do with a version, read from what they report. Their replica
records (`replicas`), the `status` view, `verify` and its smoke inference (`smoke`). Whether a version may
be pushed or promoted at all is model_sync.admission's call."""
