"""Version alignment: never publish a TorchScript model the target Triton cannot load.

A TorchScript file saved by a newer PyTorch than the LibTorch inside the serving image
fails at load ("Unknown builtin op", "version_ number ... not supported", ABI errors).
The Triton container's PyTorch backend links the LibTorch of the NGC PyTorch container
of the same release, so the table below maps each Triton container release to that
PyTorch version.

# ref: https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html
#      (Deep Learning Frameworks Support Matrix, "PyTorch" row of each container release)
# ref: https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/
# NGC ships pre-release builds (e.g. "2.9.0a0+<sha>"): such a build is treated as the
# minor release it precedes, so a model exported with torch 2.9.x is accepted by it.
Bumping the Triton image (components/upstream/versions.py) without adding its row here fails
`make test`. This module holds the facts and the LibTorch comparison; the verdict on one version for
one environment, per export format, and the compatibility record it writes are
model_sync/admission/alignment.py's (the record: model_sync/records/compatibility.py).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path


class Release(NamedTuple):
    """What one Triton container release (`<YY.MM>-py3`) serves models with (docs/triton-releases.md
    transcribes the release notes' figures; tests/model_sync/contract/test_compat.py holds this table
    to them)."""

    triton: str  # the Triton server version
    pytorch: str  # the PyTorch (LibTorch) of its PyTorch backend: pytorch_libtorch and torch_aoti models
    onnxruntime: str  # the ONNX Runtime of its onnxruntime backend
    tensorrt: str | None  # its TensorRT (None: not stated in the sources the table was written from)
    torch_aoti: str  # its PyTorch backend's `torch_aoti` platform: "" none, "beta" (loads model.pt2,
    #                  dynamic batching not stated), "batching" (dynamic batching stated): AOTI_STATES


AOTI_STATES = ("", "beta", "batching")

# Triton container release -> Release.
TRITON_RELEASES: dict[str, Release] = {
    "24.01": Release("2.42.0", "2.2.0a0", "1.16.3", "8.6.1.6", ""),
    "24.02": Release("2.43.0", "2.3.0a0", "1.16.3", "8.6.3", ""),
    "24.03": Release("2.44.0", "2.3.0a0", "1.17.2", "8.6.3", ""),
    "24.04": Release("2.45.0", "2.3.0a0", "1.17.3", "8.6.3", ""),
    "24.05": Release("2.46.0", "2.4.0a0", "1.18.0", "10.0.1.6", ""),
    "24.06": Release("2.47.0", "2.4.0a0", "1.18.0", "10.1.0.27", ""),
    "24.07": Release("2.48.0", "2.4.0a0", "1.18.1", "10.2.0.19", ""),
    "24.08": Release("2.49.0", "2.5.0a0", "1.18.1", "10.3.0.26", ""),
    "24.09": Release("2.50.0", "2.5.0a0", "1.19.2", "10.4.0.26", ""),
    "24.10": Release("2.51.0", "2.5.0a0", "1.19.2", "10.5.0.18", ""),
    "24.11": Release("2.52.0", "2.6.0a0", "1.19.2", "10.6.0.26", ""),
    "24.12": Release("2.53.0", "2.6.0a0", "1.20.1", "10.7.0.23", ""),
    "25.01": Release("2.54.0", "2.6.0a0", "1.20.1", "10.8.0.43", ""),
    "25.02": Release("2.55.0", "2.7.0a0", "1.20.1", "10.8.0.43", ""),
    "25.03": Release("2.56.0", "2.7.0a0", "1.21.0", "10.9.0.34", ""),
    "25.04": Release("2.57.0", "2.7.0a0", "1.21.0", "10.9.0.34", ""),
    "25.05": Release("2.58.0", "2.8.0a0", "1.22.0", "10.10.0.31", ""),
    "25.06": Release("2.59.0", "2.8.0a0", "1.22.0", "10.11.0.33", ""),
    "25.08": Release("2.60.0", "2.8.0a0", "1.23.0", "10.13.2.6", ""),
    "25.09": Release("2.61.0", "2.9.0a0", "1.23.0", "10.13.3.9", ""),
    "25.10": Release("2.62.0", "2.9.0a0", "1.23.1", "10.13.3.9", ""),
    "25.11": Release("2.63.0", "2.10.0a0", "1.23.2", "10.14.1.48", ""),
    "26.01": Release("2.65.0", "2.10.0a0", "1.23.2", None, ""),
    "26.02": Release("2.66.0", "2.11.0a0", "1.24.1", None, ""),
    "26.03": Release("2.67.0", "2.11.0a0", "1.24.2", None, "beta"),
    "26.04": Release("2.68.0", "2.12.0a0", "1.24.4", None, "beta"),
    "26.05": Release("2.69.0", "2.12.0a0", "1.24.4", None, "beta"),
}

# ONNX Runtime minor -> (the ONNX release it implements, its highest opset of the default domain,
# its highest IR version). A model stamped with a higher opset or IR version does not load
# ("Unsupported model IR version", "opset ... is under development").
# ref: https://onnxruntime.ai/docs/reference/compatibility.html
ONNX_RUNTIME_SUPPORT: dict[str, tuple[str, int, int]] = {
    "1.16": ("1.14.1", 19, 9),
    "1.17": ("1.15.0", 20, 9),
    "1.18": ("1.16.0", 21, 10),
    "1.19": ("1.16.1", 21, 10),
    "1.20": ("1.16.1", 21, 10),
    "1.21": ("1.17.0", 22, 10),
    "1.22": ("1.18.0", 23, 11),
    "1.23": ("1.19.0", 24, 12),
    "1.24": ("1.20.0", 25, 13),
}

# The first release whose torch_aoti platform states dynamic batching: until one does, `export`
# keeps TorchScript as its default format (default_format()). None: no release in the table does.
AOTI_BATCHING_RELEASE: str | None = next((r for r, v in TRITON_RELEASES.items() if v.torch_aoti == "batching"), None)


def default_format(image: str) -> str:
    """`export --format`'s default for an image: pt2 once its release's torch_aoti states dynamic
    batching (every model here batches dynamically), else torchscript."""
    return "pt2" if TRITON_RELEASES[triton_release(image)].torch_aoti == "batching" else "torchscript"


_TAG = re.compile(r"^(?P<release>\d{2}\.\d{2})-py3(?:-[a-z0-9-]+)?$")
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")


class VersionSkewError(ValueError):
    """The model needs a newer PyTorch than the target image's LibTorch."""


