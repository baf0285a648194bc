"""Transfer benchmark: model-sync against s5cmd and the AWS CLI on the same local S3 server.

    .venv/bin/python -m bench.transfer.run [--size-gb 2] [--reps 3] [--only push-2g,...]

Scenarios (every tool a CLI process, as a user runs it; tools alternate order in every rep):
    push-2g        cold `model-sync push` of one model whose model.pt is --size-gb GiB (hashing,
                   manifest and pin included) vs `s5cmd cp` and `aws s3 cp` of the same file
    download-2g    `model-sync agent --once` placing that pinned version in a local repository,
                   sha256-verified and fsynced, vs `s5cmd cp` of the same object (read once,
                   untimed, before either: rclone hashes an object on its first read)
    promote-2g     `model-sync promote --skip-verification` staging -> prod (server-side copy, then
                   the copy read back and hashed: S3-compatible servers store checksums unverified)
                   vs `aws s3 cp s3://.. s3://..`
    noop-1000      no-op push of a 1,000-model repository (right after its cold push, then again
                   on a warm server) vs `s5cmd sync`, `aws s3 sync`
    cold-50        cold push of 50 models x (config.pbtxt, model.py, 2 MiB model.pt), the old
                   push benchmark's scenario, vs `s5cmd sync`, `aws s3 sync`
    agent-pass     S3 requests of one agent pass over 1,000 models x 5 versions (moto's request
                   log): steady state, a full-resync pass, and the average at the defaults
The throughput scenarios run against one `rclone serve s3` (on disk, 127.0.0.1): the server
shares this machine's CPUs with the tool, so the ratios say how close each tool gets to what the
server can take, not what AWS S3 gives. Medians of --reps, the spread (min..max) and the CPU
seconds of each process (user + system) are recorded. Writes bench/results/transfer.json, the
table in docs/model-sync.md (between the `bench:transfer` markers) and README.md's row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from model_sync.sandbox.s3server import RcloneS3Server  # noqa: E402

BIN = Path(sys.executable).parent
DOC = ROOT / "docs" / "model-sync.md"
README = ROOT / "README.md"
RESULTS = ROOT / "bench" / "results" / "transfer.json"
SCENARIOS = ("push-2g", "download-2g", "promote-2g", "noop-1000", "cold-50", "agent-pass")
MB = 1024 * 1024


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + system) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {err[-800:]}")
    return wall, usage.ru_utime + usage.ru_stime


def write_random(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 64 * MB)
            f.write(os.urandom(n))
            left -= n


def python_model(root: Path, name: str, weights: int) -> None:
    (root / name / "1").mkdir(parents=True, exist_ok=True)
    (root / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n')
    (root / name / "1" / "model.py").write_text(f"# {name}\n")
    write_random(root / name / "1" / "model.pt", weights)


def config(path: Path, endpoint: str, envs: dict[str, str]) -> str:
    import yaml

    path.write_text(
        yaml.safe_dump(
            {
                "environments": {
                    n: {"bucket": f"s3://{b}", "endpointUrl": endpoint, "region": "us-east-1"} for n, b in envs.items()
                }
            }
        )
    )
    return str(path)


class Bench:
    def __init__(self, work: Path, server: RcloneS3Server) -> None:
        self.work = work
        self.server = server
        self.env = {
            **os.environ,
            **server.client_env(),
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
        self.samples: dict[str, dict[str, dict[str, list[float]]]] = {}
        self._client: Any = None

    def bucket(self, name: str) -> str:
        """A new bucket, created through the S3 API (rclone caches its directory listing)."""
        import boto3

        if self._client is None:
            s = self.server
            self._client = boto3.session.Session(
                aws_access_key_id=s.access_key, aws_secret_access_key=s.secret_key, region_name=s.region
            ).client("s3", endpoint_url=s.endpoint_url)
        self._client.create_bucket(Bucket=name)
        return name

    def aws_single_copy(self) -> None:
        (self.work / "aws-single-copy.cfg").write_text("[default]\ns3 =\n  multipart_threshold = 5GB\n")

    def drop(self, *buckets: str) -> None:
        for b in buckets:
            shutil.rmtree(self.server.data_dir / b, ignore_errors=True)

    def record(self, scenario: str, tool: str, sample: tuple[float, float]) -> None:
        d = self.samples.setdefault(scenario, {}).setdefault(tool, {"wall": [], "cpu": []})
        d["wall"].append(sample[0])
        d["cpu"].append(sample[1])
        print(f"  {scenario:12s} {tool:14s} {sample[0]:7.2f} s wall {sample[1]:6.2f} s cpu", flush=True)

    def ms(self, *args: str, cache: Path | None = None) -> list[str]:
        return [str(BIN / "model-sync"), *args]

    def big(self, rep: int, size: int) -> None:
        """push-2g, download-2g and promote-2g of one rep (the pushed bucket feeds the other two)."""
        src = self.work / "big"
        staging, prod = self.bucket(f"ms-stage-{rep}"), self.bucket(f"ms-prod-{rep}")
        cfg = config(self.work / f"model-sync-{rep}.yaml", self.server.endpoint_url, {"staging": staging, "prod": prod})
        env = {**self.env, "MODEL_SYNC_CACHE_DIR": str(self.work / f"cache-{rep}")}  # cold: nothing hashed before
        weights = str(src / "big" / "1" / "model.pt")
        order = ["model-sync", "s5cmd", "aws-cli"]
        order = order[rep % 3 :] + order[: rep % 3]
        for tool in order:
            if tool == "model-sync":
                self.record(
                    "push-2g",
                    tool,
                    run(self.ms("push", str(src / "big"), "--env", "staging", "--config", cfg, "--quiet"), env),
                )
            elif tool == "s5cmd":
                b = self.bucket(f"s5-{rep}")
                self.record(
                    "push-2g",
                    tool,
                    run(
                        [
                            str(BIN / "s5cmd"),
                            "--endpoint-url",
                            self.server.endpoint_url,
                            "cp",
                            weights,
                            f"s3://{b}/model.pt",
                        ],
                        env,
                    ),
                )
                self.drop(b)
            else:
                b = self.bucket(f"aws-{rep}")
                self.record(
                    "push-2g",
                    tool,
                    run(
                        [
                            str(BIN / "aws"),
                            "--endpoint-url",
                            self.server.endpoint_url,
                            "s3",
                            "cp",
                            "--only-show-errors",
                            weights,
                            f"s3://{b}/model.pt",
                        ],
                        env,
                    ),
                )
                self.drop(b)
        key = f"s3://{staging}/repository/big/1/model.pt"
        # rclone computes an object's MD5 ETag on its first read after a write (4 s for 2 GiB): done
        # here, untimed, so that neither downloader's time includes it.
        self._client.head_object(Bucket=staging, Key="repository/big/1/model.pt")
        for tool in ["model-sync", "s5cmd"] if rep % 2 == 0 else ["s5cmd", "model-sync"]:
            out = self.work / f"dl-{tool}-{rep}"
            if tool == "model-sync":
                argv = self.ms("agent", "--once", "--env", "staging", "--config", cfg,
                               "--repository", str(out / "models"), "--staging-dir", str(out / ".staging"),
                               "--deployment", "bench", "--replica-id", f"r{rep}",
                               "--log-level", "WARNING")  # fmt: skip
                self.record("download-2g", tool, run(argv, env))
                assert (out / "models" / "big" / "1" / "model.pt").stat().st_size == size
            else:
                self.record(
                    "download-2g",
                    tool,
                    run(
                        [
                            str(BIN / "s5cmd"),
                            "--endpoint-url",
                            self.server.endpoint_url,
                            "cp",
                            key,
                            str(out / "model.pt"),
                        ],
                        env,
                    ),
                )
            shutil.rmtree(out)
        for tool in ["model-sync", "aws-cli"] if rep % 2 == 0 else ["aws-cli", "model-sync"]:
            if tool == "model-sync":
                self.record(
                    "promote-2g",
                    tool,
                    run(
                        self.ms(
                            "promote",
                            "big",
                            "--model-version",
                            "1",
                            "--from",
                            "staging",
                            "--to",
                            "prod",
                            "--no-canary",
                            "--skip-verification",
                            "--config",
                            cfg,
                            "--quiet",
                        ),
                        env,
                    ),
                )
            else:
                b = self.bucket(f"awscp-{rep}")
                # One CopyObject, as promote does up to 5 GiB: rclone serve s3 cannot do UploadPartCopy (no ETag in its
                # answer).
                aws_env = {**env, "AWS_CONFIG_FILE": str(self.work / "aws-single-copy.cfg")}
                self.record(
                    "promote-2g",
                    tool,
                    run(
                        [
                            str(BIN / "aws"),
                            "--endpoint-url",
                            self.server.endpoint_url,
                            "s3",
                            "cp",
                            "--only-show-errors",
                            key,
                            f"s3://{b}/model.pt",
                        ],
                        aws_env,
                    ),
                )
                self.drop(b)
        self.drop(staging, prod)

    def trees(self, rep: int, scenario: str, tree: Path, noop: bool) -> None:
        """cold-50 (cold push only) or noop-1000 (cold push, then the no-op twice)."""
        order = ["model-sync", "s5cmd", "aws-cli"]
        order = order[rep % 3 :] + order[: rep % 3]
        for tool in order:
            b = self.bucket(f"{scenario}-{tool.replace('-', '')}-{rep}")
            env = {**self.env, "MODEL_SYNC_CACHE_DIR": str(self.work / f"cache-{scenario}-{rep}")}
            if tool == "model-sync":
                cmd = self.ms(
                    "push",
                    str(tree),
                    "--env",
                    "bench",
                    "--bucket",
                    f"s3://{b}",
                    "--endpoint-url",
                    self.server.endpoint_url,
                    "--region",
                    "us-east-1",
                    "--quiet",
                )
            elif tool == "s5cmd":
                cmd = [
                    str(BIN / "s5cmd"),
                    "--endpoint-url",
                    self.server.endpoint_url,
                    "sync",
                    f"{tree}/",
                    f"s3://{b}/repository/",
                ]
            else:
                cmd = [
                    str(BIN / "aws"),
                    "--endpoint-url",
                    self.server.endpoint_url,
                    "s3",
                    "sync",
                    str(tree),
                    f"s3://{b}/repository",
                    "--only-show-errors",
                ]
            cold = run(cmd, env)
            if noop:
                self.record("noop-1000 cold", tool, cold)
                self.record("noop-1000", tool, run(cmd, env))
                self.record("noop-1000 warm", tool, run(cmd, env))
            else:
                self.record(scenario, tool, cold)
            self.drop(b)


def agent_pass(work: Path, models: int, versions: int, passes: int) -> dict[str, Any]:
    """Requests of one agent pass over models x versions, counted in moto's request log."""
    from model_sync import agent as ag
    from model_sync import environments
    from model_sync.contract import layout
    from model_sync.records import codec
    from model_sync.s3 import clients
    from model_sync.s3.bucket import Bucket
    from model_sync.triton_model import model_config
    from tests.support.s3_servers import S3Server, aws_environ
    from tests.support.triton import upload_version

    os.environ.update({k: v for k, v in aws_environ().items() if k.startswith("AWS_")})
    server = S3Server("moto").start()
    try:
        bucket = server.make_bucket("agent-pass")
        client = server.client()
        base = 'name: "{m}"\nbackend: "python"\nmax_batch_size: 8\n'

        def publish(i: int) -> None:
            name = f"model-{i:04d}"
            text = ""
            for v in range(1, versions + 1):
                text = model_config.pinned_text(model_config.parse(base.format(m=name)), v, name)
                upload_version(client, bucket, name, v, {"model.py": f"# {name} {v}\n".encode()}, text)
            client.put_object(Bucket=bucket, Key=layout.config_key(name), Body=text.encode())
            client.put_object(Bucket=bucket, Key=layout.pin_index_key(name), Body=codec.pin_index(name, versions))

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(publish, range(models)))
        objects = len(server.keys(bucket, "repository/"))
        env = environments.Environment("bench", layout.Root(bucket), server.endpoint, "us-east-1")
        settings = ag.AgentSettings(root=layout.Root(bucket), repository=work / "agent" / "models",
                                    staging=work / "agent" / ".staging",
                                    deployment="bench", replica="r0", heartbeat=1e9, resync=1e9)  # fmt: skip
        agent = ag.RepositoryAgent(settings, Bucket(env, clients.AGENT))
        agent.prepare()

        def one() -> list[str]:
            before = len(server.requests())
            agent.sync_once()
            return server.requests()[before:]

        first = one()
        steady = [len(one()) for _ in range(passes)]
        agent._listed_at = -1e9  # the next pass is a full resync
        full = len(one())
        agent.close()
    finally:
        server.close()
    defaults = ag.AgentSettings(
        root=layout.Root("b-x"), repository=work / "r", staging=work / ".r", deployment="d", replica="r"
    )
    per_resync = defaults.resync / defaults.interval
    median = statistics.median(steady)
    average = (median * (per_resync - 1) + full) / per_resync + defaults.interval / defaults.heartbeat
    return {"models": models, "versions": versions, "objects_under_repository": objects,
            "first_pass_requests": len(first), "steady_pass_requests": steady,
            "steady_pass_median": median, "full_resync_pass_requests": full,
            "defaults": {"interval_s": defaults.interval, "resync_s": defaults.resync,
                         "heartbeat_s": defaults.heartbeat},
            "average_requests_per_pass_at_defaults": average, "target": "<= 2 requests per pass",
            "met": average <= 2}  # fmt: skip


