#!/usr/bin/env bash
# The GPU serving benchmark on an NVIDIA GPU host (docs/gpu-benchmark.md, "How to rerun").
# On a build machine, from the repository root:
#   .venv/bin/python -m bench.serving.bundle            # once: bench/serving/.dist (git-ignored)
# copy the repository (with bench/serving/.dist) to the GPU host, then there, from its root:
#   OUT=/tmp/bench-out bash bench/serving/device.sh [bench.serving.run options]
# (It first builds Triton's PyTorch backend from the bundle's pinned archives, bench.serving.pytorch_backend:
# r24.10 into the server's backends/, and with pt2 in FORMATS the main measurement build. BACKEND=python
# serves the python-backend wrapper instead. SWEEP=0 skips the serving sweep; WARMUP_REPEAT=0 skips the
# GPU warm-up measurement that follows it; MEMORY=1 runs the GPU memory calibration (bench.serving.memory,
# memory-plan.json); CONSOLIDATION=1 the consolidation benchmark (bench.consolidation.run,
# consolidation.json); PROFILES=1 each model's profile alone (bench.consolidation.profile,
# model-profiles.json); PLAN_CHECK=FILE serves a model-sync plan as planned (bench.consolidation.plan_check,
# plan-check.json; PLAN_CHECK_ARGS="--passes 2" checks it twice); FORMATS=torchscript,pt2 exports every variant in each format and writes
# serving-formats.json; ORT_PARTS=DIR installs onnxruntime-gpu from the parts of bench/serving/.dist-ort/
# copied into DIR, for BACKEND=python's ONNX wrapper.)
# Results land in $OUT (serving.json, warmup-gpu.json + logs); copy them to bench/results/ and run
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
PIP_TARGET="python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target"
# onnxruntime-gpu (ONNX's CUDA execution provider), when its parts were copied here: ORT_PARTS is the
# folder holding every part of bench/serving/.dist-ort/ (bench.serving.bundle --onnxruntime-gpu).
ORT_SITE=""
if [[ -n "${ORT_PARTS:-}" ]]; then
  ( cd "$ORT_PARTS" && wheel=$(cut -d' ' -f3 onnxruntime-gpu.sha256) && cat "$wheel".part* > "$W/$wheel" \
    && cd "$W" && sha256sum --check --strict "$ORT_PARTS/onnxruntime-gpu.sha256" )
  $PIP_TARGET "$W/ortgpu" "$W"/onnxruntime_gpu-*.whl && rm -f "$W"/onnxruntime_gpu-*.whl
  ORT_SITE="$W/ortgpu"
  # The CUDA 13 libraries its provider loads come with the host's torch (nvidia-* packages).
  LD_LIBRARY_PATH="$(find "$(python3 -c 'import site; print(site.getsitepackages()[0])')/nvidia" -name 'lib*.so*' \
    -printf '%h\n' | sort -u | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi
# The python backend stub's python3 (tritonserver puts it first on PATH, bench.serving.run
# --stub-python): a virtualenv with numpy 1.26 (the stub's pybind11 2.10 reads numpy 1.x arrays only:
# under the host's numpy 2 every tensor it builds has 0 bytes), onnxruntime-gpu when carried, then the
# host's torch from its own site-packages (.pth). PYTHONPATH never reaches the stub (isolated).
python3 -m venv --without-pip "$W/stubpy"
STUB_SITE=$(echo "$W"/stubpy/lib/python3*/site-packages)
$PIP_TARGET "$STUB_SITE" "$DIST"/wheels/numpy-1.26.4-*.whl
{ [[ -z "$ORT_SITE" ]] || echo "$ORT_SITE"; python3 -c 'import site; print(site.getsitepackages()[0])'; } > "$STUB_SITE/host.pth"
"$W/stubpy/bin/python3" -c 'import numpy, torch; print("stub python: numpy", numpy.__version__, "torch", torch.__version__)'
$PIP_TARGET "$W/exsite" "$DIST"/wheels/protobuf-*.whl \
  "$DIST"/wheels/jsonschema-*.whl "$DIST"/wheels/jsonschema_specifications-*.whl "$DIST"/wheels/referencing-*.whl \
  "$DIST"/wheels/rpds_py-*.whl
nvidia-smi --query-gpu=name,driver_version,utilization.gpu,memory.used --format=csv
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1  # a crash in a subprocess (an export) leaves its Python stack
status=0
BACKEND=${BACKEND:-pytorch_libtorch}
BACKENDS="$W/triton/pytriton/tritonserver/backends"
CUDA_ARCH="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d . )-real"  # 9.0 -> 90-real
build_backend() {  # RELEASE INSTALL [--pt2-by-env]: Triton's PyTorch backend from the pinned archives
  PYTHONPATH="$W/exsite" python3 -m bench.serving.pytorch_backend --src "$DIST/triton-src" --work "$W/ptb" \
    --install "$2" --release "$1" --cuda-arch "$CUDA_ARCH" --triton-root "$W/triton" "${@:3}" \
    > "$OUT/backend-$1.json" || { cp "$W/ptb/build-$1.log" "$OUT/" 2>/dev/null; return 1; }
  cat "$OUT/backend-$1.json"
}
if [[ "$BACKEND" == pytorch_libtorch ]]; then
  build_backend r24.10 "$BACKENDS" || status=1
  set -- "$@" --backend pytorch_libtorch --backend-info "$OUT/backend-r24.10.json"
  if [[ ",${FORMATS:-}," == *,pt2,* ]]; then
    build_backend main "$W/triton/backends-pt2" --pt2-by-env || status=1
    set -- "$@" --pt2-backends "$W/triton/backends-pt2" --backend-info "$OUT/backend-main.json"
  fi
