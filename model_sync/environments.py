"""Resolve `--env NAME` to an Environment: repository root, S3 endpoint, region, Triton endpoint.

Config file (first found: --config PATH, $MODEL_SYNC_CONFIG, ./model-sync.yaml):

    environments:
      staging:                                  # [a-z][a-z0-9-]{0,31}
        bucket: s3://triton-models-staging      # s3://bucket[/prefix], the repository root
        endpointUrl: http://127.0.0.1:9000      # optional: an S3-compatible server
        region: eu-west-1                       # optional (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's)
        tritonUrl: http://127.0.0.1:8000        # optional: `verify`'s own HTTP smoke inference
        grpcUrl: 127.0.0.1:8001                 # optional: `verify`'s own gRPC smoke inference (HOST:PORT)
        tritonImage: nvcr.io/nvidia/tritonserver:25.10-py3   # the image serving this env:
                                                # push/promote refuse TorchScript it cannot load
        unenforcedConditionalWrites: accepted   # optional: the endpoint ignores If-None-Match /
                                                # If-Match (rclone serve s3) and has one writer:
                                                # no race warning on every push/promote
        # The gray release's figures (model-sync canary, promote to prod): one of
        prometheusUrl: https://...                # Prometheus (its /api/v1/query), e.g. through
        eksCluster: triton-platform-prod        #   the EKS API's service proxy, with a token from
                                                #   the AWS credentials for this cluster
        tritonMetricsUrls:                      # or each replica's Triton /metrics (locally), by the
          default-0: http://127.0.0.1:8002/metrics   #   replica id its agent reports as
        canaryPolicies:                         # optional, per model: steps and thresholds
          resnet: {steps: [25, 50], stepSeconds: 120}   # (model_sync/contract/canary_policy.py; default: its defaults)
        tritonGpus:                             # optional: each Triton deployment's GPU, for GPU memory
          default:                              #   planning (model_sync/admission/gpu_plan.py): push/promote refuse
            gpu: H100                           #   a version that overcommits it (exit 7), status shows
            memoryGiB: 80                       #   the plan; without it nothing is checked (and they say so)
            models: [resnet, bert]              #   the models the deployment serves (a model in one only)
            architectures: [sm_90]              #   optional: its node group's CUDA architectures; a .pt2
                                                #   compiled for others is refused (model_sync/admission/alignment.py)
      prod:
        pulumiStack: acme/triton-platform/prod  # read the rest from `pulumi stack output --json`
        pulumiCwd: ../infra                     # optional, relative to the config file

With `pulumiStack`, `pulumi stack output --json --stack <stack>` is run (PULUMI binary: $PULUMI or
`pulumi` on PATH) and its outputs `modelRepositoryBucket` (the repository root; else
`modelRepositoryUri` without its trailing `/repository`, the Triton tree), `region`,
`tritonEndpoints` (`{http, grpc}`: tritonUrl and grpcUrl), `tritonImage`, `prometheusUrl`,
`clusterName` (eksCluster), `canaryPolicies` and `tritonGpus` fill in what the file
does not set (what __main__.py exports: docs/stack-outputs.md). Explicit flags (--bucket,
--endpoint-url, --region, --triton-url, --grpc-url, --triton-image) override both. Without an endpoint from either,
AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL apply (sdk_endpoint); a profile's `endpoint_url` is not read. Credentials are
never configured here: the AWS default chain only (model_sync/s3/bucket.py).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from model_sync import errors
from model_sync.contract import layout, stack_outputs
from model_sync.contract.canary_policy import CanaryPolicy, CanaryPolicyError
from model_sync.contract.dns_label import DNS_LABEL

ENV_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
ENV_KEYS = (
    "bucket",
    "endpointUrl",
    "region",
    "tritonUrl",
    "grpcUrl",
    "tritonImage",
    "unenforcedConditionalWrites",
    "pulumiStack",
    "pulumiCwd",
    "prometheusUrl",
    "eksCluster",
    "tritonMetricsUrls",
    stack_outputs.CANARY_POLICIES,
    stack_outputs.TRITON_GPUS,
)
# not strings: checked by _metrics_urls / _policies / _triton_gpus
_STRUCTURED_KEYS = ("tritonMetricsUrls", stack_outputs.CANARY_POLICIES, stack_outputs.TRITON_GPUS)
CONFIG_NAME = "model-sync.yaml"
GPU_KEYS = ("gpu", "memoryGiB", "models")  # tritonGpus.<deployment>: every key required
OPTIONAL_GPU_KEYS = ("architectures", "sharing")  # ... and these may be left out
ARCHITECTURE_RE = re.compile(r"^sm_[0-9]{2,3}a?$")  # a CUDA compute capability as nvcc names it: sm_90
MAX_GPU_MEMORY_GIB = 1024


@dataclass(frozen=True)
class DeploymentGpu:
    """One Triton deployment's GPU (`tritonGpus.<deployment>`): what GPU memory planning fits it into."""

    deployment: str
    gpu: str  # the GPU's model, e.g. "H100" (components/gpu/gpu_instances.py names them)
    memory_gib: float  # memory of ONE GPU, GiB
    models: tuple[str, ...]  # the models the deployment serves
    # the CUDA architectures of every instance type its node group may launch (sm_90); ():
    # unknown. A .pt2 compiled for CUDA must have been compiled for each (model_sync/admission/alignment.py)
    architectures: tuple[str, ...] = ()
    # how its node group shares a GPU among replicas (`whole`, `time-slicing x2`, `mig 1g.10gb`, as the
    # stack names it: docs/serving-plane.md#gpu-sharing); memory_gib is then one replica's share
    sharing: str = "whole"

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * (1 << 30))


