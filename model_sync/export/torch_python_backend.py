"""A PyTorch model served by Triton's python backend: `export --target local` copies this file to
<model>/<N>/model.py beside model.pt (TorchScript, loaded with torch.jit.load: the artefact the
cloud's pytorch_libtorch platform loads) or model.pt2 (an AOTInductor package, loaded with
torch._inductor.aoti_load_package: the artefact the cloud's torch_aoti platform loads). It runs
inside tritonserver's python backend stub: keep it numpy<2-compatible and free of model_sync imports.

Inputs INPUT__i / outputs OUTPUT__i as in config.pbtxt. With max_batch_size > 0 the requests of
one execute() call (a dynamic batch) run as one batch. What one batch costs beyond the model
(docs/gpu-benchmark.md measured the earlier wrapper's per-image host work as its bound):

- inputs: each request's tensor is copied once (np.concatenate(out=...) on a GPU instance,
  torch.cat(out=...) on a CPU one) into a staging buffer
  kept per instance and grown only when a larger batch arrives: pinned host memory on a GPU
  instance, so the one host-to-device copy of the batch is non-blocking, then a device buffer;
- a request whose input Triton already holds on the GPU (a CUDA shared-memory client, with
  FORCE_CPU_ONLY_INPUT_TENSORS "no", which export sets for KIND_GPU) is taken through DLPack
  without a host copy;
- outputs: the batch's outputs are copied once into pinned host buffers (non-blocking, one
  synchronisation) and every request gets a view of its rows: no copy on this side. Triton
  copies each response into its shared memory when execute() returns, before the next
  execute() reuses the buffers.

Requests whose non-batch dims differ, and models without batching, run one request at a time.

A failure of the model (or of reading the requests) RAISES pb_utils.TritonModelException, one line
naming the model, its version and the exception (a TorchScript error's last line, its traceback
left out), so Triton fails every request of that execute() call, which one forward failed for all
of them anyway. Raised, not returned as `InferenceResponse(error=...)`: measured on tritonserver
2.51, a returned error response reaches the client as HTTP 500 but is counted in
nv_inference_request_success, so the gray release and every alert on nv_inference_request_failure
would miss it; a raised exception is counted there (reason "BACKEND") and in the statistics API's
`fail`.
"""

import json
import os
import warnings

import numpy as np
import torch

try:  # only importable inside Triton's python backend
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover
    pb_utils = None


class _Staging:
    """One reusable flat buffer per slot, grown to the largest batch seen (never shrunk)."""

    def __init__(self, device, pinned):
        self.device, self.pinned = device, pinned
        self.buffers = {}

    def view(self, slot, shape, dtype):
        numel = 1
        for d in shape:
            numel *= int(d)
        buf = self.buffers.get(slot)
        if buf is None or buf.dtype != dtype or buf.numel() < numel:
            size = max(numel, 2 * buf.numel() if buf is not None and buf.dtype == dtype else 0)
            buf = torch.empty(size, dtype=dtype, device=self.device, pin_memory=self.pinned)
            self.buffers[slot] = buf
        return buf[:numel].view(tuple(shape))


