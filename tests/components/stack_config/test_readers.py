"""The field readers, through parse(): booleans, the older string spelling of the YAML maps and a name given twice in it."""

from __future__ import annotations

import pytest
import yaml

from components.stack_config import parser
from components.stack_config.errors import ConfigError
from tests.components.stack_config._helpers import K, fails, raw
from tests.pulumi_kit import stack_config as stack_file


def test_node_groups_yaml_must_parse() -> None:
    cfg = stack_file("dev")
    cfg[K + "nodeGroups"] = "system: [unclosed"
    with pytest.raises(ConfigError, match=r"nodeGroups: '<yaml>' does not parse as YAML"):
        parser.parse(cfg, "dev")


def test_booleans_are_booleans() -> None:
    cfg = raw("dev")
    cfg[K + "monitoringEnabled"] = "yes"
    fails(cfg, r"monitoringEnabled: 'yes' is not a boolean; allowed: true or false")


def test_a_name_given_twice_in_the_yaml_maps_is_refused_not_kept_last() -> None:
    """in staging a second `gpu-l4:` entry (spot, minSize 0) silently replaced the
    on-demand one; YAML keeps the last copy, the stack model refuses it."""
    # The older spelling, a string holding the YAML mapping: the stack model refuses the copy.
    cfg = stack_file("staging")
    text = yaml.safe_dump(cfg[K + "nodeGroups"], sort_keys=False)
    cfg[K + "nodeGroups"] = text + (
        "gpu-l4:\n  kind: gpu\n  instanceTypes: [g6.2xlarge]\n  capacityType: SPOT\n"
        "  minSize: 0\n  desiredSize: 0\n  maxSize: 4\n"
    )
    line = len(text.splitlines()) + 1
    fails(
        cfg,
        rf"nodeGroups: 'gpu-l4' appears twice in the YAML \(the second time on line {line}\); YAML would keep only "
        r"the last; allowed: each name once",
    )
    cfg = stack_file("staging")
    text = yaml.safe_dump(cfg[K + "tritonDeployments"], sort_keys=False)
    cfg[K + "tritonDeployments"] = text.replace("maxReplicas:", "maxReplicas: 9\n  maxReplicas:", 1)
    fails(cfg, r"tritonDeployments: 'maxReplicas' appears twice in the YAML")
