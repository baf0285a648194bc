"""GPU memory planning: would a Triton deployment's models overcommit its GPU?

An environment's `tritonGpus` (model-sync.yaml or the stack output; model_sync/environments.py)
names each deployment's GPU, its memory and its models. For one deployment, on the fullest GPU
of a replica:

    planned = PROCESS_CONTEXT_BYTES                   (once: the replica's tritonserver process)
            + sum over its models of  instances on that GPU x (bytes_per_instance + INSTANCE_BYTES)
    allowed = HEADROOM x the GPU's memory          (push and promote refuse planned > allowed: exit 7)

Instances of Triton's own backends (pytorch_libtorch, torch_aoti, onnxruntime) are threads of the
server process and share its one CUDA context; a python-backend instance (`export --target local`)
is a stub process of its own, so it pays a context each (CUDA_CONTEXT_BYTES instead of
INSTANCE_BYTES, and no shared PROCESS_CONTEXT_BYTES unless another model shares the process).
The constants and where they were measured are beside them below; docs/gpu-benchmark.md has the
plan-against-observed table (bench/results/memory-plan.json: within 10 % on every row).

`bytes_per_instance` is export's record (model_sync/export/gpu_memory.py), carried by the manifest
(schema v3). Each model counts the version its pin serves, except the one being pushed or
promoted, which counts the new version. While a new version loads, the version it replaces is
still loaded (Triton unloads it once the new one is READY): when the plan with both does not fit,
the plan's line says that the load may run out of GPU memory (not a refusal: the replicas keep
serving the old version when it does). Instances per GPU follow Triton's placement of
`instance_group` (config.pbtxt, recorded in the manifest as `instance_groups` by
model_sync/triton_model/instance_groups.py):
  - KIND_GPU: `count` instances on EACH GPU the replica sees, or on each GPU of `gpus` when the
    group lists them;
  - KIND_AUTO (Triton places it on the GPUs when there are any) and KIND_MODEL (the model places
    itself: nothing says it stays off the GPU) count as KIND_GPU;
  - KIND_CPU costs no GPU memory.
A model whose manifest has no GPU memory (written before v3, or from a directory `export` did not
write) is "unknown": it is not counted and not guessed, and the plan says which models it left out.
ref: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#instance-groups
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from model_sync import errors
from model_sync.parallel import parallel_map
from model_sync.records import codec
from model_sync.versions import catalog

if TYPE_CHECKING:
    from model_sync.environments import DeploymentGpu
    from model_sync.s3.bucket import Bucket

MIB = 1 << 20
# An ALLOWANCE per GPU instance, beside the caching allocator's peak that export records
# (torch.cuda.max_memory_reserved() leaves out the CUDA context and the runtime's own state), from a
# measurement: on an NVIDIA H200 with torch 2.11 + CUDA 13.0, a process held 686 MiB outside torch's
# allocator once CUDA was up and one ResNet-18 batch had loaded cuDNN/cuBLAS kernels
# (bench/serving/cuda_context.py; bench/results/serving.json, `cuda_context`). It is right for the
# python backend, whose every instance is its own stub process with its own context, and
# conservative for the libtorch backend, whose instances share their process' context.
CUDA_CONTEXT_BYTES = 686 * MIB
# Triton's PyTorch backend (r24.10, built from the pinned sources), NVIDIA H100 80GB, torch 2.11 +
# CUDA 13.0, measured with NVML per tritonserver process (bench/serving/memory.py; bench/results/
# memory-plan.json, `fit`): three models (54, 302 and 554 MiB per instance by export's figure) at 1,
# 2 and 4 instances, a least-squares line through the nine rows: one server process holds 696 MiB
# beside its instances (the CUDA context, libtorch's kernels and handles), and each instance 76 MiB
# beyond export's figure (its own stream's allocator pool and cuBLAS/cuDNN workspaces).
PROCESS_CONTEXT_BYTES = 696 * MIB
INSTANCE_BYTES = 76 * MIB
OWN_PROCESS_BACKENDS = ("python",)  # a backend whose every instance is a process (and a context) of its own
HEADROOM = 0.90  # the share of one GPU's memory a deployment's instances may plan to use
GPU_KINDS = ("KIND_GPU", "KIND_AUTO", "KIND_MODEL")  # instance kinds that take GPU memory (see above)
NO_GPUS = "the environment does not name its GPUs (tritonGpus in model-sync.yaml or the stack output)"


def human(n: float) -> str:
    """Bytes in IEC units, one decimal: 1.5 GiB, 512.0 MiB, 12.0 KiB, 100 B."""
    for unit, size in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


@dataclass(frozen=True)
class Need:
    """One model version's GPU memory need: bytes per instance (None: unknown) and its groups."""

    model: str
    label: str  # how lines name it: "bert v3", "resnet (this push)"
    bytes_per_instance: int | None
    groups: tuple[dict[str, Any], ...]
    version: int | None = None  # None: not allocated yet (the version being pushed)
    backend: str | None = None  # the config's platform, or its backend when it names no platform

    @classmethod
    def from_manifest(cls, doc: dict[str, Any], label: str | None = None) -> Need:
        """A manifest's need; a v1/v2 manifest or a null gpu_memory is unknown."""
        gpu = doc.get("gpu_memory") if doc["schema"] in (codec.MANIFEST_V3, codec.MANIFEST_V4) else None
        return cls(doc["model"], label or f"{doc['model']} v{doc['version']}",
                   gpu["bytes_per_instance"] if gpu else None, tuple(doc.get("instance_groups") or ()),
                   doc["version"], doc.get("platform") or doc.get("backend"))  # fmt: skip

    @property
    def shares_context(self) -> bool:
        """Its instances are threads of the server process (None: a need that names no backend is
        planned as a process per instance, the larger allowance)."""
        return self.backend is not None and self.backend not in OWN_PROCESS_BACKENDS

    def on_gpu(self, gpu: int | None) -> int:
        """Instances Triton places on GPU `gpu` (None: a GPU that no group of any model lists)."""
        return sum(g["count"] for g in self.groups
                   if g["kind"] in GPU_KINDS and (not g["gpus"] or gpu in g["gpus"]))  # fmt: skip


