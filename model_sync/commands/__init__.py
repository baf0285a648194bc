"""One module per `model-sync` command; see model_sync/cli.py."""
