"""Alignment: can the target environment's Triton load this version, in its export format?

Decided before any S3 request of push (from export.json) and before anything is written by promote
(from the source manifest), against the environment's Triton image (model_sync/contract/compat.py:
what each release serves models with) and, for a .pt2 compiled for CUDA, the GPU architectures of
the deployment that serves the model (`tritonGpus.<deployment>.architectures`: every instance type
its node group may launch). One rule per format:

    torchscript  platform pytorch_libtorch: the image's LibTorch minor >= the exporting torch's
                 (assess_libtorch, as before formats existed)
    pt2          platform torch_aoti: the image's release has the torch_aoti platform; its PyTorch
                 is the torch that compiled the package (same minor: AOTInductor output is compiled
                 code calling that torch's C++ ABI); a package compiled for CUDA runs on the GPU
                 architectures it was compiled for only, so every architecture of the deployment's
                 node group must be one of them; a CPU package serves CPU instances only, and a CUDA
                 one GPU instances only
    onnx         platform onnxruntime_onnx: the model's opset (default domain) and IR version are
                 at most those the image's ONNX Runtime implements (compat.ONNX_RUNTIME_SUPPORT)

A `--target local` model (python backend) of any format is assess_libtorch's: exempt, except for an
NGC image, whose python backend has neither torch nor ONNX Runtime. Whatever cannot be proven
(an unknown image, no recorded opset, no architectures for a CUDA package) is refused like a
mismatch; `--allow-version-skew` publishes anyway and the verdict is recorded in the manifest's
`compatibility` (result "skew-allowed", the reason in `detail`; the record's one writer and reader:
model_sync/records/compatibility.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from model_sync import errors
from model_sync.contract import compat
from model_sync.records import compatibility
from model_sync.records.compatibility import Result
from model_sync.triton_model.formats import FORMAT_OF_PLATFORM, FORMATS

if TYPE_CHECKING:
    from model_sync.environments import DeploymentGpu, Environment

GPU_KINDS = ("KIND_GPU", "KIND_AUTO", "KIND_MODEL")


class ArchitectureError(ValueError):
    """A .pt2 compiled for other GPU architectures (or another device) than the deployment's."""


class OnnxOpsetError(ValueError):
    """An ONNX model whose opset or IR version the image's ONNX Runtime does not implement."""


def format_of(platform: str, exporter: Mapping[str, Any]) -> str:
    """The export format of a version: export.json's / the manifest's `format`, else its platform's."""
    recorded = exporter.get("format")
    return recorded if recorded in FORMATS else FORMAT_OF_PLATFORM.get(platform, "torchscript")


def _minor(version: str) -> tuple[int, int]:
    return compat._minor(version)


UNKNOWN_IMAGE = (
    "triton image: unknown for the target environment; allowed: set tritonImage in model-sync.yaml "
    "(or the stack output tritonImage, or --triton-image), or --allow-version-skew"
)


def assess_libtorch(
    *,
    platform: str,
    backend: str,
    exporter_torch: str | None,
    image: str | None,
    allow_skew: bool = False,
    target: str | None = None,
    allow_local_target: bool = False,
) -> dict[str, Any]:
    """The compatibility record of a TorchScript or python-backend version for one target image.

    Raises VersionSkewError / UnknownImageError / UnverifiableError (one line each) unless the
    model is exempt, loads, or `allow_skew` is set (then result "skew-allowed" with the reason).
    A model exported with `target` "local" for an NGC image whose python backend has no torch
    raises LocalTargetError unless `allow_local_target` (then "exempt", the override in `detail`)."""
    if target == "local" and image is not None and compat.python_backend_lacks_torch(image):
        if not allow_local_target:
            raise compat.LocalTargetError(compat.local_target_detail(image))
        refusal = compat.local_target_detail(image).split("; allowed:")[0]
        return compatibility.record(image, None, Result.EXEMPT, f"published with --allow-local-target: {refusal}")
    if not compat.served_by_libtorch(platform, backend):
        return compatibility.record(
            image, None, Result.EXEMPT,
            f"backend {backend or platform!r} is not LibTorch: the serving environment's own torch loads it",
        )  # fmt: skip
    serving: str | None = None
    detail: str | None = None
    try:
        if image is None:
            raise compat.UnverifiableError(UNKNOWN_IMAGE)
        serving = compat.libtorch_version(image)
        if exporter_torch is None:
            raise compat.UnverifiableError(
                "torch version: unknown (no export.json torch_version for a pytorch_libtorch model); "
                "allowed: a directory written by `model-sync export`, or --allow-version-skew"
            )
        detail = compat.check(exporter_torch, image, allow_skew=allow_skew)
    except (compat.UnverifiableError, compat.UnknownImageError) as e:
        if not allow_skew:
            raise
        detail = str(e)
    return compatibility.record(image, serving, Result.SKEW_ALLOWED if detail else Result.COMPATIBLE, detail)


