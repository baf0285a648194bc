#!/usr/bin/env bash
# The GPU serving benchmark, as run on the lent H200 (no network there). From the repo root HERE:
#   .venv/bin/python -m bench.serving.bundle            # once: bench/serving/.dist (git-ignored)
# then the device tool: run(command="bash bench/serving/device.sh", carry=["bench/serving/.dist"])
# Results land in $OUT (serving.json + logs); copy serving.json to bench/results/ and run
#   .venv/bin/python -m bench.serving.report
set -euo pipefail
OUT=${OUT:-/tmp/bench-out}
W=/tmp/bench-w
DIST=bench/serving/.dist
rm -rf "$W" && mkdir -p "$W" "$OUT"
tar -C "$W" -xJf "$DIST/bundle.tar.xz"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/np126" "$DIST"/wheels/numpy-1.26.4-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/exsite" "$DIST"/wheels/protobuf-*.whl
nvidia-smi --query-gpu=name,driver_version,utilization.gpu,memory.used --format=csv
export PYTHONUNBUFFERED=1
python3 -m bench.serving.run \
  --triton-root "$W/triton" --perf-analyzer "$W/triton/perf/bin/perf_analyzer" \
  --stub-pythonpath "$W/np126" --export-pythonpath "$W/exsite" --out "$OUT" "$@"