def summary(samples: dict[str, list[float]]) -> dict[str, float]:
    return {
        "median": statistics.median(samples["wall"]),
        "min": min(samples["wall"]),
        "max": max(samples["wall"]),
        "cpu_median": statistics.median(samples["cpu"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.transfer.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size-gb", type=float, default=2.0, help="GiB of the big model file (default 2)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions; medians are reported (default 3)")
    ap.add_argument(
        "--only",
        default=",".join(SCENARIOS),
        help=f"comma-separated scenarios (default: all of {', '.join(SCENARIOS)})",
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=None,
        help="scratch directory (default: a new temporary one; needs ~3x --size-gb free)",
    )
    ap.add_argument("--no-doc", action="store_true", help="write the results file only")
    ap.add_argument(
        "--doc-only",
        action="store_true",
        help="run nothing: rewrite the docs table and README row from bench/results/transfer.json",
    )
    args = ap.parse_args(argv)
    if args.doc_only:
        write_docs(json.loads(RESULTS.read_text()))
        return 0
    only = set(args.only.split(","))
    unknown = only - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"--only: {sorted(unknown)}; allowed: {', '.join(SCENARIOS)}")
    work = Path(tempfile.mkdtemp(prefix="bench-transfer-", dir=args.work))
    size = int(args.size_gb * 1024 * MB)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "model_sync")], check=True, capture_output=True
    )
    server = RcloneS3Server(work / "s3", work / "rclone.log")
    result: dict[str, Any] = {"setup": {"size_bytes": size, "reps": args.reps,
                                        "server": "rclone serve s3 (on disk, 127.0.0.1)", "cpus": os.cpu_count(),
                                        "python": platform.python_version(),
                                        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}  # fmt: skip
    try:
        server.start()
        bench = Bench(work, server)
        bench.aws_single_copy()
        if only & {"push-2g", "download-2g", "promote-2g"}:
            python_model(work / "big", "big", size)
            for rep in range(args.reps):
                bench.big(rep, size)
        if "noop-1000" in only:
            tree = work / "tree-1000"
            for i in range(1000):
                python_model(tree, f"model-{i:04d}", 1024)
            for rep in range(args.reps):
                bench.trees(rep, "noop-1000", tree, noop=True)
        if "cold-50" in only:
            tree = work / "tree-50"
            for i in range(50):
                python_model(tree, f"model-{i:03d}", 2 * MB)
            for rep in range(args.reps):
                bench.trees(rep, "cold-50", tree, noop=False)
        result["scenarios"] = {
            s: {t: {**summary(v), "wall": v["wall"], "cpu": v["cpu"]} for t, v in tools.items()}
            for s, tools in bench.samples.items()
        }
    finally:
        server.stop()
    if "agent-pass" in only:
        result["agent_pass"] = agent_pass(work, 1000, 5, 10)
    shutil.rmtree(work, ignore_errors=True)
    result["ratios"], result["targets"] = ratios(result, size)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    merged = {**previous, **result, "scenarios": {**previous.get("scenarios", {}), **result.get("scenarios", {})}}
    merged["ratios"], merged["targets"] = ratios(merged, size)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(merged, indent=2) + "\n")
    print(render(merged))
    if not args.no_doc:
        write_docs(merged)
    return 0


