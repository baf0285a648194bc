"""The benchmark figures written by hand in the docs equal bench/results/*.json (to the rounding
they are printed with): README's "Measured" rows, docs/gpu-benchmark.md's result table,
docs/agent.md's P1/P2/P3 rows and pass cost, docs/model-sync.md's transfer table, the local S3
servers' race (docs/agent.md's table, README's row). A rerun that changes a JSON file
fails here until the prose is updated."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def result(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return doc


def doc_line(path: str, marker: str) -> str:
    lines = [ln for ln in (ROOT / path).read_text().splitlines() if marker in ln]
    assert len(lines) == 1, f"{path}: {len(lines)} lines contain {marker!r}"
    return lines[0]


def grab(pattern: str, text: str, flags: int = 0) -> tuple[str, ...]:
    m = re.search(pattern, text, flags)
    assert m, f"{pattern!r} not found in: {text}"
    return m.groups()


def assert_rounds_to(printed: str, value: float, scale: float = 1.0) -> None:
    """`printed` ("12,658", "58.6", "2.16") is `value * scale` rounded to the digits it shows."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    shown = float(printed.replace(",", ""))
    assert abs(shown - value * scale) <= 0.5 * 10**-decimals + 1e-9, (
        f"doc says {printed}, data gives {value * scale:.6g}"
    )


def test_rounding_helper_rejects_a_wrong_figure() -> None:
    assert_rounds_to("1.8", 1.7547)
    assert_rounds_to("12,658", 12658.1)
    with pytest.raises(AssertionError, match=r"doc says 1\.7, data gives 1\.7547"):
        assert_rounds_to("1.7", 1.7547)
    with pytest.raises(AssertionError, match=r"doc says 58\.7"):
        assert_rounds_to("58.7", 58.646)


# ---- GPU serving (bench/results/serving.json) ----------------------------------------------------
def serving_summary() -> dict[str, Any]:
    summary: dict[str, Any] = result("serving.json")["summary"]
    return summary


def test_readme_gpu_serving_row() -> None:
    line = doc_line("README.md", "| GPU serving, ResNet-18")
    rps, p99, speedup, raw = grab(
        r"([\d,]+) req/s at p99 ([\d.]+) ms: ([\d.]+)x the one-request-at-a-time server, ([\d.]+) % of raw TorchScript",
        line,
    )
    s = serving_summary()
    assert_rounds_to(rps, s["best"]["throughput"])
    assert_rounds_to(p99, s["best"]["p99_ms"])
    assert_rounds_to(speedup, s["speedup"])
    assert_rounds_to(raw, s["raw_fraction"], 100)


def test_gpu_benchmark_result_table() -> None:
    s = serving_summary()
    raw = doc_line("docs/gpu-benchmark.md", "| raw TorchScript, batch 64, input already on the GPU (the limit) |")
    assert_rounds_to(grab(r"\| ([\d,]+) \|", raw)[0], s["raw_img_s"])
    base = doc_line("docs/gpu-benchmark.md", "| one-request HTTP server, batch 1 (the baseline) |")
    assert_rounds_to(grab(r"\| ([\d,]+) \|", base)[0], s["baseline_req_s"])
    best = doc_line("docs/gpu-benchmark.md", "| **Triton, `")
    variant, conc, rps, p99, speedup, frac = grab(
        r"`([\w-]+)`, (\d+) concurrent requests\*\* \| \*\*([\d,]+)\*\* \| \*\*([\d.]+) ms\*\* \| \*\*([\d.]+)x\*\* "
        r"\| \*\*([\d.]+) %\*\*",
        best,
    )
    assert (variant, float(conc)) == (s["best"]["variant"], s["best"]["concurrency"])
    assert_rounds_to(rps, s["best"]["throughput"])
    assert_rounds_to(p99, s["best"]["p99_ms"])
    assert_rounds_to(speedup, s["speedup"])
    assert_rounds_to(frac, s["raw_fraction"], 100)


# ---- the repository agent (bench/results/agent-p1.json, agent-p2.json) ---------------------------
def test_agent_p1_row() -> None:
    line = doc_line("docs/agent.md", "| **P1** pin flip")
    cycles, p50, p95, mx, failed, ok, target = grab(
        r"(\d+) push \+ \d+ rollback cycles.*p50 ([\d.]+) s, \*\*p95 ([\d.]+) s\*\*, max ([\d.]+) s; \*\*(\d+) "
        r"failed\*\* of ([\d,]+) requests \| p95 <= ([\d.]+) s",
        line,
    )
    p1 = result("agent-p1.json")
    assert int(cycles) == p1["cycles"]
    assert_rounds_to(p50, p1["p50_s"])
    assert_rounds_to(p95, p1["p95_s"])
    assert_rounds_to(mx, p1["max_s"])
    assert (int(failed), int(ok.replace(",", ""))) == (p1["requests_failed"], p1["requests_ok"])
    assert float(target) == p1["target_p95_s"]


