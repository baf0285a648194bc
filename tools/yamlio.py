"""Reading YAML through libyaml: PyYAML's C parser under its safe constructor.

The same Python objects as `yaml.safe_load`, built by libyaml's parser instead of PyYAML's
pure-Python scanner, which was the largest single cost of `make test` outside its real servers: 58 s
of CPU in one profile of the manifest, component, tool and workflow tests (the stack files read
for each program run, the charts' default values, every workflow and rendered manifest). The pinned
PyYAML wheel carries libyaml (`yaml.__with_libyaml__`; tests/tools/test_yamlio.py holds it).

Writing stays PyYAML's own emitter wherever the bytes are kept (tools/render.py): libyaml folds
long double-quoted strings at other places, so a render would change text for the same objects.
"""

from __future__ import annotations

from typing import Any

import yaml

Loader = yaml.CSafeLoader


def load(text: str | bytes) -> Any:
    """One YAML document, as `yaml.safe_load` reads it."""
    return yaml.load(text, Loader=Loader)  # noqa: S506 - libyaml's safe loader
