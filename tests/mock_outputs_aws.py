"""Mock outputs for the AWS resource types and invokes of the AWS foundation components.

Shaped like what the AWS provider returns (ARN formats, ID prefixes, EKS endpoint and
certificate), so policies and the kubeconfig built from them look like the real thing.
Every function returns only provider-computed outputs; the kit copies inputs into state.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

from tests.pulumi_kit import ACCOUNT, mock_invoke, mock_outputs

REGION = "us-east-1"

# us-east-1 as one account sees it: name -> zone id. use1-az3 does not support EKS.
# ref: https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html
ZONES = {
    "us-east-1a": "use1-az1",
    "us-east-1b": "use1-az2",
    "us-east-1c": "use1-az4",
    "us-east-1d": "use1-az6",
    "us-east-1e": "use1-az3",
    "us-east-1f": "use1-az5",
}


def _hex(name: str, n: int) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:n]


def _uuid(name: str) -> str:
    return str(uuid.UUID(hashlib.md5(name.encode()).hexdigest()))  # noqa: S324  (stable fake id, not security)


def _arn(service: str, resource: str, region: str = REGION) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT}:{resource}"


@mock_invoke("aws:index/getAvailabilityZones:getAvailabilityZones")
def _zones(args: dict[str, Any]) -> dict[str, Any]:
    excluded = set(args.get("excludeZoneIds") or []) | set(args.get("excludeNames") or [])
    zones = {n: z for n, z in ZONES.items() if n not in excluded and z not in excluded}
    return {
        "id": REGION,
        "names": list(zones),
        "zoneIds": list(zones.values()),
        "groupNames": [REGION] * len(zones),
        "state": args.get("state"),
    }


# ---- EC2 / VPC -------------------------------------------------------------------------


@mock_outputs("aws:ec2/vpc:Vpc")
def _vpc(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    vid = f"vpc-{_hex(name, 17)}"
    return {
        "id": vid,
        "arn": _arn("ec2", f"vpc/{vid}"),
        "defaultSecurityGroupId": f"sg-{_hex(name + 'sg', 17)}",
        "mainRouteTableId": f"rtb-{_hex(name + 'rt', 17)}",
        "ownerId": ACCOUNT,
    }


@mock_outputs("aws:ec2/subnet:Subnet")
def _subnet(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    sid = f"subnet-{_hex(name, 17)}"
    return {
        "id": sid,
        "arn": _arn("ec2", f"subnet/{sid}"),
        "availabilityZoneId": ZONES.get(inputs.get("availabilityZone", ""), ""),
    }


@mock_outputs("aws:ec2/internetGateway:InternetGateway")
def _igw(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    gid = f"igw-{_hex(name, 17)}"
    return {"id": gid, "arn": _arn("ec2", f"internet-gateway/{gid}")}


@mock_outputs("aws:ec2/eip:Eip")
def _eip(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    aid = f"eipalloc-{_hex(name, 17)}"
    return {"id": aid, "allocationId": aid, "publicIp": f"203.0.113.{int(_hex(name, 2), 16) % 250 + 1}"}


@mock_outputs("aws:ec2/natGateway:NatGateway")
def _nat(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"nat-{_hex(name, 17)}", "publicIp": "203.0.113.10"}


@mock_outputs("aws:ec2/routeTable:RouteTable")
def _route_table(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    rid = f"rtb-{_hex(name, 17)}"
    return {"id": rid, "arn": _arn("ec2", f"route-table/{rid}")}


@mock_outputs("aws:ec2/routeTableAssociation:RouteTableAssociation")
def _rta(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"rtbassoc-{_hex(name, 17)}"}


@mock_outputs("aws:ec2/vpcEndpoint:VpcEndpoint")
def _vpce(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    vid = f"vpce-{_hex(name, 17)}"
    return {"id": vid, "arn": _arn("ec2", f"vpc-endpoint/{vid}"), "prefixListId": f"pl-{_hex(name, 8)}"}


@mock_outputs("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
def _default_sg(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    gid = f"sg-{_hex(name, 17)}"
    return {"id": gid, "arn": _arn("ec2", f"security-group/{gid}")}


@mock_outputs("aws:ec2/launchTemplate:LaunchTemplate")
def _launch_template(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    lid = f"lt-{_hex(name, 17)}"
    return {
        "id": lid,
        "arn": _arn("ec2", f"launch-template/{lid}"),
        "latestVersion": 1,
        "defaultVersion": 1,
        "name": f"{inputs.get('namePrefix', '')}{_hex(name, 26)}",
    }


# ---- IAM / KMS / CloudWatch ------------------------------------------------------------


@mock_outputs("aws:iam/role:Role")
def _role(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    role_name = inputs.get("name") or f"{inputs.get('namePrefix', name + '-')}{_hex(name, 26)}"
    return {
        "name": role_name,
        "arn": f"arn:aws:iam::{ACCOUNT}:role/{role_name}",
        "id": role_name,
        "uniqueId": f"AROA{_hex(name, 17).upper()}",
        "createDate": "2026-11-30T00:00:00Z",
    }


@mock_outputs("aws:iam/rolePolicy:RolePolicy", "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
def _role_policy(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"{inputs.get('role', 'role')}:{name}"}


@mock_outputs("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
def _oidc(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    host = str(inputs.get("url", "")).removeprefix("https://")
    arn = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{host}"
    return {"id": arn, "arn": arn, "thumbprintLists": ["6938fd4d98bab03faadb97b34396831e3780aea1"]}


@mock_outputs("aws:ecr/repository:Repository")
def _ecr_repository(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    repo = inputs.get("name", name)
    return {
        "id": repo,
        "arn": f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/{repo}",
        "registryId": ACCOUNT,
        "repositoryUrl": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{repo}",
    }


@mock_outputs("aws:kms/key:Key")
def _kms_key(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    key_id = _uuid(name)
    return {"id": key_id, "keyId": key_id, "arn": _arn("kms", f"key/{key_id}")}


@mock_outputs("aws:kms/alias:Alias")
def _kms_alias(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "arn": _arn("kms", str(inputs.get("name", f"alias/{name}"))),
        "targetKeyArn": _arn("kms", f"key/{inputs.get('targetKeyId', '')}"),
    }


@mock_outputs("aws:cloudwatch/logGroup:LogGroup")
def _log_group(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    group = inputs.get("name") or name
    return {"id": group, "name": group, "arn": _arn("logs", f"log-group:{group}")}


# ---- EKS -------------------------------------------------------------------------------


@mock_outputs("aws:eks/cluster:Cluster")
def _cluster(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    cluster = inputs.get("name") or name
    vpc = dict(inputs.get("vpcConfig") or {})
    vpc.update(
        {"clusterSecurityGroupId": f"sg-{_hex(cluster + 'cluster', 17)}", "vpcId": f"vpc-{_hex('network-vpc', 17)}"}
    )
    ca = base64.b64encode(
        b"-----BEGIN CERTIFICATE-----\nMOCK " + cluster.encode() + b"\n-----END CERTIFICATE-----\n"
    ).decode()
    oidc_id = _hex(cluster, 32).upper()
    return {
        "name": cluster,
        "arn": _arn("eks", f"cluster/{cluster}"),
        "id": cluster,
        "status": "ACTIVE",
        "endpoint": f"https://{oidc_id}.gr7.{REGION}.eks.amazonaws.com",
        "certificateAuthority": {"data": ca},
        "vpcConfig": vpc,
        "platformVersion": "eks.9",
        "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{REGION}.amazonaws.com/id/{oidc_id}"}]}],
    }


@mock_outputs("aws:eks/accessEntry:AccessEntry")
def _access_entry(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "accessEntryArn": _arn("eks", f"access-entry/{inputs.get('clusterName')}/role/{ACCOUNT}/{name}/{_uuid(name)}"),
        "kubernetesGroups": [],
        "userName": str(inputs.get("principalArn", "")),
    }


@mock_outputs("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
def _access_policy(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"associatedAt": "2026-11-30T00:00:00Z", "modifiedAt": "2026-11-30T00:00:00Z"}


@mock_outputs("aws:eks/addon:Addon")
def _addon(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"arn": _arn("eks", f"addon/{inputs.get('clusterName')}/{inputs.get('addonName')}/{_uuid(name)}")}


@mock_outputs("aws:eks/nodeGroup:NodeGroup")
def _node_group(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    group = inputs.get("nodeGroupName") or f"{inputs.get('nodeGroupNamePrefix', '')}{_hex(name, 26)}"
    return {
        "nodeGroupName": group,
        "arn": _arn("eks", f"nodegroup/{inputs.get('clusterName')}/{group}/{_uuid(name)}"),
        "status": "ACTIVE",
        "releaseVersion": "1.33.5-20261120",
        "resources": [
            {"autoscalingGroups": [{"name": f"eks-{group}-{_uuid(name)}"}], "remoteAccessSecurityGroupId": ""}
        ],
    }


@mock_outputs("aws:eks/podIdentityAssociation:PodIdentityAssociation")
def _pod_identity(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    aid = f"a-{_hex(name, 17)}"
    return {
        "associationId": aid,
        "associationArn": _arn("eks", f"podidentityassociation/{inputs.get('clusterName')}/{aid}"),
    }


# ---- S3 (the Bucket itself is mocked in tests/mock_outputs.py) -------------------------


@mock_outputs(
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
    "aws:s3/bucketVersioning:BucketVersioning",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketPolicy:BucketPolicy",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
)
def _bucket_config(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"id": str(inputs.get("bucket", name))}
