"""Where the gray release's figures come from (docs/architecture.md#gray-release): Triton's own
metrics, per `version` label, so each track is one version whichever replicas serve it.

- `PrometheusMetrics` (the cloud): the in-cluster Prometheus's query API, reached through the EKS
  API server's service proxy (the stack output `prometheusUrl`) with a bearer token made from the
  caller's AWS credentials (`eks_token`, what `aws eks get-token` does, with botocore's signer).
- `TritonMetrics` (locally): every replica's Triton /metrics, scraped and parsed with
  prometheus_client's parser; a window's figures are the differences between two scrapes.

Both answer `mark()` (the start of a window) and `figures(mark, versions)` (each version's
`Figures` since then), so model_sync.canary.analysis judges them alike. Errors are what Triton
counts in nv_inference_request_failure: a failed execution (an exception in a python model, a
backend error), not a python model's per-request error *response*, which Triton 2.51 counts as a
success (measured: tests/model_sync/canary/test_metrics.py). Counters are summed over
replicas (a replica's counter that went down restarted: its new value counts); p99 and p95 are the
highest replica's (Triton's summaries cannot be merged). A replica endpoint that stops answering
is left out of the scrape and named in a warning (once, and once more when it answers again).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from model_sync import errors
from model_sync.canary.analysis import Figures

SUCCESS = "nv_inference_request_success"
FAILURE = "nv_inference_request_failure"
QUEUE = "nv_inference_queue_duration_us"
DURATION = "nv_inference_request_duration_us"  # cumulative, successful requests
SUMMARY = "nv_inference_request_summary_us"  # --metrics-config summary_latencies=true
QUANTILES = {"0.99": "p99", "0.95": "p95"}  # Triton's summary quantiles the analysis reads
TIMEOUT = 10.0
# Endpoints scraped side by side: a poll waits for the slowest, not for their sum (three
# scheduled-but-absent pods made every poll 3 s longer one after another, measured).
SCRAPES_AT_ONCE = 16
# A replica's /metrics is not retried on a connection error (refused: nothing listens there, the pod is
# dead or not yet up): the next poll asks again, and a poll that waited through urllib3's backoff for
# it (~1 s) held every step of the gray release back (a good release in the e2e lab, whose three spare
# pods are listed before they start: 23.4 s, 18.8 and 16.9 s without; measured). Read errors keep theirs.
SCRAPE_CONNECT_RETRIES = 0
log = logging.getLogger("model_sync.canary.gray_release")


class MetricsError(errors.SyncError):
    """No figures: the metrics endpoint is unreachable or answered something else (exit 5)."""

    def __init__(self, message: str) -> None:
        super().__init__(errors.S3, message)


class MetricsSource(Protocol):
    def mark(self) -> Any: ...

    def figures(self, mark: Any, versions: Sequence[int]) -> dict[int, Figures]: ...

    def answering(self, replicas: Sequence[str]) -> dict[str, float]: ...


def _http(connect_retries: int = 2) -> Any:
    import urllib3

    retries = urllib3.Retry(2, connect=connect_retries, backoff_factor=0.5)
    return urllib3.PoolManager(timeout=urllib3.Timeout(total=TIMEOUT), retries=retries)


# ---- locally: each replica's /metrics ----------------------------------------------------


# (metric, version) -> value, one replica's scrape for one model
Scrape = dict[tuple[str, int], float]


def parse(text: str, model: str) -> Scrape:
    """The model's counters, p99 and p95 (quantiles 0.99 and 0.95, µs) per version from Triton's
    /metrics text."""
    from prometheus_client.parser import text_string_to_metric_families

    out: Scrape = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("model") != model or not s.labels.get("version", "").isdigit():
                continue
            key, name = None, s.name.removesuffix("_total")  # the parser names a counter's sample <name>_total
            if name in (SUCCESS, FAILURE, QUEUE, DURATION):
                key = name
            elif s.name == SUMMARY and s.labels.get("quantile") in QUANTILES:
                key = QUANTILES[s.labels["quantile"]]
            if key is not None and not math.isnan(s.value):
                version = int(s.labels["version"])
                out[(key, version)] = out.get((key, version), 0.0) + s.value  # failures carry a `reason` label
    return out


@dataclass
class TritonMetrics:
    """The replicas' Triton metrics endpoints, by replica id (replica -> http://HOST:PORT/metrics),
    scraped directly."""

    model: str
    urls: Mapping[str, str]
    _pool: Any = field(default=None, init=False, repr=False)
    _away: set[str] = field(default_factory=set, init=False, repr=False)  # endpoints not answering now

    def scrape(self, replicas: Sequence[str] | None = None) -> dict[str, Scrape]:
        """replica -> its scrape (of `replicas`, default every one); a replica that does not answer
        is left out (dead, restarting, scaled away)."""
        self._pool = self._pool or _http(connect_retries=SCRAPE_CONNECT_RETRIES)
        asked = [r for r in (sorted(self.urls) if replicas is None else replicas) if r in self.urls]
        if not asked:
            return {}
        with ThreadPoolExecutor(max_workers=min(SCRAPES_AT_ONCE, len(asked))) as pool:
            texts = list(pool.map(lambda replica: self._get(self.urls[replica]), asked))
        return {
            replica: parse(text, self.model) for replica, text in zip(asked, texts, strict=True) if text is not None
        }

    def _get(self, url: str) -> str | None:
        """The endpoint's text; None (named in a warning, once until it answers again) when it does
        not answer 200."""
        try:
            reply = self._pool.request("GET", url)
            status = reply.status
        except Exception as e:  # urllib3's errors: the replica is away this time
            status, why = 0, errors.one_line(str(e))
        else:
            why = f"HTTP {status}"
        if status != 200:
            if url not in self._away:
                log.warning("metrics %s: %s; left out of the figures while it does not answer", url, why)
            self._away.add(url)
            return None
        if url in self._away:
            log.warning("metrics %s: answers again", url)
            self._away.discard(url)
        return str(reply.data.decode())

    def _scrape_some(self) -> dict[str, Scrape]:
        found = self.scrape()
        if not found:
            raise MetricsError(
                f"metrics: none of {', '.join(self.urls.values())} answered; allowed: reachable Triton /metrics "
                "endpoints (tritonMetricsUrls)"
            )
        return found

    def mark(self) -> dict[str, Scrape]:
        return self._scrape_some()

    def answering(self, replicas: Sequence[str]) -> dict[str, float]:
        """Those of `replicas` whose endpoint answers now (one without an entry in tritonMetricsUrls
        never does), each with the requests of the model it has answered (every version)."""
        return {replica: sum(v for (metric, _), v in scrape.items() if metric in (SUCCESS, FAILURE))
                for replica, scrape in self.scrape(replicas).items()}  # fmt: skip

    def figures(self, mark: dict[str, Scrape], versions: Sequence[int]) -> dict[int, Figures]:
        now = self._scrape_some()
        out: dict[int, Figures] = {}
        for v in versions:
            totals = {SUCCESS: 0.0, FAILURE: 0.0, QUEUE: 0.0, DURATION: 0.0}
            tails: dict[str, dict[str, float]] = {q: {} for q in QUANTILES.values()}
            for replica, scrape in now.items():
                before = mark.get(replica, {})
                for metric in totals:
                    value, start = scrape.get((metric, v), 0.0), before.get((metric, v), 0.0)
                    totals[metric] += value - start if value >= start else value  # went down: restarted
                for q in QUANTILES.values():
                    if (q, v) in scrape:
                        tails[q][replica] = scrape[(q, v)]
            out[v] = _figures(totals[SUCCESS], totals[FAILURE], totals[QUEUE], totals[DURATION], tails)
        return out


def _figures(success: float, failure: float, queue_us: float, duration_us: float,
             tails: Mapping[str, Mapping[str, float]]) -> Figures:  # fmt: skip
    """Figures from a window's counter increases and each replica's quantiles (µs; by "p99"/"p95",
    then replica): the version's p99 and p95 are its worst replica's, each replica's p99 kept."""
    ok, failed = round(success), round(failure)

    def ms(q: str) -> float | None:
        return max(tails[q].values()) / 1000.0 if tails.get(q) else None

    return Figures(
        requests=ok + failed,
        errors=failed,
        p99_ms=ms("p99"),
        p95_ms=ms("p95"),
        queue_us=queue_us / success if success > 0 else None,
        mean_ms=duration_us / success / 1000.0 if success > 0 else None,
        replicas_p99_ms=tuple(sorted(v / 1000.0 for v in tails.get("p99", {}).values())),
        replicas_p95_ms=tuple(sorted(v / 1000.0 for v in tails.get("p95", {}).values())),
    )


