"""Kubernetes helpers shared by the components: the names that must agree (`naming`), the NetworkPolicy
specs (`network_policies`) and one way to install a pinned Helm chart (`helm`)."""