def _one_line(e):
    """The exception in one line: TorchScript's interpreter puts its tracebacks first and the
    error itself ("builtins.ValueError: ...") on the last line; other exceptions get their type."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if lines and lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        text = lines[-1]
    else:
        text = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
    return text if len(text) <= 500 else text[:497] + "..."


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        self.name, self.version = args["model_name"], args["model_version"]
        gpu = args.get("model_instance_kind") == "GPU" and torch.cuda.is_available()
        self.device = torch.device(f"cuda:{args.get('model_instance_device_id', '0')}" if gpu else "cpu")
        self.gpu = gpu
        if gpu:
            torch.cuda.set_device(self.device)
            # The host side of a GPU instance is memory copies; torch's intra-op thread pool (one
            # thread per core, in every instance's stub process) only spins against the others:
            # measured on an H200, 16 cores busy at 200 req/s with it, against 2-3 cores without.
            torch.set_num_threads(1)
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        if os.path.exists(os.path.join(version_dir, "model.pt2")):
            import torch._inductor as inductor  # an AOTInductor package runs on the device it was compiled for

            index = self.device.index if gpu and self.device.index is not None else -1
            self.model = inductor.aoti_load_package(os.path.join(version_dir, "model.pt2"), device_index=index)
        else:
            self.model = torch.jit.load(os.path.join(version_dir, "model.pt"), map_location=self.device).eval()
        self.batching = int(cfg.get("max_batch_size", 0)) > 0
        self.inputs = [i["name"] for i in cfg["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in cfg["output"]]
        self.host = _Staging("cpu", pinned=gpu)  # inputs gathered here (pinned on a GPU instance)
        self.dev = _Staging(self.device, pinned=False)  # the batch on the GPU (a GPU instance only)
        self.out = _Staging("cpu", pinned=gpu)  # the batch's outputs, back on the host (a GPU instance only)
        # Triton hands inputs as read-only views of its shared memory; they are only ever read.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

    def _tensor(self, request, name):
        t = pb_utils.get_input_tensor_by_name(request, name)
        if not t.is_cpu():  # already on the GPU (FORCE_CPU_ONLY_INPUT_TENSORS: "no")
            return torch.from_dlpack(t.to_dlpack())
        return torch.from_numpy(t.as_numpy())

    def _stage(self, slot, parts):
        """The batch of one input on the model's device, from every request's part: one copy each."""
        shape = (sum(int(p.shape[0]) for p in parts), *parts[0].shape[1:])
        if not self.gpu:
            if len(parts) == 1:
                return parts[0]  # the model reads Triton's buffer as it is
            return torch.cat(parts, out=self.host.view(slot, shape, parts[0].dtype))
        on_gpu = [p.is_cuda for p in parts]
        batch = self.dev.view(slot, shape, parts[0].dtype)
        if all(on_gpu):
            return torch.cat(parts, out=batch)
        if any(on_gpu):
            parts = [p.cpu() for p in parts]
        host = self.host.view(slot, shape, parts[0].dtype)
        np.concatenate([p.numpy() for p in parts], out=host.numpy())  # one memcpy per part, this thread
        return batch.copy_(host, non_blocking=True)

    def _run(self, tensors):
        with torch.inference_mode():
            out = self.model(*tensors)
        return (out,) if isinstance(out, torch.Tensor) else tuple(out)

    def _to_host(self, outs):
        """The outputs as host tensors: pinned reusable buffers on a GPU instance."""
        if not self.gpu:
            return [o.detach() for o in outs]
        host = [self.out.view(j, o.shape, o.dtype).copy_(o, non_blocking=True) for j, o in enumerate(outs)]
        torch.cuda.current_stream(self.device).synchronize()
        return host

    def _batched(self, tensors):
        """One forward over every request; each request gets a view of its rows."""
        sizes = [int(t[0].shape[0]) for t in tensors]
        batch = [self._stage(i, [t[i] for t in tensors]) for i in range(len(self.inputs))]
        outs = self._to_host(self._run(batch))
        per_request, start = [], 0
        for n in sizes:
            per_request.append([o[start : start + n].numpy() for o in outs])
            start += n
        return per_request

    def _single(self, tensors):
        """One request on its own: fresh host arrays (a later request must not overwrite them)."""
        outs = self._run([t.to(self.device, non_blocking=True) for t in tensors])
        return [o.detach().cpu().numpy() for o in outs]

    def execute(self, requests):
        try:
            tensors = [[self._tensor(r, name) for name in self.inputs] for r in requests]
            uniform = all(
                t[i].shape[1:] == tensors[0][i].shape[1:] and t[i].dtype == tensors[0][i].dtype
                for t in tensors
                for i in range(len(self.inputs))
            )
            if self.batching and uniform:
                per_request = self._batched(tensors)
            else:
                per_request = [self._single(t) for t in tensors]
        except Exception as e:
            # from None: the line already carries the cause, no chained traceback beside it
            raise pb_utils.TritonModelException(
                f"model '{self.name}' version {self.version} failed: {_one_line(e)}"
            ) from None
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor(name, a if a.dtype == dtype else a.astype(dtype))
                    for (name, dtype), a in zip(self.outputs, outs, strict=False)
                ]
            )
            for outs in per_request
        ]
