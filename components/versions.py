"""Every chart, image and add-on version the platform deploys, pinned in one place.

Bumping a version is a one-line change here, reviewed through the stack previews.
Each entry names where the version comes from.
"""

from __future__ import annotations

# NVIDIA Triton Inference Server container (NGC). 25.10 ships Triton 2.62 and
# PyTorch/LibTorch 2.9 (see model_sync/compat.py for the release -> LibTorch table).
# ref: https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html
TRITON_IMAGE_REPOSITORY = "nvcr.io/nvidia/tritonserver"
TRITON_IMAGE_TAG = "25.10-py3"
TRITON_IMAGE = f"{TRITON_IMAGE_REPOSITORY}:{TRITON_IMAGE_TAG}"

# ---- AWS foundation: EKS add-ons, NVIDIA device plugin, DCGM exporter ---------------

# ---- Serving plane: ingress, cert-manager, monitoring, logging, prometheus-adapter ---

# ---- Node autoscaling ---------------------------------------------------------------
