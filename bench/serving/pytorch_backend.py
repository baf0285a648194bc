"""Triton's own PyTorch backend (`libtriton_pytorch.so`), built on the GPU host from the pinned source
archives, so the benchmark serves what production serves (`platform: "pytorch_libtorch"`).

    python3 -m bench.serving.pytorch_backend --src DIR --work W --install BACKENDS [--release r24.10|main]

The archives (ARCHIVES: upstream commits named in docs/gpu-benchmark.md, each checked against its
sha256 here before anything is unpacked) travel in the bundle (bench.serving.bundle copies them into
`.dist/triton-src/`). The backend is compiled against the torch of the `python3` that runs this
module (its headers and libraries), with CMake and Ninja, FetchContent pointed at the unpacked
backend/core/common archives and never at the network. Four build-only edits (`TWEAKS`, each must
find its target or the build stops):

  - common's unit tests fetch googletest from the network: their subdirectory is left out;
  - backend's CUDA kernel library lists compute_53, which CUDA 13's nvcc refuses: it is built for the
    host GPU's architecture alone (`--cuda-arch`, e.g. 90-real);
  - RapidJSON's headers (the Debian package, unpacked) warn under backend's -Werror: they are
    included with -isystem (CMAKE_CXX_FLAGS), which GCC prefers over the -I that common adds;
  - `--pt2-by-env` (main only, a MEASUREMENT build): Triton 2.51's core refuses the `torch_aoti`
    platform, which only 26.03+ servers know, and the backend decides a model is a .pt2 by that
    platform alone. This build takes every model as a .pt2 when the server's environment has PT2_ENV
    set (Triton's core fills in `pytorch_libtorch` for a `backend: "pytorch"` config that names no
    platform, so the platform cannot tell): a server of .pt2 models only. Figures from it say so
    wherever they appear.

`install` gets `pytorch/libtriton_pytorch.so` (Triton's backend layout: <backend-directory>/<name>/)
and `libtritonserver.so`, a link to the server's own library (the wheel renames it
libtritonserver-<hash>.so; the backend links the plain name): put `install` and torch's lib/ on
LD_LIBRARY_PATH (`runtime_env`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

# archive -> sha256 (the same as the archives' SHA256SUMS; upstream commits in docs/gpu-benchmark.md)
ARCHIVES = {
    "backend-main-3f57fb9.tar.gz": "1e50123a4e28735fb6eb9c723da0e4582efd7dfb961fed00f961967446e21850",
    "backend-r24.10.tar.gz": "151da6fa28fbece76c7357a72e089768d4322e2382cce8b6b578424a82b4987a",
    "common-main-83adf7c.tar.gz": "1c9dee9b571016893911875426a58bcc344448b4262c4d3a3b87896f97ad9064",
    "common-r24.10.tar.gz": "f8d42fac07949257d938261d3330ced625b33829ac02bac37fa837a4c6f6c57c",
    "core-main-73aad7c.tar.gz": "a9a981261b40a519ef45fda0a412fad45a24eb5bbd59409d6b780135183946a8",
    "core-r24.10.tar.gz": "a77d172b45f5582fa6a089c894d003cdcd6e81f57d941a196eb4ca93ff7d8a63",
    "pytorch_backend-main-266fd38.tar.gz": "00b72c5e4facc51396b6e477a5a8fda1262913d16933e2eb3d8a5cda24c05b22",
    "pytorch_backend-r24.10.tar.gz": "3bbd9bd9d3254a9f2f1eb6cd9870890443d0541eea7974964efe6b6810895b53",
    "rapidjson-dev_1.1.0+dfsg2-7.1_all.deb": "37d2bd2dd97e3f8a25d9d27958ba22dfed13550a515852cc30434e538b9f47a3",
}
RAPIDJSON_DEB = "rapidjson-dev_1.1.0+dfsg2-7.1_all.deb"
# release -> the archive of each repository (r24.10: the release of the bundled tritonserver 2.51)
RELEASES = {
    "r24.10": {
        "pytorch_backend": "pytorch_backend-r24.10.tar.gz",
        "backend": "backend-r24.10.tar.gz",
        "core": "core-r24.10.tar.gz",
        "common": "common-r24.10.tar.gz",
    },
    "main": {
        "pytorch_backend": "pytorch_backend-main-266fd38.tar.gz",
        "backend": "backend-main-3f57fb9.tar.gz",
        "core": "core-main-73aad7c.tar.gz",
        "common": "common-main-83adf7c.tar.gz",
    },
}
PT2_ENV = "BENCH_PT2_SERVER"  # the measurement build's switch (module docstring)


class BuildError(RuntimeError):
    """The backend could not be built (one line)."""


@dataclass(frozen=True)
class Tweak:
    """One build-only edit: in `path` (relative to the unpacked repository `repo`), `pattern` -> `repl`."""

    repo: str
    path: str
    pattern: str
    repl: str
    why: str

    def apply(self, root: Path) -> None:
        file = root / self.repo / self.path
        text = file.read_text()
        new, n = re.subn(self.pattern, self.repl, text)
        if n == 0:
            raise BuildError(f"tweak {self.why!r}: {self.pattern!r} not found in {self.repo}/{self.path}")
        file.write_text(new)


def tweaks(cuda_arch: str, pt2_by_env: bool) -> list[Tweak]:
    """The build-only edits (module docstring), in order."""
    out = [
        Tweak("common", "src/CMakeLists.txt", r"(?m)^add_subdirectory\(test\)\s*$", "",
              "common's tests need googletest from the network"),
        Tweak("backend", "CMakeLists.txt", r'(kernel_library_new PROPERTIES CUDA_ARCHITECTURES) "[^"]*"',
              rf'\1 "{cuda_arch}"', "CUDA 13's nvcc refuses compute_53"),
    ]  # fmt: skip
    if pt2_by_env:
        out.append(
            Tweak("pytorch_backend", "src/libtorch.cc", r'is_pt2 = \(platform == "torch_aoti"\);',
                  f'is_pt2 = (platform == "torch_aoti") || (std::getenv("{PT2_ENV}") != nullptr);',
                  "2.51's core refuses torch_aoti (measurement build)")
        )  # fmt: skip
    return out


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(src: Path, names: list[str]) -> None:
    """Every archive of `names` in `src` with its pinned sha256, before anything is unpacked."""
    for name in names:
        path = src / name
        if not path.is_file():
            raise BuildError(f"{path}: missing; allowed: the pinned archives (bench.serving.bundle copies them)")
        got = sha256(path)
        if got != ARCHIVES[name]:
            raise BuildError(f"{path}: sha256 {got}; allowed: {ARCHIVES[name]} (pinned)")


def unpack(src: Path, release: str, work: Path) -> Path:
    """The release's four repositories under work/<release>/<repo>/ and RapidJSON under work/rapidjson."""
    names = [*RELEASES[release].values(), RAPIDJSON_DEB]
    verify(src, names)
    root = work / release
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for repo, name in RELEASES[release].items():
        with tarfile.open(src / name) as tar:
            tar.extractall(root, filter="data")  # sha256-verified pinned archive; each holds <repo>/
        if not (root / repo).is_dir():
            raise BuildError(f"{name}: no {repo}/ inside; allowed: an archive made by git archive --prefix={repo}/")
    rapidjson = work / "rapidjson"
    if not (rapidjson / "usr/include/rapidjson").is_dir():
        rapidjson.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(src / RAPIDJSON_DEB), str(rapidjson)], check=True)
    return root


