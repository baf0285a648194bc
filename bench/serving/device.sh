#!/usr/bin/env bash
# The GPU serving benchmark on an NVIDIA GPU host (docs/gpu-benchmark.md, "How to rerun").
# On a build machine, from the repository root:
#   .venv/bin/python -m bench.serving.bundle            # once: bench/serving/.dist (git-ignored)
# copy the repository (with bench/serving/.dist) to the GPU host, then there, from its root:
#   OUT=/tmp/bench-out bash bench/serving/device.sh [bench.serving.run options]
# Results land in $OUT (serving.json + logs); copy serving.json to bench/results/ and run
#   .venv/bin/python -m bench.serving.report
set -euo pipefail
if [[ " $* " == *" -h "* || " $* " == *" --help "* ]]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  echo "Options after the script name are passed to: python3 -m bench.serving.run (see its --help)."
  exit 0
fi
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
