"""`status`: per model, the pinned version, what each replica serves (from its agent's status
report: version, state and the one-line reason of a failed load; a pin no replica serves READY
is flagged PIN NOT SERVED; model_sync.observation.replicas), the available versions (complete = manifest +
every file), the previous pin, provenance and whether it was verified; per version, the torch
that exported it and whether each shown environment's Triton image can load it
(model_sync.admission.alignment.loadable, per export format); whether the pin-index entry agrees with
the pin (a pin written without it reaches the agents only at their next full listing); per Triton
deployment of the environment's `tritonGpus`, the GPU memory its pinned versions plan on one GPU
against what the card allows (model_sync/admission/gpu_plan.py), or that the environment does not
know its GPUs."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from model_sync import environments, errors
from model_sync.admission import alignment, gpu_plan
from model_sync.admission.gpu_plan import NO_GPUS, human
from model_sync.contract import layout
from model_sync.observation import replicas, verify
from model_sync.records import canary_record, codec, compatibility
from model_sync.s3.bucket import Bucket
from model_sync.versions import catalog

if TYPE_CHECKING:
    from model_sync.environments import Environment


def version_details(
    repo: Any, model: str, versions: list[int], manifests: set[int], images: dict[str, str | None]
) -> list[dict[str, Any]]:
    """Per version: exporting torch, platform, and alignment.loadable() for each environment's image."""

    out = []
    for v in versions:
        doc = catalog.read_manifest(repo, model, v, required=False) if v in manifests else None
        torch = doc["exporter"]["torch_version"] if doc else None
        platform, backend = (doc["platform"], doc["backend"]) if doc else ("", "")
        loads = {env: (alignment.loadable(doc, image) if doc else "unknown") for env, image in sorted(images.items())}
        out.append({"version": v, "torch_version": torch, "platform": platform or backend or None, "loadable": loads,
                    "compatibility": compatibility.read(doc["compatibility"]) if doc and "compatibility" in doc else None})  # fmt: skip
    return out


def pin_index(repo: Any, pin: catalog.Pin) -> dict[str, Any]:
    """Whether the model's pin-index entry (manifests/_pins/<model>.json, what agents list every pass)
    agrees with its pin: `{"version": <the entry's>, "agrees": bool, "detail": None | one line}`.
    A pin written without its entry (a crash between the two writes, a writer other than
    model-sync) is seen by the agents only at their next full listing of repository/ (at most
    --full-resync after the write, 300 s by default; docs/agent.md)."""
    found = repo.get_with_meta(layout.pin_index_key(pin.model))
    entry: dict[str, Any] | None = None
    if found is not None:
        try:
            entry = codec.read_pin_index(found[0], pin.model)
        except codec.RecordError as e:
            return {"version": None, "agrees": False, "detail": f"its pin-index entry is unreadable ({e})"}
    version = None if entry is None else entry["version"]
    if pin.text is None:
        detail = None if entry is None else f"there is no pin, its pin-index entry names version {version}"
    elif entry is None:
        detail = "the pin has no pin-index entry"
    elif version != pin.version:
        detail = f"the pin names version {pin.version}, its pin-index entry version {version}"
    elif found is not None and pin.modified is not None and found[2] is not None and pin.modified > found[2]:
        detail = "the pin was rewritten after its pin-index entry"
    else:
        detail = None
    return {"version": version, "agrees": detail is None, "detail": detail}


