"""Pure functions of the serving benchmark (no torch, no GPU, no network): latency percentiles,
Prometheus text parsing for Triton's batch counters, perf_analyzer CSV parsing, the result-file
schema check and the summary against the issue-8 targets. Unit-tested in tests/bench/.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SCHEMA = "triton-platform/bench-serving/v1"

# The benchmark's targets (docs/gpu-benchmark.md): Triton >= 10x the one-request baseline and
# >= 85 % of the raw TorchScript limit at batch 64, both at client-side
# p99 <= 50 ms.
TARGET_SPEEDUP = 10.0
TARGET_RAW_FRACTION = 0.85
TARGET_P99_MS = 50.0
# The comparison is over the same client as every earlier run: clients keeping their tensors in CUDA
# shared memory (no host copy at all) are reported beside it, not counted as the best point.
CUDA_SHM_CLIENT = "perf_analyzer grpc + CUDA shm"
# P4 (docs/gpu-benchmark.md): on Triton's own PyTorch backend, the best perf_analyzer point, with or
# without CUDA shared memory, >= 90 % of raw TorchScript at batch 64 with p99 <= 15 ms.
TARGET_P4_FRACTION = 0.90
TARGET_P4_P99_MS = 15.0
RAW_REFERENCE_BATCH = 64


class ResultError(ValueError):
    """serving.json breaks the schema (one line naming the field, the value and what is allowed)."""


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q: {q}; allowed: 0..100")
    if not values:
        raise ValueError("percentile values: empty; allowed: at least one value")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_summary(latencies_s: Sequence[float], duration_s: float, errors: int = 0) -> dict[str, float | int]:
    """Throughput (successful requests per second) and latency percentiles in milliseconds."""
    if duration_s <= 0:
        raise ValueError(f"duration_s: {duration_s}; allowed: > 0")
    if not latencies_s:
        return {
            "requests": 0,
            "errors": errors,
            "throughput": 0.0,
            "p50_ms": math.nan,
            "p90_ms": math.nan,
            "p99_ms": math.nan,
            "mean_ms": math.nan,
        }
    ms = [v * 1000.0 for v in latencies_s]
    return {
        "requests": len(ms),
        "errors": errors,
        "throughput": len(ms) / duration_s,
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "mean_ms": sum(ms) / len(ms),
    }


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text exposition -> [(metric, labels, value)]; comments and blank lines skipped."""
    out: list[tuple[str, dict[str, str], float]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group(2) or ""))
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out.append((m.group(1), labels, value))
    return out


def metric_total(samples: Iterable[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """Sum of `name` over the samples whose labels include every given label."""
    return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == want for k, want in labels.items()))


def batch_stats(before: str, after: str, model: str) -> dict[str, float]:
    """Requests, executions and the average executed batch of `model` between two /metrics scrapes.

    nv_inference_count counts inferences (batch elements), nv_inference_exec_count model executions
    (dynamic batches); their delta ratio is the batch size Triton actually ran.
    ref: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/metrics.md#counts
    """
    b, a = parse_prometheus(before), parse_prometheus(after)
    requests = metric_total(a, "nv_inference_request_success", model=model) - metric_total(
        b, "nv_inference_request_success", model=model
    )
    inferences = metric_total(a, "nv_inference_count", model=model) - metric_total(b, "nv_inference_count", model=model)
    executions = metric_total(a, "nv_inference_exec_count", model=model) - metric_total(
        b, "nv_inference_exec_count", model=model
    )
    queue_us = metric_total(a, "nv_inference_queue_duration_us", model=model) - metric_total(
        b, "nv_inference_queue_duration_us", model=model
    )
    infer_us = metric_total(a, "nv_inference_compute_infer_duration_us", model=model) - metric_total(
        b, "nv_inference_compute_infer_duration_us", model=model
    )
    return {
        "server_requests": requests,
        "inferences": inferences,
        "executions": executions,
        "avg_batch": inferences / executions if executions else math.nan,
        # Per request, as the HPA metric is defined (queue-time delta over request delta, not a rate).
        "queue_ms_per_request": queue_us / requests / 1000.0 if requests else math.nan,
        "compute_infer_ms_per_request": infer_us / requests / 1000.0 if requests else math.nan,
    }


