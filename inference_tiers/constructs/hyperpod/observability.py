"""HyperPod observability: the ``amazon-sagemaker-hyperpod-observability`` add-on writing to Amazon Managed
Prometheus (node, GPU/DCGM, EFA and inference metrics, including the operator's ``model_*`` invocation metrics
and vLLM's own ``/metrics``), optionally with an Amazon Managed Grafana workspace for HyperPod's dashboards.
"""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from constructs import Construct

from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.trust import (
    pod_identity_principal,
    regional_arn_pattern,
    service_for_account,
)
from inference_tiers.constructs.hyperpod.cluster import HyperPodCluster
from inference_tiers.validation import Args

OBSERVABILITY_ADDON = "amazon-sagemaker-hyperpod-observability"
# Pinned: the add-on version seen running with this configuration schema (AMP endpoint + metric levels);
# confirm with `aws eks describe-addon-versions --addon-name amazon-sagemaker-hyperpod-observability`.
OBSERVABILITY_ADDON_VERSION = "v1.0.4-eksbuild.1"
ADDON_VERSION_PATTERN = r"v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+"
ADDON_VERSION_TEXT = "an EKS add-on version such as v1.0.4-eksbuild.1 (aws eks describe-addon-versions)"
COLLECTOR_SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"


class HyperPodObservability(Construct):
    """AMP workspace, the collector's pod-identity role, the observability add-on and (optionally) Grafana."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        hyperpod_cluster: HyperPodCluster,
        grafana_workspace: bool = False,
        addon_version: str = OBSERVABILITY_ADDON_VERSION,
    ) -> None:
        """
        :param cluster: the EKS cluster (needs the eks-pod-identity-agent add-on).
        :param hyperpod_cluster: the add-on installs after its node barrier (collectors run on the nodes).
        :param grafana_workspace: also create an Amazon Managed Grafana workspace (IAM Identity Center sign-in,
            which the account must have enabled). Default False.
        :param addon_version: pinned add-on version. Default :data:`OBSERVABILITY_ADDON_VERSION`.
        """
        args = Args("HyperPodObservability")
        args.implements("cluster", cluster, eks.ICluster)
        args.instance("hyperpod_cluster", hyperpod_cluster, HyperPodCluster)
        args.boolean("grafana_workspace", grafana_workspace)
        args.text(
            "addon_version", addon_version, pattern=ADDON_VERSION_PATTERN, description=ADDON_VERSION_TEXT
        )
        super().__init__(scope, construct_id)
        self.workspace = aps.CfnWorkspace(self, "Prometheus", alias=f"{Stack.of(self).stack_name}-hyperpod")
        """The Amazon Managed Prometheus workspace (alias ``<stack name>-hyperpod``) the add-on writes to."""
        self.prometheus_endpoint = self.workspace.attr_prometheus_endpoint
        """The workspace's Prometheus endpoint URL, ending in ``/`` (a deploy-time token); the add-on
        remote-writes to it."""
        self.workspace_arn = self.workspace.attr_arn
        """The workspace's ARN (a deploy-time token), e.g. to let other roles query it."""
        # KEDA's prometheus trigger wants the workspace URL without the trailing "/" of PrometheusEndpoint.
        self.query_url = f"https://aps-workspaces.{Aws.REGION}.{Aws.URL_SUFFIX}/workspaces/{self.workspace.attr_workspace_id}"
        """The workspace URL without the trailing ``/`` (a deploy-time token), as KEDA's ``prometheus``
        trigger takes it."""

        self.collector_role = iam.Role(
            self,
            "CollectorRole",
            description="HyperPod observability collector: remote-write to AMP, logs to CloudWatch",
            assumed_by=pod_identity_principal(self, cluster.cluster_arn),
        )
        """The EKS Pod Identity role of the add-on's collector
        (``hyperpod-observability-operator-otel-collector``): remote-write to the workspace and writes to the
        ``/aws/sagemaker/Clusters/*`` log groups."""
        self.collector_role.add_to_policy(
            iam.PolicyStatement(
                sid="RemoteWrite", actions=["aps:RemoteWrite"], resources=[self.workspace_arn]
            )
        )
        log_groups = (
            f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:/aws/sagemaker/Clusters/*"
        )
        self.collector_role.add_to_policy(
            iam.PolicyStatement(
                sid="ClusterLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[log_groups, f"{log_groups}:log-stream:*"],
            )
        )

        config: dict[str, object] = {
            "ampWorkspace": {"prometheusEndpoint": self.prometheus_endpoint, "arn": self.workspace_arn},
            "metricsProvider": {
                name: {"level": "BASIC", "scrapeInterval": 30}
                for name in ("inferenceMetrics", "nodeMetrics", "acceleratedComputeMetrics", "networkMetrics")
            },
            "logging": {"enabled": True},
        }
        self.grafana_workspace: grafana.CfnWorkspace | None = None
        """The Amazon Managed Grafana workspace (IAM Identity Center sign-in) that reads the Prometheus
        workspace, or None without ``grafana_workspace``."""
        if grafana_workspace:
            self.grafana_workspace = self._grafana()
            config["amgWorkspace"] = {
                "workspaceName": self.grafana_workspace.name,
                "arn": f"arn:{Aws.PARTITION}:grafana:{Aws.REGION}:{Aws.ACCOUNT_ID}:/workspaces/"
                f"{self.grafana_workspace.attr_id}",
            }

        self.addon = eks_l1.CfnAddon(
            self,
            "Addon",
            addon_name=OBSERVABILITY_ADDON,
            addon_version=addon_version,
            cluster_name=cluster.cluster_name,
            configuration_values=Stack.of(self).to_json_string(config),
            pod_identity_associations=[
                eks_l1.CfnAddon.PodIdentityAssociationProperty(
                    service_account=COLLECTOR_SERVICE_ACCOUNT, role_arn=self.collector_role.role_arn
                )
            ],
            resolve_conflicts="OVERWRITE",
        )
        """The ``amazon-sagemaker-hyperpod-observability`` add-on (L1 ``CfnAddon``), installed after the node
        barrier."""
        self.addon.node.add_dependency(hyperpod_cluster.nodes_ready)
        acknowledge(
            self.collector_role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/*]",
            "HyperPod names its cluster log groups /aws/sagemaker/Clusters/<name>/<id> at creation; the "
            "collector writes only under that prefix",
        )
        acknowledge(
            self.collector_role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/*:log-stream:*]",
            "Log streams are created per node by the collector inside the HyperPod cluster log groups only",
        )

    def _grafana(self) -> grafana.CfnWorkspace:
        role = iam.Role(
            self,
            "GrafanaRole",
            description="Amazon Managed Grafana: read the HyperPod Prometheus workspace",
            # Managed Grafana sends the workspace's ARN (arn:...:grafana:<region>:<account>:/workspaces/<id>).
            assumed_by=service_for_account(
                self, "grafana.amazonaws.com", regional_arn_pattern(self, "grafana", "/workspaces/*")
            ),
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "aps:DescribeWorkspace",
                    "aps:QueryMetrics",
                    "aps:GetLabels",
                    "aps:GetSeries",
                    "aps:GetMetricMetadata",
                ],
                resources=[self.workspace_arn],
            )
        )
        role.add_to_policy(iam.PolicyStatement(actions=["aps:ListWorkspaces"], resources=["*"]))
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Grafana's Prometheus data-source discovery lists workspaces, which has no resource-level "
            "permission; queries are limited to the HyperPod workspace",
        )
        return grafana.CfnWorkspace(
            self,
            "Grafana",
            name=f"{Stack.of(self).stack_name}-hyperpod",
            account_access_type="CURRENT_ACCOUNT",
            authentication_providers=["AWS_SSO"],
            permission_type="CUSTOMER_MANAGED",
            role_arn=role.role_arn,
            data_sources=["PROMETHEUS"],
        )
