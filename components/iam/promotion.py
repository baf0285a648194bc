"""What cross-account promotion reads in the source (staging) bucket.

Granted once by the source bucket's policy and its KMS key's policy (components/model_repository.py)
and asked for by the prod promoter's role (components/identities.py), from this one list.
"""

from __future__ import annotations

from model_sync.contract import layout

# What a promoter must read in the source (staging) bucket: the versions and their
# manifests, the replicas' status and the verification records.
PROMOTION_SOURCE_READ_PREFIXES = (
    layout.REPOSITORY_PREFIX,
    layout.MANIFESTS_PREFIX,
    layout.STATUS_PREFIX,
    layout.AUDIT_PREFIX,
)
