"""Regenerate (or check) docs/stack-config.md, the stack file's reference, from the stack config's
declarations (components/stack_config/declarations.py: KEYS, NODE_GROUP_FIELDS, TRITON_FIELDS).

`python -m tools.stack_config_doc` rewrites the page; `--check` exits 1 when it is stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tools.generated import write_or_check

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "stack-config.md"

INTRO = """\
# Stack configuration reference

<!-- Generated from components/stack_config/declarations.py by `make stack-config-doc`: edit the
declarations, not this page. A test fails when the two drift. -->

Every key a stack file (`stacks/Pulumi.<stack>.yaml`) may set, with its default and what it allows.
The program parses the whole file before it declares any resource (`components/stack_config/`), and
anything else is one line naming the key, what was wrong and what is allowed: an unknown key, a key in a
namespace neither `{project}` nor a provider's ({providers}), a value out of bounds. The rules that
tie keys together (prod needs three zones, a GPU group must hold its deployments, ...) are listed in
the README, under "The real cloud path".

## Keys (`{project}:<key>`)

| key | type | default | what it is |
|---|---|---|---|
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    return f"`{json.dumps(value)}`" if not isinstance(value, str) else f"`{value}`"


def _field_rows(fields: tuple[Any, ...]) -> list[str]:
    rows = []
    for f in fields:
        default = "required" if f.required else ("none" if f.default is None else _value(f.default))
        rows.append(f"| `{f.name}` | {default} | {_cell(f.bounds)} | {_cell(f.doc)} |")
    return rows


def render() -> str:
    sys.path.insert(0, str(ROOT))
    from components.stack_config.declarations import KEYS, NODE_GROUP_FIELDS, TRITON_FIELDS
    from components.stack_config.vocabulary import PROJECT, PROVIDER_NAMESPACES

    lines = [INTRO.format(project=PROJECT, providers=", ".join(f"`{n}:`" for n in PROVIDER_NAMESPACES)).rstrip("\n")]
    for k in KEYS:
        default = "required" if k.required else _value(k.default)
        lines.append(f"| `{k.name}` | {k.type}{' (secret)' if k.secret else ''} | {default} | {_cell(k.description)} |")
    for kind, fields in NODE_GROUP_FIELDS.items():
        lines += ["", f"## `nodeGroups.<group>` of kind `{kind}`", "", "| field | default | allowed | what it is |",
                  "|---|---|---|---|", *_field_rows(fields)]  # fmt: skip
    lines += ["", "## `tritonDeployments.<deployment>`", "", "| field | default | allowed | what it is |",
              "|---|---|---|---|", *_field_rows(TRITON_FIELDS)]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale; write nothing")
    args = parser.parse_args(argv)
    return write_or_check(PAGE, render(), check=args.check, regenerate="make stack-config-doc")


if __name__ == "__main__":
    raise SystemExit(main())