def finite(obj: Any) -> Any:
    """`obj` with every NaN/inf float replaced by None (serving.json is strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def parse_perf_analyzer_csv(text: str) -> list[dict[str, float]]:
    """perf_analyzer `-f out.csv` rows -> {concurrency, throughput, p50_ms, p90_ms, p95_ms, p99_ms, avg_ms,
    client_send_ms...}.

    Latency columns are in microseconds in the file.
    ref: https://github.com/triton-inference-server/perf_analyzer/blob/main/docs/cli.md
    """
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "Inferences/Second" not in reader.fieldnames:
        raise ValueError(
            f"perf_analyzer csv header: {reader.fieldnames!r}; allowed: a header with Concurrency (or Request Rate) "
            "and Inferences/Second"
        )
    rows = []
    us = {
        "p50_ms": "p50 latency",
        "p90_ms": "p90 latency",
        "p95_ms": "p95 latency",
        "p99_ms": "p99 latency",
        "avg_ms": "Avg latency",
        "client_send_ms": "Client Send",
        "network_server_ms": "Network+Server Send/Recv",
        "server_queue_ms": "Server Queue",
        "server_compute_input_ms": "Server Compute Input",
        "server_compute_infer_ms": "Server Compute Infer",
        "server_compute_output_ms": "Server Compute Output",
        "client_recv_ms": "Client Recv",
    }
    key, name = (
        ("Concurrency", "concurrency") if "Concurrency" in reader.fieldnames else ("Request Rate", "request_rate")
    )
    for raw in reader:
        if not raw.get(key, "").strip():
            continue
        row: dict[str, float] = {
            name: float(raw[key]),
            "throughput": float(raw["Inferences/Second"]),
        }
        for key, column in us.items():
            if raw.get(column, "").strip():
                row[key] = float(raw[column]) / 1000.0
        rows.append(row)
    return rows


def _require(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in doc:
        raise ResultError(f"{where}.{key}: missing; allowed: a {kind if isinstance(kind, type) else kind[0]} value")
    value = doc[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise ResultError(
            f"{where}.{key}: {value!r}; allowed: "
            f"{kind.__name__ if isinstance(kind, type) else ' or '.join(k.__name__ for k in kind)}"
        )
    return value


def _check_point(point: Mapping[str, Any], where: str) -> None:
    conc = _require(point, "concurrency", (int, float), where)
    if conc < 1:
        raise ResultError(f"{where}.concurrency: {conc}; allowed: >= 1")
    thr = _require(point, "throughput", (int, float), where)
    if thr < 0 or math.isnan(thr):
        raise ResultError(f"{where}.throughput: {thr}; allowed: a number >= 0")
    if thr == 0:
        return  # nothing completed inside the window: no latency to report
    for key in ("p50_ms", "p99_ms"):
        _require(point, key, (int, float), where)
    if not point["p50_ms"] <= point["p99_ms"]:
        raise ResultError(f"{where}.p99_ms: {point['p99_ms']} < p50_ms {point['p50_ms']}; allowed: p50 <= p99")


def validate_result(doc: Mapping[str, Any]) -> None:
    """Raise ResultError unless `doc` is a complete serving.json (the fields report.py and the docs read)."""
    if doc.get("schema") != SCHEMA:
        raise ResultError(f"schema: {doc.get('schema')!r}; allowed: {SCHEMA!r}")
    env = _require(doc, "environment", dict, "$")
    for key in ("gpu", "driver", "torch", "triton"):
        _require(env, key, str, "environment")
    raw = _require(doc, "raw", list, "$")
    if not raw:
        raise ResultError("raw: []; allowed: at least one raw TorchScript measurement")
    for i, r in enumerate(raw):
        _require(r, "batch", int, f"raw[{i}]")
        _require(r, "img_per_s", (int, float), f"raw[{i}]")
    baseline = _require(doc, "baseline", dict, "$")
    points = _require(baseline, "points", list, "baseline")
    if not points:
        raise ResultError("baseline.points: []; allowed: at least one measured point")
    for i, p in enumerate(points):
        _check_point(p, f"baseline.points[{i}]")
    variants = _require(doc, "triton", list, "$")
    if not variants:
        raise ResultError("triton: []; allowed: at least one Triton configuration")
    for i, v in enumerate(variants):
        _require(v, "name", str, f"triton[{i}]")
        _require(v, "config_pbtxt", str, f"triton[{i}]")
        for j, p in enumerate(_require(v, "points", list, f"triton[{i}]")):
            _check_point(p, f"triton[{i}].points[{j}]")


def raw_rates(raw: Iterable[Mapping[str, Any]]) -> dict[int, float]:
    """A raw-limit list as {batch: images per second}."""
    return {int(r["batch"]): float(r["img_per_s"]) for r in raw}


def summarize(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The best Triton point within the p99 budget against the baseline and the raw limit."""
    raw = raw_rates(doc["raw"])
    raw_ref = raw.get(RAW_REFERENCE_BATCH, max(raw.values()))
    base = max(float(p["throughput"]) for p in doc["baseline"]["points"])
    candidates = [
        (float(p["throughput"]), v["name"], p)
        for v in doc["triton"]
        if v.get("client") != CUDA_SHM_CLIENT and v.get("client_batch", 1) == 1
        for p in v["points"]
        if float(p["throughput"]) > 0
        and p.get("p99_ms") is not None
        and float(p["p99_ms"]) <= TARGET_P99_MS
        and not p.get("errors")
    ]
    if not candidates:
        return {
            "best": None,
            "baseline_req_s": base,
            "raw_img_s": raw_ref,
            "speedup": 0.0,
            "raw_fraction": 0.0,
            "meets_speedup": False,
            "meets_raw_fraction": False,
        }
    thr, name, point = max(candidates, key=lambda c: c[0])
    speedup = thr / base if base else math.inf
    fraction = thr / raw_ref if raw_ref else 0.0
    return {
        "best": {
            "variant": name,
            "concurrency": point["concurrency"],
            "throughput": thr,
            "p50_ms": point["p50_ms"],
            "p99_ms": point["p99_ms"],
        },
        "baseline_req_s": base,
        "raw_img_s": raw_ref,
        "raw_batch": RAW_REFERENCE_BATCH if RAW_REFERENCE_BATCH in raw else max(raw, key=lambda b: raw[b]),
        "speedup": speedup,
        "raw_fraction": fraction,
        "meets_speedup": speedup >= TARGET_SPEEDUP,
        "meets_raw_fraction": fraction >= TARGET_RAW_FRACTION,
    }


