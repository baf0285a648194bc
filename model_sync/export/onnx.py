"""`export --format onnx`: torch.onnx.export with the dynamo exporter (torch.export underneath, ONNX
Script translating the graph) -> 1/model.onnx, re-loaded in an ONNX Runtime CPU session for export's
check (model_sync/export/exporter.py). Triton serves it with the onnxruntime backend
(`onnxruntime_onnx`), which matches inputs and outputs by name: the graph's are INPUT__i / OUTPUT__i,
as config.pbtxt declares them.

With max_batch_size > 1 the batch dimension is exported dynamic (torch.export.Dim, 1..max_batch_size:
the graph's first dimension is a symbol), captured from an example of at least 2 rows. --onnx-opset
chooses the opset (the exporter's default otherwise); export.json records the model's opset of the
default domain and its IR version, which push and promote compare with the ONNX Runtime of the
target's Triton image (model_sync/admission/alignment.py), plus the onnx and onnxruntime versions
that wrote and checked it.
ref: https://docs.pytorch.org/docs/stable/onnx_export.html (torch.onnx.export, dynamo=True)
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from model_sync.export import exporter_log
from model_sync.export.options import Artefact, ExportOptions, example_inputs


def export(opts: ExportOptions, model: Any, inputs: list[Any], version_dir: str) -> Artefact:
    import onnx
    import onnxruntime
    import torch

    dynamic = opts.max_batch_size > 1
    capture = example_inputs(opts, max(2, int(inputs[0].shape[0])), opts.seed) if dynamic else inputs
    names = [f"INPUT__{i}" for i in range(len(capture))]
    with torch.no_grad():
        out = model(*capture)
    outputs = [f"OUTPUT__{i}" for i in range(1 if isinstance(out, torch.Tensor) else len(out))]
    shapes = None
    if dynamic:
        batch = torch.export.Dim("batch", min=1, max=opts.max_batch_size)
        shapes = tuple({0: batch} for _ in capture)
    path = os.path.join(version_dir, "model.onnx")
    # The exporter reports its steps on stdout and logs what it skips (torchvision's ops when absent):
    # all of it goes to the export's log, kept when it fails; export prints one line.
    log = exporter_log.log_path(opts.output, opts.name)
    try:
        with exporter_log.captured(log), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecation notices (pytree)
            program = torch.onnx.export(
                model, tuple(capture), dynamo=True, input_names=names, output_names=outputs,
                dynamic_shapes=shapes, opset_version=opts.onnx_opset, external_data=False,
            )  # fmt: skip
            assert program is not None
            program.save(path)
    except Exception as e:
        raise exporter_log.refusal(
            e, "torch.onnx.export", "onnx", log, "a module the dynamo exporter translates"
            + (f", with a dynamic batch dimension 1..{opts.max_batch_size}" if dynamic else ""),
        ) from None  # fmt: skip
    proto = onnx.load(path, load_external_data=False)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])

    def run(*xs: Any) -> list[Any]:
        feeds = {n: t.detach().cpu().numpy() for n, t in zip(names, xs, strict=True)}
        return [torch.from_numpy(a) for a in session.run(outputs, feeds)]

    def load(device: Any) -> Any:
        gpu = onnxruntime.InferenceSession(
            path, providers=[("CUDAExecutionProvider", {"device_id": device.index or 0})]
        )
        return lambda *xs: gpu.run(outputs, {n: t.detach().cpu().numpy() for n, t in zip(names, xs, strict=True)})

    return Artefact(
        path=path,
        run=run,
        meta={
            "onnx_opset": opset,
            "onnx_ir_version": int(proto.ir_version),
            "onnx_version": onnx.__version__,
            "onnxruntime_version": onnxruntime.__version__,
        },
        load=load,
        device_wide=True,
    )


def facts(meta: dict[str, Any]) -> str:
    """What `export` prints of export.json for an ONNX model."""
    return f"ONNX opset {meta.get('onnx_opset')}, IR {meta.get('onnx_ir_version')}"