def test_agent_p2_row() -> None:
    line = doc_line("docs/agent.md", "| **P2** S3 requests")
    agent, a_list, a_put, triton, t_head, t_list, inverse, target = grab(
        r"agent \*\*([\d,]+)/min\*\* \((\d+) LIST \+ (\d+) status PUT\) vs tritonserver polling S3 "
        r"\*\*([\d,]+)/min\*\* "
        r"\(([\d,]+) HEAD \+ ([\d,]+) LIST\): \*\*1/(\d+)\*\* \| <= 1/(\d+)",
        line,
    )
    p2 = result("agent-p2.json")
    assert_rounds_to(agent, p2["agent_requests_per_min"])
    assert (int(a_list), int(a_put)) == (p2["agent_request_kinds"]["GET list"], p2["agent_request_kinds"]["PUT object"])
    assert_rounds_to(triton, p2["triton_s3_poll_requests_per_min"])
    assert (int(t_head.replace(",", "")), int(t_list.replace(",", ""))) == (
        p2["triton_request_kinds"]["HEAD object"],
        p2["triton_request_kinds"]["GET list"],
    )
    assert_rounds_to(inverse, p2["triton_s3_poll_requests_per_min"] / p2["agent_requests_per_min"])
    assert_rounds_to(target, 1 / p2["target_ratio"])


# ---- the local S3 servers' race (bench/results/local-s3.json) -------------------------------------
def _race_figures(line: str) -> tuple[int, int, int]:
    """(GETs, failed, torn) printed in a row of docs/agent.md's race table."""
    gets, failed, torn = grab(r"\| ([\d,]+) \| ([\d,]+)[^|]* \| ([\d,]+) \|", line)
    return int(gets.replace(",", "")), int(failed.replace(",", "")), int(torn.replace(",", ""))


def test_agent_doc_local_s3_race_table() -> None:
    race = result("local-s3.json")
    rows = (("rclone", "| `rclone serve s3` (the project's flags) |"), ("moto", "| moto (`MotoS3Server`) |"))
    for kind, label in rows:
        r, line = race["servers"][kind], doc_line("docs/agent.md", label)
        assert _race_figures(line) == (r["gets"], r["get_errors"], r["torn"])
        assert line.rstrip(" |").endswith(f"{r['puts']:,}")
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(r["get_errors_by_kind"].items(), key=lambda kv: -kv[1]))
        assert (f"({kinds})" in line) == bool(kinds), line
    text = " ".join((ROOT / "docs" / "agent.md").read_text().split())  # the setup sentence spans lines
    n, low, high, seconds, load = grab(
        r"`bench/results/local-s3\.json`: one writer rewriting one key with (\d+) JSON bodies of (\d+)\.\.([\d,]+) "
        r"bytes, two readers GETting it, one attempt per request, (\d+) s per server, \d+ cores, load average "
        r"([\d.]+) before",
        text,
    )
    assert (int(n), int(low), int(high.replace(",", ""))) == (race["bodies"], *race["body_bytes"])
    assert float(seconds) == race["seconds_each"]
    assert_rounds_to(load, race["machine"]["load_average_before"][0])


def test_readme_local_s3_row() -> None:
    line = doc_line("README.md", "| The local S3 server: a GET racing a PUT")
    rc_failed, rc_gets, rc_torn, m_failed, m_gets, m_torn = grab(
        r"`rclone serve s3`: ([\d,]+) of ([\d,]+) GETs failed and ([\d,]+) returned torn bytes; "
        r"moto \(the local environment's\): ([\d,]+) of ([\d,]+) failed, ([\d,]+) torn",
        line,
    )
    servers = result("local-s3.json")["servers"]
    for (failed, gets, torn), kind in (((rc_failed, rc_gets, rc_torn), "rclone"), ((m_failed, m_gets, m_torn), "moto")):
        r = servers[kind]
        assert [int(x.replace(",", "")) for x in (failed, gets, torn)] == [r["get_errors"], r["gets"], r["torn"]]
    assert f"{result('local-s3.json')['seconds_each']:g} s each" in line


# ---- transfers (bench/results/transfer.json) --------------------------------------------------
def test_model_sync_transfer_table_is_the_results_file() -> None:
    from bench.transfer.run import render

    text = (ROOT / "docs" / "model-sync.md").read_text()
    block = grab(r"<!-- bench:transfer -->\n(.*?)\n<!-- /bench:transfer -->", text, re.S)[0]
    assert block == render(result("transfer.json"))


