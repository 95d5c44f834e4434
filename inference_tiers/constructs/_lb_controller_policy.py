"""Permissions of the AWS Load Balancer Controller that the HyperPod inference add-on runs (one ALB per model).

Written for this project from the controller's documented needs (ELBv2, its security groups, ACM/WAF/Shield
look-ups the controller performs on every ALB it reconciles), scoped to this account and region. Read-only
EC2/ELB/ACM/WAF calls support no resource-level permissions.
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
    "acm:ListCertificates",
    "acm:DescribeCertificate",
    "cognito-idp:DescribeUserPoolClient",
    "wafv2:GetWebACL",
    "wafv2:GetWebACLForResource",
    "waf-regional:GetWebACL",
    "waf-regional:GetWebACLForResource",
    "shield:GetSubscriptionState",
    "shield:DescribeProtection",
]

_MANAGE_LOAD_BALANCERS = [
    "elasticloadbalancing:CreateLoadBalancer",
    "elasticloadbalancing:CreateTargetGroup",
    "elasticloadbalancing:CreateListener",
    "elasticloadbalancing:DeleteListener",
    "elasticloadbalancing:CreateRule",
    "elasticloadbalancing:DeleteRule",
    "elasticloadbalancing:ModifyListener",
    "elasticloadbalancing:ModifyListenerAttributes",
    "elasticloadbalancing:ModifyRule",
    "elasticloadbalancing:AddListenerCertificates",
    "elasticloadbalancing:RemoveListenerCertificates",
    "elasticloadbalancing:AddTags",
    "elasticloadbalancing:RemoveTags",
    "elasticloadbalancing:ModifyLoadBalancerAttributes",
    "elasticloadbalancing:SetIpAddressType",
    "elasticloadbalancing:SetSecurityGroups",
    "elasticloadbalancing:SetSubnets",
    "elasticloadbalancing:DeleteLoadBalancer",
    "elasticloadbalancing:ModifyTargetGroup",
    "elasticloadbalancing:ModifyTargetGroupAttributes",
    "elasticloadbalancing:DeleteTargetGroup",
    "elasticloadbalancing:RegisterTargets",
    "elasticloadbalancing:DeregisterTargets",
    "elasticloadbalancing:SetWebAcl",
]

_MANAGE_SECURITY_GROUPS = [
    "ec2:CreateSecurityGroup",
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:DeleteSecurityGroup",
    "ec2:CreateTags",
    "ec2:DeleteTags",
]


def load_balancer_controller_statements() -> list[iam.PolicyStatement]:
    elb = f"arn:{Aws.PARTITION}:elasticloadbalancing:{Aws.REGION}:{Aws.ACCOUNT_ID}"
    ec2 = f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}"
    return [
        iam.PolicyStatement(sid="Describe", actions=_DESCRIBE, resources=["*"]),
        iam.PolicyStatement(
            sid="ElbServiceLinkedRole",
            actions=["iam:CreateServiceLinkedRole"],
            resources=["*"],
            conditions={"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            sid="ManageLoadBalancers",
            actions=_MANAGE_LOAD_BALANCERS,
            resources=[
                f"{elb}:loadbalancer/*",
                f"{elb}:targetgroup/*",
                f"{elb}:listener/*",
                f"{elb}:listener-rule/*",
            ],
        ),
        iam.PolicyStatement(
            sid="ManageSecurityGroups",
            actions=_MANAGE_SECURITY_GROUPS,
            resources=[f"{ec2}:security-group/*", f"{ec2}:vpc/*"],
        ),
    ]
