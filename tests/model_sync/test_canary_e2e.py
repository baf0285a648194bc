"""The gray release's verdicts end to end on the real local stack (model_sync.local.canary_lab): the
local S3 server with staging and prod, four real tritonserver replicas in prod each with its real
agent, round-robin traffic over them standing in for the Service, and the CLI in subprocesses: push
to staging, then `promote --to prod`, which runs the gray release (steps 25 and 50 %, 5 s each) on
good, failing, slow, tail-slow and unloadable versions. What happens around a release (an outage,
an interrupt, a moved pin, a scale-out, a dead replica): test_canary_lifecycle_e2e.py, on a stack of
its own, so that the two modules run side by side.

One stack for every scenario (the time budget); each scenario starts from one stable version
serving every replica. In every one, no request outside the canary share fails."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_sync import errors
from model_sync.local.canary_lab import MODEL, TAIL_RATE, TS_MODEL, CanaryLab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CanaryLab]:
    stack = CanaryLab(Path(tmp_path_factory.mktemp("canary"))).start()
    try:
        stack.stable()
        yield stack
    finally:
        stack.stop()


def _stable(lab: CanaryLab, model: str = MODEL) -> int:
    pinned = json.loads(lab.cli("status", "--env", "prod", model, "--output", "json").stdout)
    return int(pinned["prod"]["models"][0]["pinned"])


def _release(lab: CanaryLab, kind: str, model: str = MODEL) -> tuple[int, dict, dict, str]:
    """Publish `kind`, promote it to prod under traffic: (exit code, measure(), final record, stderr)."""
    stable = _stable(lab, model)
    done = lab.release(kind, model)
    assert done.doc["stable_version"] == stable
    return done.code, done.figures, done.doc, done.stderr


def test_a_good_version_is_promoted_with_its_share_within_3_points(lab: CanaryLab) -> None:
    code, figures, doc, err = _release(lab, "good")
    assert code == errors.OK, err
    assert figures["outcome"] == "promoted"
    assert (figures["failed_stable"], figures["failed_canary"], figures["failed_other"]) == (0, 0, 0), figures[
        "unexpected_failures"
    ]
    assert [s["verdict"] for s in figures["steps"]] == ["pass", "pass"]
    for step in figures["steps"]:
        assert step["effective_percent"] == step["configured_percent"]  # 1 and 2 of 4 replicas
        assert abs(step["observed_percent"] - step["configured_percent"]) <= 3, figures
    assert _stable(lab) == doc["canary_version"]
    lab.fleet.wait_ready(MODEL, doc["canary_version"])  # every replica serves it


def test_a_version_failing_5_percent_of_requests_is_aborted(lab: CanaryLab) -> None:
    code, figures, doc, err = _release(lab, "errors")
    assert code == errors.CHECK_FAILED, err
    assert "error ratio: canary" in doc["decision"]["reason"], doc["decision"]
    assert figures["failed_stable"] == figures["failed_other"] == 0, figures["unexpected_failures"]
    assert figures["unexpected_failures"] == [], figures["unexpected_failures"]  # the canary's are all injected
    assert 0 < figures["failed_canary"] < 0.1 * figures["answered_by_canary"] + 5, figures
    assert figures["seconds_to_zero_canary"] is not None
    assert figures["seconds_to_zero_canary"] <= 10, figures
    assert _stable(lab) == doc["stable_version"]


def test_a_torchscript_version_failing_5_percent_of_requests_is_aborted(lab: CanaryLab) -> None:
    """The failure mode of the platform's own wrapper: `export --target local` of a TorchScript
    module whose forward raises on 1 input in 20. Clients see HTTP 500s; the analysis must too."""
    if not lab.fleet.version_ready(0, TS_MODEL, 1):
        lab.stable("good", TS_MODEL)
    code, figures, doc, err = _release(lab, "errors", TS_MODEL)
    assert code == errors.CHECK_FAILED, err
    assert "error ratio: canary" in doc["decision"]["reason"], doc["decision"]
    assert figures["failed_stable"] == figures["failed_other"] == 0, figures["unexpected_failures"]
    assert figures["failed_canary"] > 0, figures
    failing = doc["steps"][-1]["figures"]["canary"]
    assert failing["errors"] > 0, failing  # what Triton counted, read by the analysis
    assert _stable(lab, TS_MODEL) == doc["stable_version"]


def test_a_tail_only_regression_is_aborted_on_p99(lab: CanaryLab) -> None:
    """+150 ms on 3 % of the requests of a 30 ms model: p99 moves ~5x, the mean a sixth (at 80
    requests a second, within what one instance of the stable answers). p99 alone decides."""
    stable = _stable(lab)
    lab.stable("slow")
    try:
        done = lab.release("tail", rate=TAIL_RATE)
    finally:
        lab.repin(stable)  # back to the good stable the other scenarios compare with
    assert done.code == errors.CHECK_FAILED, done.stderr
    assert done.doc["decision"]["reason"].startswith("step 25 %: p99 latency: canary"), done.doc["decision"]
    canary, stable_figures = (done.doc["steps"][-1]["figures"][k] for k in ("canary", "stable"))
    assert canary["p99_ms"] > 3 * stable_figures["p99_ms"], (canary, stable_figures)
    assert (done.figures["failed_stable"], done.figures["failed_canary"], done.figures["failed_other"]) == (0, 0, 0), (
        done.figures["unexpected_failures"]
    )


def test_a_version_three_times_slower_is_aborted_on_latency(lab: CanaryLab) -> None:
    code, figures, doc, err = _release(lab, "slow")
    assert code == errors.CHECK_FAILED, err
    assert doc["decision"]["reason"].startswith("step 25 %: p99 latency: canary"), doc["decision"]
    assert (figures["failed_stable"], figures["failed_canary"], figures["failed_other"]) == (0, 0, 0), figures[
        "unexpected_failures"
    ]
    assert figures["seconds_to_zero_canary"] <= 10, figures


def test_a_version_that_fails_to_load_is_aborted_and_takes_no_traffic(lab: CanaryLab) -> None:
    code, figures, doc, err = _release(lab, "broken")
    assert code == errors.CHECK_FAILED, err
    assert "the canary failed to load on" in doc["decision"]["reason"], doc["decision"]
    assert figures["answered_by_canary"] == 0, figures
    assert (figures["failed_stable"], figures["failed_canary"], figures["failed_other"]) == (0, 0, 0), figures[
        "unexpected_failures"
    ]
