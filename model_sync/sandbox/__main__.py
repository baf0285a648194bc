"""`python -m model_sync.sandbox demo [--format FORMAT[,FORMAT...]] [--keep-running] [--dir .demo]` | `stop [--dir .demo]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model_sync.sandbox.demo import demo, stop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m model_sync.sandbox", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="export, push to staging, verify, promote to prod, serve: all locally")
    d.add_argument(
        "--dir", type=Path, default=Path(".demo"), help="state directory: repositories, logs (default .demo)"
    )
    d.add_argument("--keep-running", action="store_true", help="leave S3, tritonservers and agents running")
    d.add_argument(
        "--format",
        default="torchscript",
        metavar="FORMAT[,FORMAT...]",
        help="model-sync export --format of both versions (torchscript, pt2 or onnx; default torchscript), or "
        "up to three, comma-separated: one version per format, each later one promoted through a gray release",
    )
    s = sub.add_parser("stop", help="stop what `demo --keep-running` left running")
    s.add_argument("--dir", type=Path, default=Path(".demo"))
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo(args.dir, keep_running=args.keep_running, fmt=args.format)
    return stop(args.dir)


if __name__ == "__main__":
    sys.exit(main())
