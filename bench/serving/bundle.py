"""Build what the GPU machine needs and cannot download (it has no network): run HERE.

    .venv/bin/python -m bench.serving.bundle        # writes bench/serving/.dist/ (git-ignored)

bench/serving/.dist/
    bundle.tar.xz   triton/pytriton/tritonserver/{bin/tritonserver, backends/python + the 3.12 stub}
                    triton/nvidia_pytriton.libs/ (everything the server, backend and stub link; not
                                                  the pytriton bindings' libpython3.13)
                    triton/perf/bin/perf_analyzer + perf/lib/{libb64.so.0d, libcudart.so.12} links
                                                  to the server's bundled copies (its two missing libs)
                    exsite/tritonclient/          pure-Python package (model_config_pb2 for export)
    triton-src/     the pinned source archives of Triton's PyTorch backend (r24.10 and main, with backend,
                    core, common and RapidJSON's headers: bench.serving.pytorch_backend.ARCHIVES, each
                    sha256-checked on the way in), which the GPU host builds (device.sh)
    wheels/         numpy 1.26.4 cp312 (the python backend stub needs numpy<2), protobuf 6.33.6
                    (runtime for tritonclient's generated model_config_pb2), jsonschema 4.26.0 and
                    its three dependencies (model_sync's record schemas, for bench.warmup)

Every download is pinned by version AND sha256. `bench/serving/.dist` travels with the repository
to the GPU host (which needs no network); it is kept under 60 MiB (checked here).

    .venv/bin/python -m bench.serving.bundle --onnxruntime-gpu   # also writes bench/serving/.dist-ort/

ONNX on the GPU needs onnxruntime-gpu (its CUDA execution provider; the GPU host's onnxruntime has
only the CPU one). Its wheel is 244 MiB, over one transfer, so it is cut into parts of at most
PART_BYTES, each in a folder of its own (.dist-ort/1/, .dist-ort/2/, ...; the last one also holds
onnxruntime-gpu.sha256). Copy every part's files into one folder on the GPU host and name it in
ORT_PARTS for device.sh, which joins them, checks the pinned sha256 and installs the wheel.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from bench.serving import pytorch_backend
from model_sync.records.codec import sha256_file
from model_sync.sandbox import runtime

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "bench" / "serving" / ".dist"
ORT_DIST = ROOT / "bench" / "serving" / ".dist-ort"
# The folder holding the pinned source archives of Triton's PyTorch backend (bench.serving.pytorch_backend
# .ARCHIVES; upstream commits in docs/gpu-benchmark.md): --triton-src, else $TRITON_SRC, else none.
TRITON_SRC_ENV = "TRITON_SRC"
PART_BYTES = 59 * 1024 * 1024  # one part with the repository (4 MiB) stays under one transfer (64 MiB)
LIMIT_BYTES = 60 * 1024 * 1024  # keeps the repository + bundle copy to the GPU host small (one transfer under 64 MiB)
STUB_PYTHON = "3.12"  # the GPU machine's python3

# name==version -> (wheel file, sha256 from PyPI)
WHEELS = {
    "tritonclient==2.51.0": (
        "tritonclient-2.51.0-py3-none-manylinux1_x86_64.whl",
        "c485bb0123bdf310f90bc8b03d3489b28df2ffed55b30c7eee0b795b48113d52",
    ),
    "numpy==1.26.4": (
        "numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "675d61ffbfa78604709862923189bad94014bef562cc35cf61d3a07bba02a7ed",
    ),
    "protobuf==6.33.6": (
        "protobuf-6.33.6-cp39-abi3-manylinux2014_x86_64.whl",
        "e9db7e292e0ab79dd108d7f1a94fe31601ce1ee3f7b79e0692043423020b0593",
    ),
    # model_sync's record schemas (bench.warmup imports the local runtime, which reads manifests);
    # the same pins and hashes as requirements-dev.txt.
    "jsonschema==4.26.0": (
        "jsonschema-4.26.0-py3-none-any.whl",
        "d489f15263b8d200f8387e64b4c3a75f06629559fb73deb8fdfb525f2dab50ce",
    ),
    "jsonschema-specifications==2025.9.1": (
        "jsonschema_specifications-2025.9.1-py3-none-any.whl",
        "98802fee3a11ee76ecaca44429fda8a41bff98b00a0f2838151b113f210cc6fe",
    ),
    "referencing==0.37.0": (
        "referencing-0.37.0-py3-none-any.whl",
        "381329a9f99628c9069361716891d34ad94af76e461dcb0335825aecc7692231",
    ),
    "rpds-py==2026.9.1": (
        "rpds_py-2026.9.1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "addeda51556dac7c1a2f14cda62db8b621cd12afba3091d03a96c72932387eab",
    ),
}
# The CUDA execution provider of ONNX Runtime, built for CUDA 13 (the GPU host's torch is cu130 and
# brings the CUDA 13 runtime, cuBLAS, cuFFT, cuRAND and cuDNN 9 libraries it loads).
ORT_GPU = "onnxruntime-gpu==1.31.1"
WHEELS[ORT_GPU] = (
    "onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl",
    "05d548956197b9d01f59b625de740e0d6be3593f874e241a12dc0362650ecdf7",
)
SCHEMA_WHEELS = (
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
)
CARRIED = ("numpy==1.26.4", "protobuf==6.33.6", *SCHEMA_WHEELS)  # tritonclient's wheel only donates perf_analyzer
PLATFORMS = ("manylinux1_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")


class BundleError(RuntimeError):
    """The bundle could not be built or is too large (one line)."""


def fetch(spec: str, dest: Path) -> Path:
    """The pinned wheel for the GPU host's CPython 3.12 / x86-64, downloaded once and sha256-checked."""
    filename, digest = WHEELS[spec]
    path = dest / filename
    if not path.exists():
        dest.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            STUB_PYTHON,
            "--implementation",
            "cp",
            *[a for p in PLATFORMS for a in ("--platform", p)],
            "-d",
            str(dest),
            spec,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not path.exists():
            raise BundleError(
                f"{spec}: pip download failed ({(proc.stderr.strip().splitlines() or ['no output'])[-1]}); allowed: "
                "a reachable PyPI"
            )
    got = sha256_file(str(path))
    if got != digest:
        raise BundleError(f"{path.name}: sha256 {got}; allowed: {digest} (pinned); delete the file to re-download")
    return path