def test_transfer_targets_are_recomputed_from_the_medians() -> None:
    from bench.transfer.run import ratios

    data = result("transfer.json")
    assert (data["ratios"], data["targets"]) == ratios(data, data["setup"]["size_bytes"])
    assert set(data["scenarios"]) >= {"push-2g", "download-2g", "promote-2g", "noop-1000", "cold-50"}
    assert data["setup"]["size_bytes"] == 2 * 1024**3


def test_readme_transfer_row_and_the_agent_pass_figure() -> None:
    from bench.transfer.run import readme_row

    data = result("transfer.json")
    assert doc_line("README.md", "| Moving models ") == readme_row(data)
    printed = grab(
        r"([\d.]+) requests per pass on average over 1,000 models x 5 versions",
        (ROOT / "docs" / "agent.md").read_text(),
    )[0]
    assert_rounds_to(printed, data["agent_pass"]["average_requests_per_pass_at_defaults"])


# ---- many models READY (bench/results/agent-ready.json) -------------------------------------------
def test_agent_doc_p3_row() -> None:
    line = doc_line("docs/agent.md", "| **P3** 200 small python-backend models")
    doc = result("agent-ready.json")
    new = doc["scenarios"]["new-pod"]
    live = doc["scenarios"]["live-pod"]
    med, lo, hi = grab(r"new pod .*?median \*\*([\d.]+) s\*\* \(([\d.]+)\.\.([\d.]+)\)", line)
    assert_rounds_to(med, new["median_ready_s"])
    assert_rounds_to(lo, new["min_ready_s"])
    assert_rounds_to(hi, new["max_ready_s"])
    med, lo, hi = grab(r"live pod .*?median \*\*([\d.]+) s\*\* \(([\d.]+)\.\.([\d.]+)\)", line)
    assert_rounds_to(med, live["median_ready_s"])
    assert_rounds_to(lo, live["min_ready_s"])
    assert_rounds_to(hi, live["max_ready_s"])
    assert doc["met"] == {"new-pod": True, "live-pod": False}
    assert "new pod met, live pod **not met**" in line
    assert {len(s["runs"]) for s in doc["scenarios"].values()} == {3}


def test_readme_many_models_row() -> None:
    line = doc_line("README.md", "| A replica with 200 small python-backend models")
    doc = result("agent-ready.json")["scenarios"]
    new, live = grab(r"new pod ([\d.]+) s \(median of 3.*?running replica ([\d.]+) s", line)
    assert_rounds_to(new, doc["new-pod"]["median_ready_s"])
    assert_rounds_to(live, doc["live-pod"]["median_ready_s"])


# ---- gray release (bench/results/canary.json) ----------------------------------------------------
def test_architecture_gray_release_figures() -> None:
    summary = result("canary.json")["summary"]
    line = doc_line("docs/architecture.md", "**Measured** (`bench/canary/run.py`")
    (points,) = grab(r"within ([0-9.]+) points of the configured one", line)
    assert_rounds_to(points, max(s["share_points_abs"]["max"] for s in summary.values() if s["share_points_abs"]))
    zero_max, errors_zero, slow_zero = grab(
        r"took at most ([0-9.]+) s \(medians ([0-9.]+) s for 5 % errors, ([0-9.]+) s for 3x latency", line
    )
    assert_rounds_to(zero_max, max(summary[k]["seconds_to_zero_canary"]["max"] for k in ("errors", "slow")))
    assert_rounds_to(errors_zero, summary["errors"]["seconds_to_zero_canary"]["median"])
    assert_rounds_to(slow_zero, summary["slow"]["seconds_to_zero_canary"]["median"])
    errors_answered, slow_answered = grab(r"a median of ([0-9]+) requests \(errors\) and ([0-9]+) \(slow\)", line)
    assert_rounds_to(errors_answered, summary["errors"]["answered_by_canary"]["median"])
    assert_rounds_to(slow_answered, summary["slow"]["answered_by_canary"]["median"])
    assert summary["broken"]["answered_by_canary"]["max"] == 0
    assert sum(s["failed_outside_canary"] for s in summary.values()) == 0
    assert summary["good"]["outcomes"] == ["promoted"]
    assert all(summary[k]["outcomes"] == ["aborted"] for k in ("errors", "slow", "broken"))


