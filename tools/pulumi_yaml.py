"""Regenerate (or check) Pulumi.yaml's `config:` section from the stack config's declarations.

`python -m tools.pulumi_yaml` rewrites Pulumi.yaml; `--check` exits 1 when it is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from tools.generated import write_or_check

ROOT = Path(__file__).resolve().parents[1]
HEADER = """\
# Generated config section: edit components/stack_config/declarations.py (KEYS), then `make pulumi-yaml`.
# Pulumi's config schema has no object type, so the two name-keyed collections
# (nodeGroups, tritonDeployments: structured YAML in the stack files, edited with
# `pulumi config set --path`) are not declared here; the program validates them strictly.
"""


def render() -> str:
    sys.path.insert(0, str(ROOT))
    from components.stack_config.declarations import pulumi_yaml_config
    from components.stack_config.vocabulary import PROJECT

    project = {
        "name": PROJECT,
        "description": (
            "Production NVIDIA Triton inference platform on AWS (EKS + S3 model repository), one stack per environment."
        ),
        "runtime": {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}},
        "stackConfigDir": "stacks",
    }
    body = yaml.safe_dump(project, sort_keys=False)
    config = yaml.safe_dump({"config": pulumi_yaml_config()}, sort_keys=False, width=120)
    return body + HEADER + config


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    return write_or_check(ROOT / "Pulumi.yaml", render(), check=args.check, regenerate="make pulumi-yaml")


if __name__ == "__main__":
    raise SystemExit(main())
