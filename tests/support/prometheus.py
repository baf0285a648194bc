"""A real Prometheus for tests: Debian's `prometheus` package (server and promtool), which
`make prometheus` fetches with apt-get download, checks against tools/prometheus.sha256 and
unpacks into .cache/prometheus (`make unit` depends on it).

    promtool_test(rules, tests, tmp)   `promtool test rules` on a rules file + a test file
    PrometheusServer(...)              the server on a free 127.0.0.1 port, scraping static
                                       targets with the labels a ServiceMonitor would give them,
                                       with a rules file loaded; stopped by the test
    rules_file(groups)                 the PrometheusRule spec's groups as a Prometheus rules file
    scrape(url)                        one exporter's /metrics, read with prometheus-client's parser
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from model_sync.sandbox.procs import LOOPBACK, Process, http_status, wait_until
from tests.support.s3_servers import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".cache" / "prometheus" / "usr" / "bin"
PROMETHEUS = BIN / "prometheus"
PROMTOOL = BIN / "promtool"


def binary(path: Path) -> Path:
    if not path.exists():
        raise AssertionError(
            f"{path} is missing: `make prometheus` fetches Debian's prometheus package (make unit does it)"
        )
    return path


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """{(sample name, sorted labels): value} of one /metrics page (prometheus-client's parser, not
    the project's; a counter's sample is named <name>_total)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url, timeout=5).read().decode()  # noqa: S310 - loopback
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def rules_file(groups: list[dict[str, Any]]) -> str:
    """A PrometheusRule's spec.groups as the operator hands them to Prometheus: a rules file."""
    return yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True)


def promtool_test(rules: str, tests: dict[str, Any], tmp: Path) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` of `tests` (a test file as data; rule_files is set here)."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "rules.yaml").write_text(rules)
    (tmp / "test.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], **tests}, sort_keys=False, allow_unicode=True)
    )
    return subprocess.run(
        [str(binary(PROMTOOL)), "test", "rules", "test.yaml"],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@dataclass
class PrometheusServer:
    """prometheus on 127.0.0.1, its TSDB under `tmp`, scraping `targets` (address -> labels)
    every `interval`, evaluating `rules` (a rules file's text) at the same interval."""

    tmp: Path
    targets: dict[str, dict[str, str]]
    rules: str
    interval: str = "1s"
    port: int = 0
    process: Process | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.port = self.port or free_port()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        self.tmp.mkdir(parents=True, exist_ok=True)
        (self.tmp / "rules.yaml").write_text(self.rules)
        config = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval},
            "rule_files": [str(self.tmp / "rules.yaml")],
            "scrape_configs": [
                {
                    "job_name": "triton",
                    "static_configs": [{"targets": [addr], "labels": labels} for addr, labels in self.targets.items()],
                }
            ],
        }
        (self.tmp / "prometheus.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        argv = [
            str(binary(PROMETHEUS)),
            f"--config.file={self.tmp / 'prometheus.yaml'}",
            f"--storage.tsdb.path={self.tmp / 'data'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--log.level=warn",
        ]
        self.process = Process("prometheus", argv, self.tmp / "prometheus.log").start()
        wait_until(self._ready, timeout, what=f"prometheus ready on {self.url} (log {self.tmp / 'prometheus.log'})")
        return self

    def _ready(self) -> bool:
        if self.process is None or not self.process.running:
            raise AssertionError(f"prometheus exited: {self.process.log_tail() if self.process else ''}")
        return http_status(self.url + "/-/ready") == 200

    def api(self, path: str, **params: str) -> Any:
        with urllib.request.urlopen(  # noqa: S310
            f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}", timeout=10
        ) as resp:
            doc = json.loads(resp.read())
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str, at: float | None = None) -> dict[str, float]:
        """An instant query: {labels as `k=v,...`: value}."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data = self.api("query", **params)
        assert data["resultType"] == "vector", data
        return {
            ",".join(f"{k}={v}" for k, v in sorted(r["metric"].items())): float(r["value"][1]) for r in data["result"]
        }

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(timeout=10)
