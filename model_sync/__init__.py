"""model_sync: export TorchScript models, publish them to the S3 model repository,
hot-reload them into Triton through the repository agent, verify, promote, roll back."""

__version__ = "0.1.0"
