"""Metrics, alerts, dashboards and the custom metric the Triton HPAs scale on, one module per concern:

- monitoring: the `Monitoring` component;
- args: its Args (`MonitoringArgs`, `MonitoredDeployment`), which the other modules read;
- chart_values: the Helm values of kube-prometheus-stack and prometheus-adapter, Alertmanager's configuration;
- queries: the PromQL and LogQL (the HPA's queue-time metric and its adapter rule, the failure ratio,
  the canary vs stable comparison, the log panels);
- dashboard: the Grafana dashboard `Triton inference + GPU`;
- alerts: the PrometheusRule's alert groups;
- access: the namespace's NetworkPolicies and the canary analysis' read of Prometheus through the
  API server's service proxy.

Importers name the module (`from components.monitoring.monitoring import Monitoring`): nothing is
re-exported here. The design: docs/serving-plane.md ("Observability").
"""