@dataclass(frozen=True)
class Environment:
    name: str
    root: layout.Root
    endpoint_url: str | None = None
    region: str | None = None
    triton_url: str | None = None
    grpc_url: str | None = None  # HOST:PORT
    triton_image: str | None = None  # e.g. nvcr.io/nvidia/tritonserver:25.10-py3 (model_sync.contract.compat)
    unenforced_writes_accepted: bool = False  # unenforcedConditionalWrites: accepted
    prometheus_url: str | None = None  # the gray release's Prometheus (model_sync.canary.metrics)
    eks_cluster: str | None = None  # the EKS cluster whose API server proxies prometheus_url (bearer token)
    metrics_urls: tuple[tuple[str, str], ...] = ()  # or each replica's Triton /metrics (locally): (replica id, URL)
    canary_policies: tuple[tuple[str, CanaryPolicy], ...] = ()  # model -> its gray release policy
    triton_gpus: tuple[DeploymentGpu, ...] | None = None  # tritonGpus; None: the environment does not know its GPUs
    source: str = "flags"  # where it was resolved from (config path, pulumi stack)

    @property
    def bucket(self) -> str:
        return self.root.bucket

    @property
    def uri(self) -> str:
        return self.root.uri().rstrip("/")

    def canary_policy(self, model: str) -> CanaryPolicy:
        """The model's gray release policy (canaryPolicies), else the defaults."""
        return dict(self.canary_policies).get(model) or CanaryPolicy()

    def deployment_of(self, model: str) -> DeploymentGpu | None:
        """The deployment of tritonGpus that serves `model` (None: in none, or no tritonGpus)."""
        return next((d for d in self.triton_gpus or () if model in d.models), None)


def find_config(explicit: str | None) -> str | None:
    if explicit:
        if not os.path.isfile(explicit):
            raise errors.usage(f"--config: {explicit!r} does not exist; allowed: a readable {CONFIG_NAME}")
        return explicit
    from_env = os.environ.get("MODEL_SYNC_CONFIG")
    if from_env:
        if not os.path.isfile(from_env):
            raise errors.usage(f"$MODEL_SYNC_CONFIG: {from_env!r} does not exist; allowed: a readable {CONFIG_NAME}")
        return from_env
    return CONFIG_NAME if os.path.isfile(CONFIG_NAME) else None


