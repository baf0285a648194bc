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
`make test`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

# Triton container release -> (Triton server version, PyTorch/LibTorch version inside).
TRITON_RELEASES: dict[str, tuple[str, str]] = {
    "24.01": ("2.42.0", "2.2.0a0"),
    "24.02": ("2.43.0", "2.3.0a0"),
    "24.03": ("2.44.0", "2.3.0a0"),
    "24.04": ("2.45.0", "2.3.0a0"),
    "24.05": ("2.46.0", "2.4.0a0"),
    "24.06": ("2.47.0", "2.4.0a0"),
    "24.07": ("2.48.0", "2.4.0a0"),
    "24.08": ("2.49.0", "2.5.0a0"),
    "24.09": ("2.50.0", "2.5.0a0"),
    "24.10": ("2.51.0", "2.5.0a0"),
    "24.11": ("2.52.0", "2.6.0a0"),
    "24.12": ("2.53.0", "2.6.0a0"),
    "25.01": ("2.54.0", "2.6.0a0"),
    "25.02": ("2.55.0", "2.7.0a0"),
    "25.03": ("2.56.0", "2.7.0a0"),
    "25.04": ("2.57.0", "2.7.0a0"),
    "25.05": ("2.58.0", "2.8.0a0"),
    "25.06": ("2.59.0", "2.8.0a0"),
    "25.08": ("2.60.0", "2.8.0a0"),
    "25.09": ("2.61.0", "2.9.0a0"),
    "25.10": ("2.62.0", "2.9.0a0"),
    "25.11": ("2.63.0", "2.10.0a0"),
}

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
    return TRITON_RELEASES[triton_release(image)][1]


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
RESULTS = ("compatible", "exempt", "skew-allowed")


def served_by_libtorch(platform: str, backend: str) -> bool:
    return platform == LIBTORCH_PLATFORM or backend == LIBTORCH_BACKEND


def assess(
    *,
    platform: str,
    backend: str,
    exporter_torch: str | None,
    image: str | None,
    allow_skew: bool = False,
    target: str | None = None,
    allow_local_target: bool = False,
) -> dict[str, str | None]:
    """The `compatibility` provenance record of one model version for one target image.

    Raises VersionSkewError / UnknownImageError / UnverifiableError (one line each) unless the
    model is exempt, loads, or `allow_skew` is set (then result "skew-allowed" with the reason).
    A model exported with `target` "local" for an NGC image whose python backend has no torch
    raises LocalTargetError unless `allow_local_target` (then "exempt", the override in `detail`)."""
    if target == "local" and image is not None and python_backend_lacks_torch(image):
        if not allow_local_target:
            raise LocalTargetError(local_target_detail(image))
        return {
            "triton_image": image,
            "libtorch_version": None,
            "result": "exempt",
            "detail": f"published with --allow-local-target: {local_target_detail(image).split('; allowed:')[0]}",
        }
    if not served_by_libtorch(platform, backend):
        return {
            "triton_image": image,
            "libtorch_version": None,
            "result": "exempt",
            "detail": f"backend {backend or platform!r} is not LibTorch: the serving environment's own torch loads it",
        }
    serving: str | None = None
    try:
        if image is None:
            raise UnverifiableError(
                "triton image: unknown for the target environment; allowed: set tritonImage in model-sync.yaml "
                "(or the stack output tritonImage, or --triton-image), or --allow-version-skew"
            )
        serving = libtorch_version(image)
        if exporter_torch is None:
            raise UnverifiableError(
                "torch version: unknown (no export.json torch_version for a pytorch_libtorch model); "
                "allowed: a directory written by `model-sync export`, or --allow-version-skew"
            )
        detail = check(exporter_torch, image, allow_skew=allow_skew)
    except (UnverifiableError, UnknownImageError) as e:
        if not allow_skew:
            raise
        detail = str(e)
    return {
        "triton_image": image,
        "libtorch_version": serving,
        "result": "skew-allowed" if detail else "compatible",
        "detail": detail,
    }


def loadable(
    platform: str, backend: str, exporter_torch: str | None, image: str | None, target: str | None = None
) -> str:
    """For `status`: "yes" / "no" (version skew, or a `--target local` model for an NGC image whose
    python backend has no torch) / "exempt" (not LibTorch) / "unknown" (torch version or image
    unknown, or the image has no table entry)."""
    if target == "local" and image is not None and python_backend_lacks_torch(image):
        return "no"
    if not served_by_libtorch(platform, backend):
        return "exempt"
    if exporter_torch is None or image is None:
        return "unknown"
    try:
        return "yes" if can_load(exporter_torch, image) else "no"
    except ValueError:  # UnknownImageError, or a malformed version
        return "unknown"


def read_file_format_version(path: Path) -> int:
    """TorchScript archives are zip files with a `version` record under the root folder."""
    import zipfile  # only export reads archives

    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.endswith("/.data/version") or (name.count("/") == 1 and name.endswith("/version")):
                return int(archive.read(name).decode().strip())
    raise ValueError(f"torchscript: {path} has no version record; allowed: a file written by torch.jit.save")
