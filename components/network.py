"""The VPC the platform runs in.

Per availability zone: one private subnet (nodes and pods: the VPC CNI gives every pod a
VPC address, so these are large) and one public subnet (internet-facing load balancers
and the NAT gateways only; nothing is launched there with a public IP). Private subnets
route the internet through a NAT gateway (one per AZ in `perAz` mode, one shared in
`single` mode) and S3 through a gateway endpoint on every private route table, so model
downloads never pay NAT data processing and keep working if a NAT gateway fails.

Subnets carry the tags the AWS Load Balancer Controller and EKS use for discovery:
`kubernetes.io/role/elb` (public), `kubernetes.io/role/internal-elb` (private) and
`kubernetes.io/cluster/<cluster name>: shared`.
ref: https://docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html#network-load-balancer-subnet-tagging

The VPC's default security group is taken over with no rules, so nothing attached to it
by mistake can talk to anything (CIS AWS Foundations 5.4).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.stack_config.vocabulary import NAT_MODES

# Every tag key the subnets carry for load-balancer discovery.
ELB_ROLE_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_ROLE_TAG = "kubernetes.io/role/internal-elb"


def cluster_tag(cluster_name: str) -> str:
    return f"kubernetes.io/cluster/{cluster_name}"


@dataclass(frozen=True)
class NetworkArgs:
    """Inputs of `Network`.

    cluster_name: the EKS cluster the subnets are tagged for (required; DNS label).
    region: the AWS region of the stack (names the S3 endpoint service; required).
    vpc_cidr: IPv4 CIDR of the VPC, private, prefix /16 to /20 (required).
    availability_zones: the zones to span, 2 to 6 distinct names (required; the stack model picks
        the first N of `stack_config.zones.eks_zone_names()`).
    nat_gateway_mode: `perAz` (default; one NAT per AZ, no cross-AZ dependency) or `single`.
    tags: extra tags on every resource (default none).
    """

    cluster_name: str
    region: str
    vpc_cidr: str
    availability_zones: Sequence[str]
    nat_gateway_mode: str = "perAz"
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.cluster_name or len(self.cluster_name) > 100:
            raise ValueError(
                f"NetworkArgs.cluster_name: {self.cluster_name!r} is not valid; allowed: a non-empty name of at most "
                "100 characters"
            )
        if not re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-[0-9]", self.region):
            raise ValueError(
                f"NetworkArgs.region: {self.region!r} is not an AWS region; allowed: a region name such as us-east-1"
            )
        try:
            net = ipaddress.IPv4Network(self.vpc_cidr, strict=True)
        except ValueError:
            raise ValueError(
                f"NetworkArgs.vpc_cidr: {self.vpc_cidr!r} is not an IPv4 CIDR; allowed: a private /16 to /20 network "
                "such as 10.0.0.0/16"
            ) from None
        if not net.is_private or not 16 <= net.prefixlen <= 20:
            raise ValueError(
                f"NetworkArgs.vpc_cidr: {self.vpc_cidr!r} is not a private /16-/20 range; allowed: a private /16 to "
                "/20 network such as 10.0.0.0/16"
            )
        if not 2 <= len(set(self.availability_zones)) == len(self.availability_zones) <= 6:
            raise ValueError(
                f"NetworkArgs.availability_zones: {list(self.availability_zones)!r} is not 2 to 6 distinct zones; "
                "allowed: 2 to 6 distinct zone names"
            )
        if self.nat_gateway_mode not in NAT_MODES:
            raise ValueError(
                f"NetworkArgs.nat_gateway_mode: {self.nat_gateway_mode!r} is not allowed; allowed: "
                f"{' | '.join(NAT_MODES)}"
            )


def _build_subnet_cidrs(vpc_cidr: str, zone_count: int) -> tuple[list[str], list[str]]:
    """(private, public) subnet CIDRs, one each per zone, non-overlapping, inside the VPC.

    The VPC is cut in eight: the first six eighths are the private subnets (a /19 each in a
    /16: 8,187 pod and node addresses per AZ), the last eighth is cut in eight again for the
    public subnets (a /22 each in a /16), which only hold load balancers and NAT gateways.
    """
    vpc = ipaddress.IPv4Network(vpc_cidr)
    eighths = list(vpc.subnets(prefixlen_diff=3))
    private = [str(n) for n in eighths[:zone_count]]
    public = [str(n) for n in list(eighths[7].subnets(prefixlen_diff=3))[:zone_count]]
    return private, public


def _build_subnet_tags(cluster_name: str, public: bool, zone: str, base: Mapping[str, str]) -> dict[str, str]:
    role_tag = ELB_ROLE_TAG if public else INTERNAL_ELB_ROLE_TAG
    tier = "public" if public else "private"
    return {
        **base,
        "Name": f"{cluster_name}-{tier}-{zone}",
        "tier": tier,
        role_tag: "1",
        cluster_tag(cluster_name): "shared",
    }


class Network(pulumi.ComponentResource):
    """VPC, subnets, NAT, routes and the S3 gateway endpoint (see module docstring)."""

    vpc_id: pulumi.Output[str]
    availability_zones: list[str]
    # The private subnets' CIDRs, one per zone (known before any resource: `_build_subnet_cidrs`).
    # The EKS control plane's network interfaces live in these subnets (the cluster is given
    # `private_subnet_ids`), so the API server's calls into pods come from these addresses.
    private_subnet_cidrs: list[str]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]
    private_route_table_ids: pulumi.Output[list[str]]
    nat_gateway_ids: pulumi.Output[list[str]]
    s3_endpoint_id: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:network:Network", name, None, opts)
        self.availability_zones = list(args.availability_zones)
        private_cidrs, public_cidrs = _build_subnet_cidrs(args.vpc_cidr, len(self.availability_zones))
        self.private_subnet_cidrs = list(private_cidrs)

        vpc, igw, public_rt = self._vpc(name, args)
        public_subnets = self._subnets(name, args, vpc, "public", public_cidrs, public_rt)
        private_subnets = self._subnets(name, args, vpc, "private", private_cidrs, None)
        nats = self._nat_gateways(name, args, public_subnets, igw)
        private_rts = self._private_routes(name, args, vpc, private_subnets, nats)
        s3_endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3-endpoint",
            vpc_id=vpc.id,
            vpc_endpoint_type="Gateway",
            service_name=f"com.amazonaws.{args.region}.s3",
            route_table_ids=[rt.id for rt in private_rts.values()],
            tags={**args.tags, "Name": f"{args.cluster_name}-s3"},
            opts=pulumi.ResourceOptions(parent=self),
        )

        self.vpc_id = vpc.id
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets.values()])
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets.values()])
        self.private_route_table_ids = pulumi.Output.all(*[rt.id for rt in private_rts.values()])
        self.nat_gateway_ids = pulumi.Output.all(*[n.id for n in nats.values()])
        self.s3_endpoint_id = s3_endpoint.id
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "availabilityZones": self.availability_zones,
                "privateSubnetCidrs": self.private_subnet_cidrs,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
                "privateRouteTableIds": self.private_route_table_ids,
                "natGatewayIds": self.nat_gateway_ids,
                "s3EndpointId": self.s3_endpoint_id,
            }
        )

    def _vpc(self, name: str, args: NetworkArgs) -> tuple[aws.ec2.Vpc, aws.ec2.InternetGateway, aws.ec2.RouteTable]:
        """The VPC, its default security group emptied, its internet gateway and the public route table."""
        child = pulumi.ResourceOptions(parent=self)
        base_tags = dict(args.tags)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            # Both are required for EKS private endpoint resolution and the S3 endpoint.
            # ref: https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags={**base_tags, "Name": args.cluster_name},
            opts=child,
        )
        aws.ec2.DefaultSecurityGroup(
            f"{name}-default-sg",
            vpc_id=vpc.id,
            ingress=[],
            egress=[],
            tags={**base_tags, "Name": f"{args.cluster_name}-default-deny"},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags={**base_tags, "Name": args.cluster_name}, opts=child
        )
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={**base_tags, "Name": f"{args.cluster_name}-public"},
            opts=child,
        )
        return vpc, igw, public_rt

    def _subnets(
        self,
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        tier: str,
        cidrs: list[str],
        route_table: aws.ec2.RouteTable | None,
    ) -> dict[str, aws.ec2.Subnet]:
        """zone -> the `tier` (public | private) subnet in it; a public one is associated with `route_table`."""
        child = pulumi.ResourceOptions(parent=self)
        subnets: dict[str, aws.ec2.Subnet] = {}
        for zone, cidr in zip(self.availability_zones, cidrs, strict=True):
            subnets[zone] = aws.ec2.Subnet(
                f"{name}-{tier}-{zone}",
                vpc_id=vpc.id,
                cidr_block=cidr,
                availability_zone=zone,
                # Public subnets hold only NAT gateways (own EIPs) and load balancers.
                map_public_ip_on_launch=False,
                tags=_build_subnet_tags(args.cluster_name, tier == "public", zone, dict(args.tags)),
                opts=child,
            )
            if route_table is not None:
                aws.ec2.RouteTableAssociation(
                    f"{name}-{tier}-{zone}-rta", subnet_id=subnets[zone].id, route_table_id=route_table.id, opts=child
                )
        return subnets

    def _nat_gateways(
        self,
        name: str,
        args: NetworkArgs,
        public_subnets: dict[str, aws.ec2.Subnet],
        igw: aws.ec2.InternetGateway,
    ) -> dict[str, aws.ec2.NatGateway]:
        """zone -> its NAT gateway: one per zone (`perAz`) or one in the first zone (`single`)."""
        nat_zones = self.availability_zones if args.nat_gateway_mode == "perAz" else self.availability_zones[:1]
        nats: dict[str, aws.ec2.NatGateway] = {}
        for zone in nat_zones:
            eip = aws.ec2.Eip(
                f"{name}-nat-{zone}-eip",
                domain="vpc",
                tags={**args.tags, "Name": f"{args.cluster_name}-nat-{zone}"},
                opts=pulumi.ResourceOptions(parent=self),
            )
            nats[zone] = aws.ec2.NatGateway(
                f"{name}-nat-{zone}",
                allocation_id=eip.id,
                subnet_id=public_subnets[zone].id,
                tags={**args.tags, "Name": f"{args.cluster_name}-{zone}"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )
        return nats

    def _private_routes(
        self,
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        private_subnets: dict[str, aws.ec2.Subnet],
        nats: dict[str, aws.ec2.NatGateway],
    ) -> dict[str, aws.ec2.RouteTable]:
        """zone -> the private route table, out through the zone's NAT gateway (else the single one)."""
        child = pulumi.ResourceOptions(parent=self)
        private_rts: dict[str, aws.ec2.RouteTable] = {}
        for zone in self.availability_zones:
            nat = nats.get(zone, next(iter(nats.values())))
            private_rts[zone] = aws.ec2.RouteTable(
                f"{name}-private-{zone}-rt",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags={**args.tags, "Name": f"{args.cluster_name}-private-{zone}"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}-rta",
                subnet_id=private_subnets[zone].id,
                route_table_id=private_rts[zone].id,
                opts=child,
            )
        return private_rts