def load_config(path: str) -> dict[str, dict[str, Any]]:
    import yaml

    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise errors.usage(
            f"{path}: cannot be read as YAML ({' '.join(str(e).split())[:200]}); allowed: a {CONFIG_NAME} mapping"
        ) from None
    if not isinstance(doc, dict) or set(doc) - {"environments"} or not isinstance(doc.get("environments"), dict):
        raise errors.usage(
            f"{path}: top-level keys {sorted(doc) if isinstance(doc, dict) else doc!r}; allowed: a mapping with "
            "only 'environments'"
        )
    envs: dict[str, dict[str, Any]] = doc["environments"]
    for name, body in envs.items():
        if not isinstance(name, str) or not ENV_NAME_RE.match(name):
            raise errors.usage(f"{path} environment name: {name!r}; allowed: [a-z][a-z0-9-]{{0,31}}")
        if not isinstance(body, dict):
            raise errors.usage(f"{path} environments.{name}: {body!r}; allowed: a mapping of {', '.join(ENV_KEYS)}")
        for key, value in body.items():
            if key not in ENV_KEYS:
                raise errors.usage(f"{path} environments.{name}.{key}: unknown key; allowed: {', '.join(ENV_KEYS)}")
            if key in _STRUCTURED_KEYS:
                continue
            if not isinstance(value, str) or not value:
                raise errors.usage(f"{path} environments.{name}.{key}: {value!r}; allowed: a non-empty string")
        if body.get("unenforcedConditionalWrites", "accepted") != "accepted":
            raise errors.usage(
                f"{path} environments.{name}.unenforcedConditionalWrites: "
                f"{body['unenforcedConditionalWrites']!r}; allowed: 'accepted' (or leave it out)"
            )
        body["tritonMetricsUrls"] = _metrics_urls(f"{path} environments.{name}", body.get("tritonMetricsUrls"))
        body[stack_outputs.CANARY_POLICIES] = _policies(
            f"{path} environments.{name}", body.get(stack_outputs.CANARY_POLICIES)
        )
        body[stack_outputs.TRITON_GPUS] = _triton_gpus(
            f"{path} environments.{name}", body.get(stack_outputs.TRITON_GPUS)
        )
        if "bucket" not in body and "pulumiStack" not in body:
            raise errors.usage(
                f"{path} environments.{name}: no bucket; allowed: set 'bucket' (s3://bucket[/prefix]) or 'pulumiStack'"
            )
    return envs


def _metrics_urls(where: str, value: Any) -> tuple[tuple[str, str], ...]:
    """tritonMetricsUrls: replica id (as its agent reports, layout.REPLICA_ID_RE) -> its Triton
    /metrics URL; the gray release ties each replica's liveness to its own endpoint."""
    if value is None:
        return ()
    if not isinstance(value, dict) or not value or not all(
        isinstance(r, str) and layout.REPLICA_ID_RE.match(r) and isinstance(u, str)
        and re.match(r"^https?://[^\s/]+/\S*$", u) for r, u in value.items()
    ):  # fmt: skip
        raise errors.usage(
            f"{where}.tritonMetricsUrls: {value!r}; allowed: a mapping of replica id (as its agent reports it) -> "
            "http(s)://host:port/metrics URL"
        )
    return tuple(sorted(value.items()))


