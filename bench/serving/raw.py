"""The raw limit of one export format: the exported file run directly on the GPU, inputs already on
the device, no server, no copies. Timed after a warm-up (TorchScript's profiling executor, cuDNN's
algorithm choice, ONNX Runtime's arena), several input sets rotated so the input is not cached,
median of repeats. Also reports the same batch with the host-to-device copy of a pageable input
included (what any server has to pay per image).

The file's suffix says how it runs (the loaders export's check and the python-backend wrappers use):
  model.pt    torch.jit.load, timed with CUDA events on torch's stream;
  model.pt2   torch._inductor.aoti_load_package (AOTInductor), timed with CUDA events on torch's stream;
  model.onnx  ONNX Runtime's CUDAExecutionProvider with I/O binding to torch's device tensors (no host
              copy), timed around a device-wide synchronisation (ONNX Runtime runs on its own stream).

    python -m bench.serving.raw --model repo/resnet18/1/model.pt2 --batch 64 --batch 256
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any


def load(path: str, device: str) -> tuple[Any, bool]:
    """(a callable batch -> output for the exported file at `path` on `device`, whether its work
    runs on torch's current stream: CUDA events time it)."""
    import torch

    if path.endswith(".pt2"):
        import torch._inductor as inductor

        runner = inductor.aoti_load_package(path)
        return (lambda x: runner(x)[0]), True
    if path.endswith(".onnx"):
        import numpy as np
        import onnxruntime

        cuda = device.startswith("cuda")
        providers = ["CUDAExecutionProvider"] if cuda else ["CPUExecutionProvider"]
        if cuda and "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
            raise RuntimeError(
                f"onnxruntime {onnxruntime.__version__}: no CUDAExecutionProvider (providers: "
                f"{onnxruntime.get_available_providers()}); allowed: onnxruntime-gpu for this CUDA"
            )
        session = onnxruntime.InferenceSession(path, providers=providers)
        (inp,), (out,) = session.get_inputs(), session.get_outputs()

        def run(x: Any) -> Any:
            x = x.contiguous()
            y = torch.empty((x.shape[0], 1000), dtype=torch.float32, device=x.device)
            binding = session.io_binding()
            kind = "cuda" if x.is_cuda else "cpu"
            binding.bind_input(inp.name, kind, x.device.index or 0, np.float32, tuple(x.shape), x.data_ptr())
            binding.bind_output(out.name, kind, y.device.index or 0, np.float32, tuple(y.shape), y.data_ptr())
            session.run_with_iobinding(binding)
            return y

        return run, False
    model = torch.jit.load(path, map_location=device).eval()
    return model, True


def measure(model_pt: str, batch: int, device: str = "cuda", repeats: int = 20, iters: int = 10) -> dict[str, Any]:
    import torch

    model, on_stream = load(model_pt, device)
    gen = torch.Generator(device="cpu").manual_seed(batch)
    host = [torch.rand((batch, 3, 224, 224), generator=gen) for _ in range(3)]
    dev = [h.to(device) for h in host]
    cuda = device.startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def timed(fn: Any) -> float:
        """Seconds per iteration of `fn(i)` over `iters` calls."""
        if cuda and on_stream:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(iters):
                fn(i)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0 / iters
        sync()
        t0 = time.perf_counter()
        for i in range(iters):
            fn(i)
        sync()
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
        "format": {".pt2": "pt2", ".onnx": "onnx"}.get(model_pt[model_pt.rfind(".") :], "torchscript"),
        "repeats": repeats,
        "iters_per_repeat": iters,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.serving.raw", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", "--model-pt", dest="model_pt", required=True, help="model.pt, model.pt2 or model.onnx")
    p.add_argument("--batch", type=int, action="append", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args(argv)
    print(json.dumps([measure(a.model_pt, b, a.device, a.repeats) for b in a.batch]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
