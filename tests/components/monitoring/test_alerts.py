"""The PrometheusRule `triton-alerts` as each stack records it: the alerts, their expressions and labels
per deployment, their waits, their runbook links. (Every alert on a real Prometheus: test_rules.py.)"""

from __future__ import annotations

import re

import pytest
import yaml

from components.monitoring.alerts import canary_stuck_rule, runbooks_url
from components.monitoring.args import MonitoredDeployment
from tests.components.monitoring._helpers import program_rules, recorded
from tests.conftest import STACKS, stack_run
from tests.pulumi_kit import ROOT, Run
from tests.test_docs import anchors, tracked

RUNBOOKS = ROOT / "docs" / "runbooks.md"


def test_rules_per_deployment_and_no_ready_replica_silent_at_zero(prod: Run) -> None:
    rules = recorded(prod, "PrometheusRule", "triton-alerts")["spec"]["groups"]
    alerts = [r["alert"] for g in rules for r in g["rules"]]
    for name in (
        "TritonQueueLatencyP99High",
        "TritonInferenceFailureRatioHigh",
        "TritonNoReadyReplica",
        "TritonModelLoadFailure",
        "GpuIdle",
        "GpuSaturated",
    ):
        assert name in alerts
    (no_ready,) = [r for g in rules for r in g["rules"] if r["alert"] == "TritonNoReadyReplica"]
    # Silent while the Deployment is scaled to 0 (dev's scale-to-zero), matched per deployment.
    available, wanted = no_ready["expr"].split(" and on (namespace, deployment) ")
    assert available.startswith("(kube_deployment_status_replicas_available{")
    assert available.endswith("} < 1)")
    assert wanted.startswith("(kube_deployment_spec_replicas{")
    assert wanted.endswith("} > 0)")
    assert 'namespace="triton"' in wanted
    p99 = [r for g in rules for r in g["rules"] if r["alert"] == "TritonQueueLatencyP99High"]
    assert sorted(r["labels"]["deployment"] for r in p99) == ["default", "large"]
    assert any("> 100000" in r["expr"] for r in p99)  # 5 x the default deployment's 20 ms target


def test_canary_stuck_alert_per_deployment_waits_its_deadline_plus_the_rate_window(prod: Run) -> None:
    """prod: `default` keeps the canary defaults (1 h), `large` sets deadlineSeconds 5400; the
    rule of each deployment selects its own pods and waits its deadline + the 5-minute window."""
    rules = recorded(prod, "PrometheusRule", "triton-alerts")["spec"]["groups"]
    stuck = {r["labels"]["deployment"]: r for g in rules for r in g["rules"] if r["alert"] == "TritonCanaryStuck"}
    assert sorted(stuck) == ["default", "large"]
    assert {d: r["for"] for d, r in stuck.items()} == {"default": "65m", "large": "95m"}
    for d, r in stuck.items():
        assert r["labels"] == {"severity": "warning", "deployment": d}
        assert r["expr"] == (
            "count by (namespace, model) (count by (namespace, model, version) "
            f'(rate(nv_inference_request_success{{namespace="triton",pod=~"triton-{d}-.*"}}[5m]) > 0)) > 1'
        )
        summary = r["annotations"]["summary"]
        assert "`model-sync status`" in summary
        assert "`model-sync canary --abort`" in summary
    assert "(the canary deadline, 90 minutes, plus the 5m rate window)" in stuck["large"]["annotations"]["summary"]


def test_an_odd_deadline_is_waited_in_seconds() -> None:
    rule = canary_stuck_rule('namespace="triton"', MonitoredDeployment("default", 1000, 3630))
    assert rule["for"] == "3930s"
    assert "for 3930 seconds (the canary deadline, 3630 seconds, plus" in rule["annotations"]["summary"]


def test_every_alert_links_its_runbook_section_on_github(any_stack: Run) -> None:
    """Operators read alerts in Slack and Alertmanager, where a repository path is no link: every rule
    of every stack carries an absolute `runbook_url` to docs/runbooks.md on GitHub, in the repository the
    stack file names, at the ref it deploys from (its first githubDeployRefs entry), and its anchor is a
    heading of that page."""
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{any_stack.stack}.yaml").read_text())["config"]
    repository = config["triton-platform:githubRepository"]
    branch = config["triton-platform:githubDeployRefs"][0].removeprefix("refs/heads/")
    page = f"https://github.com/{repository}/blob/{branch}/docs/runbooks.md"
    assert "docs/runbooks.md" in tracked()  # the page the URL names is this repository's
    headings = anchors(RUNBOOKS)
    rules = [r for g in program_rules(any_stack) for r in g["rules"]]
    assert len(rules) >= 9
    for rule in rules:
        url, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert url == page, rule["alert"]
        assert anchor in headings, f"{rule['alert']}: docs/runbooks.md has no heading for #{anchor}"


def test_the_runbook_page_has_one_section_per_alert_and_no_other() -> None:
    """A section for an alert that no stack has any more is a stale runbook; an alert without one is
    a dead link (the test above)."""
    alerts = {r["alert"] for stack in STACKS for g in program_rules(stack_run(stack)) for r in g["rules"]}
    sections = re.findall(r"^## (.+?)\s*$", RUNBOOKS.read_text(), flags=re.M)
    assert sorted(sections) == sorted(alerts)  # once each


@pytest.mark.parametrize(
    ("ref", "url"),
    [
        ("refs/heads/main", "https://github.com/o/r/blob/main/docs/runbooks.md"),
        ("refs/heads/release/1.2", "https://github.com/o/r/blob/release/1.2/docs/runbooks.md"),
        ("refs/tags/v3", "https://github.com/o/r/blob/v3/docs/runbooks.md"),
    ],
)
def test_runbooks_url_names_the_branch_or_tag(ref: str, url: str) -> None:
    assert runbooks_url("o/r", ref) == url


@pytest.mark.parametrize("ref", ["main", "refs/heads/", "refs/pull/7/merge", ""])
def test_runbooks_url_needs_a_branch_or_tag_ref(ref: str) -> None:
    with pytest.raises(ValueError, match=r"^runbooks_url git_ref: .* is not allowed; allowed: refs/heads/<branch>"):
        runbooks_url("o/r", ref)
