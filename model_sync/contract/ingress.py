"""What the ingress (components/gateway/routes.py) and model_sync's Triton clients agree on: the
header that selects a Triton deployment on the shared gRPC listener (`verify --deployment` sends it)."""

DEPLOYMENT_HEADER = "x-triton-deployment"