def _policies(where: str, value: Any) -> tuple[tuple[str, CanaryPolicy], ...]:
    """canaryPolicies (model -> policy mapping; a `deployment` key, as the stack exports it, is
    allowed and ignored) -> ((model, CanaryPolicy), ...)."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise errors.usage(f"{where}.canaryPolicies: {value!r}; allowed: a mapping of model name -> policy")
    out = []
    for model, policy in value.items():
        if not isinstance(model, str) or not layout.MODEL_NAME_RE.match(model):
            raise errors.usage(f"{where}.canaryPolicies: {model!r}; allowed: model names ({layout.MODEL_NAME_ALLOWED})")
        body = {k: v for k, v in policy.items() if k != "deployment"} if isinstance(policy, dict) else policy
        try:
            out.append((model, CanaryPolicy.from_mapping(body, f"{where}.canaryPolicies.{model}")))
        except CanaryPolicyError as e:
            raise errors.usage(str(e)) from None
    return tuple(sorted(out))


def _triton_gpus(where: str, value: Any) -> tuple[DeploymentGpu, ...] | None:
    """tritonGpus (deployment -> {gpu, memoryGiB, models}, as the stack exports it) -> DeploymentGpus,
    sorted by name; None when absent. Every key is required, no other is allowed, and a model is
    served by one deployment."""
    if value is None:
        return None
    key = f"{where}.tritonGpus"
    if not isinstance(value, dict) or not value:
        raise errors.usage(
            f"{key}: {value!r}; allowed: a mapping of deployment name -> {{gpu, memoryGiB, models}}, at least one"
        )
    out: list[DeploymentGpu] = []
    served: dict[str, str] = {}
    for name, body in value.items():
        if not isinstance(name, str) or not DNS_LABEL.match(name):
            raise errors.usage(
                f"{key}: {name!r}; allowed: deployment names (a DNS label: a-z 0-9 -, starting with a letter, at most "
                "32 characters)"
            )
        if not isinstance(body, dict):
            raise errors.usage(f"{key}.{name}: {body!r}; allowed: a mapping of {', '.join(GPU_KEYS)}")
        unknown = [k for k in body if k not in GPU_KEYS + OPTIONAL_GPU_KEYS]
        if unknown:
            raise errors.usage(
                f"{key}.{name}.{unknown[0]}: unknown key; allowed: {', '.join(GPU_KEYS + OPTIONAL_GPU_KEYS)}"
            )
        missing = [k for k in GPU_KEYS if k not in body]
        if missing:
            raise errors.usage(f"{key}.{name}.{missing[0]}: missing; allowed: every one of {', '.join(GPU_KEYS)}")
        gpu, memory, models = body["gpu"], body["memoryGiB"], body["models"]
        if not isinstance(gpu, str) or not gpu.strip():
            raise errors.usage(f"{key}.{name}.gpu: {gpu!r}; allowed: the GPU's model, e.g. H100")
        if isinstance(memory, bool) or not isinstance(memory, int | float) or not 0 < memory <= MAX_GPU_MEMORY_GIB:
            raise errors.usage(
                f"{key}.{name}.memoryGiB: {memory!r}; allowed: the memory of one GPU in GiB, a number in "
                f"(0, {MAX_GPU_MEMORY_GIB}], e.g. 80"
            )
        if not isinstance(models, list) or not all(
            isinstance(m, str) and layout.MODEL_NAME_RE.match(m) for m in models
        ):
            raise errors.usage(
                f"{key}.{name}.models: {models!r}; allowed: a list of model names ({layout.MODEL_NAME_ALLOWED})"
            )
        for m in models:
            if m in served:
                raise errors.usage(
                    f"{key}.{name}.models: {m!r} is also served by deployment {served[m]!r}; allowed: a model in one "
                    "deployment"
                )
            served[m] = name
        archs = body.get("architectures", [])
        if not isinstance(archs, list) or not all(isinstance(a, str) and ARCHITECTURE_RE.match(a) for a in archs):
            raise errors.usage(
                f"{key}.{name}.architectures: {archs!r}; allowed: a list of CUDA architectures such as [sm_90] "
                "(every instance type of the deployment's node group)"
            )
        sharing = body.get("sharing", "whole")
        if not isinstance(sharing, str) or not sharing.strip():
            raise errors.usage(
                f"{key}.{name}.sharing: {sharing!r}; allowed: how the node group shares a GPU, as the stack output "
                "names it (whole, time-slicing x2, mps x4, mig 1g.10gb)"
            )
        out.append(DeploymentGpu(name, gpu, float(memory), tuple(models), tuple(sorted(set(archs))), sharing))
    return tuple(sorted(out, key=lambda d: d.deployment))


def pulumi_outputs(stack: str, cwd: str | None) -> dict[str, Any]:
    import shutil  # only for pulumiStack environments: kept off every command's start-up
    import subprocess

    binary = os.environ.get("PULUMI") or shutil.which("pulumi")
    if not binary:
        raise errors.not_found(
            f"pulumi CLI: not on PATH (needed for pulumiStack {stack!r}); allowed: install pulumi or set "
            f"'bucket' in {CONFIG_NAME}"
        )
    try:
        proc = subprocess.run(
            [binary, "stack", "output", "--json", "--stack", stack],
            cwd=cwd or None,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise errors.s3(
            f"pulumi stack output --stack {stack}: {e}; allowed: a working pulumi CLI and backend login"
        ) from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise errors.not_found(
            f"pulumi stack output --stack {stack}: exit {proc.returncode} ({last}); allowed: an existing stack "
            "you are logged in to"
        )
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        raise errors.usage(
            f"pulumi stack output --stack {stack}: not JSON ({proc.stdout[:80]!r}); allowed: the JSON of `pulumi "
            "stack output --json`"
        ) from None
    if not isinstance(out, dict):
        raise errors.usage(
            f"pulumi stack output --stack {stack}: {type(out).__name__}; allowed: a JSON object of outputs"
        )
    return out


def _root_from_outputs(outs: dict[str, Any]) -> str | None:
    """The repository ROOT (layout.py puts repository/, manifests/, audit/ under it). The stack's
    `modelRepositoryUri` is the Triton tree `s3://<bucket>/repository` (docs/stack-outputs.md):
    using it as the root would nest repository/repository/."""
    if isinstance(outs.get("modelRepositoryBucket"), str) and outs["modelRepositoryBucket"]:
        return f"s3://{outs['modelRepositoryBucket']}"
    uri = outs.get("modelRepositoryUri")
    if not isinstance(uri, str) or not uri:
        return None
    uri = uri.rstrip("/")
    tree = "/" + layout.REPOSITORY_PREFIX.rstrip("/")
    return uri[: -len(tree)] if uri.endswith(tree) else uri


def sdk_endpoint() -> str | None:
    """AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, as the AWS SDKs and CLI read them (unless
    AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true). Resolved here, once, so every client and every
    "custom endpoint?" decision (promote's checksum trust) sees the same endpoint."""
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() == "true":
        return None
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def resolve(
    env: str | None,
    config: str | None = None,
    bucket: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    triton_url: str | None = None,
    triton_image: str | None = None,
    grpc_url: str | None = None,
) -> Environment:
    """Flags > config file > pulumi stack outputs."""
    if env is not None and not ENV_NAME_RE.match(env):
        raise errors.usage(f"--env: {env!r}; allowed: [a-z][a-z0-9-]{{0,31}}")
    path = find_config(config)
    body: dict[str, Any] = {}
    source = "flags"
    if env is not None:
        envs = load_config(path) if path else {}
        if env not in envs and bucket is None:
            known = ", ".join(sorted(envs)) or f"none (no {CONFIG_NAME} found)"
            raise errors.not_found(f"environment: {env!r} is not configured; allowed: {known}")
        body = dict(envs.get(env, {}))
        source = path or "flags"
        if "pulumiStack" in body and bucket is None:
            cwd = body.get("pulumiCwd")
            if cwd and path and not os.path.isabs(cwd):
                cwd = os.path.join(os.path.dirname(os.path.abspath(path)), cwd)
            outs = pulumi_outputs(body["pulumiStack"], cwd)
            body.setdefault("bucket", _root_from_outputs(outs))
            found = outs.get("tritonEndpoints")
            endpoints: dict[str, Any] = found if isinstance(found, dict) else {}
            for key, value in (("region", outs.get("region")), ("tritonImage", outs.get("tritonImage")),
                               ("tritonUrl", endpoints.get("http")), ("grpcUrl", endpoints.get("grpc")),
                               ("prometheusUrl", outs.get("prometheusUrl")),
                               ("eksCluster", outs.get("clusterName"))):  # fmt: skip
                if isinstance(value, str) and value:
                    body.setdefault(key, value)
            if not body.get(stack_outputs.CANARY_POLICIES) and outs.get(stack_outputs.CANARY_POLICIES):
                body[stack_outputs.CANARY_POLICIES] = _policies(
                    f"pulumi stack {body['pulumiStack']}", outs[stack_outputs.CANARY_POLICIES]
                )
            if body.get(stack_outputs.TRITON_GPUS) is None and outs.get(stack_outputs.TRITON_GPUS) is not None:
                body[stack_outputs.TRITON_GPUS] = _triton_gpus(
                    f"pulumi stack {body['pulumiStack']}", outs[stack_outputs.TRITON_GPUS]
                )
            source = f"pulumi stack {body['pulumiStack']}"
    uri = bucket or body.get("bucket")
    if not uri:
        raise errors.usage(
            f"bucket: missing for environment {env!r}; allowed: --bucket s3://bucket[/prefix], 'bucket' or "
            f"'pulumiStack' in {CONFIG_NAME}"
        )
    try:
        root = layout.Root.parse(uri)
    except layout.LayoutError as e:
        raise errors.usage(str(e)) from None
    endpoint = endpoint_url or body.get("endpointUrl") or sdk_endpoint()
    if endpoint and not re.match(r"^https?://[^\s/]+(/\S*)?$", endpoint):
        raise errors.usage(f"endpoint URL: {endpoint!r}; allowed: http(s)://host[:port]")
    return Environment(
        name=env or "adhoc",
        root=root,
        endpoint_url=endpoint,
        region=region or body.get("region"),
        triton_url=triton_url or body.get("tritonUrl"),
        grpc_url=grpc_url or body.get("grpcUrl"),
        triton_image=triton_image or body.get("tritonImage"),
        unenforced_writes_accepted=body.get("unenforcedConditionalWrites") == "accepted",
        prometheus_url=body.get("prometheusUrl"),
        eks_cluster=body.get("eksCluster"),
        metrics_urls=body.get("tritonMetricsUrls") or (),
        canary_policies=body.get(stack_outputs.CANARY_POLICIES) or (),
        triton_gpus=body.get(stack_outputs.TRITON_GPUS),
        source=source,
    )
