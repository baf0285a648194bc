"""tools/yamlio.py: libyaml's parser reads the repository's YAML to the same objects as PyYAML's own
(what every test and tool that reads through it relies on), and the pinned PyYAML carries libyaml."""

from __future__ import annotations

from pathlib import Path

import yaml

from tools import yamlio

ROOT = Path(__file__).resolve().parents[2]


def test_the_pinned_pyyaml_carries_libyaml() -> None:
    assert yaml.__with_libyaml__
    assert yamlio.Loader is yaml.CSafeLoader


def test_every_yaml_file_of_the_repository_reads_as_pyyaml_reads_it() -> None:
    """Workflows, stack files, Pulumi.yaml, the examples, the linters' configs: one document each,
    equal to yaml.safe_load's."""
    files = [
        p
        for pattern in ("*.yaml", ".*.yaml", "*.yml", ".github/workflows/*.yml", "stacks/*.yaml", "examples/**/*.yaml")
        for p in sorted(ROOT.glob(pattern))
    ]
    assert len(files) >= 10, files
    for path in files:
        text = path.read_text()
        assert yamlio.load(text) == yaml.safe_load(text), path
