"""parse(): the shipped stacks parse, in both of Pulumi's spellings (typed YAML and strings), before any resource exists."""

from __future__ import annotations

import pytest

from components.stack_config import parser
from tests.components.stack_config._helpers import K, fails, raw
from tests.pulumi_kit import stack_config as stack_file


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_shipped_stacks_parse(stack: str) -> None:
    cfg = parser.parse(stack_file(stack), stack)
    assert cfg.environment == stack
    assert cfg.stack == stack
    assert cfg.gpu_node_groups
    assert cfg.triton_deployments


def test_string_encoded_values_parse_like_typed_ones() -> None:
    """Pulumi hands programs strings (JSON for arrays); both forms give the same model."""
    from tests.pulumi_kit import to_pulumi_strings

    typed = parser.parse(stack_file("prod"), "prod")
    stringly = parser.parse(to_pulumi_strings(stack_file("prod")), "prod")
    assert typed == stringly


def test_region_shape() -> None:
    cfg = raw("dev")
    cfg["aws:region"] = "moon-1"
    fails(cfg, r"aws:region: 'moon-1' is not valid; allowed: an AWS region")


def test_structured_maps_are_edited_with_config_set_path() -> None:
    """`pulumi config set --path triton-platform:tritonDeployments.default.maxReplicas 8` needs
    the map to be YAML of the stack file (a string cannot be addressed by path); Pulumi then
    hands the program the whole map as JSON, with the number set as a number."""
    import json

    from tests.pulumi_kit import to_pulumi_strings

    for stack in ("dev", "staging", "prod"):
        cfg = stack_file(stack)
        assert isinstance(cfg[K + "nodeGroups"], dict)
        assert isinstance(cfg[K + "tritonDeployments"], dict)
    cfg = stack_file("staging")
    cfg[K + "tritonDeployments"]["default"]["maxReplicas"] = 3  # what `config set --path ... 3` writes
    passed = to_pulumi_strings(cfg)
    assert json.loads(passed[K + "tritonDeployments"])["default"]["maxReplicas"] == 3
    assert next(t for t in parser.parse(passed, "staging").triton_deployments if t.name == "default").max_replicas == 3
    cfg[K + "tritonDeployments"]["default"]["maxReplicas"] = "3"  # `--type string`, or a quoted value
    assert next(t for t in parser.parse(cfg, "staging").triton_deployments if t.name == "default").max_replicas == 3
