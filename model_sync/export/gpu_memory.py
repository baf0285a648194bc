"""One model instance's GPU memory, as `export` records it in export.json (`gpu_memory`) and
`push` reads it strictly and copies it into the manifest (model_sync/records/version_manifest.py,
`read_gpu_memory`; schema: model_sync.records.schemas.GPU_MEMORY); the planner
(model_sync/admission/gpu_plan.py) sums it over a deployment's models.

At the largest batch Triton may form for the model (`max_batch_size`; a model that does not batch,
max_batch_size 0, at the example's own shape, recorded as batch 1):

  measured   a GPU instance (KIND_GPU, the cloud default, or KIND_AUTO, which Triton places on a GPU
             when there is one) exported where torch sees CUDA: the saved TorchScript is loaded on
             the GPU, the allocator's peak statistics are reset, one batch runs, and the figure is
             torch.cuda.max_memory_reserved(): what PyTorch's caching allocator holds resident
             (weights, activations, workspaces, allocator slack), the CUDA context excluded. A
             batch that fails or runs out of memory there fails the export (exit 6).
  estimated  no GPU here: the bytes of the parameters and buffers plus the input and output tensors
             at that batch. Intermediate activations (and the CUDA context) are NOT counted, so it
             is a floor, marked as such in `basis`.
  cpu        a KIND_CPU instance: no GPU memory (0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from model_sync import errors


def _tensor_bytes(tensors: Sequence[Any]) -> int:
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors)


def _at_batch(tensors: Sequence[Any], example_batch: int, batch: int) -> int:
    """Bytes of `tensors` (batch dimension first, `example_batch` rows) at `batch` rows."""
    return sum(int(t.numel()) * int(t.element_size()) // example_batch * batch for t in tensors)


def parameter_bytes(module: Any) -> int:
    """Bytes of a module's parameters and buffers, each storage counted once (tied weights)."""
    seen: set[int] = set()
    total = 0
    for t in (*module.parameters(), *module.buffers()):
        storage = t.untyped_storage()
        if storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        total += int(storage.nbytes())
    return total


def measure(load: Callable[[Any], Callable[..., Any]], inputs: list[Any], what: str = "TorchScript",
            device_wide: bool = False) -> tuple[int, str]:  # fmt: skip
    """(the GPU memory one batch of `inputs` takes through the model `load(device)` loads on the GPU,
    the GPU's name). torch's models: torch.cuda.max_memory_reserved() over the load and the batch,
    the allocator emptied first and what it held before subtracted, so earlier work of this process
    is not counted. `device_wide` (ONNX Runtime, whose arena torch's allocator does not see): the
    drop of the device's free memory (cudaMemGetInfo) from before the load to after the batch."""
    import torch

    device = torch.device("cuda", torch.cuda.current_device())
    name = torch.cuda.get_device_name(device)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved(device)
    free_before = torch.cuda.mem_get_info(device)[0]
    try:
        model = load(device)
        on_gpu = [t.to(device) for t in inputs]
        torch.cuda.reset_peak_memory_stats(device)
        with torch.no_grad():
            model(*on_gpu)
        torch.cuda.synchronize(device)
    except Exception as e:  # a GPU instance that cannot run one batch on a GPU would fail in Triton too
        batch = f"{tuple(inputs[0].shape)} {str(inputs[0].dtype).removeprefix('torch.')}"
        oom = isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()
        raise errors.SyncError(
            errors.CHECK_FAILED,
            f"gpu memory: the {what} model {'ran out of memory' if oom else 'failed'} on {name} with input {batch} "
            f"({errors.one_line(str(e), 160)}); allowed: "
            + ("a smaller --max-batch-size" if oom else "a model that runs on the GPU, or --instance-kind KIND_CPU"),
        ) from None
    if device_wide:
        peak = free_before - torch.cuda.mem_get_info(device)[0]
    else:
        peak = torch.cuda.max_memory_reserved(device) - before
    del model, on_gpu
    torch.cuda.empty_cache()
    return int(max(peak, 0)), name


def record(
    load: Callable[[Any], Callable[..., Any]] | None,
    module: Any,
    *,
    kind: str,
    max_batch_size: int,
    inputs: list[Any],
    outputs: Sequence[Any],
    make_inputs: Callable[[int | None], list[Any]],
    what: str = "TorchScript",
    device_wide: bool = False,
) -> dict[str, Any]:
    """export.json's `gpu_memory` for the exported model `load(device)` loads (`module`: the eager
    module it came from), an instance of `kind`, from the example `inputs` and their `outputs`;
    `make_inputs(batch)` builds example inputs at another batch (None: the example's own shape)."""
    import torch

    batch = max_batch_size if max_batch_size > 0 else 1
    shown = f"batch {batch}" if max_batch_size > 0 else "the example's own shape (max_batch_size 0)"
    if kind == "KIND_CPU":
        return {"bytes_per_instance": 0, "method": "cpu", "batch": batch, "device": None,
                "basis": f"{kind}: its instances use no GPU memory"}  # fmt: skip
    if torch.cuda.is_available() and load is not None:
        peak, device = measure(load, make_inputs(max_batch_size if max_batch_size > 0 else None), what, device_wide)
        how = ("the drop of the device's free memory (cudaMemGetInfo) over the session's creation and one inference"
               if device_wide else "torch.cuda.max_memory_reserved() over one inference")  # fmt: skip
        return {"bytes_per_instance": peak, "method": "measured", "batch": batch, "device": device,
                "basis": f"{how} at {shown} on {device}: {what}'s resident peak (weights, activations, "
                         "workspaces); the CUDA context is not included"}  # fmt: skip
    weights = parameter_bytes(module)
    if max_batch_size > 0:
        example = int(inputs[0].shape[0])
        io = _at_batch(inputs, example, batch) + _at_batch(outputs, example, batch)
    else:
        io = _tensor_bytes(inputs) + _tensor_bytes(outputs)
    return {"bytes_per_instance": weights + io, "method": "estimated", "batch": batch, "device": None,
            "basis": f"estimated without a GPU: parameters and buffers ({weights} bytes) + inputs and outputs at "
                     f"{shown} ({io} bytes); intermediate activations and the CUDA context are not counted"}  # fmt: skip
