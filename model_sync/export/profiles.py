"""`export --profile NAME`: batching and instance presets, each taken from a configuration measured
by the serving benchmark (bench/serving/, results in bench/results/) and naming the point it came
from. A profile sets the defaults of --max-batch-size, --preferred-batch-size,
--max-queue-delay-us, --instance-kind and --instance-count; a flag given explicitly wins.

Without --profile, `--target cloud` takes `gpu-throughput`; `--target local` keeps export's own
defaults (max batch 8, queue delay 100 us, one KIND_CPU instance). There is no CPU preset: on the
2 shared cores of this project's machines perf_analyzer could not hold a stable measurement window.

What the figures are and are not (docs/gpu-benchmark.md): ResNet-18, fp32, one image per request,
Triton 2.51's python backend (one stub process per instance), perf_analyzer over gRPC with system
shared memory. The cloud's pytorch_libtorch backend runs instances as threads of one process, so
the GPU profiles are a measured starting point for it, not a measurement of it; a model of another
size shifts the good point, and GPU memory planning (push / promote) checks what the instance count
costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Profile:
    name: str
    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...]
    max_queue_delay_us: int
    instance_kind: str
    instance_count: int
    results: str  # the results file under bench/results/
    variant: str  # the configuration's name in it
    concurrency: int  # the point the figures are from
    throughput: float  # requests (= images) per second at that point
    p99_ms: float
    device: str

    def measured(self) -> str:
        """One line for --help: where the preset comes from."""
        return (
            f"{self.name}: max batch {self.max_batch_size}, preferred {'/'.join(map(str, self.preferred_batch_sizes))}, "
            f"queue delay {self.max_queue_delay_us} us, {self.instance_count} x {self.instance_kind}; measured "
            f"{self.throughput:,.0f} req/s at p99 {self.p99_ms:.1f} ms with {self.concurrency} requests in flight "
            f"({self.variant} on {self.device}, bench/results/{self.results})"
        )


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        # The best point within p99 50 ms of the 2026-12-02 GPU sweep.
        Profile(
            "gpu-throughput", 32, (16,), 1000, "KIND_GPU", 12,
            "serving.json", "resnet18-i12-p16", 256, 12070.6, 48.004, "NVIDIA H200",
        ),
        # The most requests within p99 10 ms of the 2026-12-02 small-batch sweep.
        Profile(
            "gpu-latency", 8, (4, 8), 100, "KIND_GPU", 4,
            "serving-latency.json", "resnet18-i4-p8", 32, 6238.99, 8.454, "NVIDIA H200",
        ),
    )
}  # fmt: skip
DEFAULT_FOR_TARGET = {"cloud": "gpu-throughput"}  # --target local keeps export's own defaults (one CPU instance)


def get(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"--profile: {name!r}; allowed: {', '.join(PROFILES)}") from None


def resolve(
    target: str,
    name: str | None,
    *,
    max_batch_size: int | None,
    preferred_batch_sizes: tuple[int, ...],
    max_queue_delay_us: int | None,
    instance_kind: str | None,
    instance_count: int | None,
    dynamic_batching: bool,
) -> dict[str, Any]:
    """ExportOptions keyword arguments: what the flags set, the profile (or the target's default
    profile) for the rest. The profile's preferred sizes are dropped when the flags leave no room
    for them (batching off, or sizes above an explicit --max-batch-size)."""
    chosen = name or DEFAULT_FOR_TARGET.get(target)
    given: dict[str, Any] = {
        "max_batch_size": max_batch_size,
        "max_queue_delay_us": max_queue_delay_us,
        "instance_kind": instance_kind,
        "instance_count": instance_count,
    }
    out = {k: v for k, v in given.items() if v is not None}
    out["preferred_batch_sizes"] = preferred_batch_sizes
    if chosen is None:
        return out
    p = get(chosen)
    for key in given:
        out.setdefault(key, getattr(p, key))
    if not preferred_batch_sizes and dynamic_batching and out["max_batch_size"] > 0:
        out["preferred_batch_sizes"] = tuple(b for b in p.preferred_batch_sizes if b <= out["max_batch_size"])
    out["profile"] = chosen
    return out
