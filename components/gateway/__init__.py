"""The public ingress's parts by concern (components/ingress.py wires them): args, the public routes,
who may call them, traffic limits, the Envoy proxies, certificates and the network policies."""
