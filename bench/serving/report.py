"""serving.json -> serving.png and the Markdown table of docs/gpu-benchmark.md. Runs HERE (matplotlib).

    .venv/bin/python -m bench.serving.report [bench/results/serving.json]

The table between the `<!-- serving-table:begin -->` / `<!-- serving-table:end -->` markers of
docs/gpu-benchmark.md is regenerated from the JSON, so the document cannot drift from the data.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.serving import stats

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "bench" / "results" / "serving.json"
DOC = ROOT / "docs" / "gpu-benchmark.md"
EXPORT_DOC = ROOT / "docs" / "export.md"  # the per-format table is in both
BEGIN, END = "<!-- serving-table:begin -->", "<!-- serving-table:end -->"
FORMATS_BEGIN, FORMATS_END = "<!-- formats-table:begin -->", "<!-- formats-table:end -->"


def measured_variants(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Triton variants with at least one point that completed requests (failed cross-checks left out)."""
    return [v for v in doc["triton"] if any(p["throughput"] > 0 for p in v["points"])]


def table_doc(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "triton": measured_variants(doc)}


def replace_table(text: str, table: str, begin: str = BEGIN, end: str = END) -> str:
    if begin not in text or end not in text:
        raise ValueError(f"{DOC.name}: markers {begin} / {end} missing; allowed: a document holding both")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for v in measured_variants(doc):
        pts = [p for p in v["points"] if p["throughput"] > 0]
        conc = [p["concurrency"] for p in pts]
        ax1.plot(conc, [p["throughput"] for p in pts], marker="o", label=f"Triton {v['name']}")
        ax2.plot([p["throughput"] for p in pts], [p["p99_ms"] for p in pts], marker="o", label=f"Triton {v['name']}")
    for r in doc["raw"]:
        ax1.axhline(
            r["img_per_s"],
            linestyle="--",
            color="black" if r["batch"] == stats.RAW_REFERENCE_BATCH else "grey",
            label=f"raw TorchScript, batch {r['batch']} (limit)",
        )
    ax1.axhline(
        doc["raw"][0]["img_per_s"] * stats.TARGET_RAW_FRACTION,
        linestyle=":",
        color="green",
        label="target: 50 % of raw batch 64",
    )
    base = max(p["throughput"] for p in doc["baseline"]["points"])
    ax1.axhline(base, linestyle="-.", color="red", label=f"one-request HTTP baseline ({base:,.0f} req/s)")
    ax1.set(
        xscale="log",
        xlabel="concurrent requests (client)",
        ylabel="requests/s = images/s",
        title="Throughput vs concurrency",
    )
    ax1.set_xticks([1, 8, 32, 64, 128, 256, 512], labels=["1", "8", "32", "64", "128", "256", "512"])
    ax2.axhline(stats.TARGET_P99_MS, linestyle=":", color="green", label=f"p99 budget {stats.TARGET_P99_MS:.0f} ms")
    bp = doc["baseline"]["points"][0]
    ax2.plot([bp["throughput"]], [bp["p99_ms"]], marker="s", color="red", label="one-request HTTP baseline")
    ax2.set(
        xlabel="requests/s", ylabel="p99 latency (ms, client side)", title="p99 latency vs throughput", yscale="log"
    )
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    env = doc["environment"]
    fig.suptitle(
        f"ResNet-18 fp32 on {env['gpu']} (driver {env['driver']}), Triton {env['triton']} python backend, torch "
        f"{env['torch']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.serving.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "result",
        nargs="?",
        type=Path,
        default=RESULT,
        help=(
            f"serving.json written by bench.serving.run (default: {RESULT.relative_to(ROOT)}); the plot is written "
            "beside it as .png"
        ),
    )
    result = p.parse_args(argv).result
    doc = json.loads(result.read_text())
    stats.validate_result(doc)
    if "raw_by_format" in doc:  # a run of several export formats (--formats): its own table
        for page in (DOC, EXPORT_DOC):
            if page.exists():
                page.write_text(replace_table(page.read_text(), stats.format_table(doc), FORMATS_BEGIN, FORMATS_END))
        print(json.dumps(stats.format_summary(doc), indent=2))
        return 0
    plot(doc, result.with_suffix(".png"))
    if DOC.exists():
        DOC.write_text(replace_table(DOC.read_text(), stats.markdown_table(table_doc(doc))))
    print(json.dumps(stats.summarize(table_doc(doc)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
