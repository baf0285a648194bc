"""The DNS-label rules names follow, each written once.

`DNS_LABEL` is the platform's own names: a Triton deployment (the stack's `tritonDeployments`
keys, model-sync.yaml's `tritonGpus`), a node group, an ingress client. It starts with a letter
and is at most 32 characters, so the objects named after it (`triton-<deployment>`, the node
group's IAM role prefix) stay within Kubernetes' and IAM's limits. The stack config, the
components' Args and model_sync's environments check against it.

`RFC1123_LABEL` is the wider rule Kubernetes itself holds a namespace or a ServiceAccount to
(RFC 1123: up to 63 characters, may start with a digit).
ref: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names
"""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")
DNS_LABEL_RULE = "a DNS label: lowercase letters, digits and '-', starting with a letter, at most 32 characters"
RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
