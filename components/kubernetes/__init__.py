"""Kubernetes helpers shared by the components: the names that must agree (`naming`), what others
must know of a Triton server pod (`triton_server`: ports, admin header, container names, the scaling metric), the
NetworkPolicy specs (`network_policies`), the platform's namespace (`serving_namespace`) and one way
to install a pinned Helm chart (`helm`)."""
