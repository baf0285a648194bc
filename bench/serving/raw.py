"""The raw limit: the exported model.pt run directly by torch on the GPU, inputs already on the
device, no server, no copies. Timed with CUDA events after a warm-up (TorchScript's profiling
executor specialises on the first calls of each shape), several input sets rotated so the input
is not cached, median of repeats. Also reports the same batch with the host-to-device copy of a
pageable input included (what any server has to pay per image).

    python -m bench.serving.raw --model-pt repo/resnet18/1/model.pt --batch 64 --batch 256
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any


def measure(model_pt: str, batch: int, device: str = "cuda", repeats: int = 20, iters: int = 10) -> dict[str, Any]:
    import torch

    model = torch.jit.load(model_pt, map_location=device).eval()
    gen = torch.Generator(device="cpu").manual_seed(batch)
    host = [torch.rand((batch, 3, 224, 224), generator=gen) for _ in range(3)]
    dev = [h.to(device) for h in host]
    cuda = device.startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def timed(fn: Any) -> float:
        """Seconds per iteration of `fn(i)` over `iters` calls."""
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(iters):
                fn(i)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0 / iters
        t0 = time.perf_counter()
        for i in range(iters):
            fn(i)
        return (time.perf_counter() - t0) / iters

    with torch.inference_mode():
        for i in range(8):  # warm-up: profiling executor, cuDNN algorithm choice, allocator
            model(dev[i % 3])
        sync()
        compute = [timed(lambda i: model(dev[i % 3])) for _ in range(repeats)]
        with_copy = [timed(lambda i: model(host[i % 3].to(device))) for _ in range(max(3, repeats // 4))]
        out = model(dev[0])
        sync()
    if not bool(torch.isfinite(out).all()):
        raise RuntimeError(f"raw batch {batch}: non-finite output; allowed: finite logits")
    med = statistics.median(compute)
    med_copy = statistics.median(with_copy)
    return {
        "batch": batch,
        "img_per_s": batch / med,
        "ms_per_batch": med * 1000.0,
        "spread_pct": (max(compute) - min(compute)) / med * 100.0,
        "img_per_s_with_h2d_copy": batch / med_copy,
        "device": device,
        "repeats": repeats,
        "iters_per_repeat": iters,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.serving.raw", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model-pt", required=True)
    p.add_argument("--batch", type=int, action="append", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args(argv)
    print(json.dumps([measure(a.model_pt, b, a.device, a.repeats) for b in a.batch]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
