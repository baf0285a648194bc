"""A GET racing a PUT of the same key, on the local environment's two S3 servers side by side:
`rclone serve s3` (model_sync.sandbox.s3server.RcloneS3Server, the project's flags) and moto
(MotoS3Server, the local environment's server).

For --seconds on each server, one after the other on this machine: one writer rewrites one key
(`status/race.json`) with 50 distinct JSON bodies of 219..2,033 bytes in turn, as fast as it can,
the way an agent rewrites its replica's status record every heartbeat and a gray release its canary
record every poll; two readers GET that key as fast as they can. Every client is botocore with ONE
attempt per request (max_attempts 1: no retry hides an error). Counted per server: GETs and PUTs,
failed ones by kind (the S3 error code, else the exception's class) and torn bodies (a GET that
succeeded with bytes whose sha256 is none of the 50 written). Writes bench/results/local-s3.json
with the machine's core count and load average before and after.

    .venv/bin/python -m bench.s3.race [--seconds 15] [--out bench/results/local-s3.json]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

KEY = "status/race.json"
BUCKET = "race"
BODIES = [json.dumps({"i": i, "pad": "x" * (200 + 37 * i)}).encode() for i in range(50)]


def _kind(e: Exception) -> str:
    """The S3 error code of a ClientError, else the exception's class (ConnectionClosedError, ...)."""
    response = getattr(e, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return str(code) if code else type(e).__name__


def race(endpoint_url: str, credentials: dict[str, str], seconds: float, readers: int = 2) -> dict[str, Any]:
    """One writer and `readers` readers on KEY of BUCKET (which must exist) for `seconds`: GETs,
    PUTs, errors by kind, torn bodies."""
    import botocore.session
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=5,
        read_timeout=30,
        s3={"addressing_style": "path"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )

    def client() -> Any:  # created here, in one thread: botocore's session is not thread-safe
        session = botocore.session.Session()
        return session.create_client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=credentials["AWS_DEFAULT_REGION"],
            aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
            config=config,
        )

    written = {hashlib.sha256(b).hexdigest() for b in BODIES}
    writer_client, reader_clients = client(), [client() for _ in range(readers)]
    writer_client.put_object(Bucket=BUCKET, Key=KEY, Body=BODIES[-1])
    counts = [collections.Counter[str]() for _ in range(readers + 1)]  # one per thread, summed after
    deadline = time.monotonic() + seconds

    def write(c: Any, n: collections.Counter[str]) -> None:
        i = 0
        while time.monotonic() < deadline:
            n["puts"] += 1
            try:
                c.put_object(Bucket=BUCKET, Key=KEY, Body=BODIES[i % len(BODIES)])
            except Exception as e:
                n[f"put_error:{_kind(e)}"] += 1
            i += 1

    def read(c: Any, n: collections.Counter[str]) -> None:
        while time.monotonic() < deadline:
            n["gets"] += 1
            try:
                body = c.get_object(Bucket=BUCKET, Key=KEY)["Body"].read()
            except Exception as e:
                n[f"get_error:{_kind(e)}"] += 1
                continue
            if hashlib.sha256(body).hexdigest() not in written:
                n["torn"] += 1

    threads = [threading.Thread(target=write, args=(writer_client, counts[0]))]
    threads += [threading.Thread(target=read, args=(c, n)) for c, n in zip(reader_clients, counts[1:], strict=True)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    total = sum(counts, collections.Counter[str]())
    get_errors = {k.split(":", 1)[1]: v for k, v in sorted(total.items()) if k.startswith("get_error:")}
    put_errors = {k.split(":", 1)[1]: v for k, v in sorted(total.items()) if k.startswith("put_error:")}
    return {
        "seconds": round(elapsed, 2),
        "gets": total["gets"],
        "puts": total["puts"],
        "get_errors": sum(get_errors.values()),
        "get_errors_by_kind": get_errors,
        "put_errors": sum(put_errors.values()),
        "put_errors_by_kind": put_errors,
        "torn": total["torn"],
        "gets_per_s": round(total["gets"] / elapsed, 1),
        "puts_per_s": round(total["puts"] / elapsed, 1),
    }


def measure(kind: str, work: Path, seconds: float) -> dict[str, Any]:
    """race() against a fresh server of `kind` ("rclone" or "moto") under `work`."""
    from model_sync.sandbox.s3server import MotoS3Server, RcloneS3Server, rclone_binary

    server: RcloneS3Server | MotoS3Server
    if kind == "rclone":
        server = RcloneS3Server(work / "rclone", work / "rclone.log")
        version = subprocess.run([rclone_binary(), "version"], capture_output=True, text=True, check=True)
        about = {"server": "rclone serve s3 (RcloneS3Server: on disk, --etag-hash MD5)",
                 "version": version.stdout.splitlines()[0]}  # fmt: skip
    else:
        server = MotoS3Server(work / "moto", work / "moto.log")
        about = {"server": "moto S3 in one process (MotoS3Server: in memory)",
                 "version": f"moto {importlib.metadata.version('moto')}"}  # fmt: skip
    server.create_buckets(BUCKET)
    server.start()
    try:
        return {**about, **race(server.endpoint_url, server.client_env(), seconds)}
    finally:
        server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.s3.race", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds of racing per server (default 15)")
    parser.add_argument(
        "--out", type=Path, default=Path("bench/results/local-s3.json"), help="the results file (default %(default)s)"
    )
    args = parser.parse_args(argv)
    if not args.seconds > 0:
        raise SystemExit(f"--seconds: {args.seconds}; allowed: > 0")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-s3-race-") as tmp:
        servers = {kind: measure(kind, Path(tmp), args.seconds) for kind in ("rclone", "moto")}
    result = {
        "benchmark": "a GET racing a PUT of the same key: 1 writer, 2 readers, botocore max_attempts 1",
        "seconds_each": args.seconds,
        "key": KEY,
        "bodies": len(BODIES),
        "body_bytes": [len(BODIES[0]), len(BODIES[-1])],
        "servers": servers,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(),
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for kind, r in servers.items():
        print(f"{kind}: {r['gets']} GETs ({r['get_errors']} failed: {r['get_errors_by_kind']}), {r['torn']} torn; "
              f"{r['puts']} PUTs ({r['put_errors']} failed)")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
