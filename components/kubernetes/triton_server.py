"""What other components must know of a Triton server pod: its ports, the header its admin
protocols answer to, its containers' names and the metric its replicas are scaled on.

Defined once so the Deployment that runs tritonserver (components/triton_deployment.py), the
ingress that routes to it (components/gateway/) and the monitoring that scrapes and scales it
(components/monitoring/) can never drift apart.
"""

from __future__ import annotations

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002
# The agent sidecar's own /metrics (model_sync agent --metrics-port), scraped through the PodMonitor.
AGENT_METRICS_PORT = 8003
AGENT_METRICS_PORT_NAME = "agent-metrics"

# The header Triton's restricted (admin) protocols answer to.
ADMIN_HEADER = "admin-key"
# On gRPC Triton reads that header as metadata `triton-grpc-protocol-<header>` (tritonserver
# 2.51 refuses a restricted RPC with "expecting header 'triton-grpc-protocol-admin-key'").
GRPC_ADMIN_HEADER = f"triton-grpc-protocol-{ADMIN_HEADER}"

# The containers of a Triton pod, which the log panels and the alerts name: tritonserver, the agent's
# first sync and the agent as a native sidecar (an init container with restartPolicy Always).
TRITON_CONTAINER = "tritonserver"
AGENT_INIT_CONTAINER = "agent-init"
AGENT_SIDECAR = "agent"

# The custom metric prometheus-adapter serves (components/monitoring/queries.py defines the rule)
# and the HorizontalPodAutoscaler of each Triton deployment scales on.
QUEUE_TIME_METRIC = "triton_queue_time_per_request_us"