@dataclass(frozen=True)
class Share:
    """What one model plans on the fullest GPU."""

    need: Need
    instances: int

    @property
    def per_instance(self) -> int:
        allowance = INSTANCE_BYTES if self.need.shares_context else CUDA_CONTEXT_BYTES
        return (self.need.bytes_per_instance or 0) + allowance

    @property
    def bytes(self) -> int:
        return self.instances * self.per_instance

    def text(self) -> str:
        return f"{self.need.label} {self.instances} x {human(self.per_instance)} = {human(self.bytes)}"


@dataclass(frozen=True)
class Plan:
    """One deployment's plan on its fullest GPU: the known models' shares (largest first) and the
    models left out because their GPU memory is unknown."""

    deployment: DeploymentGpu
    shares: tuple[Share, ...]
    unknown: tuple[str, ...]

    @property
    def process_bytes(self) -> int:
        """The server process' own context, once, when an instance shares it."""
        return PROCESS_CONTEXT_BYTES if any(s.need.shares_context for s in self.shares) else 0

    @property
    def planned(self) -> int:
        return self.process_bytes + sum(s.bytes for s in self.shares)

    @property
    def allowed(self) -> int:
        return int(self.deployment.memory_bytes * HEADROOM)

    @property
    def fits(self) -> bool:
        return self.planned <= self.allowed

    def _card(self) -> str:
        d = self.deployment
        if d.sharing == "whole":
            return f"{d.gpu} ({human(d.memory_bytes)})"
        return f"{d.gpu} share ({d.sharing}: {human(d.memory_bytes)})"

    def _unknown_text(self) -> str:
        return f"; not counted (GPU memory unknown): {', '.join(self.unknown)}" if self.unknown else ""

    def summary(self, env: str, switch: Plan | None = None) -> str:
        """The line push and promote print when the plan fits; with `switch` (the same plan with
        the versions served now still loaded) that does not fit, it says so: Triton unloads a
        version only once the version that replaces it is READY (docs/agent.md, P1: 0 failed
        requests over the flips), so both are resident while the new one loads."""
        text = (
            f"gpu memory: deployment {self.deployment.deployment} in {env} plans {human(self.planned)} of the "
            f"{human(self.allowed)} allowed on one {self._card()}{self._unknown_text()}"
        )
        if switch is not None and not switch.fits:
            text += (
                f"; but {human(switch.planned)} while the new version loads beside the one served now (Triton "
                "unloads the old one only once the new one is READY): that load may run out of GPU memory and "
                "fail, and the replicas then keep serving the old version"
            )
        return text

    def refusal(self, who: str, env: str) -> str:
        """The one-line exit-7 message: the deployment, its GPU, planned vs allowed and the largest shares."""
        largest = ", ".join(s.text() for s in self.shares[:3])
        return (
            f"{who} -> {env}: gpu memory: deployment {self.deployment.deployment} would plan {human(self.planned)} "
            f"on one {self._card()}, more than the {human(self.allowed)} allowed ({HEADROOM:.0%} of it); largest: "
            f"{largest} ({self._allowances()}){self._unknown_text()}; "
            "allowed: fewer GPU instances (instance_group count), a smaller max_batch_size, or a bigger GPU"
        )

    def _allowances(self) -> str:
        parts = []
        if self.process_bytes:
            parts.append(
                f"{human(PROCESS_CONTEXT_BYTES)} for the server process, each instance + {human(INSTANCE_BYTES)}"
            )
        if any(not s.need.shares_context for s in self.shares):
            parts.append(f"each python-backend instance + {human(CUDA_CONTEXT_BYTES)} CUDA context")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        return {
            "deployment": d.deployment, "gpu": d.gpu, "sharing": d.sharing, "memory_bytes": d.memory_bytes, "allowed_bytes": self.allowed,
            "planned_bytes": self.planned, "fits": self.fits, "headroom": HEADROOM,
            "cuda_context_bytes": CUDA_CONTEXT_BYTES, "process_context_bytes": self.process_bytes,
            "unknown": list(self.unknown),
            "models": [{"model": s.need.model, "version": s.need.version, "instances_per_gpu": s.instances,
                        "bytes_per_instance": s.need.bytes_per_instance, "bytes": s.bytes} for s in self.shares],
        }  # fmt: skip


