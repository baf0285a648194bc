"""The contract between model_sync and components/: the bucket layout (`layout`), version compatibility
(`compat`), the gray release's policy (`canary_policy`), the ingress's deployment header (`ingress`), the
DNS-label rules of names (`dns_label`) and the names of the stack outputs model_sync reads
(`stack_outputs`). The only model_sync code components/ and __main__.py import (tests/test_contract.py
holds it); it imports nothing from the rest of model_sync."""
