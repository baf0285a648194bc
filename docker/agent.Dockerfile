# syntax=docker/dockerfile:1
# The repository agent (model_sync agent): init container (--once) and sidecar of every Triton pod.
# Build from the repository root:  docker build -f docker/agent.Dockerfile -t triton-platform/model-sync-agent:0.1.0 .
# Invariants checked by tests/model_sync/agent/test_image.py: pinned base, USER 1000, no torch,
# ENTRYPOINT == model_sync.agent.AGENT_COMMAND (what the tests run).

# The official image by tag AND digest: the tag says what it is, the digest is what is pulled (a
# rebuilt tag cannot change it; agent-image.yml refuses an unpinned FROM). The digest is the
# multi-arch index of python:3.11.13-slim-bookworm; check or move it with
# `docker buildx imagetools inspect python:3.11.13-slim-bookworm` (this repository's machines
# reach no registry).
FROM python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1

# Reproducible: agent-image.yml sets SOURCE_DATE_EPOCH to the commit time. BuildKit then stamps
# the image with it (and rewrites the layers' file times), compileall writes hash-checked .pyc
# files instead of mtime-stamped ones, and useradd dates the account with it.
ARG SOURCE_DATE_EPOCH
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/model-sync
COPY docker/agent-requirements.txt ./agent-requirements.txt
# --no-deps: exactly the pinned set, nothing resolved at build time.
RUN python -m pip install --no-deps --require-hashes -r agent-requirements.txt
COPY pyproject.toml ./
# The agent's import closure only, file by file (no export, push, sandbox or torch code): what
# `python -m tools.agent_closure` prints, followed from the ENTRYPOINT with ast (in-function imports,
# the command cli imports by name and the agent package's lazily loaded modules included);
# tests/model_sync/agent/test_image.py fails when an import is added without its COPY, or a COPY is unneeded.
COPY model_sync/__init__.py model_sync/__main__.py model_sync/cli.py model_sync/environments.py \
    model_sync/errors.py model_sync/ui.py ./model_sync/
COPY model_sync/agent/__init__.py model_sync/agent/bucket.py model_sync/agent/canaries.py \
    model_sync/agent/exceptions.py model_sync/agent/loads.py model_sync/agent/loop.py \
    model_sync/agent/metrics.py model_sync/agent/pins.py model_sync/agent/pod_disk.py \
    model_sync/agent/replica_record.py model_sync/agent/settings.py model_sync/agent/staging.py \
    model_sync/agent/state.py model_sync/agent/triton.py ./model_sync/agent/
COPY model_sync/commands/__init__.py model_sync/commands/_common.py model_sync/commands/agent.py \
    ./model_sync/commands/
COPY model_sync/contract/__init__.py model_sync/contract/canary_policy.py model_sync/contract/compat.py \
    model_sync/contract/dns_label.py model_sync/contract/ingress.py model_sync/contract/layout.py \
    model_sync/contract/stack_outputs.py \
    ./model_sync/contract/
COPY model_sync/observation/__init__.py model_sync/observation/replicas.py model_sync/observation/smoke.py \
    ./model_sync/observation/
COPY model_sync/records/__init__.py model_sync/records/canary_record.py model_sync/records/codec.py \
    model_sync/records/schemas.py model_sync/records/servable.py ./model_sync/records/
COPY model_sync/s3/__init__.py model_sync/s3/bucket.py model_sync/s3/clients.py model_sync/s3/conditional.py \
    model_sync/s3/download.py model_sync/s3/endpoint.py model_sync/s3/failures.py model_sync/s3/transfer.py \
    ./model_sync/s3/
COPY model_sync/triton_model/__init__.py model_sync/triton_model/formats.py \
    model_sync/triton_model/model_config.py ./model_sync/triton_model/
# The package itself without its dependency ranges (torch is an optional extra and never installed).
RUN python -m pip install --no-deps --no-build-isolation . \
    && python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"

# Non-root, matching the pod securityContext (runAsUser/runAsGroup/fsGroup 1000).
RUN groupadd --gid 1000 agent \
    && useradd --uid 1000 --gid 1000 --no-create-home --no-log-init --shell /usr/sbin/nologin agent
USER 1000:1000
WORKDIR /models

ENTRYPOINT ["python", "-m", "model_sync", "agent"]