def torch_dir() -> Path:
    import torch

    return Path(torch.__file__).parent


def tool(name: str) -> str:
    """cmake / ninja: on PATH, else beside this python3 (the GPU host's torch venv has both)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        raise BuildError(f"{name}: not found on PATH or beside {sys.executable}; allowed: a host with CMake and Ninja")
    return found


def configure_args(root: Path, work: Path, gpu: bool) -> list[str]:
    t = torch_dir()
    rapidjson = work / "rapidjson" / "usr"
    return [
        "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_MAKE_PROGRAM={tool('ninja')}",
        f"-DTRITON_PYTORCH_INCLUDE_PATHS={t / 'include'};{t / 'include/torch/csrc/api/include'}",
        f"-DTRITON_PYTORCH_LIB_PATHS={t / 'lib'}",
        "-DTRITON_PYTORCH_ENABLE_TORCHVISION=OFF", "-DTRITON_PYTORCH_NVSHMEM=OFF",
        f"-DTRITON_ENABLE_GPU={'ON' if gpu else 'OFF'}",
        f"-DCMAKE_CXX_FLAGS=-D_GLIBCXX_USE_CXX11_ABI=1 -isystem {rapidjson / 'include'}",
        f"-DCMAKE_PREFIX_PATH={rapidjson}",
        f"-DFETCHCONTENT_SOURCE_DIR_REPO-COMMON={root / 'common'}",
        f"-DFETCHCONTENT_SOURCE_DIR_REPO-CORE={root / 'core'}",
        f"-DFETCHCONTENT_SOURCE_DIR_REPO-BACKEND={root / 'backend'}",
        "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",
        f"-DPython3_EXECUTABLE={sys.executable}",
        f"-DPython3_INCLUDE_DIR={sysconfig.get_paths()['include']}",
    ]  # fmt: skip


def build(src: Path, work: Path, install: Path, release: str, *, cuda_arch: str, gpu: bool, pt2_by_env: bool,
          server_lib: Path | None, log: Path) -> dict[str, object]:  # fmt: skip
    """Build `release` into `install`/pytorch/; returns what was built (recorded in the result file)."""
    if pt2_by_env and release == "r24.10":
        raise BuildError("--pt2-by-env: r24.10 has no torch_aoti; allowed: --release main")
    t0 = time.monotonic()
    root = unpack(src, release, work)
    done = tweaks(cuda_arch, pt2_by_env)
    for tw in done:
        tw.apply(root)
    build_dir = root / "build"
    with open(log, "w") as out:
        for cmd in (
            [
                tool("cmake"),
                "-S",
                str(root / "pytorch_backend"),
                "-B",
                str(build_dir),
                *configure_args(root, work, gpu),
            ],
            [tool("cmake"), "--build", str(build_dir), "-j", str(os.cpu_count() or 2)],
        ):
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
            if proc.returncode != 0:
                tail = log.read_text().strip().splitlines()[-6:]
                raise BuildError(f"{release}: {Path(cmd[0]).name} exit {proc.returncode}: {' | '.join(tail)[-600:]}")
    lib = next(build_dir.glob("libtriton_pytorch.so"), None)
    if lib is None:
        raise BuildError(f"{release}: no libtriton_pytorch.so in {build_dir} (log {log})")
    (install / "pytorch").mkdir(parents=True, exist_ok=True)
    shutil.copy2(lib, install / "pytorch" / "libtriton_pytorch.so")
    if server_lib is not None:
        link = install / "libtritonserver.so"
        link.unlink(missing_ok=True)
        link.symlink_to(server_lib)
    return {
        "release": release,
        "archives": {repo: f"{name} sha256 {ARCHIVES[name]}" for repo, name in RELEASES[release].items()},
        "torch": str(torch_dir()),
        "gpu": gpu,
        "cuda_arch": cuda_arch if gpu else None,
        "tweaks": [tw.why for tw in done],
        "measurement_build": pt2_by_env,
        "seconds": round(time.monotonic() - t0, 1),
        "library": str(install / "pytorch" / "libtriton_pytorch.so"),
    }


def server_library(triton_root: Path) -> Path:
    """The bundled tritonserver's own libtritonserver-<hash>.so."""
    found = sorted((triton_root / "nvidia_pytriton.libs").glob("libtritonserver-*.so"))
    if not found:
        raise BuildError(f"{triton_root}/nvidia_pytriton.libs: no libtritonserver-*.so; allowed: the bundle's triton/")
    return found[0]


