"""One way to install a pinned upstream Helm chart (kubernetes.helm.v3.Release).

Every release the serving plane installs goes through `pinned_release`: the chart,
version and repository come from a `versions.HelmChart` (pinned in components/upstream/versions.py),
the release is atomic (a failed upgrade rolls back), the namespace is created by the
caller's ServingNamespace (never by Helm, so its Pod Security labels are ours), and
Helm keeps a bounded history. `timeout` (seconds, default 900) bounds how long Helm waits
for the release's workloads to become ready before the atomic rollback; each caller sets
it explicitly for what it installs.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.upstream import versions


def pinned_release(
    name: str,
    chart: versions.HelmChart,
    namespace: pulumi.Input[str],
    values: Any,
    opts: pulumi.ResourceOptions,
    *,
    timeout: int = 900,
) -> k8s.helm.v3.Release:
    if not 60 <= timeout <= 3600:
        raise ValueError(f"pinned_release timeout: {timeout} is out of range; allowed: 60 to 3600 seconds")
    return k8s.helm.v3.Release(
        name,
        k8s.helm.v3.ReleaseArgs(
            name=chart.chart,
            chart=chart.reference,
            version=chart.version,
            # An OCI chart is addressed by its full reference; only an HTTP repository is an option.
            repository_opts=None if chart.oci else k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
            namespace=namespace,
            create_namespace=False,
            atomic=True,
            timeout=timeout,
            max_history=10,
            values=values,
        ),
        opts=opts,
    )
