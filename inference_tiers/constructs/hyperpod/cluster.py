"""``AWS::SageMaker::Cluster`` orchestrated by EKS, with its lifecycle scripts, execution role and node barrier.

Creation order is what makes HyperPod work, so this construct wires it: the cluster waits for the execution
role *and its policy* (CloudFormation would otherwise only wait for the role, and HyperPod fails with "Unable to
retrieve subnets"), for the upload of both lifecycle scripts and for the HyperPod dependency Helm chart; the
node barrier (:attr:`HyperPodCluster.nodes_ready`) waits for the cluster and then for every instance to be
Running, and everything scheduled on the nodes must depend on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Aws, CfnElement, CustomResource, Duration, Names, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct, IDependable

from inference_tiers import ASSETS_DIR
from inference_tiers.constructs.common.checkov import skip_check
from inference_tiers.constructs.common.encryption import allow_log_encryption, retained_key
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.storage import access_logs_bucket as new_access_logs_bucket
from inference_tiers.constructs.common.storage import private_bucket
from inference_tiers.constructs.common.trust import regional_arn_pattern, sagemaker_principal
from inference_tiers.constructs.hyperpod.dependencies import HyperPodDependencyChart
from inference_tiers.instance_types import CLUSTER_INSTANCE_TYPES, unknown_sagemaker_instance_type
from inference_tiers.validation import Args

ASSETS = ASSETS_DIR / "hyperpod"
LIFECYCLE_SCRIPTS = ASSETS / "lifecycle"
LIFECYCLE_PREFIX = "lifecycle"
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
_GROUP_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Deep health checks on GPU instances take tens of minutes; HyperPod may replace a failing instance once.
NODES_READY_TIMEOUT = Duration.hours(2)


@dataclass(frozen=True)
class HyperPodTaint:
    """A Kubernetes taint HyperPod puts on every node of an instance group.

    :param key: the taint key, at most 316 characters.
    :param value: the taint value, at most 63 characters (may be empty).
    :param effect: ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``. Default: ``NoSchedule``.
    """

    key: str
    """The taint key, at most 316 characters."""
    value: str
    """The taint value, at most 63 characters (may be empty)."""
    effect: str = "NoSchedule"
    """``NoSchedule`` (default), ``PreferNoSchedule`` or ``NoExecute``."""

    def __post_init__(self) -> None:
        args = Args("HyperPodTaint")
        args.text("key", self.key, max_length=316, allow_token=False)
        args.text("value", self.value, min_length=0, max_length=63, allow_token=False)
        args.one_of("effect", self.effect, _TAINT_EFFECTS)


@dataclass(frozen=True)
class HyperPodInstanceGroup:
    """One instance group: ``instance_count`` instances of ``instance_type`` in the cluster's subnet.

    :param name: letters, digits and ``-``, at most 63 characters.
    :param instance_count: 0 to 256 (a token is accepted).
    :param threads_per_core: 1 (default) or 2.
    :param ebs_volume_gb: 1 to 16384. Default: 500.
    :param deep_health_checks: distinct ``InstanceStress`` / ``InstanceConnectivity`` checks HyperPod runs before
        a node joins. Default: both; ``()`` for none (required with ``taints``).
    :param training_plan_arn: a SageMaker training plan to run the group on. Default: none (On-Demand).
    :param labels: Kubernetes labels put on every node of the group. Default: none.
    :param taints: :class:`HyperPodTaint` values put on every node; only without deep health checks.
        Default: none.
    """

    name: str
    """The group's name: letters, digits and ``-``, at most 63 characters, unique within the cluster."""
    instance_type: str
    """SageMaker name, e.g. ``ml.g6e.12xlarge`` or ``ml.p5.48xlarge``."""
    instance_count: int
    """Instances in the group, 0 to 256 (a token is accepted); the node barrier waits for this many to be
    Running."""
    threads_per_core: int = 1
    """Threads per CPU core: 1 (default, no simultaneous multithreading) or 2."""
    ebs_volume_gb: int = 500
    """Secondary EBS volume HyperPod mounts at /opt/sagemaker (images, logs)."""
    deep_health_checks: tuple[str, ...] = DEEP_HEALTH_CHECKS
    """The deep health checks HyperPod runs before a node joins (``InstanceStress``,
    ``InstanceConnectivity``); default both, ``()`` for none (required with :attr:`taints`)."""
    training_plan_arn: str | None = None
    """Run the group on a SageMaker training plan (reserved capacity)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Kubernetes labels put on every node of the group; empty by default."""
    taints: tuple[HyperPodTaint, ...] = ()
    """Taints put on every node of the group; empty by default, and allowed only without deep health
    checks."""

    def __post_init__(self) -> None:
        args = Args("HyperPodInstanceGroup")
        args.text(
            "name", self.name, pattern=_GROUP_NAME.pattern, description="letters, digits and '-' (at most 63)"
        )
        args.text("instance_type", self.instance_type, allow_token=False)
        unknown = unknown_sagemaker_instance_type(self.instance_type, CLUSTER_INSTANCE_TYPES)
        if unknown is not None:
            raise args.error("instance_type", self.instance_type, unknown)
        args.integer("instance_count", self.instance_count, minimum=0, maximum=256, allow_token=True)
        args.one_of("threads_per_core", self.threads_per_core, (1, 2))
        args.integer("ebs_volume_gb", self.ebs_volume_gb, minimum=1, maximum=16384, allow_token=True)
        args.sequence(
            "deep_health_checks",
            self.deep_health_checks,
            lambda name, v: args.one_of(name, v, DEEP_HEALTH_CHECKS),
            unique=True,
        )
        if self.training_plan_arn is not None:
            args.text(
                "training_plan_arn",
                self.training_plan_arn,
                pattern=r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/[\w-]+",
                description="arn:aws:sagemaker:<region>:<account>:training-plan/<name>",
            )
        args.mapping("labels", self.labels, lambda name, v: args.text(name, v, min_length=0))
        taints = args.sequence(
            "taints", self.taints, lambda name, v: args.instance(name, v, HyperPodTaint, "a HyperPodTaint")
        )
        if taints and self.deep_health_checks:
            raise args.error(
                "taints",
                [t.key for t in taints],
                f"no taints with deep health checks {list(self.deep_health_checks)} (HyperPod rejects custom "
                "taints on groups with deep health checks): either no taints or deep_health_checks=()",
            )