def test_readme_gray_release_row() -> None:
    summary = result("canary.json")["summary"]
    line = doc_line("README.md", "| Gray release on 4 CPU replicas")
    points, zero, answered = grab(
        r"within ([0-9.]+) points .* in at most ([0-9.]+) s .* a median of ([0-9]+) requests before a 5 %-errors abort",
        line,
    )
    assert_rounds_to(points, max(s["share_points_abs"]["max"] for s in summary.values() if s["share_points_abs"]))
    assert_rounds_to(zero, max(summary[k]["seconds_to_zero_canary"]["max"] for k in ("errors", "slow")))
    assert_rounds_to(answered, summary["errors"]["answered_by_canary"]["median"])
    assert summary["broken"]["answered_by_canary"]["max"] == 0
    assert sum(s["failed_outside_canary"] for s in summary.values()) == 0


# ---- GPU memory planning's allowance (bench/results/serving.json, cuda_context) ------------------
def test_the_cuda_context_allowance_is_the_measured_one() -> None:
    from model_sync.admission import gpu_plan

    measured = result("serving.json")["cuda_context"]
    assert measured["gpu"] == "NVIDIA H200"
    assert gpu_plan.CUDA_CONTEXT_BYTES == round(measured["context_mib"]) * gpu_plan.MIB


@pytest.mark.parametrize(
    ("name", "suffix"), [("warmup-gpu.json", ""), ("warmup-gpu-libtorch.json", ", pytorch_libtorch")]
)
def test_gpu_benchmark_warmup_table(name: str, suffix: str) -> None:
    """docs/gpu-benchmark.md's warm-up rows equal the warm-up result's medians: the python backend's
    (warmup-gpu.json) and Triton's PyTorch backend's (warmup-gpu-libtorch.json)."""
    summary = result(name)["summary"]
    for scenario, label in (
        ("warmup", f"| warm-up (the default){suffix} |"),
        ("no-warmup", f"| `--no-warmup`{suffix} |"),
    ):
        first, second, batch, steady, ready = grab(
            r"\| ([\d.]+) ms \| ([\d.]+) ms \| ([\d.]+) ms \| ([\d.]+) ms \| ([\d.]+) s \|",
            doc_line("docs/gpu-benchmark.md", label),
        )
        s = summary[scenario]
        assert_rounds_to(first, s["first_request_ms"]["median"])
        assert_rounds_to(second, s["first_requests_ms_by_index"][1]["median"])
        assert_rounds_to(batch, s["first_batch_ms"]["median"])
        assert_rounds_to(steady, s["steady_median_ms"]["median"])
        assert_rounds_to(ready, s["ready_s"]["median"])


def test_architecture_gray_release_analysis_figures() -> None:
    """The A/A false-abort rate and the tail regression's detection quoted in the design of record
    are the results file's, and the file holds what the issue asked to measure."""
    data = result("canary.json")["analysis"]
    line = doc_line("docs/architecture.md", "**Measured** (`bench/canary/run.py`")
    aa_releases, aa_aborts, aa_mean = grab(
        r"A/A \(([0-9]+) releases of identical versions[^)]*\): ([0-9]+) aborted, and the mean-confirmed rule "
        r"would have aborted ([0-9]+)",
        line,
    )
    assert (int(aa_releases), int(aa_aborts), int(aa_mean)) == (
        data["aa"]["releases"], data["aa"]["false_aborts"], data["aa"]["mean_rule_false_aborts"]
    )  # fmt: skip
    tail_releases, detected, median, low, high, mean_detected = grab(
        r"tail regression \([^)]*, ([0-9]+) releases\): ([0-9]+) aborted on p99, a median of ([0-9.]+) s "
        r"\(([0-9.]+)\.\.([0-9.]+)\) after the window's start; the mean-confirmed rule would have caught ([0-9]+)",
        line,
    )
    assert (int(tail_releases), int(detected), int(mean_detected)) == (
        data["tail"]["releases"], data["tail"]["detected"], data["tail"]["mean_rule_detected"]
    )  # fmt: skip
    spread = data["tail"]["seconds_to_verdict"]
    assert_rounds_to(median, spread["median"])
    assert_rounds_to(low, spread["min"])
    assert_rounds_to(high, spread["max"])
    assert data["aa"]["releases"] >= 30 and data["tail"]["releases"] >= 10  # noqa: PT018
    assert data["aa"]["first_after_start"]["releases"] >= 3  # the first release after a fresh start, each lab's
    assert data["aa"]["failed_outside_canary"] == data["tail"]["failed_outside_canary"] == 0
    first, strikes = grab(
        r"([0-9]+) of them the first release after a fresh start, ([0-9]+) with a latency failure confirmed away", line
    )
    assert (int(first), int(strikes)) == (
        data["aa"]["first_after_start"]["releases"],
        data["aa"]["releases_with_strikes"],
    )
    policy = result("canary.json")["scenario"]["policy"]
    assert not {"minP99DeltaMs", "latencyConfirmAfterSeconds", "maxP99Ratio"} & set(policy)  # the product's defaults
