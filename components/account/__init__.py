"""The account bootstrap project's configuration (`bootstrap_config`); its component is components/account_bootstrap.py."""