class HyperPodCluster(Construct):
    """A HyperPod cluster on an existing EKS cluster, with lifecycle scripts, execution role and node barrier."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        subnets: Sequence[ec2.ISubnet],
        security_groups: Sequence[ec2.ISecurityGroup],
        instance_groups: Sequence[HyperPodInstanceGroup],
        dependency_chart: HyperPodDependencyChart,
        wait_for: Sequence[IDependable] = (),
        lifecycle_scripts: Path = LIFECYCLE_SCRIPTS,
        access_logs_bucket: s3.IBucket | None = None,
        node_recovery: str = "Automatic",
        nodes_ready_timeout: Duration = NODES_READY_TIMEOUT,
        log_key: kms.IKey | None = None,
        tiered_storage_memory_percent: int | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (authentication mode API or API_AND_CONFIG_MAP, VPC CNI >= 1.18.3).
        :param subnets: private subnet(s) of the cluster, in the AZ of the capacity; cannot change later.
        :param security_groups: security groups of the nodes (the EKS cluster security group is added).
        :param instance_groups: the instance groups (at least one).
        :param dependency_chart: the HyperPod dependency chart; the cluster is created after it.
        :param wait_for: more resources the cluster must wait for (e.g. core EKS add-ons). Default none.
        :param lifecycle_scripts: directory with ``on_create.sh`` and what it runs. Default: the packaged scripts.
        :param access_logs_bucket: server access logs of the lifecycle bucket. Default: a new
            access-log bucket of this construct (AwsSolutions-S1 holds in any app).
        :param node_recovery: ``Automatic`` (replace unhealthy nodes) or ``None``. Default Automatic.
        :param nodes_ready_timeout: how long the barrier waits for all instances. Default 2 hours.
        :param log_key: KMS key of the log groups this construct creates (node barrier, its waiter, the script
            upload); its policy must let CloudWatch Logs use it (``allow_log_encryption``). Default: a new
            rotated, retained key with that grant.
        :param tiered_storage_memory_percent: enable managed tiered storage (``TieredStorageConfig``), the
            backend of the inference operator's ``tieredstorage`` L2 KV cache, with this share of every
            instance's memory (1-100). Default: none (the property is not rendered).
        """
        args = Args("HyperPodCluster")
        args.implements("cluster", cluster, eks.ICluster)
        args.sequence(
            "subnets",
            subnets,
            lambda name, v: args.implements(name, v, ec2.ISubnet),
            min_items=1,
            max_items=16,
        )
        args.sequence(
            "security_groups",
            security_groups,
            lambda name, v: args.implements(name, v, ec2.ISecurityGroup),
            max_items=4,
        )
        groups = args.sequence(
            "instance_groups",
            instance_groups,
            lambda name, v: args.instance(name, v, HyperPodInstanceGroup, "a HyperPodInstanceGroup"),
            min_items=1,
            max_items=100,
        )
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise args.error("instance_groups", names, "instance groups with unique names")
        args.instance("dependency_chart", dependency_chart, HyperPodDependencyChart)
        args.sequence("wait_for", wait_for, lambda name, v: args.implements(name, v, IDependable))
        args.instance("lifecycle_scripts", lifecycle_scripts, Path, "a pathlib.Path of a directory")
        if not (lifecycle_scripts / "on_create.sh").is_file():
            raise args.error(
                "lifecycle_scripts",
                str(lifecycle_scripts),
                "a directory with on_create.sh and the scripts it runs",
            )
        if access_logs_bucket is not None:
            args.implements("access_logs_bucket", access_logs_bucket, s3.IBucket)
        args.one_of("node_recovery", node_recovery, ("Automatic", "None"))
        args.duration(
            "nodes_ready_timeout",
            nodes_ready_timeout,
            minimum=Duration.minutes(10),
            maximum=Duration.hours(2),
        )
        if log_key is not None:
            args.implements("log_key", log_key, kms.IKey)
        if tiered_storage_memory_percent is not None:
            # ClusterTieredStorageConfig.InstanceMemoryAllocationPercentage: 0-100 (botocore 1.44.8
            # sagemaker service-2.json); 0 would enable the daemon with no memory.
            args.integer(
                "tiered_storage_memory_percent", tiered_storage_memory_percent, minimum=1, maximum=100
            )
        super().__init__(scope, construct_id)
        self.tiered_storage_memory_percent = tiered_storage_memory_percent
        """The share of every instance's memory given to managed tiered storage (the inference operator's
        ``tieredstorage`` L2 KV cache), in percent; None when tiered storage is off."""
        self.instance_groups = tuple(instance_groups)
        """The instance groups, in the order given."""
        self.log_key: kms.IKey = log_key or _log_key(self)
        """The KMS key of the log groups this construct creates (node barrier, its waiter, the script upload):
        the ``log_key`` passed in, or a new rotated key retained on stack deletion."""

        self.lifecycle_key = retained_key(
            self, "LifecycleKey", "Encrypts the HyperPod lifecycle scripts bucket"
        )
        """The KMS key (rotated, retained on stack deletion) that encrypts :attr:`lifecycle_bucket`;
        :attr:`execution_role` may decrypt with it."""
        self.lifecycle_bucket = private_bucket(
            self,
            "LifecycleBucket",
            key=self.lifecycle_key,
            access_logs=access_logs_bucket or new_access_logs_bucket(self, "AccessLogs"),
            access_logs_prefix="hyperpod-lifecycle/",
        )
        """The private bucket holding the lifecycle scripts under ``lifecycle/``, which HyperPod copies to
        each instance with :attr:`execution_role`."""
        self.lifecycle_deployment = s3_deployment.BucketDeployment(
            self,
            "LifecycleScripts",
            sources=[s3_deployment.Source.asset(str(lifecycle_scripts))],
            destination_bucket=self.lifecycle_bucket,
            destination_key_prefix=f"{LIFECYCLE_PREFIX}/",
            log_group=self._log_group("LifecycleScriptsLogs"),
        )
        """The upload of ``lifecycle_scripts`` to the ``lifecycle/`` prefix of :attr:`lifecycle_bucket`; the
        cluster is created after it."""

        self._acknowledge_deployment_findings()

        self.execution_role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=sagemaker_principal(self),
            description="HyperPod instances: EKS node, VPC CNI, image pulls, lifecycle scripts",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerClusterInstanceRolePolicy")
            ],
        )
        """The role every HyperPod instance runs with (EKS node, VPC CNI, image pulls, lifecycle script
        reads): the role to grant further permissions to when the nodes themselves need them."""
        self._grant_node_permissions(cluster)
        self._grant_lifecycle_read()

        cluster_security_groups = [sg.security_group_id for sg in security_groups]
        self.resource = sagemaker.CfnCluster(
            self,
            "Resource",
            cluster_name=Names.unique_resource_name(self, max_length=63),
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=cluster.cluster_arn)
            ),
            node_recovery=node_recovery,
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                # The EKS cluster security group lets the nodes reach the control plane and vice versa.
                security_group_ids=[*cluster_security_groups, cluster.cluster_security_group_id],
                subnets=[s.subnet_id for s in subnets],
            ),
            instance_groups=[self._render_group(g) for g in instance_groups],
            tiered_storage_config=(
                sagemaker.CfnCluster.TieredStorageConfigProperty(
                    mode="Enable", instance_memory_allocation_percentage=tiered_storage_memory_percent
                )
                if tiered_storage_memory_percent is not None
                else None
            ),
        )
        """The ``AWS::SageMaker::Cluster`` resource (L1 ``CfnCluster``)."""
        # Construct-level dependencies: the role's DefaultPolicy, the upload's custom resource and the chart's
        # release all land in DependsOn (a GetAtt alone would only order the cluster after the role).
        self.resource.node.add_dependency(
            self.execution_role, self.lifecycle_deployment, dependency_chart, *wait_for
        )
        self.cluster_arn = self.resource.attr_cluster_arn
        """The HyperPod cluster's ARN (a deploy-time token), e.g. for IAM policies or the inference operator's
        configuration."""
        self.cluster_name = self.resource.cluster_name
        """The HyperPod cluster's name, generated from the construct path (at most 63 characters)."""
        self.nodes_ready = self._node_barrier(nodes_ready_timeout)
        """The node barrier (``Custom::HyperPodNodesReady``): complete once the cluster exists and every
        instance group has all its instances Running, within ``nodes_ready_timeout``. Make everything
        scheduled on the HyperPod nodes depend on it."""

        acknowledge(
            self.execution_role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy]",
            "HyperPod requires this AWS managed instance policy on every cluster instance role (AWS docs, "
            "sagemaker-hyperpod-prerequisites-iam); it is scoped by AWS to HyperPod node operations",
        )

    @property
    def instance_types(self) -> tuple[str, ...]:
        """The distinct instance types of the instance groups, in order of first appearance;
        ``HyperPodModelEndpoint`` accepts only endpoints whose instance types are among them."""
        return tuple(dict.fromkeys(g.instance_type for g in self.instance_groups))

    def _render_group(
        self, group: HyperPodInstanceGroup
    ) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        kubernetes_config = None
        if group.labels or group.taints:
            kubernetes_config = sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
                labels=dict(group.labels) or None,
                taints=[
                    sagemaker.CfnCluster.ClusterKubernetesTaintProperty(
                        key=t.key, value=t.value, effect=t.effect
                    )
                    for t in group.taints
                ]
                or None,
            )
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name,
            instance_type=group.instance_type,
            instance_count=group.instance_count,
            execution_role=self.execution_role.role_arn,
            threads_per_core=group.threads_per_core,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=self.lifecycle_bucket.s3_url_for_object(LIFECYCLE_PREFIX),
                on_create="on_create.sh",
            ),
            instance_storage_configs=[
                sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                        volume_size_in_gb=group.ebs_volume_gb
                    )
                )
            ],
            on_start_deep_health_checks=list(group.deep_health_checks) or None,
            training_plan_arn=group.training_plan_arn,
            kubernetes_config=kubernetes_config,
        )

    def _grant_node_permissions(self, cluster: eks.ICluster) -> None:
        """What the VPC CNI, kubelet and pod identity need on a node, scoped where the API allows it."""
        ec2_arn = f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}"
        self.execution_role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeNetwork",
                # Describe* calls do not support resource-level permissions.
                actions=[
                    "ec2:DescribeInstances",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeTags",
                ],
                resources=["*"],
            )
        )
        self.execution_role.add_to_policy(
            iam.PolicyStatement(
                sid="ManagePodNetworkInterfaces",
                actions=[
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:UnassignPrivateIpAddresses",
                    "ec2:AttachNetworkInterface",
                    "ec2:DetachNetworkInterface",
                    "ec2:CreateNetworkInterface",
                    "ec2:DeleteNetworkInterface",
                    "ec2:ModifyNetworkInterfaceAttribute",
                ],
                resources=[
                    f"{ec2_arn}:network-interface/*",
                    f"{ec2_arn}:instance/*",
                    f"{ec2_arn}:subnet/*",
                    f"{ec2_arn}:security-group/*",
                ],
            )
        )
        self.execution_role.add_to_policy(
            iam.PolicyStatement(
                sid="TagPodNetworkInterfaces",
                actions=["ec2:CreateTags"],
                resources=[f"{ec2_arn}:network-interface/*"],
            )
        )
        self.execution_role.add_to_policy(
            iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
        self.execution_role.add_to_policy(
            iam.PolicyStatement(
                sid="PullImages",
                actions=[
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ],
                # HyperPod, EKS add-on and DLC images live in AWS-owned accounts of the region.
                resources=[f"arn:{Aws.PARTITION}:ecr:{Aws.REGION}:*:repository/*"],
            )
        )
        self.execution_role.add_to_policy(
            iam.PolicyStatement(
                sid="PodIdentity",
                actions=["eks-auth:AssumeRoleForPodIdentity"],
                resources=[cluster.cluster_arn],
            )
        )
        acknowledge(
            self.execution_role,
            "AwsSolutions-IAM5[Resource::*]",
            "ec2:Describe* and ecr:GetAuthorizationToken support no resource-level permissions; every other "
            "statement of this role is scoped to this account and region",
        )
        for resource in ("network-interface", "instance", "subnet", "security-group"):
            acknowledge(
                self.execution_role,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:{resource}/*]",
                "The VPC CNI creates and attaches pod ENIs whose ids are unknown until runtime, in this "
                "account and region only",
            )
        acknowledge(
            self.execution_role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ecr:<AWS::Region>:*:repository/*]",
            "Node images (HyperPod agents, EKS add-ons, deep learning containers) come from AWS-owned "
            "registries whose account ids differ per region; pull-only actions",
        )

    def _node_barrier(self, timeout: Duration) -> CustomResource:
        log_group = self._log_group("NodeBarrierLogs")
        on_event, is_complete = (
            lambda_.Function(
                self,
                construct_id,
                handler=f"index.{handler}",
                runtime=lambda_.Runtime.PYTHON_3_14,
                code=lambda_.Code.from_asset(str(ASSETS / "node_barrier")),
                timeout=Duration.minutes(1),
                memory_size=256,
                log_group=log_group,
            )
            for construct_id, handler in (
                ("NodeBarrierOnEvent", "on_event"),
                ("NodeBarrierIsComplete", "is_complete"),
            )
        )
        is_complete.add_to_role_policy(
            iam.PolicyStatement(actions=["sagemaker:ListClusterNodes"], resources=[self.cluster_arn])
        )
        provider = cr.Provider(
            self,
            "NodeBarrierProvider",
            on_event_handler=on_event,
            is_complete_handler=is_complete,
            query_interval=Duration.minutes(1),
            total_timeout=timeout,
            log_group=log_group,
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(
                destination=self._log_group("NodeBarrierWaiterLogs"),
                level=sfn.LogLevel.ALL,
            ),
        )
        self._acknowledge_barrier_findings(provider, [on_event, is_complete])
        self._skip_barrier_checks(provider, [on_event, is_complete])
        _limit_waiter_trust(provider)
        barrier = CustomResource(
            self,
            "NodesReady",
            service_token=provider.service_token,
            resource_type="Custom::HyperPodNodesReady",
            properties={
                "ClusterArn": self.cluster_arn,
                "InstanceGroups": {g.name: str(g.instance_count) for g in self.instance_groups},
            },
        )
        barrier.node.add_dependency(self.resource)
        return barrier

    def _log_group(self, construct_id: str) -> logs.LogGroup:
        return logs.LogGroup(
            self,
            construct_id,
            encryption_key=self.log_key,
            retention=logs.RetentionDays.ONE_YEAR,
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _grant_lifecycle_read(self) -> None:
        """HyperPod copies the lifecycle scripts to each instance with the execution role: read that prefix."""
        self.execution_role.add_to_policy(
            iam.PolicyStatement(
                sid="ListLifecycleScripts",
                actions=["s3:ListBucket"],
                resources=[self.lifecycle_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [LIFECYCLE_PREFIX, f"{LIFECYCLE_PREFIX}/*"]}},
            )
        )
        self.execution_role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadLifecycleScripts",
                actions=["s3:GetObject"],
                resources=[self.lifecycle_bucket.arn_for_objects(f"{LIFECYCLE_PREFIX}/*")],
            )
        )
        self.lifecycle_key.grant_decrypt(self.execution_role)
        bucket_id = Stack.of(self).get_logical_id(_cfn_element(self.lifecycle_bucket))
        acknowledge(
            self.execution_role,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{LIFECYCLE_PREFIX}/*]",
            "HyperPod instances read every lifecycle script under the lifecycle/ prefix of this bucket (read-only)",
        )

    def _acknowledge_deployment_findings(self) -> None:
        """Findings on the singleton function aws-cdk's BucketDeployment creates to copy the scripts."""
        role = self.lifecycle_deployment.handler_role
        handler = role.node.scope
        assert handler is not None
        acknowledge(
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The BucketDeployment copy function uses the basic execution role only to write its logs",
        )
        acknowledge(
            handler,
            "AwsSolutions-L1",
            "BucketDeployment's runtime is chosen by aws-cdk-lib (no override) and is updated with the library",
        )
        for finding in (
            "Action::s3:GetBucket*",
            "Action::s3:GetObject*",
            "Action::s3:List*",
            "Action::s3:Abort*",
            "Action::s3:DeleteObject*",
            "Action::kms:GenerateDataKey*",
            "Action::kms:ReEncrypt*",
            "Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*",
        ):
            acknowledge(
                role,
                f"AwsSolutions-IAM5[{finding}]",
                "BucketDeployment reads the CDK asset objects and syncs them into the lifecycle bucket (encrypted "
                "with its KMS key); grants are limited to those two buckets and that key",
            )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{Stack.of(self).get_logical_id(_cfn_element(self.lifecycle_bucket))}.Arn>/*]",
            "BucketDeployment writes the lifecycle scripts under the lifecycle/ prefix of this bucket only",
        )

    def _acknowledge_barrier_findings(self, provider: cr.Provider, handlers: list[lambda_.Function]) -> None:
        """Findings on the node barrier's Lambda functions and the Provider framework aws-cdk generates."""
        stack = Stack.of(self)
        for handler in handlers:
            acknowledge(
                handler,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                "The node barrier functions use the basic execution role only to write their own logs",
            )
        acknowledge(
            provider,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The aws-cdk Provider framework functions use the basic execution role only to write their logs",
        )
        framework = [provider.node.find_child(f"framework-{name}") for name in ("isComplete", "onTimeout")]
        for function in [*handlers, *framework]:
            logical_id = stack.get_logical_id(_cfn_element(function))
            acknowledge(
                provider,
                f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>:*]",
                "The Provider framework invokes any version of its own barrier function, and only that function",
            )
        acknowledge(
            provider,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions log delivery (logs:CreateLogDelivery, ListLogDeliveries...) supports no "
            "resource-level permissions; the waiter state machine only writes its execution log",
        )
        acknowledge(
            provider,
            "AwsSolutions-SF2",
            "The barrier's waiter state machine only polls ListClusterNodes once a minute; its executions are "
            "logged in full, so X-Ray tracing adds nothing",
        )

    def _skip_barrier_checks(self, provider: cr.Provider, handlers: list[lambda_.Function]) -> None:
        """checkov checks that do not apply to the node barrier (the Provider's own framework functions get
        theirs from FrameworkFunctionSkips in build_app)."""
        for handler in handlers:
            skip_check(
                handler,
                "CKV_AWS_115",
                "The node barrier runs only during deployments, once per event of Custom::HyperPodNodesReady, "
                "and never competes for the account's concurrency",
            )
            skip_check(
                handler,
                "CKV_AWS_116",
                "The Provider framework invokes the node barrier synchronously and reports every failure or "
                "timeout to CloudFormation: no asynchronous event to dead-letter",
            )
            skip_check(
                handler,
                "CKV_AWS_117",
                "The node barrier calls only the SageMaker ListClusterNodes API and reaches nothing inside the "
                "VPC; outside it, it needs no NAT route or interface endpoint",
            )
        waiter_role = provider.node.find_child("waiter-state-machine").node.find_child("Role")
        skip_check(
            waiter_role.node.find_child("DefaultPolicy"),
            "CKV_AWS_111",
            "aws-cdk's Provider grants its waiter state machine the CloudWatch Logs delivery actions "
            "(logs:CreateLogDelivery, PutResourcePolicy...) on * because they support no resource-level "
            "permissions; the state machine only writes its own execution log",
        )


def _limit_waiter_trust(provider: cr.Provider) -> None:
    """The Provider framework's waiter role trusts states.amazonaws.com for any account's state machines; Step
    Functions sends aws:SourceAccount and aws:SourceArn (its confused-deputy guide), so bind the role to state
    machines of this account and Region (the waiter's own ARN would be a circular reference)."""
    role = provider.node.find_child("waiter-state-machine").node.find_child("Role").node.default_child
    assert isinstance(role, iam.CfnRole), "aws-cdk's Provider no longer names its waiter role: review this"
    role.add_property_override(
        "AssumeRolePolicyDocument.Statement.0.Condition",
        {
            "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
            "ArnLike": {"aws:SourceArn": regional_arn_pattern(provider, "states", "stateMachine:*")},
        },
    )


def _log_key(scope: Construct) -> kms.Key:
    key = retained_key(scope, "LogKey", "Encrypts the HyperPod node barrier and script upload logs")
    # Generated log group names: the key admits log groups of this account and Region only.
    allow_log_encryption(key, scope, "*")
    return key


def _cfn_element(construct: IConstruct) -> CfnElement:
    resource = construct.node.default_child
    assert isinstance(resource, CfnElement), f"{construct.node.path} has no CloudFormation resource"
    return resource