def loadable_libtorch(
    platform: str, backend: str, exporter_torch: str | None, image: str | None, target: str | None = None
) -> str:
    """For `status`: "yes" / "no" (version skew, or a `--target local` model for an NGC image whose
    python backend has no torch) / "exempt" (not LibTorch) / "unknown" (torch version or image
    unknown, or the image has no table entry)."""
    if target == "local" and image is not None and compat.python_backend_lacks_torch(image):
        return "no"
    if not compat.served_by_libtorch(platform, backend):
        return "exempt"
    if exporter_torch is None or image is None:
        return "unknown"
    try:
        return "yes" if compat.can_load(exporter_torch, image) else "no"
    except ValueError:  # UnknownImageError, or a malformed version
        return "unknown"


def check_pt2(exporter: Mapping[str, Any], image: str, kinds: list[str], gpus: DeploymentGpu | None) -> str:
    """The image's PyTorch when a torch_aoti package loads in `image` on the deployment's GPUs;
    raises one line otherwise."""
    release = compat.TRITON_RELEASES[compat.triton_release(image)]
    if not release.torch_aoti:
        first = next((r for r, v in compat.TRITON_RELEASES.items() if v.torch_aoti), "none in the table")
        raise compat.VersionSkewError(
            f"torch_aoti: {image} (Triton {release.triton}) has no torch_aoti platform to load model.pt2; allowed: "
            f"an image of release {first} or later, or --format torchscript / onnx"
        )
    torch = exporter.get("torch_version")
    if not torch:
        raise compat.UnverifiableError(
            "torch version: unknown (no export.json torch_version for a torch_aoti model); allowed: a directory "
            "written by `model-sync export --format pt2`, or --allow-version-skew"
        )
    if _minor(torch) != _minor(release.pytorch):
        want = ".".join(map(str, _minor(release.pytorch)))
        raise compat.VersionSkewError(
            f"torch version: model.pt2 compiled by torch {torch}, {image} runs torch {release.pytorch}; allowed: "
            f"export the .pt2 with torch {want}.x (AOTInductor output runs on the torch that compiled it only), "
            "or --allow-version-skew"
        )
    device = exporter.get("device")
    on_gpu = any(k in GPU_KINDS for k in kinds)
    if device not in ("cpu", "cuda"):
        raise compat.UnverifiableError(
            f"device: {device!r} (export.json of a torch_aoti model); allowed: a directory written by `model-sync "
            "export --format pt2`, or --allow-version-skew"
        )
    if (device == "cuda") != on_gpu:
        raise ArchitectureError(
            f"device: model.pt2 compiled for {device}, its instance groups are {'/'.join(sorted(set(kinds)))}; "
            "allowed: a package compiled for the device its instances run on (export it where that device is, "
            "with the same --instance-kind)"
        )
    if device == "cpu":
        return release.pytorch
    archs = tuple(exporter.get("gpu_architectures") or ())
    if gpus is None or not gpus.architectures:
        raise compat.UnverifiableError(
            f"gpu architecture: unknown for the deployment serving this model (model.pt2 compiled for "
            f"{', '.join(archs) or 'unknown'}); allowed: tritonGpus.<deployment>.architectures in model-sync.yaml "
            "(or the stack output tritonGpus), or --allow-version-skew"
        )
    missing = [a for a in gpus.architectures if a not in archs]
    if missing:
        raise ArchitectureError(
            f"gpu architecture: model.pt2 compiled for {', '.join(archs) or 'none'}, deployment {gpus.deployment} "
            f"runs {', '.join(gpus.architectures)} ({gpus.gpu}); allowed: export on a GPU of "
            f"{', '.join(missing)} (a package runs on the architectures it was compiled for only), or "
            "--allow-version-skew"
        )
    return release.pytorch


def check_onnx(exporter: Mapping[str, Any], image: str) -> None:
    """Raise one line unless the image's ONNX Runtime implements the model's opset and IR version."""
    release = compat.TRITON_RELEASES[compat.triton_release(image)]
    opset, ir = exporter.get("onnx_opset"), exporter.get("onnx_ir_version")
    if not isinstance(opset, int) or not isinstance(ir, int):
        raise compat.UnverifiableError(
            "onnx opset: unknown (no export.json onnx_opset / onnx_ir_version for an onnxruntime_onnx model); "
            "allowed: a directory written by `model-sync export --format onnx`, or --allow-version-skew"
        )
    ort_minor = ".".join(release.onnxruntime.split(".")[:2])
    if ort_minor not in compat.ONNX_RUNTIME_SUPPORT:
        raise compat.UnverifiableError(
            f"onnx opset: ONNX Runtime {release.onnxruntime} in {image} has no opset entry; allowed: "
            f"{', '.join(compat.ONNX_RUNTIME_SUPPORT)} (add it to model_sync/contract/compat.py), or "
            "--allow-version-skew"
        )
    _, max_opset, max_ir = compat.ONNX_RUNTIME_SUPPORT[ort_minor]
    if opset > max_opset or ir > max_ir:
        raise OnnxOpsetError(
            f"onnx opset: model.onnx needs opset {opset} (IR {ir}), ONNX Runtime {release.onnxruntime} in {image} "
            f"runs opsets up to {max_opset} (IR up to {max_ir}); allowed: export with --onnx-opset {max_opset} or "
            "lower (the IR version follows the opset), an image with a newer ONNX Runtime, or --allow-version-skew"
        )