# ---- the cloud: Prometheus ---------------------------------------------------------------


def eks_token(cluster: str, region: str | None, session: Any = None) -> str:
    """A bearer token for the EKS API server, from the AWS default credential chain: a presigned
    STS GetCallerIdentity URL bound to the cluster's name (header x-k8s-aws-id), valid 60 s, as
    `aws eks get-token` and aws-iam-authenticator make it (botocore's signer)."""
    import botocore.session
    from botocore.signers import RequestSigner

    session = session or botocore.session.get_session()
    region = region or session.get_config_variable("region") or "us-east-1"
    credentials = session.get_credentials()
    if credentials is None:
        raise errors.s3("EKS token: no AWS credentials; allowed: the AWS default credential chain", "credentials")
    sts = session.create_client("sts", region_name=region)
    signer = RequestSigner(
        sts.meta.service_model.service_id, region, "sts", "v4", credentials, session.get_component("event_emitter")
    )
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"{sts.meta.endpoint_url}/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {"x-k8s-aws-id": cluster},
            "context": {},
        },
        region_name=region,
        expires_in=60,
        operation_name="",
    )
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


@dataclass
class PrometheusMetrics:
    """Prometheus's instant-query API at `url` (`<url>/api/v1/query`); `token` makes the bearer
    token of each query (None: no Authorization header, e.g. a port-forward)."""

    model: str
    url: str
    token: Callable[[], str] | None = None
    clock: Callable[[], float] = time.time
    _pool: Any = field(default=None, init=False, repr=False)

    def query(self, promql: str) -> dict[int, float]:
        """version -> value of an instant query grouped `by (version)`."""
        out: dict[int, float] = {}
        for labels, value in self._rows(promql):
            if labels.get("version", "").isdigit():
                out[int(labels["version"])] = value
        return out

    def by_pod(self, promql: str) -> dict[int, dict[str, float]]:
        """version -> pod -> value of an instant query grouped `by (version, pod)`."""
        out: dict[int, dict[str, float]] = {}
        for labels, value in self._rows(promql):
            if labels.get("version", "").isdigit() and labels.get("pod"):
                out.setdefault(int(labels["version"]), {})[labels["pod"]] = value
        return out

    def answering(self, replicas: Sequence[str]) -> dict[str, float]:
        """Those of `replicas` (pod names) whose every scrape target is up now (a pod that died is
        down at its next scrape and gone once its endpoints are removed), each with the requests of
        the model it has answered (every version)."""
        if not replicas:
            return {}
        pods = "|".join(r.replace(".", "\\\\.") for r in replicas)
        up = {labels["pod"] for labels, value in self._rows(f'min by (pod) (up{{pod=~"{pods}"}})')
              if value == 1 and labels.get("pod") in replicas}  # fmt: skip
        sel = f'model="{self.model}",pod=~"{pods}"'
        answered: dict[str, float] = {}
        for metric in (SUCCESS, FAILURE):
            for labels, value in self._rows(f"sum by (pod) ({metric}{{{sel}}})"):
                answered[labels.get("pod", "")] = answered.get(labels.get("pod", ""), 0.0) + value
        return {pod: answered.get(pod, 0.0) for pod in up}

    def _rows(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """An instant query's result: (labels, value) per series, NaN left out."""
        self._pool = self._pool or _http()
        headers = {"Authorization": f"Bearer {self.token()}"} if self.token else {}
        where = f"{self.url.rstrip('/')}/api/v1/query"
        try:
            reply = self._pool.request("GET", where, fields={"query": promql}, headers=headers)
            doc = json.loads(reply.data) if reply.status == 200 else None
        except Exception as e:  # urllib3's errors, a body that is not JSON
            raise MetricsError(
                f"prometheus {where}: {errors.one_line(str(e))}; allowed: a reachable Prometheus (prometheusUrl)"
            ) from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            raise MetricsError(
                f"prometheus {where}: HTTP {reply.status} {errors.one_line(reply.data.decode(errors='replace'))}; "
                "allowed: Prometheus's query API answering with status success"
            )
        rows = [(row["metric"], float(row["value"][1])) for row in doc["data"]["result"]]
        return [(labels, value) for labels, value in rows if not math.isnan(value)]

    def mark(self) -> float:
        return self.clock()

    def figures(self, mark: float, versions: Sequence[int]) -> dict[int, Figures]:
        window = f"{max(1, math.ceil(self.clock() - mark))}s"
        sel = f'model="{self.model}"'
        success = self.query(f"sum by (version) (increase({SUCCESS}{{{sel}}}[{window}]))")
        failure = self.query(f"sum by (version) (increase({FAILURE}{{{sel}}}[{window}]))")
        queue = self.query(f"sum by (version) (increase({QUEUE}{{{sel}}}[{window}]))")
        duration = self.query(f"sum by (version) (increase({DURATION}{{{sel}}}[{window}]))")
        tails = {q: self.by_pod(f'max by (version, pod) ({SUMMARY}{{{sel},quantile="{quantile}"}})')
                 for quantile, q in QUANTILES.items()}  # fmt: skip
        out = {}
        for v in versions:
            known = {q: by_version.get(v, {}) for q, by_version in tails.items()}
            out[v] = _figures(success.get(v, 0.0), failure.get(v, 0.0), queue.get(v, 0.0), duration.get(v, 0.0), known)
        return out


def for_environment(env: Any, model: str, session: Any = None) -> MetricsSource:
    """The environment's source of figures (model_sync.environments.Environment): Prometheus when
    it has a prometheusUrl (a bearer token per query when it names its eksCluster), else the
    replicas' Triton /metrics (tritonMetricsUrls). Exit 2 when it has neither."""
    if env.prometheus_url:
        cluster, region = env.eks_cluster, env.region
        token = (lambda: eks_token(cluster, region, session)) if cluster else None
        return PrometheusMetrics(model, env.prometheus_url, token)
    if env.metrics_urls:
        return TritonMetrics(model, dict(env.metrics_urls))
    raise errors.usage(
        f"canary: environment {env.name!r} has no metrics for the analysis; allowed: prometheusUrl (a stack output) "
        "or tritonMetricsUrls in model-sync.yaml, or promote --no-canary"
    )
