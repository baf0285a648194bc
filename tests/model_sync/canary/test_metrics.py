"""model_sync.canary.metrics on real processes: two real tritonservers (the cloud Deployment's
metrics flags) serving two versions of one model under load, the figures of each version read
from their /metrics (TritonMetrics) and through a real Prometheus scraping them
(PrometheusMetrics) against what the client counted; and the EKS token, a presigned STS
GetCallerIdentity bound to the cluster's name."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_sync.agent.pod_disk import precompile_python
from model_sync.canary import metrics
from model_sync.canary.metrics import PrometheusMetrics, TritonMetrics
from model_sync.sandbox.procs import free_port, wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer
from tests.support.prometheus import PrometheusServer
from tests.support.s3_servers import S3Server
from tests.support.triton import triton_runtime  # noqa: F401

pytestmark = pytest.mark.latency  # judged on latency figures (tests/conftest.py, UNIT_NICE)

MODEL_PY = """\
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            time.sleep({sleep})
            if x[0] < 0:  # an exception: Triton counts it in nv_inference_request_failure, reason BACKEND
                raise pb_utils.TritonModelException("negative input")
            if x[0] == 0:  # an error response: Triton 2.51 counts it as a success
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("zero input")))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 2)]))
        return responses
"""
CONFIG = """name: "m"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
version_policy { specific { versions: [ %d ] } }
"""
SLEEP = {1: 0.002, 2: 0.05}  # version 2 is 25 times slower


def _server(tmp: Path, runtime: TritonRuntime, version: int) -> TritonServer:
    repo = tmp / f"v{version}" / "repository"
    (repo / "m" / str(version)).mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text(CONFIG % version)
    (repo / "m" / str(version) / "model.py").write_text(MODEL_PY.format(sleep=SLEEP[version]))
    precompile_python(repo / "m" / str(version))  # as the agent does: else the stub's pyc makes Triton reload it
    return TritonServer(repo, tmp / f"v{version}" / "triton.log", runtime=runtime)


def _tells_the_versions_apart(figures: dict[int, metrics.Figures]) -> bool:
    """Triton's own summary sees the slower version: the canary's p99 is no faster than its model
    can answer, and most stable requests are well under it. A busy CPU can stretch the stable
    version's few slowest requests to 12 ms (its p99, seen in CI), so its p95 is what is compared."""
    canary_p99, stable_p95 = figures[2].p99_ms, figures[1].p95_ms
    return canary_p99 is not None and stable_p95 is not None and canary_p99 >= 1000 * SLEEP[2] > 2 * stable_p95


def _load(server: TritonServer, requests: int, fail_every: int, value: float = -1.0) -> tuple[int, int]:
    """`requests` sequential inferences, every `fail_every`-th with input `value` (-1: the model
    raises, 0: an error response): (sent, failed as the client sees it)."""
    failed = 0
    for n in range(requests):
        x = value if n % fail_every == 0 else 1.0
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [x]}]})
        req = urllib.request.Request(f"{server.http_url}/v2/models/m/infer", data=body.encode(), method="POST")  # noqa: S310
        try:
            urllib.request.urlopen(req, timeout=30).read()  # noqa: S310
        except urllib.error.HTTPError:
            failed += 1
    return requests, failed


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, triton_runtime: TritonRuntime) -> Iterator[list[TritonServer]]:  # noqa: F811
    tmp = tmp_path_factory.mktemp("canary-metrics")
    started = [_server(tmp, triton_runtime, v) for v in (1, 2)]
    try:
        threads = [threading.Thread(target=s.start) for s in started]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for version, s in zip((1, 2), started, strict=True):
            s.wait_version_ready("m", version)
        yield started
    finally:
        for s in started:
            with contextlib.suppress(Exception):
                s.stop()


def _metrics_url(s: TritonServer) -> str:
    return f"http://127.0.0.1:{s.metrics_port}/metrics"


def _settled(source: TritonMetrics, mark: object, sent: dict[int, int]) -> dict[int, metrics.Figures]:
    """The figures once each version's counters reach what the client sent. Triton counts a request
    when it releases it, which can come a moment after the client has its response, so a scrape
    taken right after the last response may still miss that one request."""
    versions = sorted({*sent, 3})

    def counted() -> bool:
        figures = source.figures(mark, versions)
        return all(figures[v].requests >= n for v, n in sent.items())

    wait_until(counted, 10, what=f"Triton's counters to reach {sent}")
    return source.figures(mark, versions)