def plan(deployment: DeploymentGpu, needs: Sequence[Need]) -> Plan:
    """The plan of `needs` (one per model of the deployment) on the deployment's fullest GPU: every
    GPU a group lists by index is tried, and one that no group lists (only the every-GPU groups)."""
    known = [n for n in needs if n.bytes_per_instance is not None]
    listed = sorted({i for n in known for g in n.groups for i in g["gpus"]})

    def on(gpu: int | None) -> list[Share]:
        return [Share(n, n.on_gpu(gpu)) for n in known if n.on_gpu(gpu)]

    fullest = max((on(gpu) for gpu in [None, *listed]), key=lambda shares: sum(s.bytes for s in shares))
    return Plan(deployment, tuple(sorted(fullest, key=lambda s: -s.bytes)),
                tuple(n.label for n in needs if n.bytes_per_instance is None))  # fmt: skip


def pinned_needs(repo: Bucket, models: Sequence[str]) -> list[Need]:
    """The need of the version each model's pin serves now (a model without a pin serves nothing:
    left out; a pin without its manifest: unknown), read through the repository readers."""

    def one(model: str) -> Need | None:
        pin = catalog.read_pin(repo, model)
        if pin.version is None:
            return None
        doc = catalog.read_manifest(repo, model, pin.version, required=False)
        return Need.from_manifest(doc) if doc else Need(model, f"{model} v{pin.version}", None, (), pin.version)

    return [n for n in parallel_map(one, list(models), 16) if n is not None]


def check(
    repo: Bucket, models: Sequence[str], need_of: Callable[[str], Need], who: Callable[[list[str]], str]
) -> list[str]:
    """Before push or promote writes anything: refuse (exit 7, `who(models)` naming what is published)
    a set of new versions of `models` that would overcommit a deployment of repo's environment;
    `need_of(model)` gives a new version's need (asked only for models of a deployment). Returns the
    lines to print: each checked deployment's plan, or why GPU memory was not checked."""
    env = repo.env
    if env.triton_gpus is None:
        return [f"gpu memory: not checked in {env.name}: {NO_GPUS}"]
    lines = []
    alone = [m for m in models if env.deployment_of(m) is None]
    if alone:
        lines.append(f"gpu memory: not checked for {', '.join(alone)}: in no deployment of {env.name}'s tritonGpus")
    for deployment in env.triton_gpus:
        mine = [m for m in models if m in deployment.models]
        if not mine:
            continue
        pinned = pinned_needs(repo, deployment.models)
        others = [n for n in pinned if n.model not in mine]
        new = [need_of(m) for m in mine]
        result = plan(deployment, [*others, *new])
        if not result.fits:
            raise errors.incompatible(result.refusal(who(mine), env.name))
        served = [n for n in pinned if n.model in mine]  # what the new versions replace, resident until they load
        lines.append(result.summary(env.name, plan(deployment, [*others, *new, *served]) if served else None))
    return lines


def environment_plans(repo: Bucket) -> list[Plan] | None:
    """`status`: each deployment's plan with the versions pinned now; None when the environment does
    not know its GPUs."""
    if repo.env.triton_gpus is None:
        return None
    return [plan(d, pinned_needs(repo, d.models)) for d in repo.env.triton_gpus]
