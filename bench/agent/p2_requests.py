"""P2: S3 requests per replica per minute for 20 models x 3 versions x 2 files, counted at the
server (moto_server logs every request line): the repository agent (--interval 1) vs tritonserver
polling the same repository directly on S3 (--repository-poll-secs=1, the same freshness).

    .venv/bin/python -m bench.agent.p2_requests [--window 60] [--out bench/results/agent-p2.json]
Target: agent <= 1/50 of Triton-on-S3.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from model_sync.sandbox.procs import Process, http_status, wait_until
from model_sync.sandbox.runtime import TritonServer, ensure_tritonserver, stub_environment
from tests.support.s3_servers import S3Server, aws_environ

MODELS, VERSIONS = 20, 3


def populate(server: S3Server, bucket: str) -> None:
    from tests.support.triton import (
        add_model_files,
        pinned_config,
        upload_version,
    )  # imported here: `--help` needs none of it

    client = server.client()
    for m in range(MODELS):
        name = f"model-{m:02d}"
        for v in range(1, VERSIONS + 1):
            files = add_model_files(v)
            files["weights.bin"] = os.urandom(1024)
            upload_version(client, bucket, name, v, files, pinned_config(name, v))
        client.put_object(
            Bucket=bucket, Key=f"repository/{name}/config.pbtxt", Body=pinned_config(name, VERSIONS).encode()
        )


def count_per_minute(server: S3Server, settle: float, window: float) -> tuple[float, dict[str, int]]:
    time.sleep(settle)
    before = len(server.requests())
    time.sleep(window)
    reqs = server.requests()[before:]
    kinds: dict[str, int] = {}
    for r in reqs:
        method, path = r.split(" ")[0], r.split(" ")[1]
        kind = f"{method} {'list' if '?' in path and 'list-type' in path else 'object'}"
        kinds[kind] = kinds.get(kind, 0) + 1
    return len(reqs) * 60.0 / window, kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.agent.p2_requests",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--window", type=float, default=60.0, help="seconds of S3 requests counted per side (default 60)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("bench/results/agent-p2.json"),
        help="result JSON (default bench/results/agent-p2.json)",
    )
    args = parser.parse_args(argv)
    runtime = ensure_tritonserver()
    loaded = False
    with tempfile.TemporaryDirectory(prefix="p2-") as tmp_s:
        tmp = Path(tmp_s)
        server = S3Server("moto").start()
        try:
            bucket = server.make_bucket("models-bench")
            populate(server, bucket)
            env = aws_environ()
            # 1. the agent (no Triton needed to count its S3 traffic: confirmations are local HTTP)
            repo = tmp / "agent" / "models"
            agent = Process(
                "agent",
                [
                    sys.executable,
                    "-m",
                    "model_sync",
                    "agent",
                    "--env",
                    "bench",
                    "--bucket",
                    f"s3://{bucket}",
                    "--endpoint-url",
                    server.endpoint,
                    "--repository",
                    str(repo),
                    "--interval",
                    "1",
                    "--deployment",
                    "bench",
                    "--replica-id",
                    "r0",
                ],
                tmp / "agent.log",
                env=env,
            ).start()
            wait_until(lambda: len(list(repo.glob("*/config.pbtxt"))) == MODELS, 120, what="agent synced every model")
            agent_rpm, agent_kinds = count_per_minute(server, 3, args.window)
            agent.stop()
            # 2. tritonserver polling S3 directly at the same freshness
            triton = TritonServer(tmp / "unused", tmp / "triton.log", runtime=runtime, extra_env=env)
            argv = [
                a
                if not a.startswith("--model-repository=")
                else f"--model-repository=s3://{server.endpoint.split('://')[1]}/{bucket}/repository"
                for a in triton.argv()
            ]
            proc = Process("triton-s3", argv, tmp / "triton.log", env={**env, **stub_environment(env)}).start()
            try:
                try:
                    wait_until(
                        lambda: http_status(f"{triton.http_url}/v2/models/model-19/versions/3/ready") == 200,
                        120,
                        what="triton loaded the models from S3",
                    )
                    loaded = True
                except TimeoutError:
                    loaded = False  # polling cost does not depend on load success; recorded
                    print((tmp / "triton.log").read_text()[-3000:], file=sys.stderr)
                triton_rpm, triton_kinds = count_per_minute(server, 3, args.window)
            finally:
                proc.stop()
        finally:
            server.close()
    result = {
        "benchmark": "P2 S3 requests per replica per minute, 20 models x 3 versions x 2 files, 1 s freshness",
        "window_s": args.window,
        "agent_requests_per_min": round(agent_rpm, 1),
        "agent_request_kinds": agent_kinds,
        "triton_s3_poll_requests_per_min": round(triton_rpm, 1),
        "triton_request_kinds": triton_kinds,
        "triton_loaded_every_model": loaded,
        "ratio": round(agent_rpm / triton_rpm, 5) if triton_rpm else None,
        "target_ratio": 1 / 50,
        "counted_at": "moto_server request log",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["ratio"] is not None and result["ratio"] <= 1 / 50 else 1


if __name__ == "__main__":
    raise SystemExit(main())