def p4_summary(doc: Mapping[str, Any]) -> dict[str, Any]:
    """P4: the best TorchScript perf_analyzer point (system or CUDA shared memory) within
    TARGET_P4_P99_MS against the raw limit at RAW_REFERENCE_BATCH."""
    raw = raw_rates(doc["raw"])
    raw_ref = raw.get(RAW_REFERENCE_BATCH, max(raw.values())) if raw else 0.0
    points = [
        (float(p["throughput"]), v, p)
        for v in doc["triton"]
        if str(v.get("client", "")).startswith("perf_analyzer")
        and v.get("format", "torchscript") == "torchscript"
        and v.get("client_batch", 1) == 1
        for p in v["points"]
        if float(p["throughput"]) > 0 and p.get("p99_ms") is not None and float(p["p99_ms"]) <= TARGET_P4_P99_MS
    ]
    if not points or not raw_ref:
        return {"best": None, "raw_img_s": raw_ref, "raw_fraction": 0.0, "meets": False,
                "target": {"raw_fraction": TARGET_P4_FRACTION, "p99_ms": TARGET_P4_P99_MS}}  # fmt: skip
    thr, v, p = max(points, key=lambda c: c[0])
    return {
        "best": {"variant": v["name"], "client": v.get("client"), "concurrency": p["concurrency"], "throughput": thr,
                 "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"], "avg_batch": p.get("avg_batch"),
                 "gpu_util_pct": p.get("gpu_util_pct")},
        "raw_img_s": raw_ref,
        "raw_fraction": thr / raw_ref,
        "meets": thr / raw_ref >= TARGET_P4_FRACTION,
        "target": {"raw_fraction": TARGET_P4_FRACTION, "p99_ms": TARGET_P4_P99_MS},
    }  # fmt: skip