class UnknownImageError(ValueError):
    """The Triton image is not in TRITON_RELEASES."""


def triton_release(image: str) -> str:
    """`nvcr.io/nvidia/tritonserver:25.10-py3[@sha256:...]` -> `25.10`."""
    ref = image.split("@", 1)[0]
    repo, _, tag = ref.rpartition(":")
    match = _TAG.match(tag) if repo.endswith("tritonserver") else None
    if not match:
        raise UnknownImageError(
            f"triton image: {image!r} is not an NGC tritonserver image; allowed: <registry>/tritonserver:<YY.MM>-py3"
        )
    release = match.group("release")
    if release not in TRITON_RELEASES:
        raise UnknownImageError(
            f"triton image: release {release} has no LibTorch entry; allowed: {', '.join(TRITON_RELEASES)} (add "
            "it to model_sync/contract/compat.py)"
        )
    return release


def libtorch_version(image: str) -> str:
    return TRITON_RELEASES[triton_release(image)].pytorch


def _minor(version: str) -> tuple[int, int]:
    match = _VERSION.match(version)
    if not match:
        raise UnverifiableError(f"torch version: {version!r} is not a version; allowed: MAJOR.MINOR[.PATCH][suffix]")
    return int(match.group(1)), int(match.group(2))


def can_load(exporter_torch: str, image: str) -> bool:
    """True when a model exported with torch `exporter_torch` loads in `image`.

    Compared at minor-version granularity: LibTorch reads TorchScript written by the
    same or an older minor release; a pre-release `2.9.0a0` counts as 2.9.
    """
    return _minor(exporter_torch) <= _minor(libtorch_version(image))


def check(exporter_torch: str, image: str, *, allow_skew: bool = False) -> str | None:
    """Raise VersionSkewError (one line naming both versions) unless the model loads.
    With `allow_skew`, return the warning text instead (recorded in provenance)."""
    serving = libtorch_version(image)
    if can_load(exporter_torch, image):
        return None
    message = (
        f"version skew: model exported with torch {exporter_torch} is newer than LibTorch {serving} in {image}; "
        f"allowed: export with torch <= {'.'.join(map(str, _minor(serving)))}.x, or --allow-version-skew"
    )
    if allow_skew:
        return message
    raise VersionSkewError(message)


class UnverifiableError(ValueError):
    """The model's exporting torch version or the target image is unknown: nothing to compare."""


class LocalTargetError(ValueError):
    """A `--target local` model (python backend + torch.jit.load) for an image without torch in its python backend."""


def python_backend_lacks_torch(image: str) -> bool:
    """True for NGC tritonserver images (and registry mirrors of them) whose python backend has no
    torch: every `<YY.MM>-py3*` tag except the `-pyt-python-py3` variant, which ships PyTorch for it.
    # ref: https://github.com/triton-inference-server/python_backend#pytorch-in-python-backend
    # ref: https://catalog.ngc.nvidia.com/orgs/nvidia/containers/tritonserver (tags)"""
    repo, _, tag = image.split("@", 1)[0].rpartition(":")
    if not repo.rsplit("/", 1)[-1] == "tritonserver" or not re.match(r"^\d{2}\.\d{2}-", tag):
        return False
    return "pyt-python" not in tag


def local_target_detail(image: str) -> str:
    return (
        f"local target: a `--target local` model (python backend running torch.jit.load) cannot load in {image}, "
        "whose python backend has no torch; allowed: export with --target cloud, "
        "a <YY.MM>-pyt-python-py3 image, or --allow-local-target"
    )


# Model configurations served by Triton's PyTorch (LibTorch) backend. Everything else is exempt:
# a python-backend model (the local target's model.py) runs in the serving environment's own
# torch, which model-sync does not control.
# ref: https://github.com/triton-inference-server/pytorch_backend#configuration
LIBTORCH_PLATFORM = "pytorch_libtorch"
LIBTORCH_BACKEND = "pytorch"


def served_by_libtorch(platform: str, backend: str) -> bool:
    return platform == LIBTORCH_PLATFORM or backend == LIBTORCH_BACKEND


def read_file_format_version(path: Path) -> int:
    """TorchScript archives are zip files with a `version` record under the root folder."""
    import zipfile  # only export reads archives

    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.endswith("/.data/version") or (name.count("/") == 1 and name.endswith("/version")):
                return int(archive.read(name).decode().strip())
    raise ValueError(f"torchscript: {path} has no version record; allowed: a file written by torch.jit.save")