# The rule of each export format not served by LibTorch (FORMATS: torchscript is assess_libtorch's):
# (exporter, image, the instance groups' kinds, the deployment's GPUs) -> the image's PyTorch where
# the rule compared with it; raises one line when the version does not load.
Rule = Callable[[Mapping[str, Any], str, Callable[[], list[str]], "DeploymentGpu | None"], "str | None"]
RULES: dict[str, Rule] = {
    "pt2": lambda exporter, image, kinds, gpus: check_pt2(exporter, image, kinds(), gpus),
    "onnx": lambda exporter, image, kinds, gpus: check_onnx(exporter, image),
}


def assess(
    *,
    platform: str,
    backend: str,
    exporter: Mapping[str, Any],
    image: str | None,
    kinds: Callable[[], list[str]],
    gpus: DeploymentGpu | None,
    allow_skew: bool = False,
    allow_local_target: bool = False,
) -> dict[str, Any]:
    """The `compatibility` record of one version for one environment; raises a one-line ValueError
    (VersionSkewError, UnknownImageError, UnverifiableError, LocalTargetError, ArchitectureError,
    OnnxOpsetError) unless it loads or `allow_skew` (then "skew-allowed", the reason in `detail`).
    `kinds` gives the instance groups' kinds (read only for a pt2 package)."""
    fmt = format_of(platform, exporter)
    if backend == "python" or fmt == "torchscript":
        return assess_libtorch(
            platform=platform, backend=backend, exporter_torch=exporter.get("torch_version"), image=image,
            allow_skew=allow_skew, target=exporter.get("target"), allow_local_target=allow_local_target,
        )  # fmt: skip
    serving: str | None = None
    detail: str | None = None
    try:
        if image is None:
            raise compat.UnverifiableError(UNKNOWN_IMAGE)
        serving = RULES[fmt](exporter, image, kinds, gpus)
    except (compat.VersionSkewError, compat.UnverifiableError, compat.UnknownImageError, ArchitectureError,
            OnnxOpsetError) as e:  # fmt: skip
        if not allow_skew:
            raise
        detail = str(e)
    return compatibility.record(image, serving, Result.SKEW_ALLOWED if detail else Result.COMPATIBLE, detail)


def of_manifest(doc: Mapping[str, Any], env: Environment, allow_skew: bool, allow_local_target: bool) -> dict[str, Any]:
    """The compatibility record of a manifest's version against `env` (promote: the TARGET); exit 7
    with one line naming the version and the environment."""
    try:
        return assess(
            platform=doc["platform"], backend=doc["backend"], exporter=doc["exporter"], image=env.triton_image,
            kinds=lambda: [g["kind"] for g in doc.get("instance_groups") or [{"kind": "KIND_AUTO"}]],
            gpus=env.deployment_of(doc["model"]), allow_skew=allow_skew, allow_local_target=allow_local_target,
        )  # fmt: skip
    except ValueError as e:
        raise errors.incompatible(f"{doc['model']} version {doc['version']} -> {env.name}: {e}") from None


def loadable(doc: Mapping[str, Any], image: str | None) -> str:
    """For `status`: whether `image` loads the manifest's version, in its format: "yes", "no",
    "exempt" (a python-backend model outside an NGC image), "unknown" (nothing to compare, or a
    CUDA .pt2, whose GPU architectures status does not know per environment)."""
    platform, backend, exporter = doc["platform"], doc["backend"], doc["exporter"]
    fmt = format_of(platform, exporter)
    if backend == "python" or fmt == "torchscript":
        return loadable_libtorch(platform, backend, exporter.get("torch_version"), image, exporter.get("target"))
    if image is None:
        return "unknown"
    try:
        RULES[fmt](exporter, image, lambda: [g["kind"] for g in doc.get("instance_groups") or [{"kind": "KIND_AUTO"}]],
                   None)  # fmt: skip
    except (compat.UnverifiableError, compat.UnknownImageError):
        return "unknown"
    except ValueError:  # VersionSkewError, ArchitectureError, OnnxOpsetError
        return "no"
    return "yes"
