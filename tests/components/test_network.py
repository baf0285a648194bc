"""Network: VPC, subnets, NAT, S3 gateway endpoint, discovery tags (recorded under the mocks)."""

from __future__ import annotations

import ipaddress

import pytest

from components.network import NetworkArgs, _build_subnet_cidrs
from components.stack_config.zones import EKS_UNSUPPORTED_ZONE_IDS
from tests.components._helpers import assert_children_prefixed, registered_outputs
from tests.pulumi_kit import Run

NETWORK = "triton-platform:network:Network"
EXPECTED = {  # stack -> (AZs, NAT gateways, VPC CIDR, cluster)
    "dev": (2, 1, "10.10.0.0/16", "triton-dev"),
    "staging": (3, 3, "10.20.0.0/16", "triton-staging"),
    "prod": (3, 3, "10.30.0.0/16", "triton-prod"),
}


def _subnets(run: Run, tier: str) -> list:
    return [r for r in run.of_type("aws:ec2/subnet:Subnet") if r.inputs["tags"]["tier"] == tier]


def test_vpc_spans_the_configured_zones(any_stack: Run) -> None:
    zones, _, cidr, _ = EXPECTED[any_stack.stack]
    vpc = any_stack.one("aws:ec2/vpc:Vpc", "network-vpc")
    assert vpc.inputs["cidrBlock"] == cidr
    assert vpc.inputs["enableDnsHostnames"] is True
    assert vpc.inputs["enableDnsSupport"] is True
    private, public = _subnets(any_stack, "private"), _subnets(any_stack, "public")
    assert len(private) == len(public) == zones
    assert {s.inputs["availabilityZone"] for s in private} == {s.inputs["availabilityZone"] for s in public}
    assert len({s.inputs["availabilityZone"] for s in private}) == zones
    # Subnets are keyed by zone name, never by index.
    assert sorted(s.name for s in private) == sorted(f"network-private-{s.inputs['availabilityZone']}" for s in private)
    cidrs = [ipaddress.IPv4Network(s.inputs["cidrBlock"]) for s in private + public]
    assert all(c.subnet_of(ipaddress.IPv4Network(cidr)) for c in cidrs)
    assert not any(a.overlaps(b) for i, a in enumerate(cidrs) for b in cidrs[i + 1 :])
    assert all(s.inputs["mapPublicIpOnLaunch"] is False for s in private + public)


def test_zone_invoke_excludes_eks_unsupported_zones(any_stack: Run) -> None:
    calls = [i for i in any_stack.invokes if i.token == "aws:index/getAvailabilityZones:getAvailabilityZones"]
    assert len(calls) == 1
    assert set(calls[0].args["excludeZoneIds"]) == set(EKS_UNSUPPORTED_ZONE_IDS)
    zones = {s.inputs["availabilityZone"] for s in _subnets(any_stack, "private")}
    assert "us-east-1e" not in zones  # use1-az3 in the mocked account


def test_subnet_discovery_tags(any_stack: Run) -> None:
    cluster = EXPECTED[any_stack.stack][3]
    for s in _subnets(any_stack, "public"):
        assert s.inputs["tags"]["kubernetes.io/role/elb"] == "1"
        assert "kubernetes.io/role/internal-elb" not in s.inputs["tags"]
        assert s.inputs["tags"][f"kubernetes.io/cluster/{cluster}"] == "shared"
    for s in _subnets(any_stack, "private"):
        assert s.inputs["tags"]["kubernetes.io/role/internal-elb"] == "1"
        assert "kubernetes.io/role/elb" not in s.inputs["tags"]
        assert s.inputs["tags"][f"kubernetes.io/cluster/{cluster}"] == "shared"


def test_nat_gateways_per_mode(any_stack: Run) -> None:
    zones, nats, _, _ = EXPECTED[any_stack.stack]
    recorded = any_stack.of_type("aws:ec2/natGateway:NatGateway")
    assert len(recorded) == nats
    assert len(any_stack.of_type("aws:ec2/eip:Eip")) == nats
    public_ids = {s.state["id"] for s in _subnets(any_stack, "public")}
    assert all(n.inputs["subnetId"] in public_ids for n in recorded)
    private_rts = [r for r in any_stack.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name]
    assert len(private_rts) == zones
    used = {rt.inputs["routes"][0]["natGatewayId"] for rt in private_rts}
    assert len(used) == nats
    if any_stack.stack == "prod":  # perAz: each private route table uses the NAT of its own zone
        for rt in private_rts:
            zone = rt.name.removeprefix("network-private-").removesuffix("-rt")
            assert (
                rt.inputs["routes"][0]["natGatewayId"]
                == any_stack.one("aws:ec2/natGateway:NatGateway", f"network-nat-{zone}").state["id"]
            )


