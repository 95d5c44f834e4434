"""Permissions of the AWS Load Balancer Controller that the HyperPod inference add-on runs (one ALB per model).

Written for this project from the controller's documented needs (ELBv2, its security groups, ACM/WAF/Shield
look-ups the controller performs on every ALB it reconciles), scoped to this account and region, and, like the
controller's reference policy, limited to resources carrying its ownership tag for every change and deletion of
load balancers, target groups and security groups. Read-only EC2/ELB/ACM/WAF calls support no resource-level
permissions. The controller may create internal load balancers only (``elasticloadbalancing:Scheme``), whatever
scheme an Ingress asks for. Every action of the controller's reference policy at the release the add-on bundles
(v2.13.2, docs/install/iam_policy.json) is granted: tests/common/test_iam_reference.py checks it against a
vendored copy.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

_DESCRIBE = [
    "ec2:DescribeAccountAttributes",
    "ec2:DescribeAddresses",
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeInternetGateways",
    "ec2:DescribeVpcs",
    "ec2:DescribeVpcPeeringConnections",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeInstances",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeTags",
    "ec2:DescribeRouteTables",
    "ec2:DescribeCoipPools",
    "ec2:GetCoipPoolUsage",
    "ec2:GetSecurityGroupsForVpc",
    "ec2:DescribeIpamPools",
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DescribeLoadBalancerAttributes",
    "elasticloadbalancing:DescribeListeners",
    "elasticloadbalancing:DescribeListenerAttributes",
    "elasticloadbalancing:DescribeListenerCertificates",
    "elasticloadbalancing:DescribeSSLPolicies",
    "elasticloadbalancing:DescribeRules",
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetGroupAttributes",
    "elasticloadbalancing:DescribeTargetHealth",
    "elasticloadbalancing:DescribeTags",
    "elasticloadbalancing:DescribeTrustStores",
    "elasticloadbalancing:DescribeCapacityReservation",
    "acm:ListCertificates",
    "acm:DescribeCertificate",
    "iam:ListServerCertificates",
    "iam:GetServerCertificate",
    "cognito-idp:DescribeUserPoolClient",
    "wafv2:GetWebACL",
    "wafv2:GetWebACLForResource",
    "waf-regional:GetWebACL",
    "waf-regional:GetWebACLForResource",
    "shield:GetSubscriptionState",
    "shield:DescribeProtection",
]

# The controller tags everything it creates with this key; changes and deletions are limited to such resources,
# so the role cannot delete or reopen load balancers and security groups that other software owns.
CLUSTER_TAG = "elbv2.k8s.aws/cluster"
_TAGGED_AT_CREATION = {"Null": {f"aws:RequestTag/{CLUSTER_TAG}": "false"}}
_ALREADY_TAGGED = {"Null": {f"aws:ResourceTag/{CLUSTER_TAG}": "false"}}
# Tag changes on the controller's own resources, never removing or forging the ownership tag itself.
_RETAGGED = {"Null": {f"aws:RequestTag/{CLUSTER_TAG}": "true", f"aws:ResourceTag/{CLUSTER_TAG}": "false"}}

# Internal load balancers only: the ELB condition key elasticloadbalancing:Scheme (AWS What's New, 2023-11-13,
# "AWS Elastic Load Balancing IAM condition keys"; Service Authorization Reference, list_awselasticloadbalancing)
# carries the requested scheme. The controller always sends one (aws-load-balancer-controller v2.13.2,
# pkg/deploy/elbv2/load_balancer_manager.go:331), and a request without it, which the ELB API would make
# internet-facing, does not match StringEquals either: whatever an Ingress asks, no internet-facing load balancer.
_INTERNAL_ONLY = {"StringEquals": {"elasticloadbalancing:Scheme": "internal"}}

_CREATE_TAGGED_LOAD_BALANCERS = [
    "elasticloadbalancing:CreateLoadBalancer",
    "elasticloadbalancing:CreateTargetGroup",
]

# Listener and rule changes are not tag-conditioned, as in the controller's reference policy.
_MANAGE_LISTENERS = [
    "elasticloadbalancing:CreateListener",
    "elasticloadbalancing:DeleteListener",
    "elasticloadbalancing:CreateRule",
    "elasticloadbalancing:DeleteRule",
    "elasticloadbalancing:ModifyListener",
    "elasticloadbalancing:ModifyRule",
    "elasticloadbalancing:AddListenerCertificates",
    "elasticloadbalancing:RemoveListenerCertificates",
    "elasticloadbalancing:SetRulePriorities",
]

_MANAGE_OWN_LOAD_BALANCERS = [
    "elasticloadbalancing:ModifyLoadBalancerAttributes",
    "elasticloadbalancing:SetIpAddressType",
    "elasticloadbalancing:SetSecurityGroups",
    "elasticloadbalancing:SetSubnets",
    "elasticloadbalancing:SetWebAcl",
    "elasticloadbalancing:DeleteLoadBalancer",
    "elasticloadbalancing:ModifyTargetGroup",
    "elasticloadbalancing:ModifyTargetGroupAttributes",
    "elasticloadbalancing:DeleteTargetGroup",
    "elasticloadbalancing:ModifyCapacityReservation",
    "elasticloadbalancing:ModifyIpPools",
]

# What an Ingress's WAF and Shield annotations ask of the controller: it associates the web ACL with the load
# balancer and adds or removes its Shield Advanced protection. The reference policy grants these on "*".
_PROTECTION = [
    "wafv2:AssociateWebACL",
    "wafv2:DisassociateWebACL",
    "waf-regional:AssociateWebACL",
    "waf-regional:DisassociateWebACL",
    "shield:CreateProtection",
    "shield:DeleteProtection",
]

_TARGETS = ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"]

# Ingress rules are also added to the nodes' security groups (backend traffic), which the controller does not
# own: the upstream controller policy grants these two without a tag condition for the same reason.
_INGRESS_RULES = ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"]


def load_balancer_controller_statements() -> list[iam.PolicyStatement]:
    elb = f"arn:{Aws.PARTITION}:elasticloadbalancing:{Aws.REGION}:{Aws.ACCOUNT_ID}"
    ec2 = f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}"
    load_balancers = [f"{elb}:loadbalancer/*", f"{elb}:targetgroup/*"]
    listeners = [f"{elb}:listener/*", f"{elb}:listener-rule/*"]
    security_groups = [f"{ec2}:security-group/*"]
    return [
        iam.PolicyStatement(sid="Describe", actions=_DESCRIBE, resources=["*"]),
        iam.PolicyStatement(sid="ProtectLoadBalancers", actions=_PROTECTION, resources=["*"]),
        iam.PolicyStatement(
            sid="ElbServiceLinkedRole",
            actions=["iam:CreateServiceLinkedRole"],
            resources=["*"],
            conditions={"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            sid="CreateTaggedInternalLoadBalancers",
            actions=["elasticloadbalancing:CreateLoadBalancer"],
            resources=[f"{elb}:loadbalancer/*"],
            conditions={**_INTERNAL_ONLY, **_TAGGED_AT_CREATION},
        ),
        iam.PolicyStatement(
            sid="CreateTaggedTargetGroups",
            actions=["elasticloadbalancing:CreateTargetGroup"],
            resources=[f"{elb}:targetgroup/*"],
            conditions=_TAGGED_AT_CREATION,
        ),
        iam.PolicyStatement(
            sid="TagLoadBalancersAtCreation",
            actions=["elasticloadbalancing:AddTags"],
            resources=load_balancers,
            conditions={
                "StringEquals": {"elasticloadbalancing:CreateAction": _CREATE_TAGGED_LOAD_BALANCERS},
                **_TAGGED_AT_CREATION,
            },
        ),
        iam.PolicyStatement(
            sid="RetagOwnLoadBalancers",
            actions=["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            resources=load_balancers,
            conditions=_RETAGGED,
        ),
        iam.PolicyStatement(
            sid="ManageOwnLoadBalancers",
            actions=_MANAGE_OWN_LOAD_BALANCERS,
            resources=load_balancers,
            conditions=_ALREADY_TAGGED,
        ),
        iam.PolicyStatement(
            sid="ManageOwnListenerAttributes",
            # Tag-conditioned like the other changes of the reference policy's ownership statement.
            actions=["elasticloadbalancing:ModifyListenerAttributes"],
            resources=[f"{elb}:listener/*"],
            conditions=_ALREADY_TAGGED,
        ),
        iam.PolicyStatement(sid="ManageTargets", actions=_TARGETS, resources=[f"{elb}:targetgroup/*"]),
        iam.PolicyStatement(
            sid="ManageListeners",
            actions=_MANAGE_LISTENERS,
            # The load balancers too: the controller's reference policy grants these actions on "*".
            resources=[f"{elb}:loadbalancer/*", *listeners],
        ),
        iam.PolicyStatement(
            sid="TagListeners",
            actions=["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            resources=listeners,
        ),
        iam.PolicyStatement(
            sid="CreateSecurityGroups",
            actions=["ec2:CreateSecurityGroup"],
            resources=[*security_groups, f"{ec2}:vpc/*"],
        ),
        iam.PolicyStatement(
            sid="TagSecurityGroupsAtCreation",
            actions=["ec2:CreateTags"],
            resources=security_groups,
            conditions={"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"}, **_TAGGED_AT_CREATION},
        ),
        iam.PolicyStatement(
            sid="RetagOwnSecurityGroups",
            actions=["ec2:CreateTags", "ec2:DeleteTags"],
            resources=security_groups,
            conditions=_RETAGGED,
        ),
        iam.PolicyStatement(sid="IngressRules", actions=_INGRESS_RULES, resources=security_groups),
        iam.PolicyStatement(
            sid="DeleteOwnSecurityGroups",
            actions=["ec2:DeleteSecurityGroup"],
            resources=security_groups,
            conditions=_ALREADY_TAGGED,
        ),
    ]
