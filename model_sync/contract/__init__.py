"""The contract between model_sync and components/: the bucket layout (`layout`), version compatibility
(`compat`), the gray release's policy (`canary_policy`), the ingress's deployment header (`ingress`) and the
DNS-label rules of names (`dns_label`). The only model_sync code components/ imports
(tests/test_contract.py holds it); it imports nothing from the rest of model_sync."""