def runtime_env(env: dict[str, str], install: Path, pt2: bool = False) -> dict[str, str]:
    """A tritonserver environment that loads the backend built into `install` (and, `pt2`, takes a
    model with no platform as a .pt2: the measurement build's switch)."""
    out = dict(env)
    paths = [str(install), str(torch_dir() / "lib"), out.get("LD_LIBRARY_PATH", "")]
    out["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in paths if p)
    if pt2:
        out[PT2_ENV] = "1"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.serving.pytorch_backend", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Exit codes: 0 built, 1 a checksum, tweak or build step failed.")  # fmt: skip
    p.add_argument("--src", required=True, help="folder holding the pinned archives (ARCHIVES)")
    p.add_argument("--work", required=True, help="scratch folder for the sources and the build")
    p.add_argument("--install", required=True, help="backend directory to install pytorch/ into")
    p.add_argument("--release", default="r24.10", choices=sorted(RELEASES))
    p.add_argument("--cuda-arch", default="90-real", help="CUDA architecture of backend's kernels (H100/H200: 90-real)")
    p.add_argument("--cpu", action="store_true", help="TRITON_ENABLE_GPU=OFF (a CPU build)")
    p.add_argument("--pt2-by-env", action="store_true", help="measurement build: see the docstring (main only)")
    p.add_argument("--triton-root", help="the bundle's triton/ (links libtritonserver.so to its library)")
    a = p.parse_args(argv)
    install, work = Path(a.install), Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        info = build(Path(a.src), work, install, a.release, cuda_arch=a.cuda_arch, gpu=not a.cpu,
                     pt2_by_env=a.pt2_by_env, server_lib=server_library(Path(a.triton_root)) if a.triton_root else None,
                     log=work / f"build-{a.release}.log")  # fmt: skip
    except (BuildError, subprocess.CalledProcessError) as e:
        print(f"pytorch_backend: {e}", file=sys.stderr)
        return 1
    import json

    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
