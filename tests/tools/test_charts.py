"""`make charts` / `python -m tools.charts`: every pinned chart cached, from a mirror folder or
through the real `helm pull` against a chart repository (served here on loopback from the
cached archives and an index that the real `helm repo index` writes); archives are checked."""

from __future__ import annotations

import functools
import http.server
import io
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.upstream import versions
from tools import charts

DEVICE_PLUGIN = versions.NVIDIA_DEVICE_PLUGIN_CHART


def _cached(chart: versions.HelmChart) -> Path:
    path = charts.archive_path(chart)
    assert path.is_file(), f"{path} is missing: run `make charts`"
    return path


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    folder = tmp_path / "mirror"
    folder.mkdir()
    for chart in charts.pinned_charts():
        shutil.copy(_cached(chart), folder)
    return folder


def test_every_pinned_chart_is_found() -> None:
    names = [c.chart for c in charts.pinned_charts()]
    assert names == sorted(
        [
            "alloy",
            "cert-manager",
            "cluster-autoscaler",
            "dcgm-exporter",
            "gateway-helm",
            "kube-prometheus-stack",
            "loki",
            "nvidia-device-plugin",
            "prometheus-adapter",
        ]
    )
    assert charts.archive_name(versions.CERT_MANAGER_CHART) == "cert-manager-v1.20.2.tgz"


def test_mirror_fills_the_cache_and_a_rerun_keeps_it(
    mirror: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    assert charts.main(["--cache", str(cache), "--mirror", str(mirror)]) == 0
    assert sorted(p.name for p in cache.glob("*.tgz")) == sorted(p.name for p in mirror.glob("*.tgz"))
    assert capsys.readouterr().out.count("(mirror)") == 9
    assert charts.main(["--cache", str(cache), "--mirror", str(mirror)]) == 0
    assert capsys.readouterr().out.count("(cache)") == 9
    assert not list(cache.glob(".fetch-*"))


def test_chart_mirror_environment_variable(mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHART_MIRROR", str(mirror))
    assert charts.main(["--cache", str(tmp_path / "cache")]) == 0
    assert len(list((tmp_path / "cache").glob("*.tgz"))) == 9


def test_a_version_the_mirror_lacks_is_refused_naming_what_it_holds(
    mirror: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (mirror / charts.archive_name(versions.ENVOY_GATEWAY_CHART)).unlink()
    assert charts.main(["--cache", str(tmp_path / "cache"), "--mirror", str(mirror)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("charts: gateway-helm-1.9.0.tgz is not in the mirror")
    assert "alloy-1.4.0.tgz" in err
    assert len(err.splitlines()) == 1


def _archive(name: str, version: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        body = f"apiVersion: v2\nname: {name}\nversion: {version}\n".encode()
        info = tarfile.TarInfo(f"{name}/Chart.yaml")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            _archive("nvidia-device-plugin", "0.17.0"),
            "holds nvidia-device-plugin 0.17.0; allowed: nvidia-device-plugin 0.17.1",
        ),
        (_archive("something-else", "0.17.1"), "holds something-else 0.17.1"),
        (b"not a tarball", "is not a packaged chart"),
    ],
)
def test_an_archive_that_is_not_the_pinned_chart_is_refused(
    content: bytes, expected: str, mirror: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (mirror / charts.archive_name(DEVICE_PLUGIN)).write_bytes(content)
    cache = tmp_path / "cache"
    assert charts.main(["--cache", str(cache), "--mirror", str(mirror)]) == 4
    assert expected in capsys.readouterr().err
    assert not (cache / charts.archive_name(DEVICE_PLUGIN)).exists()


def test_a_damaged_cached_archive_is_fetched_again(mirror: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / charts.archive_name(DEVICE_PLUGIN)).write_bytes(b"truncated")
    got = charts.fetch(DEVICE_PLUGIN, cache, mirror)
    assert got.source == "mirror"
    assert got.path.read_bytes() == (mirror / got.path.name).read_bytes()


@pytest.fixture
def chart_repository(tmp_path: Path) -> Iterator[str]:
    """A chart repository on loopback: archives plus the index the real `helm repo index` writes."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(_cached(DEVICE_PLUGIN), root)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    )
    url = f"http://127.0.0.1:{server.server_address[1]}"
    subprocess.run(
        [str(charts.HELM), "repo", "index", str(root), "--url", url],
        check=True,
        capture_output=True,
        timeout=60,
        env=charts.helm_env(),
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def test_without_a_mirror_helm_pull_fetches_from_the_charts_repository(chart_repository: str, tmp_path: Path) -> None:
    chart = versions.HelmChart(DEVICE_PLUGIN.chart, DEVICE_PLUGIN.version, chart_repository)
    got = charts.fetch(chart, tmp_path / "cache")
    assert got.source == "helm pull"
    assert got.path.read_bytes() == _cached(DEVICE_PLUGIN).read_bytes()


def test_helm_pull_failure_is_one_line_with_helms_reason(chart_repository: str, tmp_path: Path) -> None:
    chart = versions.HelmChart(DEVICE_PLUGIN.chart, "9.9.9", chart_repository)
    with pytest.raises(charts.ChartError) as err:
        charts.fetch(chart, tmp_path / "cache")
    assert err.value.code == 3
    assert str(err.value).startswith(f"charts: helm pull nvidia-device-plugin 9.9.9 from {chart_repository} failed: ")
    assert "\n" not in str(err.value)
