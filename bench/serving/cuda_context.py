"""What one model instance holds on the GPU beyond what PyTorch's allocator reports: the CUDA
context (driver state, kernels of the loaded libraries: cuBLAS, cuDNN), measured in a fresh
process as NVML's per-process GPU memory minus torch.cuda.memory_reserved(). It is the
per-instance allowance of GPU memory planning (model_sync/admission/gpu_plan.py): every python-backend
instance is its own stub process, and so its own CUDA context.

Phases, in one process: after CUDA init and a 1-element tensor; after torch.jit.load of the
model; after one inference at `--batch` (cuDNN and cuBLAS load their kernels on first use).

    python -m bench.serving.cuda_context --model-pt repo/resnet18/1/model.pt --batch 32
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

MIB = 1024 * 1024


def _process_used(pynvml: Any, handle: Any) -> int | None:
    """Bytes NVML attributes to this process on the device (None where the driver does not say)."""
    for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
            return int(proc.usedGpuMemory)
    return None


def measure(model_pt: str, batch: int) -> dict[str, Any]:
    import pynvml
    import torch

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    device_used_before = int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    phases: list[dict[str, Any]] = []

    def phase(name: str) -> None:
        torch.cuda.synchronize()
        used = _process_used(pynvml, handle)
        device_used = int(pynvml.nvmlDeviceGetMemoryInfo(handle).used) - device_used_before
        reserved = int(torch.cuda.memory_reserved())
        basis = used if used is not None else device_used
        phases.append(
            {
                "phase": name,
                "process_used_mib": None if used is None else round(used / MIB, 1),
                "device_used_delta_mib": round(device_used / MIB, 1),
                "torch_reserved_mib": round(reserved / MIB, 1),
                "outside_torch_mib": round((basis - reserved) / MIB, 1),
            }
        )

    torch.zeros(1, device="cuda")
    phase("cuda init")
    model = torch.jit.load(model_pt, map_location="cuda").eval()
    phase("model loaded")
    with torch.inference_mode():
        model(torch.zeros((batch, 3, 224, 224), device="cuda"))
    phase(f"after one batch of {batch}")
    return {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "batch": batch,
        "phases": phases,
        "context_mib": phases[-1]["outside_torch_mib"],
        "max_reserved_mib": round(torch.cuda.max_memory_reserved() / MIB, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.serving.cuda_context",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model-pt", required=True)
    p.add_argument("--batch", type=int, default=32)
    a = p.parse_args(argv)
    print(json.dumps(measure(a.model_pt, a.batch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
