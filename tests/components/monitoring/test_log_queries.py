"""The dashboard's Loki log panels: LogQL parsed by Grafana's own grammar
(@grafana/lezer-logql, pinned in tools/logql, `make logql`), with the labels Alloy attaches
(components/log_shipping.py) and the containers a Triton pod has."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components import log_shipping
from tests.components.monitoring._helpers import program_dashboard
from tests.pulumi_kit import Run

LOGQL = Path(__file__).resolve().parents[3] / "tools" / "logql"


def parse_logql(queries: list[str]) -> list[dict[str, Any]]:
    if not (LOGQL / "node_modules" / "@grafana" / "lezer-logql").exists():
        raise AssertionError(
            f"{LOGQL}/node_modules is missing: `make logql` installs the pinned LogQL grammar (make unit does it)"
        )
    proc = subprocess.run(
        ["node", str(LOGQL / "parse.cjs")],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    parsed: list[dict[str, Any]] = json.loads(proc.stdout)
    return parsed


def nodes(tree: list[Any], name: str) -> list[list[Any]]:
    """Every node called `name` in a parse tree."""
    found = [tree] if tree[0] == name else []
    if isinstance(tree[1], list):
        for child in tree[1]:
            found += nodes(child, name)
    return found


def text(tree: list[Any]) -> str:
    return tree[1] if isinstance(tree[1], str) else "".join(text(c) for c in tree[1])


def matchers(tree: list[Any]) -> dict[str, str]:
    """The stream selector's label matchers: label -> `op"value"`."""
    out = {}
    for m in nodes(tree, "Matcher"):
        label, op, value = m[1]
        out[label[1]] = op[1] + json.loads(value[1])
    return out


def interpolate(expr: str, model: str) -> str:
    """Grafana's substitution of the dashboard's `model` variable (All is `.*`)."""
    return expr.replace("$model", model)


def test_the_grammar_rejects_what_loki_rejects() -> None:
    good, unclosed, no_selector = parse_logql(['{namespace="triton"} |= "x"', '{namespace="triton" |= "x"', '|= "x"'])
    assert good["errors"] == []
    assert unclosed["errors"] != []
    assert no_selector["errors"] != []


def test_log_panels_parse_and_select_tritonserver_per_deployment_and_the_agent(prod: Run) -> None:
    board = program_dashboard(prod)
    logs = [p for p in board["panels"] if p["type"] == "logs"]
    assert all(p["datasource"] == {"type": "loki", "uid": "${logs}"} for p in logs)
    (source,) = [v for v in board["templating"]["list"] if v["name"] == "logs"]
    assert source["query"] == "loki"
    (model,) = [v for v in board["templating"]["list"] if v["name"] == "model"]
    assert model["allValue"] == ".*"
    # Alloy's labels (the relabel rules of its pipeline).
    shipped = set(re.findall(r'target_label\s*=\s*"(\w+)"', log_shipping.alloy_config("logging")))
    assert {"namespace", "pod", "container"} <= shipped

    exprs = {p["title"]: p["targets"][0]["expr"] for p in logs}
    queries = [interpolate(e, m) for e in exprs.values() for m in (".*", "resnet50")]
    parsed = parse_logql(queries)
    assert [q["query"] for q in parsed if q["errors"]] == []
    by_query = {q["query"]: q["tree"] for q in parsed}

    selected: dict[str, dict[str, str]] = {}
    for title, expr in exprs.items():
        tree = by_query[interpolate(expr, "resnet50")]
        assert set(matchers(tree)) <= shipped
        # The line filter keeps lines naming the model.
        (line_filter,) = nodes(tree, "LineFilter")
        assert text(line_filter).replace(" ", "") == '|~"resnet50"'
        selected[title] = matchers(tree)

    # The containers the selectors name are the Triton pod's (recorded Deployment).
    (deployment,) = [
        r.inputs
        for r in prod.kubernetes_objects()
        if r.inputs.get("kind") == "Deployment" and r.inputs["metadata"]["name"] == "triton-default"
    ]
    spec = deployment["spec"]["template"]["spec"]
    assert {"tritonserver", "agent", "agent-init"} <= {c["name"] for c in spec["containers"] + spec["initContainers"]}
    assert selected == {
        "Triton logs: deployment default": {
            "namespace": "=triton",
            "container": "=tritonserver",
            "pod": "=~triton-default-.*",
        },
        "Triton logs: deployment large": {
            "namespace": "=triton",
            "container": "=tritonserver",
            "pod": "=~triton-large-.*",
        },
        "Agent logs (model sync, every deployment)": {"namespace": "=triton", "container": "=~agent-init|agent"},
    }


@pytest.mark.parametrize("pod", ["triton-default-7c9d8-abcde", "triton-large-5f6d7-zyxwv"])
def test_the_pod_patterns_select_only_their_deployments_pods(prod: Run, pod: str) -> None:
    board = program_dashboard(prod)
    hits = []
    for p in board["panels"]:
        if p["type"] == "logs":
            m = re.search(r'pod=~"([^"]+)"', p["targets"][0]["expr"])
            if m and re.fullmatch(m.group(1), pod):
                hits.append(p["title"])
    assert hits == [f"Triton logs: deployment {pod.split('-')[1]}"]


def test_client_panels_count_the_proxies_access_log_by_client(prod: Run) -> None:
    """Requests, errors and refusals per client: metric queries over the Envoy proxies' JSON access
    log, whose fields (`client`, `response_code`, `grpc_status`) the recorded EnvoyProxy writes."""
    board = program_dashboard(prod)
    clients = [
        p for p in board["panels"] if p.get("datasource", {}).get("type") == "loki" and p["type"] == "timeseries"
    ]
    assert [p["title"] for p in clients] == [
        "Requests / s by client",
        "Errors / s by client (5xx, gRPC not OK)",
        "Refused by the ingress / s by client and code",
    ]
    exprs = [p["targets"][0]["expr"].replace("$__auto", "1m") for p in clients]
    parsed = parse_logql(exprs)
    assert [q["query"] for q in parsed if q["errors"]] == []
    (proxy,) = [r.inputs for r in prod.kubernetes_objects() if r.inputs.get("kind") == "EnvoyProxy"]
    (setting,) = proxy["spec"]["telemetry"]["accessLog"]["settings"]
    logged = set(setting["format"]["json"])
    shipped = set(re.findall(r'target_label\s*=\s*"(\w+)"', log_shipping.alloy_config("logging")))
    for q in parsed:
        # The stream selector: the label filters after `| json` (`__error__`, the codes) are not in it.
        (stream,) = nodes(q["tree"], "Selector")
        selector = matchers(stream)
        assert selector == {"namespace": "=ingress", "container": "=envoy"}
        assert set(selector) <= shipped
        grouped = re.search(r"sum by \(([^)]*)\)", q["query"]).group(1)  # type: ignore[union-attr]
        assert "client" in grouped.split(", ")
        assert set(grouped.split(", ")) <= logged
        fields = set(re.findall(r"\| (\w+) (?:>=|>|=~)", q["query"]))
        assert fields <= logged
    assert set(re.findall(r"\b(response_code|grpc_status) >", exprs[1])) == {"response_code", "grpc_status"}