def write_docs(result: dict[str, Any]) -> None:
    """The table between docs/model-sync.md's `bench:transfer` markers and README.md's row."""
    table = render(result)
    text = DOC.read_text()
    DOC.write_text(
        re.sub(
            r"(<!-- bench:transfer -->\n).*?(<!-- /bench:transfer -->)",
            lambda m: m.group(1) + table + "\n" + m.group(2),
            text,
            flags=re.S,
        )
    )
    README.write_text(re.sub(r"(?m)^\| Moving models .*$", lambda _: readme_row(result), README.read_text()))


# (scenario, tool compared, what is compared, target ratio, higher is better)
TARGETS = (
    ("push-2g", "s5cmd", "throughput", 0.9),
    ("download-2g", "s5cmd", "throughput", 0.9),
    ("promote-2g", "aws-cli", "time", 1.1),
    ("noop-1000", "s5cmd", "time", 1.0),
    ("cold-50", "s5cmd", "time", 1.2),
)


def ratios(result: dict[str, Any], size: int) -> tuple[dict[str, float], dict[str, bool]]:
    out: dict[str, float] = {}
    met: dict[str, bool] = {}
    scen = result.get("scenarios", {})
    for name, other, kind, target in TARGETS:
        if name not in scen:
            continue
        ours, theirs = scen[name]["model-sync"]["median"], scen[name][other]["median"]
        label = f"{name}: model-sync / {other} {kind}"
        out[label] = theirs / ours if kind == "throughput" else ours / theirs
        met[f"{label} {'>=' if kind == 'throughput' else '<='} {target}"] = (
            out[label] >= target if kind == "throughput" else out[label] <= target
        )
    if "agent_pass" in result:
        met["agent-pass: average requests per pass <= 2"] = bool(result["agent_pass"]["met"])
    return out, met