else
  set -- "$@" --backend python
fi
# MPS=1: the sweep under the CUDA Multi-Process Service, so the instances' stub processes (one CUDA
# context each) share the GPU concurrently instead of being time-sliced.
if [[ "${MPS:-0}" == 1 ]]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  trap 'echo quit | nvidia-cuda-mps-control; cp -r "$CUDA_MPS_LOG_DIRECTORY" "$OUT/mps-log" 2>/dev/null || true' EXIT
  set -- "$@" --label mps
fi
if [[ -n "${FORMATS:-}" ]]; then
  set -- "$@" --formats "$FORMATS" --label formats
fi
PA="$W/triton/perf/bin/perf_analyzer"
if [[ "${SWEEP:-1}" != 0 ]]; then
  PYTHONPATH="$W/exsite" python3 -m bench.serving.run \
    --triton-root "$W/triton" --perf-analyzer "$PA" \
    --stub-python "$W/stubpy/bin/python3" --export-pythonpath "$W/exsite${ORT_SITE:+:$ORT_SITE}" --out "$OUT" "$@" \
    || status=$?
  if [[ -n "${FORMATS:-}" && -f "$OUT/serving.json" ]]; then
    mv "$OUT/serving.json" "$OUT/serving-formats.json"
  fi
fi
# GPU memory of pytorch_libtorch models against the plan (bench.serving.memory).
if [[ "${MEMORY:-0}" == 1 ]]; then
  PYTHONPATH="$PWD:$W/exsite" timeout "${MEMORY_TIMEOUT_S:-200}" python3 -m bench.serving.memory \
    --triton-root "$W/triton" --perf-analyzer "$PA" --out "$OUT/memory-plan.json" || status=$?
fi
# The consolidation claim: twelve models, one process each against one tritonserver (bench.consolidation.run).
if [[ "${CONSOLIDATION:-0}" == 1 ]]; then
  PYTHONPATH="$PWD:$W/exsite" timeout "${CONSOLIDATION_TIMEOUT_S:-400}" python3 -m bench.consolidation.run \
    --triton-root "$W/triton" --perf-analyzer "$PA" --out "$OUT/consolidation.json" ${CONSOLIDATION_ARGS:-} \
    || status=$?
fi
# Each model's serving profile alone on one instance (bench.consolidation.profile, model-profiles.json).
if [[ "${PROFILES:-0}" == 1 ]]; then
  PYTHONPATH="$PWD:$W/exsite" timeout "${PROFILES_TIMEOUT_S:-480}" python3 -m bench.consolidation.profile \
    --triton-root "$W/triton" --perf-analyzer "$PA" --out "$OUT/model-profiles.json" ${PROFILES_ARGS:-} \
    || status=$?
fi
# A `model-sync plan` served as planned on one GPU (bench.consolidation.plan_check, plan-check.json):
# PLAN_CHECK=FILE, the plan's JSON (model-sync plan --output json) relative to the repository root.
if [[ -n "${PLAN_CHECK:-}" ]]; then
  PYTHONPATH="$PWD:$W/exsite" timeout "${PLAN_CHECK_TIMEOUT_S:-300}" python3 -m bench.consolidation.plan_check \
    --plan "$PLAN_CHECK" --triton-root "$W/triton" --perf-analyzer "$PA" --out "$OUT/plan-check.json" \
    ${PLAN_CHECK_ARGS:-} || status=$?
fi
# Warm-up on the GPU: the first requests after a hot reload with model_warmup against without
# (bench/warmup/run.py; KIND_GPU, max batch 32, warm-up at batch 1 and 16).
if [[ "${WARMUP_REPEAT:-3}" != 0 ]]; then
  PYTHONPATH="$PWD:$W/exsite" timeout "${WARMUP_TIMEOUT_S:-200}" python3 -m bench.warmup.run \
    --instance-kind KIND_GPU --triton-root "$W/triton" --stub-python "$W/stubpy/bin/python3" \
    --target "$([[ "$BACKEND" == pytorch_libtorch ]] && echo cloud || echo local)" \
    --max-batch-size 32 --preferred 16 --repeat "${WARMUP_REPEAT:-3}" --timeout 90 \
    --out "$OUT/warmup-gpu.json" || status=$?
fi
exit $status