def model_status(
    repo: Any,
    model: str,
    images: dict[str, str | None] | None = None,
    status_docs: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:

    pin = catalog.read_pin(repo, model)
    versions = catalog.list_versions(repo, model)
    manifests = set(catalog.list_manifests(repo, model))
    history = catalog.read_history(repo, model)
    out: dict[str, Any] = {
        "model": model,
        "pinned": pin.version,
        "versions": versions,
        "incomplete": sorted(v for v in versions if v not in manifests),
        "previous_pin": catalog.rollback_target(repo, model, pin, history, manifests)[
            0
        ],  # what `rollback` would pin: it exists
        "provenance": None,
        "verified": None,
        "files_changed": None,  # the pinned version's files differ from its manifest (catalog.changed_since_manifest)
        "version_details": version_details(
            repo, model, versions, manifests, images if images is not None else {repo.env.name: repo.env.triton_image}
        ),
        "replicas": replicas.served(
            replicas.read_status_docs(repo) if status_docs is None else status_docs, model, _dt.datetime.now(_dt.UTC)
        ),
    }
    stored = canary_record.read(repo, model)  # the last gray release, running or ended
    out["canary"] = None if stored.doc is None else {
        k: stored.doc[k] for k in ("id", "state", "stable_version", "canary_version", "share_percent", "replicas",
                                   "steps", "deadline_at", "decision")}  # fmt: skip
    # The pin is only what was asked for: flag it when no replica reports serving it READY.
    out["pin_served"] = (
        any(replicas.serves(r, pin.version) for r in out["replicas"].values()) if out["replicas"] else None
    )
    out["pin_index"] = pin_index(repo, pin)
    if pin.version is not None:
        doc = catalog.read_manifest(repo, model, pin.version, required=False)
        if doc is not None:
            out["provenance"] = {
                "by": doc["created_by"],
                "at": doc["created_at"],
                "promoted_from": doc["source"]["promoted_from"],
                "exporter": doc["exporter"]["tool"],
            }
        try:
            found = verify.gate_record(repo, model, pin.version)
            out["verified"] = found[1]["passed"] if found else None
        except codec.RecordError:
            out["verified"] = False
        if doc is not None:  # a verification vouches for the files its manifest describes, not for rewritten ones
            out["files_changed"] = catalog.changed_since_manifest(repo, model, pin.version, doc)
            if out["files_changed"] is not None and out["verified"]:
                out["verified"] = False
    return out


def gpu_memory(repo: Any) -> dict[str, Any]:
    """The environment's GPU memory plan per deployment (gpu_plan.environment_plans, the versions
    pinned now), or why there is none."""

    plans = gpu_plan.environment_plans(repo)
    if plans is None:
        return {"known": False, "detail": gpu_plan.NO_GPUS, "deployments": []}
    return {"known": True, "detail": None, "deployments": [p.to_json() for p in plans]}


def _print_gpu_memory(report: dict[str, Any]) -> None:
    """Per deployment: planned GPU memory on one GPU against what the card allows."""

    rows: list[tuple[str, ...]] = [("ENV", "DEPLOYMENT", "GPU", "PLANNED", "ALLOWED", "FITS", "NOT COUNTED (unknown)")]
    unknown_envs = []
    for name, body in report.items():
        if not body["gpu_memory"]["known"]:
            unknown_envs.append(name)
        for d in body["gpu_memory"]["deployments"]:
            rows.append((name, d["deployment"], f"{d['gpu']} {human(d['memory_bytes'])}", human(d["planned_bytes"]),
                         human(d["allowed_bytes"]), "yes" if d["fits"] else "NO", ", ".join(d["unknown"]) or "-"))  # fmt: skip
    print()
    if len(rows) > 1:
        _print_table(rows)
        print(
            "PLANNED = on one GPU: the server process' context + instances x (GPU memory per instance + an "
            "allowance), pinned versions"
        )
    for name in unknown_envs:
        print(f"gpu memory: not planned in {name}: {NO_GPUS}")


def _print_table(rows: Sequence[tuple[str, ...]]) -> None:
    """Columns padded to their widest cell, two spaces apart (kubectl get style)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def served_cell(s: dict[str, Any]) -> str:
    """`2/2` (replicas serving the pin READY / replicas reporting), `0/2 PIN NOT SERVED`, `-` (no report)."""
    if not s["replicas"]:
        return "-"
    ok = sum(1 for r in s["replicas"].values() if replicas.serves(r, s["pinned"]))
    return f"{ok}/{len(s['replicas'])}" + ("" if ok else " PIN NOT SERVED")


def _print_canaries(report: dict[str, Any]) -> None:
    """The gray releases: one row per step of each model's last one: its configured share, the
    replicas it ran on and the share they make (effective), the share of the window's requests the
    canary answered (observed), its verdict and figures."""
    rows: list[tuple[str, ...]] = [("ENV", "MODEL", "CANARY", "STATE", "STEP", "REPLICAS", "EFFECTIVE", "OBSERVED",
                                    "VERDICT", "FIGURES")]  # fmt: skip
    for name, body in report.items():
        for s in body["models"]:
            c = s["canary"]
            if c is None:
                continue
            state = c["state"] if c["state"] != "running" else f"running (deadline {c['deadline_at']})"
            for step in c["steps"] or [{}]:
                figures = step.get("figures")
                relisted = f" (relisted {step['restarts']}x)" if step.get("restarts") else ""
                observed = step.get("observed_percent")
                rows.append((name, s["model"], f"v{c['canary_version']} vs v{c['stable_version']}", state,
                             f"{step.get('share_percent', '-')} %",
                             f"{step.get('replicas', 0)}/{step.get('fleet', 0)}{relisted}",
                             f"{step['effective_percent']:g} %" if "effective_percent" in step else "-",
                             "-" if observed is None else f"{observed:g} %",
                             step.get("verdict") or "-",
                             "-" if not figures else _figures_cell(figures)))  # fmt: skip
            if c["decision"]:
                rows.append((name, s["model"], "", c["decision"]["outcome"], "", "", "", "", "",
                             c["decision"]["reason"]))  # fmt: skip
    if len(rows) > 1:
        print()
        _print_table(rows)


def _figures_cell(figures: dict[str, Any]) -> str:
    def one(f: dict[str, Any]) -> str:
        p99 = "-" if f["p99_ms"] is None else f"{f['p99_ms']:g}ms"
        return f"{f['requests']} req {100 * f['error_ratio']:.2f}% err p99 {p99}"

    return f"canary {one(figures['canary'])} | stable {one(figures['stable'])}"


def command(
    env: str | None, config: str | None, models: list[str], resolve: Callable[[str], Environment], output: str
) -> None:
    """`model-sync status`: `models` (default: every model) of `env` (default: every environment
    of the config), printed as tables or (`output` json) one JSON document."""
    report = _report(env, config, models, resolve)
    if output == "json":
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    _print_models(report)
    _print_replicas(report)
    _print_canaries(report)
    _print_warnings(report)
    _print_versions(report)
    _print_gpu_memory(report)


def _report(
    env: str | None, config: str | None, models: list[str], resolve: Callable[[str], Environment]
) -> dict[str, Any]:
    """Environment name -> its bucket, Triton image, models' status and GPU memory plan."""
    names = [env] if env else []
    if not names:
        path = environments.find_config(config)
        if path is None:
            raise errors.usage(
                f"--env: missing and no {environments.CONFIG_NAME} found; allowed: --env NAME or a config "
                "listing environments"
            )
        names = sorted(environments.load_config(path))
    report: dict[str, Any] = {}
    envs = {name: resolve(name) for name in names}
    images = {name: env.triton_image for name, env in envs.items()}
    for name, environment in envs.items():
        repo = Bucket(environment)
        shown = models or catalog.list_models(repo)
        docs = replicas.read_status_docs(repo)
        report[name] = {
            "bucket": environment.uri,
            "triton_image": environment.triton_image,
            "models": [model_status(repo, m, images, docs) for m in shown],
            "gpu_memory": gpu_memory(repo),
        }
    return report


def _print_models(report: dict[str, Any]) -> None:
    rows = [("ENV", "MODEL", "PINNED", "SERVED", "PREVIOUS", "VERSIONS", "VERIFIED", "PUBLISHED BY / AT", "FROM")]
    for name, body in report.items():
        for s in body["models"]:
            prov = s["provenance"] or {}
            origin = prov.get("promoted_from")
            rows.append(
                (
                    name,
                    s["model"],
                    str(s["pinned"] or "-"),
                    served_cell(s),
                    str(s["previous_pin"] or "-"),
                    ",".join(str(v) + ("*" if v in s["incomplete"] else "") for v in s["versions"]) or "-",
                    "NO (files changed)"
                    if s["files_changed"]
                    else {True: "yes", False: "FAILED", None: "-"}[s["verified"]],
                    f"{prov.get('by', '-')} {prov.get('at', '')}".strip(),
                    f"{origin['env']} v{origin['version']}" if origin else "-",
                )
            )
    _print_table(rows)


def _print_replicas(report: dict[str, Any]) -> None:
    replica_rows: list[tuple[str, ...]] = [("ENV", "MODEL", "REPLICA", "SERVING", "STATE", "REASON")]
    for name, body in report.items():
        for s in body["models"]:
            for key, r in s["replicas"].items():
                replica_rows.append(
                    (name, s["model"], key, ",".join(map(str, r["serving"])) or "-", r["state"], r["error"] or "")
                )
    if len(replica_rows) > 1:
        print()
        _print_table(replica_rows)


def _print_warnings(report: dict[str, Any]) -> None:
    """A pin no replica serves, a pin index that disagrees, a pinned version whose files changed,
    incomplete versions."""
    if any(s["pin_served"] is False for body in report.values() for s in body["models"]):
        print(
            "PIN NOT SERVED: no replica reports the pinned version READY (see REASON; the replicas keep serving "
            "what they had)"
        )
    for name, body in report.items():
        for s in body["models"]:
            if not s["pin_index"]["agrees"]:
                print(
                    f"PIN INDEX DISAGREES: {s['model']} in {name}: {s['pin_index']['detail']}; the agents pick the pin "
                    "up at their next full listing (within --full-resync of the write, 300 s by default), or at once "
                    "when restarted; a flip by model-sync (push, promote, rollback) rewrites the entry"
                )
    for name, body in report.items():
        for s in body["models"]:
            if s["files_changed"]:
                print(
                    f"FILES CHANGED: {s['model']} in {name} version {s['pinned']}: {s['files_changed']}; no "
                    "verification vouches for it and promote refuses it; allowed: push the model again"
                )
    if any(s["incomplete"] for body in report.values() for s in body["models"]):
        print("* incomplete: no manifest (an interrupted push; `model-sync prune` removes it)")


def _print_versions(report: dict[str, Any]) -> None:
    label = {"yes": "yes", "no": "NO", "exempt": "exempt", "unknown": "?"}
    details: list[tuple[str, ...]] = [
        ("ENV", "MODEL", "VERSION", "TORCH", "LOADABLE (Triton image of each environment)")
    ]
    for name, body in report.items():
        for s in body["models"]:
            for d in s["version_details"]:
                pinned = "*" if d["version"] == s["pinned"] else ""
                loads = " ".join(f"{env}={label[v]}" for env, v in d["loadable"].items())
                details.append((name, s["model"], f"{d['version']}{pinned}", d["torch_version"] or "-", loads))
    if len(details) > 1:
        print()
        _print_table(details)
        print("VERSION* = pinned; NO = exported with a newer torch than the image's LibTorch (exit 7 on push/promote)")
