"""`export`: a torch.nn.Module to a Triton model directory (`torchscript`), the batching and instance presets
(`profiles`) and the python-backend wrapper copied into a model for CPU Triton (`torch_python_backend`)."""
