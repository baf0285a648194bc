"""Who reaches Prometheus: the canary analysis through the API server's service proxy (the Role, its
binding, the exported URL) and the NetworkPolicy that admits the proxy from the cluster's subnets only."""

from __future__ import annotations

import json

from components.kubernetes import naming
from components.monitoring.access import PROMETHEUS_PROXY_NAME
from components.monitoring.chart_values import PROMETHEUS_PORT, PROMETHEUS_SERVICE
from tests.components.monitoring._helpers import recorded
from tests.pulumi_kit import Run


def test_canary_analysis_reads_prometheus_through_the_api_server_proxy_only(prod: Run) -> None:
    """The Role grants `get` on exactly the service proxy the exported URL names, to exactly
    the group the CI roles' access entries carry (components/identities.py)."""
    role = recorded(prod, "Role", "prometheus-query")
    assert role["metadata"]["namespace"] == naming.MONITORING_NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["services/proxy"],
            "resourceNames": ["http:kube-prometheus-stack-prometheus:9090"],
            "verbs": ["get"],
        }
    ]
    binding = recorded(prod, "RoleBinding", "prometheus-query")
    assert binding["metadata"]["namespace"] == naming.MONITORING_NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "prometheus-query"}
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "triton-platform-prometheus-query"}
    ]
    assert naming.PROMETHEUS_QUERY_GROUP == "triton-platform-prometheus-query"
    # The URL: the cluster's endpoint + the proxy path whose name segment is the Role's resource name.
    endpoint = prod.one("aws:eks/cluster:Cluster").state["endpoint"]
    url = prod.exports["prometheusUrl"]
    assert url == f"{endpoint}/api/v1/namespaces/monitoring/services/{PROMETHEUS_PROXY_NAME}/proxy"
    assert url.split("/services/")[1].removesuffix("/proxy") == role["rules"][0]["resourceNames"][0]
    assert PROMETHEUS_PROXY_NAME == f"http:{PROMETHEUS_SERVICE}:{PROMETHEUS_PORT}"
    # No other Role or binding names the group or the proxy.
    for r in prod.kubernetes_objects():
        if r.inputs["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
            text = json.dumps(r.inputs)
            if r.inputs["metadata"]["name"] != "prometheus-query":
                assert "services/proxy" not in text
                assert naming.PROMETHEUS_QUERY_GROUP not in text


def test_prometheus_admits_the_api_server_proxy_from_the_cluster_subnets_only(prod: Run) -> None:
    """The API server proxies from the control plane's interfaces in the cluster's subnets (the
    private subnets): those CIDRs, on 9090, and no wider block (not the VPC, not the public subnets)."""
    (policy,) = [
        r.inputs
        for r in prod.kubernetes_objects()
        if r.inputs["kind"] == "NetworkPolicy"
        and r.inputs["metadata"]["namespace"] == "monitoring"
        and r.inputs["metadata"]["name"] == "allow-prometheus"
    ]
    blocks = [
        (peer["ipBlock"], rule["ports"])
        for rule in policy["spec"]["ingress"]
        for peer in rule["from"]
        if "ipBlock" in peer
    ]
    private = sorted(
        r.inputs["cidrBlock"] for r in prod.of_type("aws:ec2/subnet:Subnet") if r.inputs["tags"]["tier"] == "private"
    )
    cluster = prod.one("aws:eks/cluster:Cluster")
    subnet_ids = {r.state["id"]: r for r in prod.of_type("aws:ec2/subnet:Subnet")}
    assert sorted(subnet_ids[i].inputs["cidrBlock"] for i in cluster.inputs["vpcConfig"]["subnetIds"]) == private
    assert len(private) == 3
    assert sorted(b["cidr"] for b, _ in blocks) == private
    assert all("except" not in b for b, _ in blocks)
    assert all(p == [{"port": 9090, "protocol": "TCP"}] for _, p in blocks)  # (mocks record 9090.0 == 9090)
