"""Files the repository generates from its own declarations (Pulumi.yaml's config section,
docs/stack-config.md): written, or checked without writing (`--check`, exit 1 when stale)."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(path: Path, text: str, *, check: bool, regenerate: str) -> int:
    """Write `text` to `path`, or with `check` leave it and return 1, naming `regenerate` (the command
    that rewrites it), when the file differs."""
    if check:
        if not path.exists() or path.read_text() != text:
            print(f"{path.name} is stale: run `{regenerate}`", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0