def batched_summary(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per format and client, the best point of requests that carry whole batches (`--client-batch`):
    images/s within TARGET_P99_MS, and its share of the format's raw limit at RAW_REFERENCE_BATCH
    (TorchScript's where the format has none: the .pt2 raw limit needs torch's Python loader)."""
    raws = {f: raw_rates(rs) for f, rs in doc.get("raw_by_format", {}).items()}
    ts = raws.get("torchscript", {}).get(RAW_REFERENCE_BATCH)
    out = []
    for v in doc["triton"]:
        if v.get("client_batch", 1) == 1:
            continue
        ok = [p for p in v["points"] if p.get("p99_ms") is not None and float(p["p99_ms"]) <= TARGET_P99_MS]
        if not ok:
            continue
        p = max(ok, key=lambda q: float(q["throughput"]))
        own = raws.get(v.get("format", "torchscript"), {}).get(RAW_REFERENCE_BATCH)
        out.append({"name": v["name"], "format": v.get("format"), "client": v.get("client"),
                    "client_batch": v["client_batch"], "concurrency": p["concurrency"], "img_per_s": p["throughput"],
                    "p99_ms": p["p99_ms"], "gpu_util_pct": p.get("gpu_util_pct"),
                    "vs_own_raw": float(p["throughput"]) / own if own else None,
                    "vs_torchscript_raw": float(p["throughput"]) / ts if ts else None})  # fmt: skip
    return out


def markdown_table(doc: Mapping[str, Any]) -> str:
    """Every Triton point, the baseline and the raw limit as one Markdown table."""

    def fmt(v: Any, digits: int = 1) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        return f"{v:,.{digits}f}"

    lines = [
        "| server | config | concurrency | req/s (img/s) | p50 ms | p99 ms | avg batch | GPU util % |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["raw"]:
        lines.append(
            f"| raw TorchScript (limit) | batch {r['batch']}, input on GPU | - | {fmt(r['img_per_s'], 0)} | - | - | "
            f"{r['batch']} | - |"
        )
    for p in doc["baseline"]["points"]:
        lines.append(
            f"| one-request HTTP server (baseline) | batch 1 per request | {int(p['concurrency'])} | "
            f"{fmt(p['throughput'], 0)} | {fmt(p['p50_ms'])} | {fmt(p['p99_ms'])} | 1 | "
            f"{fmt(p.get('gpu_util_pct'), 0)} |"
        )
    for v in doc["triton"]:
        for p in v["points"]:
            lines.append(
                f"| Triton ({v.get('client', 'perf_analyzer')}) | {v['name']} | {int(p['concurrency'])} | "
                f"{fmt(p['throughput'], 0)} | {fmt(p['p50_ms'])} | {fmt(p['p99_ms'])} "
                f"| {fmt(p.get('avg_batch'))} | {fmt(p.get('gpu_util_pct'), 0)} |"
            )
    return "\n".join(lines)


def format_summary(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per export format of a multi-format run (`raw_by_format`): its own raw limit at
    RAW_REFERENCE_BATCH (img/s), its best served point within the p99 budget (perf_analyzer's), that
    point's share of its own raw limit, and its throughput against TorchScript's best."""
    out = []
    for fmt, raws in doc.get("raw_by_format", {}).items():
        raw = raw_rates(raws)
        ref = raw.get(RAW_REFERENCE_BATCH, max(raw.values())) if raw else None
        points = [
            (float(p["throughput"]), v["name"], p)
            for v in doc["triton"]
            if v.get("format") == fmt and v.get("client") != CUDA_SHM_CLIENT and v.get("client_batch", 1) == 1
            for p in v["points"]
            if float(p["throughput"]) > 0 and p.get("p99_ms") is not None and float(p["p99_ms"]) <= TARGET_P99_MS
        ]
        best = max(points, key=lambda c: c[0]) if points else None
        out.append(
            {
                "format": fmt,
                "raw_img_s": ref,
                "raw_batch": RAW_REFERENCE_BATCH if RAW_REFERENCE_BATCH in raw else (max(raw) if raw else None),
                "best": None
                if best is None
                else {
                    "variant": best[1],
                    "concurrency": best[2]["concurrency"],
                    "throughput": best[0],
                    "p50_ms": best[2]["p50_ms"],
                    "p99_ms": best[2]["p99_ms"],
                },
                "raw_fraction": best[0] / ref if best and ref else None,
            }
        )
    ts = next((f["best"]["throughput"] for f in out if f["format"] == "torchscript" and f["best"]), None)
    for f in out:
        f["vs_torchscript"] = f["best"]["throughput"] / ts if f["best"] and ts else None
    return out


def format_table(doc: Mapping[str, Any]) -> str:
    """format_summary as one Markdown table."""

    def n(v: Any, digits: int = 0, suffix: str = "") -> str:
        return "-" if v is None else f"{v:,.{digits}f}{suffix}"

    lines = [
        "| format | raw limit (img/s, batch 64, input on GPU) | best served (req/s) | p99 ms | at | share of its raw limit "
        "| vs TorchScript served |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for f in format_summary(doc):
        b = f["best"] or {}
        at = f"{b['variant']}, {int(b['concurrency'])} in flight" if b else "-"
        lines.append(
            f"| {f['format']} | {n(f['raw_img_s'])} | {n(b.get('throughput'))} | {n(b.get('p99_ms'), 1)} | {at} | "
            f"{n(f['raw_fraction'] and f['raw_fraction'] * 100, 1, ' %')} | {n(f['vs_torchscript'], 2, 'x')} |"
        )
    return "\n".join(lines)
