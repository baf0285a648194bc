"""Render a stack without credentials: `python -m tools.render STACK [--out build]`.

Runs the real program for STACK under the test kit's recording mocks (no cloud, no
Pulumi CLI) and writes, for reviewers and scanners:

  build/<stack>/manifests/NNN-<kind>-<namespace>-<name>.yaml  every Kubernetes object the
                                                             program creates itself, numbered
                                                             in Helm's install order
  build/<stack>/helm/<release>.yaml                          every Helm release: chart,
                                                             version, repository, values
  build/<stack>/inventory.json                               every resource: type, logical
                                                             name, parent, provider, inputs
  build/<stack>/exports.json                                 the stack outputs
  build/<stack>/charts/<release>.yaml                        with --charts: what each release's
  build/<stack>/crds/<release>.yaml                          pinned chart renders from those
                                                             values, CRDs apart
                                                             (tools/helm_template.py; needs
                                                             `make helm charts`)

Two renders of one commit are the same files byte for byte (keys sorted, objects ordered), so
a render diffs cleanly against another.

Exit codes: 0 rendered; 2 the stack config is invalid (one-line error on stderr);
3 with --charts, helm refuses a release (one line naming it and helm's reason); 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

# Helm's install order (kind_sorter.go in helm's pkg/releaseutil): the manifests are numbered in
# it, then by namespace and name, so `kubectl apply -f` of the folder in file order creates what
# others need first, and two renders of one commit are the same files byte for byte (the program
# registers its resources in no fixed order, and the mocks record inputs in no fixed key order).
# Kinds it does not list (custom resources) come after it.
INSTALL_ORDER = (
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-")


def _install_key(doc: dict[str, Any]) -> tuple[int, str, str, str]:
    kind, meta = doc["kind"], doc["metadata"]
    rank = INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)
    return rank, kind, meta.get("namespace") or "", meta["name"]


def write_render(run: Any, out_dir: Path) -> dict[str, int]:
    """Write a recorded run (tests.pulumi_kit.Run) to `out_dir`; return counts."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    manifests = out_dir / "manifests"
    helm = out_dir / "helm"
    manifests.mkdir(parents=True)
    helm.mkdir()
    docs = []
    for r in run.kubernetes_objects():
        doc = {
            k: v
            for k, v in r.inputs.items()
            if k
            in (
                "apiVersion",
                "kind",
                "metadata",
                "spec",
                "data",
                "stringData",
                "type",
                "rules",
                "roleRef",
                "subjects",
                "immutable",
                "webhooks",
                "aggregationRule",
                # StorageClass has no spec: its fields are top-level.
                "provisioner",
                "parameters",
                "reclaimPolicy",
                "volumeBindingMode",
                "allowVolumeExpansion",
                "mountOptions",
                "allowedTopologies",
            )
        }
        if not (doc.get("metadata") or {}).get("name"):
            raise SystemExit(
                f"render: {r.type} {r.name} has no metadata.name; components must name Kubernetes objects explicitly"
            )
        docs.append(doc)
    docs.sort(key=_install_key)
    for number, doc in enumerate(docs, start=1):
        meta = doc["metadata"]
        fname = (
            f"{number:03d}-{_slug(doc['kind'])}-{_slug(meta.get('namespace', 'cluster'))}-{_slug(meta['name'])}.yaml"
        )
        (manifests / fname).write_text(yaml.safe_dump(doc, sort_keys=True))
    releases = 0
    for r in run.of_type("kubernetes:helm.sh/v3:Release"):
        releases += 1
        keep = {
            k: r.inputs.get(k)
            for k in (
                "name",
                "namespace",
                "chart",
                "version",
                "repositoryOpts",
                "values",
                "createNamespace",
                "atomic",
                "timeout",
            )
        }
        (helm / f"{_slug(r.name)}.yaml").write_text(yaml.safe_dump(keep, sort_keys=True))
    inventory = [
        {
            "type": r.type,
            "name": r.name,
            "parent": r.parent_name,
            "parentType": r.parent_type,
            "provider": r.provider_name,
            "inputs": r.inputs,
        }
        for r in sorted(run.resources, key=lambda r: (r.type, r.name, r.parent_name or ""))
    ]
    (out_dir / "inventory.json").write_text(json.dumps(inventory, indent=1, sort_keys=True, default=str))
    (out_dir / "exports.json").write_text(json.dumps(run.exports, indent=1, sort_keys=True, default=str))
    return {"resources": len(run.resources), "manifests": len(docs), "helmReleases": releases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="render", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("stack", help="stack name: dev | staging | prod (reads stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--out", default=str(ROOT / "build"), help="output folder (default: build/)")
    parser.add_argument("--stack-file", type=Path, help="read this stack file instead of stacks/Pulumi.<stack>.yaml")
    parser.add_argument(
        "--charts",
        action="store_true",
        help="also render every Helm release with helm and its pinned chart into <out>/<stack>/charts/",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from components.stack_config.errors import ConfigError
    from tests.pulumi_kit import KitError, run_program

    try:
        run = run_program(args.stack, stack_file=args.stack_file)
    except ConfigError as exc:
        print(f"render: invalid stack config: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"render: {exc}", file=sys.stderr)
        return 2
    except KitError as exc:
        print(f"render: {exc}", file=sys.stderr)
        return 1
    stack_dir = Path(args.out) / args.stack
    counts = write_render(run, stack_dir)
    print(
        f"render: {args.stack}: {counts['resources']} resources, {counts['manifests']} Kubernetes manifests, "
        f"{counts['helmReleases']} Helm releases -> {stack_dir}"
    )
    if args.charts:
        from tools.helm_template import RenderError, kubernetes_version, render_stack

        try:
            version = kubernetes_version(stack_dir)
            objects = render_stack(stack_dir).objects
        except RenderError as exc:
            print(f"render: helm refuses a release of {args.stack}: {exc}", file=sys.stderr)
            return 3
        print(
            f"render: {args.stack}: {sum(map(len, objects.values()))} objects from {len(objects)} charts (Kubernetes "
            f"{version}) "
            f"-> {stack_dir / 'charts'} (CRDs: {stack_dir / 'crds'})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
