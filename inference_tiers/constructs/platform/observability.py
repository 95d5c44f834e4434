"""PlatformObservability: metrics of the platform tier's one EKS cluster in Amazon Managed Service for
Prometheus, collected by the agentless AMP managed scraper (platform-cluster.md D4).

It reuses :class:`~inference_tiers.constructs.observability.ObservabilityHub` (workspace, rules, alert topic) and
its :meth:`~inference_tiers.constructs.observability.ObservabilityHub.add_eks_scraper` (the scraper, its RBAC
and the shared jobs: annotated pods such as vLLM, DCGM and node exporters, KEDA, kube-state-metrics), and adds
the gateway's metrics Service (:func:`~inference_tiers.observability.platform_scrape.gateway_metrics_job`).
"""

from __future__ import annotations

from aws_cdk import aws_aps as aps
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.observability import ObservabilityHub
from inference_tiers.k8s.platform_names import GatewayEndpoint
from inference_tiers.observability.platform_scrape import gateway_metrics_job
from inference_tiers.validation import Args


class PlatformObservability(Construct):
    """AMP workspace and managed scraper for the platform cluster, with the LiteLLM metrics Service scraped.

    :param cluster: the platform's EKS cluster (``aws_eks_v2.ICluster``; private endpoint access, authentication
        mode API or API_AND_CONFIG_MAP); the scraper's read-only RBAC is applied to it. The scraper's ENIs take
        one private subnet per AZ of its VPC and its cluster security group, so nodes without that group (a
        Karpenter pool whose EC2NodeClass selects other groups) must admit it on their metrics ports.
    :param gateway: where the LiteLLM gateway serves its unauthenticated metrics.
    :param retention_days: how long AMP keeps samples. Default 150.
    :param alarm_email: subscribe this address to the alert topic. Default: none.

    Attributes: ``hub`` (the :class:`~inference_tiers.constructs.observability.ObservabilityHub`) and
    ``scraper`` (its ``aps.CfnScraper`` for ``cluster``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        gateway: GatewayEndpoint,
        retention_days: int = 150,
        alarm_email: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("PlatformObservability")
        args.implements("cluster", cluster, eks.ICluster)
        args.instance(
            "gateway", gateway, GatewayEndpoint, "an inference_tiers.k8s.platform_names.GatewayEndpoint"
        )
        # the scraper's ENIs: one private subnet per AZ of the cluster's VPC (AMP wants distinct AZs)
        subnets = cluster.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, one_per_az=True)
        self.hub = ObservabilityHub(self, "Hub", retention_days=retention_days, alarm_email=alarm_email)
        """The workspace, rules and alert topic the scraper writes to."""
        self.scraper: aps.CfnScraper = self.hub.add_eks_scraper(
            "Scraper",
            cluster_arn=cluster.cluster_arn,
            subnet_ids=subnets.subnet_ids,
            # the cluster security group: every managed node carries it, so the ENIs reach the pods' ports
            security_group_ids=[cluster.cluster_security_group_id],
            cluster_label=cluster.cluster_name,
            cluster=cluster,
            extra_jobs=[gateway_metrics_job(gateway)],
        )
        """The AMP managed scraper of ``cluster`` (``aps.CfnScraper``)."""
