"""`make demo` = `python -m model_sync.sandbox demo [--format torchscript|pt2|onnx] [--keep-running] [--dir .demo]`

The whole data plane on one machine, no fakes: a local S3 server (moto's S3 in a process of its own,
in memory: model_sync.sandbox.s3server.MotoS3Server) with a staging and a prod bucket; the real
tritonserver (CPU, from the pinned nvidia-pytriton wheel), one replica in staging and two in prod,
each polling a local repository filled by its own repository agent (`python -m model_sync agent`,
the image's ENTRYPOINT). Then, through the model_sync CLI: export a small model in `--format`
(TorchScript by default, an AOTInductor .pt2, or ONNX; --target local: the python-backend wrapper that
serves that file), push it to staging, verify, promote it to prod (the first
version: `--no-canary`, there is nothing to compare it with); export its retrained successor, push
and verify it, and promote it to prod through a gray release under traffic (one of the two prod
replicas serves it first, canary and stable are compared from their /metrics, then it is pinned);
verify prod, run an inference against prod and compare it with eager PyTorch, print `status`.
Everything is stopped at the end unless --keep-running (then `python -m model_sync.sandbox stop` stops
it).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from model_sync import environments
from model_sync.contract import layout
from model_sync.s3 import clients
from model_sync.s3.bucket import Bucket
from model_sync.sandbox.fleet import agent_argv, subprocess_environ
from model_sync.sandbox.procs import Process, http_status, wait_until
from model_sync.sandbox.runtime import TritonServer, ensure_tritonserver
from model_sync.sandbox.s3server import MotoS3Server
from model_sync.sandbox.traffic import RoundRobinTraffic
from model_sync.triton_model.formats import FORMAT_TABLE, FORMATS

ENVS = ("staging", "prod")
REPLICAS = {"staging": 1, "prod": 2}  # prod: one replica serves the canary, the other stable
MODEL = "demo-mlp"
SAMPLE_FACTORIES = (
    "model_sync.sandbox.sample_model:build",
    "model_sync.sandbox.sample_model:build_retrained",
    "model_sync.sandbox.sample_model:build_finetuned",
)
INPUT = [[0.5, -1.0, 2.0, 0.25]]
# The clients during a gray release: 100 requests a second, round-robin over prod's replicas (an open
# loop): each track's 5 s window gets ~250, and the replicas are not driven flat out (unbounded, a
# release took ~1,700 a second and the CPU of a 2-core machine with them).
TRAFFIC_RATE = 100.0
# The demo's gray release: one step of 50 % (1 of 2 replicas), 5 s, judged on 20 requests a track.
# It runs on a developer's machine beside other work, where a busy CPU holds back one replica more
# than the other: the latency floors are 50 ms (p99) and 20 ms (queue time), above what that puts
# between two replicas of the same model (quiet: p99 2.6 against 3.3 ms over ~3,500 requests a
# track; under make test's load a run aborted the good successor at p99 20.6 against 7.5 ms). The
# demo shows a release promoted; tests/model_sync/canary/test_e2e.py shows each gate catching a
# real regression.
CANARY_POLICY = {"steps": [50], "stepSeconds": 5, "minRequests": 20, "deadlineSeconds": 120, "loadTimeoutSeconds": 60,
                 "minP99DeltaMs": 50, "minQueueDeltaMicroseconds": 20_000}  # fmt: skip


def say(text: str) -> None:
    print(f"==> {text}", flush=True)


@dataclass
class LocalPlatform:
    """Staging + prod on this machine. `root` holds s3/ (the S3 server's state file), <replica>/models,
    logs/, model-sync.yaml; `tritons` and `agents` are keyed by replica id (`<env>-<i>`).
    `keep_running`: the processes outlive this one (stopped by `python -m model_sync.sandbox stop`)."""

    root: Path
    interval: float = 1.0
    keep_running: bool = False
    s3: MotoS3Server = field(init=False)
    tritons: dict[str, TritonServer] = field(default_factory=dict, init=False)
    agents: dict[str, Process] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.root = self.root.absolute()
        self.s3 = MotoS3Server(self.root / "s3", self.root / "logs" / "s3.log", exit_with_owner=not self.keep_running)

    @property
    def config_path(self) -> Path:
        return self.root / "model-sync.yaml"

    def bucket(self, env: str) -> str:
        return f"models-{env}"

    def first(self, env: str) -> TritonServer:
        return self.tritons[f"{env}-0"]

    def replicas(self, env: str) -> list[TritonServer]:
        return [t for rid, t in self.tritons.items() if rid.startswith(f"{env}-")]

    def env(self) -> dict[str, str]:
        return subprocess_environ(self.s3.client_env(), self.config_path)

    def start(self) -> None:
        runtime = ensure_tritonserver()
        say(f"tritonserver {runtime.binary} (from nvidia-pytriton, sha256 verified)")
        self.s3.create_buckets(*(self.bucket(e) for e in ENVS))
        self.s3.start()
        say(
            f"local S3 (moto, in memory, pid {self.s3.process.pid if self.s3.process else None}) on "
            f"{self.s3.endpoint_url}; it enforces If-None-Match/If-Match and replaces an object at once, as AWS S3 does"
        )
        for name in ENVS:
            for i in range(REPLICAS[name]):
                rid = f"{name}-{i}"
                self.tritons[rid] = TritonServer(
                    self.root / rid / "models", self.root / "logs" / f"triton-{rid}.log", runtime=runtime
                )
        self._write_config()
        for rid, triton in self.tritons.items():
            triton.start()
            say(f"{rid}: tritonserver http {triton.http_url} grpc {triton.grpc_url} polling {triton.repository}")
            env = rid.rsplit("-", 1)[0]
            argv = agent_argv(
                env, triton.repository, triton.http_url, "local", rid, interval=self.interval, heartbeat=10
            )
            self.agents[rid] = Process(
                f"agent-{rid}", argv, self.root / "logs" / f"agent-{rid}.log", env=self.env()
            ).start()
            say(f"{rid}: repository agent pid {self.agents[rid].pid} (log {self.agents[rid].log_path})")
        self._write_pids()

    def _write_config(self) -> None:
        lines = ["# written by `python -m model_sync.sandbox demo`", "environments:"]
        for name in ENVS:
            lines += [
                f"  {name}:",
                f"    bucket: s3://{self.bucket(name)}",
                f"    endpointUrl: {self.s3.endpoint_url}",
                f"    region: {self.s3.region}",
                f"    tritonUrl: {self.first(name).http_url}",
            ]
            if REPLICAS[name] > 1:  # the gray release's figures: every replica's /metrics
                metrics = {rid: f"http://127.0.0.1:{t.metrics_port}/metrics" for rid, t in self.tritons.items()
                           if rid.startswith(f"{name}-")}  # fmt: skip
                lines += [f"    tritonMetricsUrls: {json.dumps(metrics)}",
                          f"    canaryPolicies: {json.dumps({MODEL: CANARY_POLICY})}"]  # fmt: skip
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("\n".join(lines) + "\n")

    def _write_pids(self) -> None:
        procs = [
            p
            for p in [self.s3.process, *(t.process for t in self.tritons.values()), *self.agents.values()]
            if p is not None
        ]
        (self.root / "pids.json").write_text(
            json.dumps(
                {p.name if p.name != "tritonserver" else f"tritonserver-{i}": p.pid for i, p in enumerate(procs)},
                indent=2,
            )
            + "\n"
        )

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        say("model-sync " + " ".join(args))
        proc = subprocess.run(
            [sys.executable, "-m", "model_sync", *args],
            capture_output=True,
            text=True,
            env=self.env(),
            check=False,
            timeout=600,
        )
        stdout = proc.stdout
        if "json" in args and proc.returncode == 0:  # --output json: the document on one line
            stdout = json.dumps(json.loads(stdout), sort_keys=True) + "\n"
        out = (stdout + proc.stderr).rstrip()
        if out:
            print("    " + out.replace("\n", "\n    "), flush=True)
        if check and proc.returncode != 0:
            raise SystemExit(f"demo: model-sync {args[0]} exited {proc.returncode}")
        return proc

    def wait_ready(self, env: str, version: int, timeout: float = 180) -> None:
        for i, triton in enumerate(self.replicas(env)):
            ready = f"{triton.http_url}/v2/models/{MODEL}/versions/{version}/ready"
            wait_until(
                functools.partial(lambda url: http_status(url) == 200, ready),
                timeout,
                what=f"{env}-{i}: {MODEL} version {version} READY (agent log {self.agents[f'{env}-{i}'].log_path})",
            )
            # verify reads the agent's status report: wait until it says READY too.
            wait_until(functools.partial(self._status_ready, env, i, version), timeout,
                       what=f"{env}-{i}: agent status READY on {version}")  # fmt: skip

    def _status_ready(self, env: str, index: int, version: int) -> bool:
        session = clients.new_session(self.s3.region)
        session.set_credentials(self.s3.access_key, self.s3.secret_key)
        repo = Bucket(
            environments.Environment(env, layout.Root(self.bucket(env)), self.s3.endpoint_url, self.s3.region),
            session=session,
        )
        data = repo.get(layout.status_key("local", f"{env}-{index}"))
        if data is None:
            return False
        entry = json.loads(data)["models"].get(MODEL, {})
        return bool(entry.get("state") == "READY" and entry.get("serving") == [version])

    def stop(self) -> None:
        for agent in self.agents.values():
            agent.stop(timeout=20)
        for triton in self.tritons.values():
            triton.stop()
        self.s3.shutdown()
        (self.root / "pids.json").unlink(missing_ok=True)


def infer(url: str, version: int) -> list[list[float]]:
    import numpy as np
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url.split("://", 1)[1])
    meta = client.get_model_metadata(MODEL, str(version))
    inp = meta["inputs"][0]
    data = np.array(INPUT, dtype=np.float32)
    t = httpclient.InferInput(inp["name"], list(data.shape), "FP32")
    t.set_data_from_numpy(data)
    result = client.infer(MODEL, [t], model_version=str(version))
    out = result.as_numpy(meta["outputs"][0]["name"])
    client.close()
    return [[float(x) for x in row] for row in out]


def eager(factory: str) -> list[list[float]]:
    import importlib

    import torch

    module, _, name = factory.partition(":")
    with torch.no_grad():
        model = getattr(importlib.import_module(module), name)()
        return [[float(x) for x in row] for row in model(torch.tensor(INPUT, dtype=torch.float32))]


# How far prod's answer may be from eager PyTorch's, per format: export's --rtol default for it
# (AOTInductor's and ONNX Runtime's kernels reorder floating-point sums).
TOLERANCE = {name: f.tolerances[0] for name, f in FORMAT_TABLE.items()}


def publish(platform: LocalPlatform, root: Path, factory: str, fmt: str = "torchscript") -> int:
    """Export `factory` in `fmt`, push it to staging, wait for and verify it there; its staging version."""
    export_dir = root / "export"
    platform.cli("export", factory, "--name", MODEL, "--output", str(export_dir), "--example-shape", "1,4",
                 "--target", "local", "--max-batch-size", "8", "--format", fmt, "--overwrite")  # fmt: skip
    # --output json says which version push allocated; --wait returns once the replica serves it.
    pushed = platform.cli("push", str(export_dir / MODEL), "--env", "staging", "--output", "json", "--wait")
    staged = int(json.loads(pushed.stdout)["models"][0]["version"])
    platform.wait_ready("staging", staged)
    say(f"staging serves {MODEL} version {staged}")
    platform.cli("verify", MODEL, "--env", "staging", "--model-version", str(staged), "--grpc-url",
                 platform.first("staging").grpc_url)  # fmt: skip
    return staged


def promote(platform: LocalPlatform, staged: int, *flags: str) -> int:
    promoted = platform.cli("promote", MODEL, "--model-version", str(staged), "--from", "staging", "--to", "prod",
                            "--output", "json", "--wait", *flags)  # fmt: skip
    prod = int(json.loads(promoted.stdout)["to"]["version"])
    platform.wait_ready("prod", prod)
    return prod


def demo(root: Path, keep_running: bool = False, fmt: str = "torchscript") -> int:
    """`fmt`: one format (both versions in it), or several, comma-separated: one version per format, in
    that order (the first pinned at once, each later one through a gray release: a change of format
    is a version like any other)."""
    import numpy as np

    formats = fmt.split(",")
    if any(f not in FORMATS for f in formats) or len(formats) > len(SAMPLE_FACTORIES):
        raise SystemExit(
            f"demo: --format {fmt!r}; allowed: one of {', '.join(FORMATS)}, or up to {len(SAMPLE_FACTORIES)} of "
            "them separated by commas (one version each)"
        )
    if len(formats) == 1:
        formats *= 2
    platform = LocalPlatform(root, keep_running=keep_running)
    t0 = time.monotonic()
    try:
        platform.start()
        say(f"exporting as {formats[0]}; prod's first version: nothing to compare it with, so it is pinned at once "
            "(--no-canary)")  # fmt: skip
        prod = promote(platform, publish(platform, root, SAMPLE_FACTORIES[0], formats[0]), "--no-canary")
        for factory, version_format in zip(SAMPLE_FACTORIES[1:], formats[1:], strict=False):
            say(
                f"prod serves {MODEL} version {prod} on both replicas; now its retrained successor, as {version_format}"
            )
            staged = publish(platform, root, factory, version_format)
            say("prod: the successor goes through a gray release while clients send requests round-robin")
            urls = [t.http_url for t in platform.replicas("prod")]
            traffic = RoundRobinTraffic(
                urls, MODEL, lambda seq: {"INPUT__0": np.array(INPUT, dtype=np.float32)}, rate=TRAFFIC_RATE
            ).start()
            try:
                prod = promote(platform, staged)
            finally:
                records = traffic.stop()
            counts = ", ".join(f"version {v}: {n}" for v, n in sorted(records.version_counts().items()))
            say(f"traffic during the gray release: {len(records)} requests ({counts}), {len(records.failed())} failed")
            if records.failed():
                raise SystemExit(f"demo: requests failed during the gray release: {records.errors()}")
        last = SAMPLE_FACTORIES[len(formats) - 1]
        platform.cli("verify", MODEL, "--env", "prod", "--model-version", str(prod), "--grpc-url",
                     platform.first("prod").grpc_url)  # fmt: skip
        got, want = infer(platform.first("prod").http_url, prod), eager(last)
        diff = max(abs(a - b) for ra, rb in zip(got, want, strict=True) for a, b in zip(ra, rb, strict=True))
        say(f"prod inference {MODEL} v{prod}: {got} (eager PyTorch {want}, max |diff| {diff:.2e})")
        if diff > TOLERANCE[formats[-1]]:
            raise SystemExit(
                f"demo: prod output differs from eager by {diff} (allowed: {TOLERANCE[formats[-1]]} for {formats[-1]})"
            )
        platform.cli("status")
        say(f"done in {time.monotonic() - t0:.0f}s")
        if keep_running:
            say(f"still running (pids in {root / 'pids.json'}); config {platform.config_path}")
            # Credentials reach model-sync through the standard AWS chain: a shared
            # credentials file holding the local server's loopback-only keys.
            creds = root / "aws-credentials"
            client = platform.s3.client_env()
            creds.write_text(
                f"[model-sync-demo]\naws_access_key_id = {client['AWS_ACCESS_KEY_ID']}\n"
                f"aws_secret_access_key = {client['AWS_SECRET_ACCESS_KEY']}\n"
            )
            creds.chmod(0o600)
            say(
                f"try: AWS_SHARED_CREDENTIALS_FILE={creds} AWS_PROFILE=model-sync-demo "
                f"AWS_DEFAULT_REGION={client['AWS_DEFAULT_REGION']} "
                f"MODEL_SYNC_CONFIG={platform.config_path} {sys.executable} -m model_sync status"
            )
            say(f"stop: {sys.executable} -m model_sync.sandbox stop --dir {root}")
        return 0
    finally:
        if not keep_running:
            platform.stop()
            say("stopped S3 server, tritonservers and agents")


def stop(root: Path) -> int:
    """Stop what `demo --keep-running` left up (pids recorded in <dir>/pids.json)."""
    pids_file = root.absolute() / "pids.json"
    if not pids_file.exists():
        say(f"nothing to stop ({pids_file} not found)")
        return 0
    pids: dict[str, int] = json.loads(pids_file.read_text())
    # Agents first (they exit cleanly on SIGTERM), then the servers; each one is its own process group.
    for name, pid in sorted(pids.items(), key=lambda kv: (not kv[0].startswith("agent"), kv[0])):
        try:
            os.killpg(pid, signal.SIGTERM)
            say(f"SIGTERM {name} (pid {pid})")
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 30
    for pid in pids.values():
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
    pids_file.unlink()
    return 0
