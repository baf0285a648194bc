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
COPY model_sync ./model_sync
# The package itself without its dependency ranges (torch is an optional extra and never installed).
RUN python -m pip install --no-deps --no-build-isolation . \
    && python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"

# Non-root, matching the pod securityContext (runAsUser/runAsGroup/fsGroup 1000).
RUN groupadd --gid 1000 agent \
    && useradd --uid 1000 --gid 1000 --no-create-home --no-log-init --shell /usr/sbin/nologin agent
USER 1000:1000
WORKDIR /models

ENTRYPOINT ["python", "-m", "model_sync", "agent"]
