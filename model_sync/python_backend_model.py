"""Triton python-backend wrapper for a TorchScript model: `export --target local` copies this
file to <model>/<N>/model.py beside model.pt (the same artefact the cloud's pytorch_libtorch
backend loads). It runs inside tritonserver's python backend stub: keep it numpy<2-compatible
and free of model_sync imports.

Inputs INPUT__i / outputs OUTPUT__i as in config.pbtxt. With max_batch_size > 0 the requests of
one execute() call (a dynamic batch) are concatenated along dim 0, run once, and split back.
"""

import json
import os

import numpy as np
import torch

try:  # only importable inside Triton's python backend
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover
    pb_utils = None


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        gpu = args.get("model_instance_kind") == "GPU" and torch.cuda.is_available()
        self.device = torch.device(f"cuda:{args.get('model_instance_device_id', '0')}" if gpu else "cpu")
        path = os.path.join(args["model_repository"], args["model_version"], "model.pt")
        self.model = torch.jit.load(path, map_location=self.device).eval()
        self.batching = int(cfg.get("max_batch_size", 0)) > 0
        self.inputs = [i["name"] for i in cfg["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in cfg["output"]]

    def _forward(self, tensors):
        with torch.inference_mode():
            out = self.model(*[torch.from_numpy(np.ascontiguousarray(t)).to(self.device) for t in tensors])
        out = (out,) if isinstance(out, torch.Tensor) else tuple(out)
        return [o.detach().cpu().numpy() for o in out]

    def execute(self, requests):
        arrays = [[pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.inputs] for r in requests]
        try:
            if self.batching and len(requests) > 1:
                sizes = [a[0].shape[0] for a in arrays]
                merged = self._forward([np.concatenate([a[i] for a in arrays]) for i in range(len(self.inputs))])
                bounds = np.cumsum(sizes)[:-1]
                per_request = list(zip(*[np.split(m, bounds) for m in merged], strict=False))
            else:
                per_request = [self._forward(a) for a in arrays]
        except Exception as e:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError(f"inference failed: {e}")) for _ in requests]
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor(name, np.asarray(t).astype(dtype))
                    for (name, dtype), t in zip(self.outputs, outs, strict=False)
                ]
            )
            for outs in per_request
        ]