def test_triton_metrics_count_each_version_exactly(servers: list[TritonServer]) -> None:
    urls = {f"r{i}": _metrics_url(s) for i, s in enumerate(servers)} | {"r9": "http://127.0.0.1:9/metrics"}
    source = TritonMetrics("m", urls)  # one replica away
    assert set(source.answering(["r0", "r1", "r9", "r7"])) == {"r0", "r1"}  # r7: no endpoint listed, never answers
    mark = source.mark()
    stable, canary = _load(servers[0], 60, fail_every=1000), _load(servers[1], 40, fail_every=10)
    figures = _settled(source, mark, {1: 60, 2: 40})
    assert (figures[1].requests, figures[1].errors) == stable == (60, 1)  # request 0 fails too
    assert (figures[2].requests, figures[2].errors) == canary == (40, 4)
    assert figures[3] == metrics.Figures()  # a version nobody serves: nothing, no figures
    assert figures[1].p99_ms is not None and figures[2].p99_ms is not None  # noqa: PT018
    assert _tells_the_versions_apart(figures), figures
    assert len(figures[1].replicas_p99_ms) == len(figures[2].replicas_p99_ms) == 1  # one replica serves each
    answered = source.answering(["r0", "r1"])  # every request each replica answered, of any version
    assert answered["r0"] >= 60 and answered["r1"] >= 40, answered  # noqa: PT018
    assert figures[2].replicas_p99_ms[0] == figures[2].p99_ms
    assert figures[1].queue_us is not None and figures[1].queue_us >= 0  # noqa: PT018
    # A python model's error *response* fails the request, and Triton counts it as a success.
    mark = source.mark()
    assert _load(servers[0], 10, fail_every=5, value=0.0) == (10, 2)
    settled = _settled(source, mark, {1: 10})
    assert (settled[1].requests, settled[1].errors) == (10, 0)
    with pytest.raises(metrics.MetricsError, match=r"^metrics: none of http://127.0.0.1:9/metrics answered;"):
        TritonMetrics("m", {"r9": "http://127.0.0.1:9/metrics"}).mark()


def test_a_replica_that_refuses_is_left_out_without_waiting_on_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A listed replica with nothing listening (dead, or a pod not yet up) is asked once per scrape:
    urllib3's retries and their backoff (~1 s) held every poll of a gray release back while one
    listed replica was down."""
    import urllib3

    waits: list[object] = []
    monkeypatch.setattr(urllib3.util.retry.Retry, "sleep", lambda self, response=None: waits.append(response))
    url = f"http://127.0.0.1:{free_port()}/metrics"
    assert TritonMetrics("m", {"r0": url}).scrape() == {}
    assert waits == []


def test_prometheus_metrics_give_the_same_figures(tmp_path: Path, servers: list[TritonServer]) -> None:
    targets = {f"127.0.0.1:{s.metrics_port}": {"pod": f"triton-default-{i}"} for i, s in enumerate(servers)}
    prom = PrometheusServer(tmp_path / "prometheus", targets, "groups: []\n").start()
    try:
        wait_until(lambda: len(prom.query("up == 1")) == 2, 30, what="both replicas scraped")
        source = PrometheusMetrics("m", prom.url)
        mark = source.mark()
        time.sleep(3)  # a window that starts before the load, as a step's does
        stable, canary = _load(servers[0], 60, fail_every=20), _load(servers[1], 40, fail_every=10)
        time.sleep(3)
        total = {1: stable, 2: canary}

        def scraped() -> bool:
            seen = {k: 0.0 for k in ("version=1", "version=2")}
            for metric in ("nv_inference_request_success", "nv_inference_request_failure"):
                for labels, value in prom.query(f'sum by (version) ({metric}{{model="m"}})').items():
                    seen[labels] = seen.get(labels, 0.0) + value
            return all(seen[f"version={v}"] >= sent for v, (sent, _) in total.items())

        wait_until(scraped, 20, what="the final counters scraped")
        figures = source.figures(mark, [1, 2])
        for version, (sent, failed) in total.items():
            # increase() extrapolates to the window's edges (by up to a scrape interval over a window of
            # a few seconds here, over 300 s in the cloud); the error ratio is what the verdict reads.
            # Figures count whole requests: each extrapolated counter is rounded, which moves the ratio
            # by up to one request (measured: 5 of 45 for 4 of 40 sent); a version mixed up is 0.05 off.
            assert abs(figures[version].requests - sent) <= 0.3 * sent, (version, figures)
            one = 1 / figures[version].requests
            assert abs(figures[version].error_ratio - failed / sent) <= one, (version, figures)
        assert _tells_the_versions_apart(figures), figures
        assert figures[2].replicas_p99_ms == (figures[2].p99_ms,)  # by pod: the one replica serving version 2
        answered = source.answering(["triton-default-0", "triton-default-1", "triton-default-7"])
        assert set(answered) == {"triton-default-0", "triton-default-1"}  # -7: no such pod scraped
        assert answered["triton-default-0"] >= 60 and answered["triton-default-1"] >= 40, answered  # noqa: PT018
    finally:
        prom.stop()
    with pytest.raises(metrics.MetricsError, match=r"^prometheus http://127.0.0.1:9/api/v1/query: .*allowed:"):
        PrometheusMetrics("m", "http://127.0.0.1:9").query("up")


def test_eks_token_is_a_presigned_get_caller_identity(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """No EKS API server runs here: the token is checked for what the server verifies (a
    GetCallerIdentity presigned for STS, the cluster name among the signed headers, 60 s)."""
    import botocore.session

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto_s3.endpoint)  # moto_server answers STS too
    token = metrics.eks_token("triton-platform-prod", "eu-west-1", botocore.session.Session())
    assert token.startswith("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(token.removeprefix("k8s-aws-v1.") + "==").decode()
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert url.startswith(moto_s3.endpoint + "/?Action=GetCallerIdentity&Version=2011-06-15&")
    assert query["X-Amz-Credential"][0].endswith("/eu-west-1/sts/aws4_request")
    assert query["X-Amz-SignedHeaders"][0].split(";") == ["host", "x-k8s-aws-id"]  # the cluster name is signed
    assert query["X-Amz-Expires"] == ["60"]
    assert len(query["X-Amz-Signature"][0]) == 64
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(metrics.errors.SyncError, match=r"^EKS token: no AWS credentials;"):
        metrics.eks_token("c", "eu-west-1", botocore.session.Session())
