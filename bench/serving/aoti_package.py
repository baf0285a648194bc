"""A `.pt2` model for the GPU benchmark's `torch_aoti` run, compiled by model-sync's own
`model_sync.export.pt2.compile_package` (the same dynamic batch, the same AOTInductor call as
`model-sync export --format pt2`) but NOT re-loaded through Python:

    python3 -m bench.serving.aoti_package --factory F --shape 3,224,224 --max-batch-size 32 \
        --config REPO/<torchscript model>/config.pbtxt --name NAME-pt2 --output REPO

Why not `model-sync export --format pt2`: export checks the package by loading it with torch's
Python loader (`torch._inductor.aoti_load_package`), and on the lent GPU host (torch 2.11.0+cu130)
that loader dies with SIGSEGV (docs/gpu-benchmark.md). Triton's torch_aoti loads packages with
the C++ loader instead, which is what this run measures. After the compile, the Python loader is
tried once in a child process and its exit status recorded (`python_loader`: 0, or -11 for the
segfault), so each run says whether the crash is still there.

The config is the one `model-sync export --target cloud` wrote for the same variant in TorchScript
(`--config`), renamed, with the format's platform (`torch_aoti`): export's `build_config` differs
between the two formats in the platform alone. export.json records how the package was made.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from model_sync.export.exporter import load_factory
from model_sync.triton_model import model_config
from model_sync.triton_model.formats import MODEL_FILES, PLATFORMS

LOADER_CHECK = "import sys, torch._inductor as i; i.aoti_load_package(sys.argv[1]); print('loaded')"


def python_loader_status(path: Path) -> dict[str, object]:
    """torch's Python loader on the package, in a child process (a segfault takes only the child)."""
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", LOADER_CHECK, str(path)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    tail = [line for line in proc.stderr.strip().splitlines() if line.strip()][-3:]
    return {"exit": proc.returncode, "stderr_tail": tail}


def build(factory: str, shape: tuple[int, ...], max_batch_size: int, config: Path, name: str, output: Path,
          device: str = "cuda") -> dict:  # fmt: skip
    import torch

    from model_sync.export.pt2 import compile_package

    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.aoti-", dir=output))
    try:
        (tmp / "1").mkdir()
        model = load_factory(factory)
        capture = [torch.randn(max(2, min(4, max_batch_size)), *shape)]
        package = tmp / "1" / MODEL_FILES["pt2"]
        compile_package(model, capture, torch.device(device, 0) if device == "cuda" else torch.device("cpu"),
                        max_batch_size, str(package), str(output / f"{name}.export.log"))  # fmt: skip
        cfg = model_config.read_file(str(config))
        cfg.name = name
        cfg.platform = PLATFORMS["pt2"]
        model_config.write_file(str(tmp / "config.pbtxt"), cfg)
        meta = {
            "format": "pt2",
            "factory": factory,
            "target": "cloud",
            "exported_by": "bench.serving.aoti_package (model_sync.export.pt2.compile_package, no Python re-load)",
            "config_from": str(config),
            "torch_version": torch.__version__,
            "device": device,
            "gpu_architectures": ["sm_{}{}".format(*torch.cuda.get_device_capability(0))] if device == "cuda" else None,
            "compile_seconds": round(time.monotonic() - t0, 1),
            "python_loader": python_loader_status(package),
        }
        (tmp / "export.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        dest = output / name
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
        return meta
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.serving.aoti_package", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--factory", required=True)
    p.add_argument("--shape", required=True, help="one input's shape without the batch dimension")
    p.add_argument("--max-batch-size", type=int, required=True)
    p.add_argument("--config", type=Path, required=True, help="the TorchScript cloud export's config.pbtxt")
    p.add_argument("--name", required=True)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="where the package runs")
    a = p.parse_args(argv)
    shape = tuple(int(x) for x in a.shape.split(","))
    print(json.dumps(build(a.factory, shape, a.max_batch_size, a.config, a.name, a.output, a.device)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
