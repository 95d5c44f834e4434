"""ObservabilityHub: one Amazon Managed Service for Prometheus workspace for every tier, with its rules, alert
routing to an encrypted SNS topic, the collectors that feed it, and optionally an Amazon Managed Grafana workspace.

- Workspace: encrypted with a customer-managed key, retained on stack deletion (its metrics are history), rule
  and Alertmanager errors logged to an encrypted, retained log group.
- ``RuleGroupsNamespace``: the rules file of :mod:`inference_tiers.observability.rules` (what promtool tests).
- Alertmanager definition: every alert to the SNS topic (AMP supports only SNS); the topic and key policies let
  only this account's AMP workspace publish (aws:SourceAccount + aws:SourceArn).
- :meth:`add_eks_scraper`: an agentless AMP managed scraper (``AWS::APS::Scraper``) for an EKS cluster.
- :meth:`add_ecs_collector`: an ADOT collector sidecar in an ECS task (the gateway): metrics to AMP, traces to X-Ray.
- ``grafana=True``: an AMG workspace (IAM Identity Center sign-in) whose role may read this workspace, CloudWatch
  (Bedrock and SageMaker metrics) and X-Ray, and publish to the alert topic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aws_cdk import (
    Annotations,
    ArnFormat,
    Aws,
    Fn,
    Names,
    Reference,
    RemovalPolicy,
    Stack,
    Token,
    Tokenization,
)
from aws_cdk import aws_aps as aps
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from inference_tiers.config import EMAIL_PATTERN
from inference_tiers.constructs.common.encryption import allow_log_encryption, retained_key
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.observability import collectors, rules
from inference_tiers.observability.alertmanager import alertmanager_definition
from inference_tiers.observability.scraper_rbac import ROLE_NAME, SCRAPER_USER, scraper_rbac
from inference_tiers.validation import Args

# The AWS Distro for OpenTelemetry collector image. A tag, not a digest: the digest of this multi-arch index could
# not be read offline; resolve it (crane digest) before a production deploy and pass adot_image.
ADOT_IMAGE = "public.ecr.aws/aws-observability/aws-otel-collector:v0.49.0"
RULES_NAMESPACE = "inference-tiers"
_SUBNET = r"subnet-[0-9a-f]{8,17}"
_SECURITY_GROUP = r"sg-[0-9a-f]{8,17}"
_CLUSTER_ARN = r"arn:aws(-[a-z-]+)?:eks:[a-z0-9-]{1,20}:[0-9]{12}:cluster/[A-Za-z0-9][A-Za-z0-9_-]{0,99}"


class ObservabilityHub(Construct):
    """The platform's metrics store, rules, alert routing and (optionally) Grafana.

    :param thresholds: when the alerts fire. Default: :class:`~inference_tiers.observability.rules.AlertThresholds`.
    :param retention_days: how long AMP keeps samples. Default 150 (AMP's own default, stated explicitly).
    :param alarm_email: subscribe this address to the alert topic. Default: none.
    :param encryption_key: the CMK of the workspace, topic and log group. Default: a new retained key.
    :param grafana: create an Amazon Managed Grafana workspace (needs IAM Identity Center). Default False.

    Attributes:

    - ``thresholds``: the :class:`~inference_tiers.observability.rules.AlertThresholds` in force.
    - ``encryption_key``: the CMK of the workspace, topic and log group.
    - ``alert_topic``: the SNS topic Alertmanager sends to.
    - ``log_group``: the workspace's log group (retained, one year).
    - ``workspace``: the ``aps.CfnWorkspace`` (retained); ``workspace_arn``, ``prometheus_endpoint`` and
      ``remote_write_url``: its ARN, query endpoint and remote-write URL.
    - ``rules_text``: the recording and alerting rules (YAML) that ``rule_groups``, the
      ``aps.CfnRuleGroupsNamespace``, loads.
    - ``scrapers``: the ``aps.CfnScraper`` each :meth:`add_eks_scraper` added.
    - ``grafana_workspace`` and ``grafana_role``: the Grafana workspace and its role when ``grafana`` is True,
      else None.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        thresholds: rules.AlertThresholds | None = None,
        retention_days: int = 150,
        alarm_email: str | None = None,
        encryption_key: kms.IKey | None = None,
        grafana: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("ObservabilityHub")
        self.thresholds = args.instance(
            "thresholds", thresholds or rules.AlertThresholds(), rules.AlertThresholds
        )
        """The :class:`~inference_tiers.observability.rules.AlertThresholds` the alerting rules use
        (``thresholds``, or the defaults)."""
        retention = args.integer("retention_days", retention_days, minimum=1, maximum=1095)
        if alarm_email is not None:
            args.text("alarm_email", alarm_email, pattern=EMAIL_PATTERN, description="an email address")
        with_grafana = args.boolean("grafana", grafana)
        self.encryption_key: kms.IKey = (
            args.implements("encryption_key", encryption_key, kms.IKey)
            if encryption_key is not None
            else retained_key(self, "Key", "Encrypts the observability workspace, its alert topic and logs")
        )
        """The customer-managed key of the workspace, the alert topic and the log group (``encryption_key``,
        or a new retained key)."""
        stack = Stack.of(self)
        # The workspace's ARN, known before it exists (its id is generated): for the publish conditions.
        workspace_arns = stack.format_arn(service="aps", resource="workspace", resource_name="*")

        self.alert_topic = self._alert_topic(workspace_arns, alarm_email)
        """The encrypted SNS topic Alertmanager sends every alert to: subscribe your notifications to it
        (``alarm_email`` is subscribed when given)."""
        log_group_name = f"/aws/vendedlogs/prometheus/{Names.unique_id(self)}"
        allow_log_encryption(self.encryption_key, self, log_group_name)
        self.log_group = logs.LogGroup(
            self,
            "WorkspaceLogs",
            log_group_name=log_group_name,
            encryption_key=self.encryption_key,
            retention=logs.RetentionDays.ONE_YEAR,
            removal_policy=RemovalPolicy.RETAIN,
        )
        """The log group of the workspace's rule and Alertmanager errors (encrypted with
        :attr:`encryption_key`, kept one year, retained)."""
        self.workspace = aps.CfnWorkspace(
            self,
            "Workspace",
            alias=f"inference-tiers-{Names.unique_id(self)[-8:].lower()}",
            kms_key_arn=self.encryption_key.key_arn,
            logging_configuration=aps.CfnWorkspace.LoggingConfigurationProperty(
                log_group_arn=self.log_group.log_group_arn
            ),
            workspace_configuration=aps.CfnWorkspace.WorkspaceConfigurationProperty(
                retention_period_in_days=retention
            ),
            alert_manager_definition=alertmanager_definition(self.alert_topic.topic_arn, Aws.REGION),
        )
        """The Amazon Managed Service for Prometheus workspace (``aps.CfnWorkspace``; encrypted with
        :attr:`encryption_key`, keeps samples ``retention_days``, retained on stack deletion)."""
        self.workspace.apply_removal_policy(RemovalPolicy.RETAIN)
        self.workspace.node.add_dependency(self.alert_topic)
        self.workspace_arn = self.workspace.attr_arn
        """The workspace's ARN (a deploy-time string), which :meth:`grant_remote_write` and
        :meth:`grant_query` grant on."""
        self.prometheus_endpoint = self.workspace.attr_prometheus_endpoint
        """The workspace's Prometheus endpoint URL (a deploy-time string ending in ``/``): the base of the
        query API (``api/v1/query``) and of :attr:`remote_write_url`."""
        self.remote_write_url = f"{self.prometheus_endpoint}api/v1/remote_write"
        """The workspace's remote-write URL, ``<prometheus_endpoint>api/v1/remote_write``, where collectors
        send samples (with :meth:`grant_remote_write`)."""
        self.rules_text = rules.rules_yaml(self.thresholds)
        """The recording and alerting rules (Prometheus rules YAML built with :attr:`thresholds`) that
        :attr:`rule_groups` loads."""
        self.rule_groups = aps.CfnRuleGroupsNamespace(
            self, "Rules", workspace=self.workspace_arn, name=RULES_NAMESPACE, data=self.rules_text
        )
        """The ``aps.CfnRuleGroupsNamespace`` named ``inference-tiers`` that loads :attr:`rules_text` into the
        workspace."""
        self.scrapers: list[aps.CfnScraper] = []
        """The ``aps.CfnScraper`` of each :meth:`add_eks_scraper` call, in call order (empty until the
        first)."""
        self.grafana_role: iam.Role | None = None
        """The role of the Grafana workspace (reads this workspace, CloudWatch and X-Ray, publishes to
        :attr:`alert_topic`); ``None`` unless ``grafana`` is True."""
        self.grafana_workspace = self._grafana() if with_grafana else None
        """The Amazon Managed Grafana workspace (``grafana.CfnWorkspace``, IAM Identity Center sign-in);
        ``None`` unless ``grafana`` is True."""

    # -- alert topic ----------------------------------------------------------------------------------------

    def _alert_topic(self, workspace_arns: str, email: str | None) -> sns.Topic:
        confused_deputy = {
            "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
            "ArnLike": {"aws:SourceArn": workspace_arns},
        }
        self.encryption_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AmpAlertmanagerPublishesEncrypted",
                principals=[iam.ServicePrincipal("aps.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions=confused_deputy,
            )
        )
        topic = sns.Topic(self, "AlertTopic", master_key=self.encryption_key, enforce_ssl=True)
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AmpAlertmanagerPublishes",
                principals=[iam.ServicePrincipal("aps.amazonaws.com")],
                actions=["sns:Publish", "sns:GetTopicAttributes"],
                resources=[topic.topic_arn],
                conditions=confused_deputy,
            )
        )
        if email:
            topic.add_subscription(subscriptions.EmailSubscription(email))
        return topic

    # -- grants ---------------------------------------------------------------------------------------------

    def grant_remote_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` write samples into the workspace."""
        Args("ObservabilityHub.grant_remote_write").implements("grantee", grantee, iam.IGrantable)
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["aps:RemoteWrite"], resource_arns=[self.workspace_arn]
        )

    def grant_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` run PromQL against the workspace (Grafana, KEDA, the ops commands)."""
        Args("ObservabilityHub.grant_query").implements("grantee", grantee, iam.IGrantable)
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata"],
            resource_arns=[self.workspace_arn],
        )

    # -- collectors -----------------------------------------------------------------------------------------

    def add_eks_scraper(
        self,
        construct_id: str,
        *,
        cluster_arn: str,
        subnet_ids: Sequence[str],
        security_group_ids: Sequence[str],
        cluster_label: str,
        scope: Construct | None = None,
        cluster: eks.ICluster | None = None,
        extra_jobs: Sequence[dict[str, Any]] = (),
    ) -> aps.CfnScraper:
        """An AMP managed scraper for an EKS cluster (configuration: :func:`collectors.eks_scrape_config`).

        :param cluster_arn: the cluster (its endpoint must allow private access; authentication mode API or
            API_AND_CONFIG_MAP, so AMP can create the scraper's access entry).
        :param subnet_ids: 2 to 5 private subnets of the cluster's VPC, each in a different AZ (one ENI each).
        :param security_group_ids: 1 to 5 groups of the scraper's ENIs; they must reach the pods' metrics ports
            (the EKS cluster security group does, for nodes that carry it).
        :param cluster_label: the ``cluster`` label every scraped series gets.
        :param scope: where the scraper is created. Default: the stack of the cluster when ``cluster_arn`` refers
            to a resource of another stack than this hub's (``eks.cluster.cluster_arn``), else this hub. In the
            cluster's stack the scraper reads the hub's workspace from there, so that stack depends on the hub's
            and nothing points back, even when the cluster's stack also uses the hub (a KEDA role with
            :meth:`grant_query`); created in the hub's stack it would make CDK's ``DependencyCycle``.
        :param cluster: the ``aws_eks_v2.Cluster`` that ``cluster_arn`` names, when this app manages it: the
            scraper's read-only RBAC (:func:`~inference_tiers.observability.scraper_rbac.scraper_rbac`, bound to
            the user ``aps-collector-user``) is applied to it as ``AmpScraperRbac``. Default: none, and a synth
            warning names the RBAC to apply to the cluster yourself.
        :param extra_jobs: scrape jobs added to the configuration (``eks_scrape_config(extra_jobs=)``). Default:
            none.
        """
        args = Args("ObservabilityHub.add_eks_scraper")
        args.text("construct_id", construct_id, pattern=r"[A-Za-z][A-Za-z0-9]{0,63}", allow_token=False)
        owner: Construct = (
            _stack_of_foreign_reference(cluster_arn, self) or self
            if scope is None
            else args.instance("scope", scope, Construct, "a construct")
        )
        if owner.node.try_find_child(construct_id) is not None:
            raise args.error("construct_id", construct_id, f"an id not yet used under {owner.node.path}")
        args.text("cluster_arn", cluster_arn, pattern=_CLUSTER_ARN, description="an EKS cluster ARN")
        subnets = args.sequence(
            "subnet_ids",
            subnet_ids,
            lambda n, v: args.text(n, v, pattern=_SUBNET, description="a subnet id"),
            min_items=2,
            max_items=5,
            unique=True,
        )
        groups = args.sequence(
            "security_group_ids",
            security_group_ids,
            lambda n, v: args.text(n, v, pattern=_SECURITY_GROUP, description="a security group id"),
            min_items=1,
            max_items=5,
            unique=True,
        )
        if cluster is None:
            # AMP creates the scraper's access entry (authentication mode API or API_AND_CONFIG_MAP), but nothing
            # here can apply RBAC to a cluster it only knows by ARN (AMP user guide, "Using an AWS managed
            # collector", "Configuring your Amazon EKS cluster").
            Annotations.of(owner).add_warning_v2(
                "inference-tiers:ampScraperRbac",
                f"{construct_id}: apply the scraper's RBAC to the cluster yourself: the ClusterRole "
                f"{ROLE_NAME} (get/list/watch nodes, nodes/proxy, nodes/metrics, services, endpoints, pods; "
                f"get /metrics) bound to the user {SCRAPER_USER}, as "
                "inference_tiers.observability.scraper_rbac.scraper_rbac() renders them (kubectl apply), or pass "
                "cluster= when this app manages it; the cluster's authentication mode must be API or "
                f"API_AND_CONFIG_MAP (else map the scraper's role to {SCRAPER_USER} in aws-auth)",
            )
        else:
            args.implements("cluster", cluster, eks.ICluster)
            cluster.add_manifest("AmpScraperRbac", *scraper_rbac())
        blob = collectors.to_yaml(collectors.eks_scrape_config(cluster_label, extra_jobs=extra_jobs))
        scraper = aps.CfnScraper(
            owner,
            construct_id,
            alias=f"{construct_id.lower()}-{Names.unique_id(self)[-8:].lower()}",
            source=aps.CfnScraper.SourceProperty(
                eks_configuration=aps.CfnScraper.EksConfigurationProperty(
                    cluster_arn=cluster_arn, subnet_ids=list(subnets), security_group_ids=list(groups)
                )
            ),
            destination=aps.CfnScraper.DestinationProperty(
                amp_configuration=aps.CfnScraper.AmpConfigurationProperty(workspace_arn=self.workspace_arn)
            ),
            scrape_configuration=aps.CfnScraper.ScrapeConfigurationProperty(
                configuration_blob=Fn.base64(blob)
            ),
        )
        self.scrapers.append(scraper)
        return scraper

    def add_ecs_collector(
        self,
        task_definition: ecs.TaskDefinition,
        *,
        metrics_port: int,
        log_group: logs.ILogGroup,
        adot_image: str = ADOT_IMAGE,
        metrics_key: ecs.Secret | None = None,
        metrics_key_prefix: str = "",
    ) -> ecs.ContainerDefinition:
        """Add an ADOT collector sidecar to ``task_definition`` (configuration:
        :func:`collectors.ecs_collector_config`): it scrapes 127.0.0.1:``metrics_port``/metrics, receives OTLP
        traces on 127.0.0.1:4317/4318, writes metrics to this workspace and traces to X-Ray.

        :param metrics_key: the key the metrics endpoint needs (LiteLLM's /metrics: the gateway's master key),
            injected as an ECS secret and sent as ``Authorization: Bearer <metrics_key_prefix><key>``. Default:
            none."""
        args = Args("ObservabilityHub.add_ecs_collector")
        args.instance("task_definition", task_definition, ecs.TaskDefinition, "an ecs.TaskDefinition")
        port = args.integer("metrics_port", metrics_port, minimum=1, maximum=65535)
        args.implements("log_group", log_group, logs.ILogGroup)
        args.text(
            "adot_image",
            adot_image,
            pattern=r"[\w.-]+(:[0-9]+)?/[\w./-]+(:[\w.-]+(?<!:latest)|@sha256:[0-9a-f]{64})",
        )
        if metrics_key is not None and not isinstance(metrics_key, ecs.Secret):
            raise args.error("metrics_key", metrics_key, "an ecs.Secret")
        config = collectors.ecs_collector_config(
            remote_write_url=self.remote_write_url,
            region=Aws.REGION,
            metrics_port=port,
            metrics_key_prefix=None if metrics_key is None else metrics_key_prefix,
        )
        container = task_definition.add_container(
            "OtelCollector",
            image=ecs.ContainerImage.from_registry(adot_image),
            essential=False,  # a collector outage must never stop the gateway serving
            memory_reservation_mib=256,
            readonly_root_filesystem=True,
            user="10001",
            environment={"AOT_CONFIG_CONTENT": _sub_literally(collectors.to_yaml(config))},
            secrets={collectors.METRICS_KEY_ENV: metrics_key} if metrics_key is not None else None,
            logging=ecs.LogDrivers.aws_logs(stream_prefix="otel-collector", log_group=log_group),
        )
        acknowledge(
            task_definition,
            "AwsSolutions-ECS2",
            "AOT_CONFIG_CONTENT is the collector's configuration (workspace endpoint, Region, loopback ports): "
            "no secret, and ADOT reads its configuration from that variable",
        )
        self.grant_remote_write(task_definition.task_role)
        grant_trace_export(task_definition, "OtelCollectorXRay", task_definition.task_role)
        return container

    # -- Grafana --------------------------------------------------------------------------------------------

    def _grafana(self) -> grafana.CfnWorkspace:
        stack = Stack.of(self)
        role = iam.Role(
            self,
            "GrafanaRole",
            description="Amazon Managed Grafana: read the observability workspace, CloudWatch and X-Ray",
            assumed_by=iam.ServicePrincipal(
                "grafana.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="grafana",
                            resource="/workspaces",
                            resource_name="*",
                            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                        )
                    },
                },
            ),
        )
        self.grant_query(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="FindWorkspace", actions=["aps:ListWorkspaces"], resources=["*"])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="CloudWatchAndXRayRead",
                actions=[
                    "cloudwatch:GetMetricData",
                    "cloudwatch:ListMetrics",
                    "cloudwatch:DescribeAlarms",
                    "xray:GetTraceSummaries",
                    "xray:BatchGetTraces",
                    "xray:GetServiceGraph",
                ],
                resources=["*"],
            )
        )
        self.alert_topic.grant_publish(role)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
            "grant_publish on the KMS-encrypted alert topic: SNS needs GenerateDataKey with every suffix, and the "
            "statement is limited to this hub's own key ARN",
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "aps:ListWorkspaces, CloudWatch GetMetricData/ListMetrics/DescribeAlarms and X-Ray trace reads accept "
            "no resource ARN (Service Authorization Reference), so Grafana's data sources need Resource *",
        )
        workspace = grafana.CfnWorkspace(
            self,
            "Grafana",
            account_access_type="CURRENT_ACCOUNT",
            authentication_providers=["AWS_SSO"],
            permission_type="CUSTOMER_MANAGED",
            role_arn=role.role_arn,
            data_sources=["PROMETHEUS", "CLOUDWATCH", "XRAY"],
            notification_destinations=["SNS"],
            grafana_version="12.4",
            description="inference-tiers: dashboards of every tier (push them with inference-tiers dashboards push)",
        )
        self.grafana_role = role
        return workspace


def grant_trace_export(scope: Construct, construct_id: str, role: iam.IRole) -> iam.Policy:
    """Lets ``role`` send spans to AWS X-Ray (what an OpenTelemetry collector's ``awsxray`` exporter calls), in a
    policy of its own, so that the Resource-* acknowledgment covers these X-Ray actions and nothing else the role
    may hold."""
    xray = iam.Policy(
        scope,
        construct_id,
        statements=[
            iam.PolicyStatement(
                sid="XRayTraces",
                actions=[
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                    "xray:GetSamplingRules",
                    "xray:GetSamplingTargets",
                ],
                resources=["*"],
            )
        ],
    )
    xray.attach_to_role(role)
    acknowledge(
        xray,
        "AwsSolutions-IAM5[Resource::*]",
        "X-Ray's PutTraceSegments, PutTelemetryRecords and sampling actions support no resource-level "
        "permissions (Service Authorization Reference: resource types none), so they take Resource *",
    )
    return xray


def _sub_literally(text: str) -> str:
    """``text`` as an ``Fn::Sub`` that CloudFormation turns back into ``text``: each CDK token becomes a variable,
    and every other ``${`` is written ``${!``, which Fn::Sub returns as ``${`` (CloudFormation Template Reference,
    Fn::Sub: "${!Literal}" resolves to "${Literal}"). The collector thus gets its ``${env:NAME}`` references as
    written, and no literal looks like a template parameter outside Fn::Sub (aws-cdk-lib's validation: E1029)."""
    encoded = list(dict.fromkeys(Token.as_string(t) for t in Tokenization.reverse_string(text).tokens))
    parts = re.split(f"({'|'.join(map(re.escape, encoded))})", text) if encoded else [text]
    # re.split with one group: literals at even positions, tokens at odd ones
    body = "".join(
        f"${{Token{encoded.index(part)}}}" if i % 2 else part.replace("${", "${!")
        for i, part in enumerate(parts)
    )
    return Fn.sub(body, {f"Token{i}": value for i, value in enumerate(encoded)} or None)


def _stack_of_foreign_reference(value: str, here: Construct) -> Stack | None:
    """The stack of the resource ``value`` refers to (a ``Ref``/``GetAtt`` token), when not ``here``'s stack."""
    token = Tokenization.reverse_string(value).first_token
    if not isinstance(token, Reference):
        return None
    stack = Stack.of(token.target)
    return None if stack is Stack.of(here) else stack