def needed_libs(libdir: Path, roots: list[Path]) -> set[str]:
    """Bundled libraries reachable from `roots` through DT_NEEDED (read with readelf)."""
    available = {p.name for p in libdir.iterdir()}
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        out = subprocess.run(["readelf", "-d", str(todo.pop())], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if "(NEEDED)" in line:
                name = line.rsplit("[", 1)[1].rstrip("]")
                if name in available and name not in seen:
                    seen.add(name)
                    todo.append(libdir / name)
    return seen


def copy_sources(src: Path, dest: Path) -> None:
    """The pinned source archives of Triton's PyTorch backend, each checked against its sha256."""
    try:
        pytorch_backend.verify(src, sorted(pytorch_backend.ARCHIVES))
    except pytorch_backend.BuildError as e:
        raise BundleError(f"{e} (--triton-src)") from None
    dest.mkdir(parents=True, exist_ok=True)
    for name in pytorch_backend.ARCHIVES:
        shutil.copy2(src / name, dest / name)


def build(dist: Path = DIST, triton_src: Path | None = None) -> Path:
    wheels = dist / "wheels"
    if triton_src is not None:
        copy_sources(triton_src, dist / "triton-src")
    else:  # CPU runs of the harness (the python backend) need no backend build
        print(f"bundle: warning: no --triton-src or ${TRITON_SRC_ENV}: the GPU host cannot build Triton's PyTorch "
              "backend from this bundle (device.sh BACKEND=python only); allowed: --triton-src DIR", file=sys.stderr)  # fmt: skip
    pytriton = runtime.fetch_wheel()  # sha256-pinned in model_sync/sandbox/runtime.py
    client = fetch("tritonclient==2.51.0", ROOT / ".cache" / "wheels")
    for spec in CARRIED:
        src = fetch(spec, ROOT / ".cache" / "wheels")
        wheels.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, wheels / src.name)
    with tempfile.TemporaryDirectory(prefix="bundle-", dir=ROOT / ".cache") as tmp_name:
        tmp = Path(tmp_name)
        stage = tmp / "stage"
        with zipfile.ZipFile(pytriton) as zf:
            zf.extractall(tmp / "pytriton")  # noqa: S202 - sha256-verified pinned wheel
        src_root = tmp / "pytriton"
        server = stage / "triton" / "pytriton" / "tritonserver"
        (server / "bin").mkdir(parents=True)
        shutil.copy2(src_root / "pytriton/tritonserver/bin/tritonserver", server / "bin" / "tritonserver")
        shutil.copytree(src_root / "pytriton/tritonserver/backends", server / "backends")
        stub = server / "backends" / "python" / "triton_python_backend_stub"
        shutil.copy2(
            src_root / f"pytriton/tritonserver/python_backend_stubs/{STUB_PYTHON}/triton_python_backend_stub", stub
        )
        libsrc = src_root / "nvidia_pytriton.libs"
        libs = needed_libs(
            libsrc, [server / "bin" / "tritonserver", server / "backends" / "python" / "libtriton_python.so", stub]
        )
        libdst = stage / "triton" / "nvidia_pytriton.libs"
        libdst.mkdir(parents=True)
        for name in sorted(libs):
            shutil.copy2(libsrc / name, libdst / name)
        perf = stage / "triton" / "perf"
        (perf / "bin").mkdir(parents=True)
        (perf / "lib").mkdir()
        with zipfile.ZipFile(client) as zf:
            (perf / "bin" / "perf_analyzer").write_bytes(zf.read("tritonclient-2.51.0.data/data/bin/perf_analyzer"))
        for link, prefix in (("libb64.so.0d", "libb64-"), ("libcudart.so.12", "libcudart-")):
            target = next(n for n in libs if n.startswith(prefix))
            os.symlink(f"../../nvidia_pytriton.libs/{target}", perf / "lib" / link)
        for exe in (server / "bin" / "tritonserver", stub, perf / "bin" / "perf_analyzer"):
            exe.chmod(0o755)
        import tritonclient

        tc_src = Path(tritonclient.__file__).parent
        shutil.copytree(
            tc_src, stage / "exsite" / "tritonclient", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        dist.mkdir(parents=True, exist_ok=True)
        out = dist / "bundle.tar.xz"
        with tarfile.open(tmp / "bundle.tar.xz", "w:xz", preset=6) as tar:
            tar.add(stage / "triton", "triton")
            tar.add(stage / "exsite", "exsite")
        os.replace(tmp / "bundle.tar.xz", out)
    total = sum(p.stat().st_size for p in dist.rglob("*") if p.is_file())
    if total > LIMIT_BYTES:
        raise BundleError(
            f"{dist}: {total / 2**20:.1f} MiB; allowed: <= {LIMIT_BYTES / 2**20:.0f} MiB (copied to the GPU host "
            "with the repository)"
        )
    for p in sorted(dist.rglob("*")):
        if p.is_file():
            print(f"{p.stat().st_size / 2**20:7.1f} MiB  {p.relative_to(ROOT)}")
    print(f"{total / 2**20:7.1f} MiB  total (limit {LIMIT_BYTES / 2**20:.0f})")
    return dist


def split_ort(dest: Path = ORT_DIST) -> Path:
    """The pinned onnxruntime-gpu wheel in parts of at most PART_BYTES, one folder each (docstring)."""
    wheel = fetch(ORT_GPU, ROOT / ".cache" / "wheels")
    shutil.rmtree(dest, ignore_errors=True)
    with open(wheel, "rb") as src:
        n = 0
        while chunk := src.read(PART_BYTES):
            n += 1
            (dest / str(n)).mkdir(parents=True)
            (dest / str(n) / f"{wheel.name}.part{n:02d}").write_bytes(chunk)
    (dest / str(n) / "onnxruntime-gpu.sha256").write_text(f"{WHEELS[ORT_GPU][1]}  {wheel.name}\n")
    print(f"{wheel.stat().st_size / 2**20:7.1f} MiB  {wheel.name} in {n} parts under {dest.relative_to(ROOT)}/")
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.serving.bundle",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exit codes: 0 built, 1 a download, checksum or size check failed.",
    )
    p.add_argument(
        "--onnxruntime-gpu", action="store_true", help=f"also write {ORT_GPU} in parts under bench/serving/.dist-ort/"
    )
    p.add_argument(
        "--triton-src",
        type=Path,
        default=Path(os.environ[TRITON_SRC_ENV]) if os.environ.get(TRITON_SRC_ENV) else None,
        help=f"folder holding the pinned source archives of Triton's PyTorch backend (default ${TRITON_SRC_ENV}; "
        "without either the bundle carries none and the GPU host cannot build the backend)",
    )
    a = p.parse_args(argv)
    try:
        build(triton_src=a.triton_src)
        if a.onnxruntime_gpu:
            split_ort()
    except BundleError as e:
        print(f"bundle: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