def test_public_route_goes_to_the_internet_gateway(any_stack: Run) -> None:
    rt = any_stack.one("aws:ec2/routeTable:RouteTable", "network-public-rt")
    igw = any_stack.one("aws:ec2/internetGateway:InternetGateway", "network-igw")
    assert rt.inputs["routes"] == [{"cidrBlock": "0.0.0.0/0", "gatewayId": igw.state["id"]}]
    assert igw.state["id"].startswith("igw-")
    assocs = [
        a
        for a in any_stack.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
        if a.inputs["routeTableId"] == rt.state["id"]
    ]
    assert len(assocs) == EXPECTED[any_stack.stack][0]


def test_s3_gateway_endpoint_on_every_private_route_table(any_stack: Run) -> None:
    ep = any_stack.one("aws:ec2/vpcEndpoint:VpcEndpoint", "network-s3-endpoint")
    assert ep.inputs["vpcEndpointType"] == "Gateway"
    assert ep.inputs["serviceName"] == "com.amazonaws.us-east-1.s3"
    private_rts = {r.state["id"] for r in any_stack.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name}
    assert set(ep.inputs["routeTableIds"]) == private_rts


def test_default_security_group_has_no_rules(any_stack: Run) -> None:
    sg = any_stack.one("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
    assert sg.inputs.get("ingress", []) == []
    assert sg.inputs.get("egress", []) == []


def test_component_shape(any_stack: Run) -> None:
    comp = any_stack.one(NETWORK, "network")
    assert_children_prefixed(any_stack, comp, min_children=10)
    outputs = registered_outputs(any_stack, comp)
    assert len(outputs["privateSubnetIds"]) == EXPECTED[any_stack.stack][0]
    assert set(outputs) >= {
        "vpcId",
        "privateSubnetIds",
        "publicSubnetIds",
        "natGatewayIds",
        "s3EndpointId",
        "availabilityZones",
        "privateSubnetCidrs",
    }
    # The CIDRs the component states are those of the private subnets it created (the EKS
    # control plane's subnets: the monitoring NetworkPolicy admits the API server from them).
    recorded = sorted(
        r.inputs["cidrBlock"]
        for r in any_stack.of_type("aws:ec2/subnet:Subnet")
        if r.inputs["tags"]["tier"] == "private"
    )
    assert sorted(outputs["privateSubnetCidrs"]) == recorded


# ---- builders -------------------------------------------------------------------------


@pytest.mark.parametrize(("cidr", "count"), [("10.0.0.0/16", 6), ("10.0.0.0/20", 2), ("172.16.0.0/18", 3)])
def test_subnet_cidrs_fit_and_do_not_overlap(cidr: str, count: int) -> None:
    private, public = _build_subnet_cidrs(cidr, count)
    nets = [ipaddress.IPv4Network(c) for c in private + public]
    assert len(private) == len(public) == count
    assert all(n.subnet_of(ipaddress.IPv4Network(cidr)) for n in nets)
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
    assert ipaddress.IPv4Network(private[0]).num_addresses > ipaddress.IPv4Network(public[0]).num_addresses


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"cluster_name": ""}, r"NetworkArgs.cluster_name: '' is not valid"),
        ({"region": "mars-1"}, r"NetworkArgs.region: 'mars-1' is not an AWS region"),
        ({"vpc_cidr": "10.0.0.0/33"}, r"NetworkArgs.vpc_cidr: '10.0.0.0/33' is not an IPv4 CIDR"),
        ({"vpc_cidr": "8.8.0.0/16"}, r"NetworkArgs.vpc_cidr: '8.8.0.0/16' is not a private /16-/20 range"),
        ({"vpc_cidr": "10.0.0.0/24"}, r"NetworkArgs.vpc_cidr: '10.0.0.0/24' is not a private /16-/20 range"),
        (
            {"availability_zones": ["us-east-1a"]},
            r"NetworkArgs.availability_zones: \['us-east-1a'\] is not 2 to 6 distinct zones",
        ),
        (
            {"availability_zones": ["us-east-1a", "us-east-1a"]},
            r"NetworkArgs.availability_zones: .* is not 2 to 6 distinct zones",
        ),
        (
            {"nat_gateway_mode": "none"},
            r"NetworkArgs.nat_gateway_mode: 'none' is not allowed; allowed: single \| perAz",
        ),
    ],
)
def test_args_validation(changes: dict, match: str) -> None:
    base = {
        "cluster_name": "triton-dev",
        "region": "us-east-1",
        "vpc_cidr": "10.0.0.0/16",
        "availability_zones": ["us-east-1a", "us-east-1b"],
    }
    with pytest.raises(ValueError, match=match):
        NetworkArgs(**{**base, **changes})
