"""The S3 model-repository layout: one bucket per environment. Dependency-free, so the
Pulumi program (IAM policies) and model_sync share the same prefixes.

    repository/<model>/config.pbtxt      the pin: version_policy specific {versions: [N]}.
                                          Rewriting it is the single commit point.
    repository/<model>/<N>/...            immutable version files (never overwritten)
    manifests/<model>/<N>.json            per-version manifest: sha256 + size of every file,
                                          source, exporter/framework versions, who, when
    status/<deployment>/<replica>.json    what each serving replica's agent has loaded / failed
    audit/...                             verification, promotion and rollback records

Serving pods read `repository/` and `manifests/` and write only `status/`; the CI
publisher writes `repository/`, `manifests/`, `audit/` in staging; the promoter reads
staging and writes `repository/`, `manifests/`, `audit/` in prod.
"""

from __future__ import annotations

REPOSITORY_PREFIX = "repository/"
MANIFESTS_PREFIX = "manifests/"
STATUS_PREFIX = "status/"
AUDIT_PREFIX = "audit/"

# What each identity may touch (used by components/identities and model_sync alike).
SERVING_READ_PREFIXES = (REPOSITORY_PREFIX, MANIFESTS_PREFIX)
SERVING_WRITE_PREFIXES = (STATUS_PREFIX,)
PUBLISHER_WRITE_PREFIXES = (REPOSITORY_PREFIX, MANIFESTS_PREFIX, AUDIT_PREFIX)