def render(result: dict[str, Any]) -> str:
    size = result["setup"]["size_bytes"]
    gib = size / (1024 * MB)
    rows = ["| scenario | model-sync | s5cmd | aws-cli | ratio (target) | met |", "|---|---|---|---|---|---|"]
    scen = result.get("scenarios", {})

    def cell(name: str, tool: str) -> str:
        s = scen.get(name, {}).get(tool)
        if not s:
            return "-"
        rate = f", {size / MB / s['median']:.0f} MiB/s" if name.endswith("-2g") else ""
        return f"{s['median']:.2f} s ({s['min']:.2f}..{s['max']:.2f}){rate}, cpu {s['cpu_median']:.1f} s"

    for name, other, kind, target in TARGETS:
        if name not in scen:
            continue
        label = f"{name}: model-sync / {other} {kind}"
        key = f"{label} {'>=' if kind == 'throughput' else '<='} {target}"
        rows.append(f"| {name} | {cell(name, 'model-sync')} | {cell(name, 's5cmd')} | {cell(name, 'aws-cli')} | "
                    f"{result['ratios'][label]:.2f}x {other} {kind} "
                    f"({'>=' if kind == 'throughput' else '<='} {target}) | "
                    f"{'yes' if result['targets'][key] else '**no**'} |")  # fmt: skip
    for extra in ("noop-1000 warm", "noop-1000 cold"):
        if extra in scen:
            rows.append(f"| {extra} (no target) | {cell(extra, 'model-sync')} | {cell(extra, 's5cmd')} | "
                        f"{cell(extra, 'aws-cli')} | "
                        f"{scen[extra]['model-sync']['median'] / scen[extra]['s5cmd']['median']:.2f}x s5cmd time "
                        "| |")  # fmt: skip
    p = result.get("agent_pass")
    if p:
        rows.append(f"| agent-pass, {p['models']:,} models x {p['versions']} versions "
                    f"({p['objects_under_repository']:,} objects under repository/) | "
                    f"{p['steady_pass_median']:g} request per steady pass, "
                    f"{p['full_resync_pass_requests']} in a full-resync pass, "
                    f"**{p['average_requests_per_pass_at_defaults']:.2f}** per pass on average at the defaults "
                    "| | | <= 2 | "
                    f"{'yes' if p['met'] else '**no**'} |")  # fmt: skip
    return "\n".join(rows) + (
        f"\n\n{gib:g} GiB file; medians of {result['setup']['reps']} runs (min..max), CPU seconds of the tool's "
        "process; one `rclone serve s3` "
        f"on this {result['setup']['cpus']}-CPU machine, measured {result['setup']['measured_at']}."
    )


def readme_row(result: dict[str, Any]) -> str:
    r = result["ratios"]
    parts = [f"{label.split(':')[0]} {value:.2f}x" for label, value in r.items()]
    met = all(result["targets"].values())
    return (
        f"| Moving models (push, agent download, promote, no-op push) vs s5cmd and the AWS CLI | {', '.join(parts)} "
        "(throughput ratios for push and download, time ratios otherwise; "
        f"medians of {result['setup']['reps']} runs side by side, one local rclone); agent pass "
        f"{result['agent_pass']['average_requests_per_pass_at_defaults']:.2f} requests on average. All targets: "
        f"**{'met' if met else 'not met'}** | [docs/model-sync.md](docs/model-sync.md) |"
    )


if __name__ == "__main__":
    sys.exit(main())
