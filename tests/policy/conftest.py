"""The policy pack's tests run in `.venv-policy` (`make policy-test`): pulumi-policy pins
protobuf 5.29, which the main venv (tritonclient, protobuf 6) cannot install. In the main
venv this folder is not collected; `make test` runs `policy-test` separately."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("pulumi_policy") else ["test_*.py"]
