"""The test kit itself: it records faithfully and refuses runs that would let a test
pass without checking anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.stack_config.errors import ConfigError
from tests.pulumi_kit import KitError, run_program

PROGRAMS = Path(__file__).parent / "fixtures" / "programs"


def test_records_types_names_parents_inputs_and_exports() -> None:
    run = run_program("dev", program=PROGRAMS / "well_formed.py")
    holder = run.one("triton-platform:test:Holder", "kit")
    bucket = run.one("aws:s3/bucket:Bucket", "kit-bucket")
    assert bucket.parent == holder.urn
    assert bucket.parent_type == "triton-platform:test:Holder"
    assert run.children_of(holder) == [bucket]
    assert run.exports == {"bucketArn": "arn:aws:s3:::kit-bucket-mock"}
    assert run.component_outputs[holder.urn] == {"bucketArn": "arn:aws:s3:::kit-bucket-mock"}


def test_empty_program_fails() -> None:
    with pytest.raises(KitError, match="recorded no resources"):
        run_program("dev", program=PROGRAMS / "empty.py")


def test_reading_an_unmocked_output_fails() -> None:
    with pytest.raises(KitError, match=r"kit-policy input policy <- aws:s3/bucket:Bucket.bucketRegionalDomainName"):
        run_program("dev", program=PROGRAMS / "reads_unmocked_output.py")


def test_duplicate_names_fail() -> None:
    with pytest.raises(KitError, match=r"registered twice: \['aws:s3/bucket:Bucket same-name'\]"):
        run_program("dev", program=PROGRAMS / "duplicate_names.py")


def test_broken_stack_file_fails_before_any_resource(tmp_path: Path) -> None:
    from tests.pulumi_kit import ROOT

    broken = tmp_path / "Pulumi.prod.yaml"
    text = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    broken.write_text(text.replace("availabilityZoneCount: 3", "availabilityZoneCount: 2"))
    with pytest.raises(ConfigError, match=r"triton-platform:availabilityZoneCount: 2 is below the prod minimum"):
        run_program("prod", stack_file=broken)


def test_encrypted_stack_values_render_with_a_stand_in(tmp_path: Path) -> None:
    """A stack that followed the README's `pulumi config set --secret ...` still renders."""
    from tests.pulumi_kit import ROOT

    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    secured = tmp_path / "Pulumi.dev.yaml"
    secured.write_text(
        text + "  triton-platform:alertmanagerSlackWebhookUrl:\n    secure: v1:bm90LWEtcmVhbC1jaXBoZXJ0ZXh0\n"
    )
    run = run_program("dev", stack_file=secured)
    assert run.resources
    assert "hooks.slack.com" not in json.dumps(run.exports)  # the stand-in never leaks into exports
    alertmanager = [r for r in run.resources if "hooks.slack.com/services/T000/B000/mock" in json.dumps(r.inputs)]
    assert alertmanager, "the secret stand-in reached no resource: the key is not wired"
