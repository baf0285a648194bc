"""`export`: a torch.nn.Module to a Triton model directory in one of three formats (`exporter`, with the
options in `options` and one module per format: `torchscript`, `pt2`, `onnx`), the batching and
instance presets (`profiles`) and the python-backend models copied into a model for the local
Triton (`torch_python_backend` for TorchScript and .pt2, `onnx_python_backend` for ONNX)."""
