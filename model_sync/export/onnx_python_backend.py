"""An ONNX model served by Triton's python backend: `export --format onnx --target local` copies this
file to <model>/<N>/model.py beside model.onnx (the artefact the cloud's onnxruntime_onnx platform
loads), and runs it in an ONNX Runtime session. It runs inside tritonserver's python backend stub:
keep it numpy<2-compatible and free of model_sync imports (numpy and onnxruntime only).

Inputs INPUT__i / outputs OUTPUT__i as in config.pbtxt and in the graph. With max_batch_size > 0 the
requests of one execute() call (a dynamic batch) whose non-batch dims agree run as one batch: each
input concatenated once, one session.run, every request answered with its rows. A KIND_GPU instance
runs the CUDA execution provider on its device (the CPU provider takes what CUDA does not implement;
without the CUDA provider, onnxruntime rather than onnxruntime-gpu, its load fails);
inputs reach it from host memory (the config keeps Triton's default, CPU inputs).

A failure RAISES pb_utils.TritonModelException (one line: model, version, the error), so Triton fails
and counts every request of that execute() call (nv_inference_request_failure): measured on
tritonserver 2.51, an `InferenceResponse(error=...)` is counted as a success (the reasoning of
torch_python_backend.py, the same here).
"""

import json
import os

import numpy as np
import onnxruntime

try:  # only importable inside Triton's python backend
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover
    pb_utils = None


def _one_line(e):
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return text if len(text) <= 500 else text[:497] + "..."


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        self.name, self.version = args["model_name"], args["model_version"]
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        options = onnxruntime.SessionOptions()
        providers: list = ["CPUExecutionProvider"]
        if args.get("model_instance_kind") == "GPU":
            # A GPU instance that quietly ran on the CPU would pass every check and serve a fraction
            # of what was planned: it fails its load instead, and the agent keeps what served before.
            if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
                raise pb_utils.TritonModelException(
                    f"model '{self.name}' version {self.version}: a KIND_GPU instance, and onnxruntime "
                    f"{onnxruntime.__version__} has no CUDAExecutionProvider ({onnxruntime.get_available_providers()}); "
                    "allowed: onnxruntime-gpu in the python backend's environment, or --instance-kind KIND_CPU"
                )
            device = int(args.get("model_instance_device_id", "0"))
            providers = [("CUDAExecutionProvider", {"device_id": device}), "CPUExecutionProvider"]
            options.intra_op_num_threads = 1  # the host side is copies: no thread pool spinning per instance
        self.session = onnxruntime.InferenceSession(path, sess_options=options, providers=providers)
        self.batching = int(cfg.get("max_batch_size", 0)) > 0
        self.inputs = [i["name"] for i in cfg["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in cfg["output"]]

    def _run(self, arrays):
        return self.session.run([name for name, _ in self.outputs], dict(zip(self.inputs, arrays, strict=True)))

    def execute(self, requests):
        try:
            arrays = [[pb_utils.get_input_tensor_by_name(r, name).as_numpy() for name in self.inputs] for r in requests]
            uniform = all(
                a[i].shape[1:] == arrays[0][i].shape[1:] and a[i].dtype == arrays[0][i].dtype
                for a in arrays
                for i in range(len(self.inputs))
            )
            if self.batching and uniform and len(arrays) > 1:
                sizes = [int(a[0].shape[0]) for a in arrays]
                outs = self._run([np.concatenate([a[i] for a in arrays]) for i in range(len(self.inputs))])
                per_request, start = [], 0
                for n in sizes:
                    per_request.append([o[start : start + n] for o in outs])
                    start += n
            else:
                per_request = [self._run(a) for a in arrays]
        except Exception as e:
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
