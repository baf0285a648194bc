"""Loading a stack file: a name given twice in it is refused, as Pulumi's own stack-file loader refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pulumi_kit import ROOT
from tests.pulumi_kit import stack_config as stack_file


def test_a_name_given_twice_in_a_structured_stack_file_is_refused(tmp_path: Path) -> None:
    """Structured maps are YAML of the stack file itself: Pulumi's loader refuses a key given
    twice there, and so does the kit the renders and tests read stack files with."""
    from tests.pulumi_kit import KitError

    text = (ROOT / "stacks" / "Pulumi.staging.yaml").read_text()
    anchor = "  triton-platform:nodeGroups:\n"
    assert anchor in text
    broken = tmp_path / "Pulumi.staging.yaml"
    broken.write_text(
        text.replace(
            anchor,
            anchor + "    gpu-l4:\n      kind: gpu\n      instanceTypes: [g6.2xlarge]\n"
            "      minSize: 0\n      desiredSize: 0\n      maxSize: 4\n",
            1,
        )
    )
    with pytest.raises(KitError, match=r"Pulumi.staging.yaml: 'gpu-l4' appears twice \(the second time on line \d+\)"):
        stack_file("staging", broken)
