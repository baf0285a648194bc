"""The chart cache: `python -m tools.charts [--cache DIR] [--mirror DIR]` (`make charts`).

Puts every Helm chart pinned in components/upstream/versions.py into `.cache/charts/<name>-<version>.tgz`,
the archives `helm pull` writes. Where they come from:

- `--mirror DIR` (default: `$CHART_MIRROR`): copied from that folder, which holds `helm pull`'s
  files; `.ci/run` sets it on the project's CI machines, where no chart repository is reachable);
- otherwise `helm pull <chart> --repo <repository> --version <version>` (an OCI chart:
  `helm pull oci://<registry>/<path>/<chart> --version <version>`), as a user with internet access
  gets them.

Every archive is checked before it is kept: it must be a chart whose Chart.yaml names exactly
the pinned chart and version. An archive already in the cache that passes the check is kept
(the target is idempotent); one that fails is fetched again. Files are written to a temporary
name and renamed into place, so an interrupted run never leaves half an archive.

Exit codes: 0 every chart cached; 3 a chart could not be fetched (not in the mirror, or `helm
pull` failed); 4 an archive is not the pinned chart (wrong name or version, or not a chart).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from components.upstream import versions
from tools import yamlio

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "charts"
HELM = ROOT / "tools" / "helm" / "bin" / "helm"
# Helm keeps repository and plugin state under these; inside the project, never in $HOME.
HELM_HOME = ROOT / ".cache" / "helm-home"


def helm_env() -> dict[str, str]:
    """The environment every helm command here runs with."""
    HELM_HOME.mkdir(parents=True, exist_ok=True)
    return {**os.environ, **{f"HELM_{d}_HOME": str(HELM_HOME / d.lower()) for d in ("CACHE", "CONFIG", "DATA")}}


class ChartError(Exception):
    """A chart that cannot be cached; `code` is the exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Cached:
    chart: versions.HelmChart
    path: Path
    sha256: str
    source: str  # "cache", "mirror" or "helm pull"


def pinned_charts() -> list[versions.HelmChart]:
    """Every HelmChart pinned in components/upstream/versions.py, by chart name."""
    charts = [v for v in vars(versions).values() if isinstance(v, versions.HelmChart)]
    return sorted(charts, key=lambda c: c.chart)


def archive_name(chart: versions.HelmChart) -> str:
    return f"{chart.chart}-{chart.version}.tgz"


def archive_path(chart: versions.HelmChart, cache: Path = CACHE) -> Path:
    return cache / archive_name(chart)


def chart_metadata(archive: Path) -> dict[str, object]:
    """The Chart.yaml of a packaged chart (its top folder is the chart's name)."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                parts = member.name.split("/")
                if len(parts) == 2 and parts[1] == "Chart.yaml" and member.isfile():
                    handle = tar.extractfile(member)
                    if handle is not None:
                        meta = yamlio.load(handle.read())
                        if isinstance(meta, dict):
                            return meta
    except (OSError, tarfile.TarError, yaml.YAMLError) as exc:
        raise ChartError(
            f"charts: {archive} is not a packaged chart ({exc}); allowed: the .tgz `helm pull` writes", 4
        ) from None
    raise ChartError(f"charts: {archive} has no <chart>/Chart.yaml; allowed: the .tgz `helm pull` writes", 4)


def check_archive(chart: versions.HelmChart, archive: Path) -> None:
    meta = chart_metadata(archive)
    found = (meta.get("name"), str(meta.get("version")))
    if found != (chart.chart, chart.version):
        raise ChartError(
            f"charts: {archive} holds {found[0]} {found[1]}; allowed: {chart.chart} {chart.version} "
            "(components/upstream/versions.py)",
            4,
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _from_mirror(chart: versions.HelmChart, mirror: Path, tmp: Path) -> Path:
    src = mirror / archive_name(chart)
    if not src.is_file():
        held = sorted(p.name for p in mirror.glob("*.tgz")) if mirror.is_dir() else []
        raise ChartError(
            f"charts: {archive_name(chart)} is not in the mirror {mirror}; allowed: a version the mirror holds "
            f"({', '.join(held) or 'none'}), or unset CHART_MIRROR to `helm pull` it",
            3,
        )
    dest = tmp / src.name
    shutil.copyfile(src, dest)
    return dest


def _helm_pull(chart: versions.HelmChart, helm: Path, tmp: Path) -> Path:
    if not helm.is_file():
        raise ChartError(f"charts: {helm} is missing; run `make helm` first", 3)
    cmd = [
        str(helm),
        "pull",
        chart.reference,
        *(() if chart.oci else ("--repo", chart.repository)),
        "--version",
        chart.version,
        "--destination",
        str(tmp),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=helm_env())
    if done.returncode != 0:
        reason = " ".join(done.stderr.split()) or f"exit {done.returncode}"
        raise ChartError(f"charts: helm pull {chart.chart} {chart.version} from {chart.repository} failed: {reason}", 3)
    pulled = sorted(tmp.glob("*.tgz"))
    if len(pulled) != 1:
        raise ChartError(
            f"charts: helm pull {chart.chart} {chart.version} wrote {[p.name for p in pulled]}; expected one archive", 3
        )
    return pulled[0]


def fetch(chart: versions.HelmChart, cache: Path = CACHE, mirror: Path | None = None, helm: Path = HELM) -> Cached:
    """Cache one chart (kept when already cached and valid)."""
    dest = archive_path(chart, cache)
    if dest.is_file():
        try:
            check_archive(chart, dest)
            return Cached(chart, dest, _sha256(dest), "cache")
        except ChartError:
            dest.unlink()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp_name:
        tmp = Path(tmp_name)
        got = _from_mirror(chart, mirror, tmp) if mirror is not None else _helm_pull(chart, helm, tmp)
        check_archive(chart, got)
        os.replace(got, dest)
    return Cached(chart, dest, _sha256(dest), "mirror" if mirror is not None else "helm pull")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="charts", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cache", type=Path, default=CACHE, help="cache folder (default: .cache/charts)")
    parser.add_argument(
        "--mirror",
        type=Path,
        default=None,
        help="copy the archives from this folder instead of `helm pull` (default: $CHART_MIRROR)",
    )
    args = parser.parse_args(argv)
    mirror = args.mirror or (Path(os.environ["CHART_MIRROR"]) if os.environ.get("CHART_MIRROR") else None)
    try:
        for chart in pinned_charts():
            got = fetch(chart, args.cache, mirror)
            print(f"charts: {archive_name(chart)} ({got.source}) sha256:{got.sha256[:16]}")
    except ChartError as exc:
        print(str(exc), file=sys.stderr)
        return exc.code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
