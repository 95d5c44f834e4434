"""The HyperPod Inference Operator as the EKS add-on, with the add-ons it requires, its roles and TLS bucket.

The operator's init container refuses to start without the S3 *and* FSx CSI drivers and cert-manager, so
those four add-ons (plus metrics-server) are installed first, after the HyperPod nodes are Running (they run on
those nodes; they tolerate the node-health taint HyperPod sets). Naming rules come from the AWS managed policy
``AmazonSageMakerHyperPodInferenceAccess``: it only passes roles named ``SageMakerHyperPodInference*`` and
only writes to buckets named ``hyperpod-tls*``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws, CfnJson, Names, Stack
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from inference_tiers.constructs.common.checkov import skip_check
from inference_tiers.constructs.common.nag import acknowledge, nag_resource_id
from inference_tiers.constructs.common.storage import access_logs_bucket as new_access_logs_bucket
from inference_tiers.constructs.common.storage import private_bucket
from inference_tiers.constructs.common.trust import sagemaker_principal
from inference_tiers.constructs.eks.lb_controller_policy import load_balancer_controller_statements
from inference_tiers.constructs.hyperpod.cluster import HyperPodCluster
from inference_tiers.constructs.hyperpod.observability import ADDON_VERSION_PATTERN, ADDON_VERSION_TEXT
from inference_tiers.validation import Args

INFERENCE_ADDON = "amazon-sagemaker-hyperpod-inference"
OPERATOR_ROLE_PREFIX = "SageMakerHyperPodInference"
TLS_BUCKET_PREFIX = "hyperpod-tls-"
OPERATOR_NAMESPACE = "hyperpod-inference-system"

# Pinned add-on versions: the minimum versions the HyperPod inference setup guide lists for each
# prerequisite and for the operator add-on (the versions its configuration keys were documented for).
# Before deploying on a new Kubernetes version, check `aws eks describe-addon-versions --addon-name <name>
# --kubernetes-version <v>` and raise them here together.
DEFAULT_ADDON_VERSIONS: Mapping[str, str] = {
    "aws-mountpoint-s3-csi-driver": "v1.14.1-eksbuild.1",
    "aws-fsx-csi-driver": "v1.6.0-eksbuild.1",
    "metrics-server": "v0.7.2-eksbuild.4",
    "cert-manager": "v1.18.2-eksbuild.2",
    INFERENCE_ADDON: "v1.0.0-eksbuild.1",
}

_CRD = (
    "aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/"
    "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"
)


@dataclass(frozen=True)
class OperatorRelease:
    """An inference operator release as its Helm chart publishes it: the chart and operator (app) version and
    the aws/sagemaker-hyperpod-cli commit whose CRD (:data:`_CRD`) the tests validate against."""

    chart: str
    operator: str
    commit: str

    def __str__(self) -> str:
        return f"operator {self.operator} (chart {self.chart}, CRD at {self.commit})"


def _chart_order(release: OperatorRelease) -> tuple[int, ...]:
    return tuple(int(part) for part in release.chart.split("."))


# Add-on build -> the operator release whose CRD it carries (the add-on's own CRD is not public).
# v1.0.0-eksbuild.1: the upstream Helm-to-add-on migration script installs it (9ffefae, 2026-02-17, the day
# after 51b8dd2 "Inference Operator AddOn ... Version Update 3.0", chart 2.0.0, image v3.0); release notes v3.0
# (2026-02-23): "Inference Operator 3.0 introduces EKS add-on integration".
# v2.0.0-eksbuild.2: a lower bound. The AWS Inference Gateway guide (sagemaker-hyperpod-model-deployment-
# inference-gateway) names it the first build with the gateway and documents spec.inferenceGateway on its
# InferenceEndpointConfig, a field no public CRD has up to chart 2.2.2 / operator 3.2 (011ca927, the last CRD
# change): its CRD is newer than 2.2.2's, which the tests validate against.
OPERATOR_ADDON_BUILDS: Mapping[str, OperatorRelease] = {
    "v1.0.0-eksbuild.1": OperatorRelease("2.0.0", "3.0", "51b8dd2"),
    "v2.0.0-eksbuild.2": OperatorRelease("2.2.2", "3.2", "011ca927"),
}

# Fields the tier renders that not every add-on build's CRD has: the first release whose CRD (:data:`_CRD`
# at that commit) declares the field, and the construct parameter / tier key that renders it. Without
# x-kubernetes-preserve-unknown-fields, kubectl's strict field validation rejects a field the CRD lacks.
OPERATOR_FIELD_MINIMUMS: Mapping[str, tuple[OperatorRelease, str]] = {
    "spec.worker.requestLimits": (OperatorRelease("2.1.0", "3.1", "d5e7256"), "request limits"),
    "spec.kubernetes.serviceAccountName": (OperatorRelease("2.1.1", "3.1", "4b76719"), "LoRA adapters"),
    "spec.pdSpec": (OperatorRelease("2.2.1", "3.2", "959b62b"), "prefill/decode"),
    # The field is older, but until 4b76719 its serverAddress pattern wanted a path segment after the
    # workspace id, and the tier renders the AMP workspace URL (.../workspaces/ws-<id>) the later CRDs accept.
    "spec.autoScalingSpec.prometheusTrigger": (
        OperatorRelease("2.1.1", "3.1", "4b76719"),
        "Prometheus scaling on an AMP workspace URL",
    ),
    "spec.autoScalingSpec.prometheusTriggerList": (
        OperatorRelease("2.1.1", "3.1", "4b76719"),
        "Prometheus scaling on an AMP workspace URL",
    ),
}


def first_build_with(field: str) -> str:
    """The first add-on build of :data:`OPERATOR_ADDON_BUILDS` whose CRD declares ``field``."""
    minimum, _ = OPERATOR_FIELD_MINIMUMS[field]
    return min(
        (b for b, r in OPERATOR_ADDON_BUILDS.items() if _chart_order(r) >= _chart_order(minimum)),
        key=lambda b: _chart_order(OPERATOR_ADDON_BUILDS[b]),
    )


def fields_missing_from(build: str, fields: Sequence[str]) -> list[str]:
    """Those of ``fields`` (keys of :data:`OPERATOR_FIELD_MINIMUMS`) the CRD of add-on ``build`` lacks."""
    release = OPERATOR_ADDON_BUILDS[build]
    return [f for f in fields if _chart_order(release) < _chart_order(OPERATOR_FIELD_MINIMUMS[f][0])]


def rendered_operator_fields(document: Mapping[str, Any]) -> list[str]:
    """The keys of :data:`OPERATOR_FIELD_MINIMUMS` present in the ``InferenceEndpointConfig`` ``document``."""

    def present(value: Any, parts: list[str]) -> bool:
        return not parts or (
            isinstance(value, Mapping) and parts[0] in value and present(value[parts[0]], parts[1:])
        )

    return [f for f in OPERATOR_FIELD_MINIMUMS if present(document, f.split("."))]


def field_feature(field: str) -> str:
    """The feature name preflight reports for ``field`` of :data:`OPERATOR_FIELD_MINIMUMS`."""
    return f"{OPERATOR_FIELD_MINIMUMS[field][1]} ({field.rsplit('.', 1)[-1]})"


def field_refusal(build: str, field: str) -> str:
    """What is accepted instead of ``field`` on add-on ``build``: the text of the synth-time error."""
    minimum, what = OPERATOR_FIELD_MINIMUMS[field]
    return (
        f"an endpoint without {field} ({what}): {INFERENCE_ADDON} {build} ships "
        f"{OPERATOR_ADDON_BUILDS[build]}, whose CRD lacks it (first in {minimum}); pin {INFERENCE_ADDON} "
        f"{first_build_with(field)} or later to use it"
    )


# The first operator add-on build with each feature of the InferenceEndpointConfig, and the evidence.
# kvCacheSpec and intelligentRoutingSpec entered the CRD in 3d2049b (2025-10-28), before operator 3.0.
OPERATOR_FEATURE_MINIMUMS: Mapping[str, tuple[str, str]] = {
    "the KV cache (kvCacheSpec)": ("v1.0.0-eksbuild.1", "CRD has it since 3d2049b, before operator 3.0"),
    "intelligent routing (intelligentRoutingSpec)": (
        "v1.0.0-eksbuild.1",
        "CRD has it since 3d2049b, before operator 3.0",
    ),
    **{
        field_feature(field): (first_build_with(field), f"CRD has {field} from {minimum}")
        for field, (minimum, _) in OPERATOR_FIELD_MINIMUMS.items()
    },
}

# HyperPod taints nodes with this key while deep health checks run and when its health agent finds a fault;
# system pods must tolerate it or stay Pending on a cluster made only of HyperPod nodes.
HYPERPOD_TOLERATIONS: list[dict[str, str]] = [
    {"key": "sagemaker.amazonaws.com/node-health-status", "operator": "Exists", "effect": "NoSchedule"}
]

# configurationValues of each prerequisite add-on (keys of each add-on's configuration schema).
_PREREQUISITE_CONFIG: Mapping[str, dict[str, Any]] = {
    "aws-mountpoint-s3-csi-driver": {"node": {"tolerateAllTaints": True}},
    "aws-fsx-csi-driver": {"controller": {"tolerations": HYPERPOD_TOLERATIONS}},
    "metrics-server": {"tolerations": HYPERPOD_TOLERATIONS},
    "cert-manager": {
        "tolerations": HYPERPOD_TOLERATIONS,
        "webhook": {"tolerations": HYPERPOD_TOLERATIONS},
        "cainjector": {"tolerations": HYPERPOD_TOLERATIONS},
    },
}


class HyperPodInferenceOperator(Construct):
    """Installs ``amazon-sagemaker-hyperpod-inference`` and its prerequisites on a HyperPod cluster.

    Creates the TLS bucket (``hyperpod-tls-...``), the IRSA roles of the operator (``SageMakerHyperPodInference-
    ...``), KEDA, the load-balancer controller and the two CSI drivers, the prerequisite add-ons and the
    operator add-on. Make every ``InferenceEndpointConfig`` depend on :attr:`addon` (``HyperPodModelEndpoint``
    does) so that CloudFormation deletes the custom resources before the operator that owns their finalizers.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        hyperpod_cluster: HyperPodCluster,
        model_buckets: Sequence[s3.IBucket] = (),
        prometheus_workspace_arn: str | None = None,
        access_logs_bucket: s3.IBucket | None = None,
        addon_versions: Mapping[str, str] = DEFAULT_ADDON_VERSIONS,
    ) -> None:
        """
        :param cluster: the EKS cluster (needs its OIDC provider for the service-account roles).
        :param hyperpod_cluster: the HyperPod cluster; add-ons wait for its node barrier.
        :param model_buckets: buckets the S3 CSI driver may read model weights from. Default none.
        :param prometheus_workspace_arn: AMP workspace KEDA may query for Prometheus triggers. Default none.
        :param access_logs_bucket: server access logs of the TLS bucket. Default: a new
            access-log bucket of this construct (AwsSolutions-S1 holds in any app).
        :param addon_versions: add-on name to pinned version. Default :data:`DEFAULT_ADDON_VERSIONS`.
        """
        args = Args("HyperPodInferenceOperator")
        cluster = args.implements("cluster", cluster, eks.ICluster)
        args.instance("hyperpod_cluster", hyperpod_cluster, HyperPodCluster)
        args.sequence("model_buckets", model_buckets, lambda name, v: args.implements(name, v, s3.IBucket))
        if prometheus_workspace_arn is not None:
            args.text(
                "prometheus_workspace_arn",
                prometheus_workspace_arn,
                pattern=r"arn:aws[a-z-]*:aps:[a-z0-9-]+:[0-9]{12}:workspace/ws-[\w-]+",
                description="an Amazon Managed Prometheus workspace ARN",
            )
        if access_logs_bucket is not None:
            args.implements("access_logs_bucket", access_logs_bucket, s3.IBucket)
        versions = args.mapping(
            "addon_versions",
            addon_versions,
            lambda name, v: args.text(name, v, pattern=ADDON_VERSION_PATTERN, description=ADDON_VERSION_TEXT),
        )
        missing = sorted(set(DEFAULT_ADDON_VERSIONS) - set(versions))
        if missing:
            raise args.error(
                "addon_versions",
                sorted(versions),
                f"a version for each of {', '.join(sorted(DEFAULT_ADDON_VERSIONS))} (missing {', '.join(missing)})",
            )
        if versions[INFERENCE_ADDON] not in OPERATOR_ADDON_BUILDS:
            raise args.error(
                f"addon_versions[{INFERENCE_ADDON}]",
                versions[INFERENCE_ADDON],
                f"a build whose operator is known: {', '.join(OPERATOR_ADDON_BUILDS)} (OPERATOR_ADDON_BUILDS)",
            )
        super().__init__(scope, construct_id)
        self._cluster = cluster
        self.addon_version: str = versions[INFERENCE_ADDON]
        """The pinned ``amazon-sagemaker-hyperpod-inference`` build (a key of :data:`OPERATOR_ADDON_BUILDS`):
        the ``InferenceEndpointConfig`` fields its CRD has bound what an endpoint may render."""
        suffix = Names.unique_id(self)[-8:].lower()

        self.tls_bucket = private_bucket(
            self,
            "TlsBucket",
            # SSE-S3: the operator and the SageMaker endpoint read certificates with permissions from the
            # AWS managed policy, which grants no KMS key use.
            key=None,
            access_logs=access_logs_bucket or new_access_logs_bucket(self, "AccessLogs"),
            access_logs_prefix="hyperpod-tls/",
            # The managed policy's S3 statements cover only hyperpod-tls* buckets.
            bucket_name=f"{TLS_BUCKET_PREFIX}{suffix}-{Aws.ACCOUNT_ID}-{Aws.REGION}",
        )
        """The bucket (``hyperpod-tls-...``, SSE-S3) the operator keeps its TLS certificates in; the AWS
        managed policy of :attr:`operator_role` covers it by name."""

        self.operator_role = self._service_account_role(
            "OperatorRole",
            OPERATOR_NAMESPACE,
            "hyperpod-inference-controller-manager",
            role_name=f"{OPERATOR_ROLE_PREFIX}-{Names.unique_resource_name(self, max_length=36)}",
            # SageMaker uses the role for the endpoint it registers in front of the model's load balancer.
            also_assumed_by=sagemaker_principal(self),
        )
        """The operator's execution role (``SageMakerHyperPodInference-...``), for the service account
        ``hyperpod-inference-controller-manager`` and for SageMaker, with
        ``AmazonSageMakerHyperPodInferenceAccess``: the role to grant further permissions to when endpoints
        need more."""
        self.operator_role.add_managed_policy(
            iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerHyperPodInferenceAccess")
        )
        self.operator_role.add_to_policy(
            iam.PolicyStatement(
                sid="EndpointVariantInVpc",
                # Registering a SageMaker endpoint that reaches the model's ALB through VPC interfaces.
                actions=["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission"],
                resources=[f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}:network-interface/*"],
            )
        )
        # No bucket grant: the managed policy already covers hyperpod-tls* buckets (hence the name).

        self.keda_role = self._service_account_role("KedaRole", OPERATOR_NAMESPACE, "keda-operator")
        """The service-account role of the add-on's KEDA operator: it may read CloudWatch metrics and, with
        ``prometheus_workspace_arn``, query that workspace. The role to grant access to further metric
        sources."""
        self.keda_role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadMetrics",
                actions=[
                    "cloudwatch:GetMetricData",
                    "cloudwatch:GetMetricStatistics",
                    "cloudwatch:ListMetrics",
                ],
                resources=["*"],
            )
        )
        if prometheus_workspace_arn:
            self.keda_role.add_to_policy(
                iam.PolicyStatement(
                    sid="QueryPrometheus",
                    actions=["aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
                    resources=[prometheus_workspace_arn],
                )
            )

        self.load_balancer_controller_role = self._service_account_role(
            "LoadBalancerControllerRole", OPERATOR_NAMESPACE, "aws-load-balancer-controller"
        )
        """The service-account role of the add-on's AWS Load Balancer Controller, which may create internal
        load balancers only."""
        for statement in load_balancer_controller_statements():
            self.load_balancer_controller_role.add_to_policy(statement)

        self.s3_csi_role = self._service_account_role("S3CsiRole", "kube-system", "s3-csi-driver-sa")
        """The service-account role of the Mountpoint for S3 CSI driver (``kube-system/s3-csi-driver-sa``),
        which may list and read ``model_buckets`` (and decrypt with their KMS keys)."""
        for bucket in model_buckets:
            self._grant_model_read(bucket)
        self.fsx_csi_role = self._service_account_role("FsxCsiRole", "kube-system", "fsx-csi-controller-sa")
        """The service-account role of the FSx for Lustre CSI controller
        (``kube-system/fsx-csi-controller-sa``), which may only describe file systems (static
        provisioning)."""
        self.fsx_csi_role.add_to_policy(
            iam.PolicyStatement(
                sid="StaticVolumes",
                # Models are read from existing file systems (static provisioning): nothing is created.
                actions=["fsx:DescribeFileSystems"],
                resources=["*"],
            )
        )

        roles = {
            "aws-mountpoint-s3-csi-driver": self.s3_csi_role,
            "aws-fsx-csi-driver": self.fsx_csi_role,
        }
        self.prerequisite_addons = [
            self._addon(name, addon_versions[name], _PREREQUISITE_CONFIG[name], roles.get(name))
            for name in _PREREQUISITE_CONFIG
        ]
        """The prerequisite EKS add-ons (L1 ``CfnAddon``): the Mountpoint for S3 and FSx CSI drivers,
        metrics-server and cert-manager, each installed after the node barrier."""
        for addon in self.prerequisite_addons:
            addon.node.add_dependency(hyperpod_cluster.nodes_ready)

        self.addon = self._addon(
            INFERENCE_ADDON,
            addon_versions[INFERENCE_ADDON],
            {
                "executionRoleArn": self.operator_role.role_arn,
                "tlsCertificateS3Bucket": self.tls_bucket.bucket_name,
                "hyperpodClusterArn": hyperpod_cluster.cluster_arn,
                "alb": {
                    "enabled": True,
                    "serviceAccount": {
                        "create": True,
                        "roleArn": self.load_balancer_controller_role.role_arn,
                    },
                },
                "keda": {
                    "enabled": True,
                    "auth": {"aws": {"irsa": {"enabled": True, "roleArn": self.keda_role.role_arn}}},
                },
            },
            None,
        )
        """The ``amazon-sagemaker-hyperpod-inference`` add-on (L1 ``CfnAddon``), installed after the node
        barrier and :attr:`prerequisite_addons`; make every ``InferenceEndpointConfig`` depend on it."""
        self.addon.node.add_dependency(hyperpod_cluster.nodes_ready, *self.prerequisite_addons)
        self._acknowledge_findings()

    def _grant_model_read(self, bucket: s3.IBucket) -> None:
        """Mountpoint for S3 lists and reads the weights; decrypts them when the bucket has a KMS key."""
        self.s3_csi_role.add_to_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn])
        )
        self.s3_csi_role.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects("*")])
        )
        if bucket.encryption_key is not None:
            bucket.encryption_key.grant_decrypt(self.s3_csi_role)
        # Rendered as nag sees it: an imported bucket's partition is literal or not depending on feature flags.
        rendered = nag_resource_id(self.s3_csi_role, bucket.arn_for_objects("*"))
        acknowledge(
            self.s3_csi_role,
            f"AwsSolutions-IAM5[Resource::{rendered}]",
            "The S3 CSI driver mounts the model prefix read-only; object keys (weight shards) are only known "
            "when the weights are uploaded",
        )

    def _service_account_role(
        self,
        construct_id: str,
        namespace: str,
        service_account: str,
        *,
        role_name: str | None = None,
        also_assumed_by: iam.IPrincipal | None = None,
    ) -> iam.Role:
        """A role for one Kubernetes service account (IRSA: the cluster's OIDC provider, exact subject)."""
        provider = self._cluster.open_id_connect_provider
        issuer = provider.open_id_connect_provider_issuer
        conditions = CfnJson(
            self,
            f"{construct_id}Subject",
            value={
                f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                f"{issuer}:aud": "sts.amazonaws.com",
            },
        )
        principal: iam.IPrincipal = iam.OpenIdConnectPrincipal(provider, {"StringEquals": conditions})
        if also_assumed_by is not None:
            principal = iam.CompositePrincipal(principal, also_assumed_by)
        return iam.Role(
            self,
            construct_id,
            role_name=role_name,
            assumed_by=principal,
            description=f"Kubernetes service account {namespace}/{service_account} (HyperPod inference)",
        )

    def _addon(
        self, name: str, version: str, config: Mapping[str, Any], role: iam.IRole | None
    ) -> eks_l1.CfnAddon:
        return eks_l1.CfnAddon(
            self,
            "".join(part.capitalize() for part in name.split("-")),
            addon_name=name,
            addon_version=version,
            cluster_name=self._cluster.cluster_name,
            configuration_values=Stack.of(self).to_json_string(dict(config)),
            service_account_role_arn=role.role_arn if role else None,
            resolve_conflicts="OVERWRITE",
        )

    def _acknowledge_findings(self) -> None:
        acknowledge(
            self.operator_role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess]",
            "The inference add-on validates that its execution role carries this AWS managed policy, which AWS "
            "scopes to hyperpod-tls buckets, SageMakerHyperPodInference roles and CreatedBy-tagged endpoints",
        )
        acknowledge(
            self.operator_role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:network-interface/*]",
            "SageMaker endpoint variants attach interfaces that exist only at runtime; limited to "
            "interface permissions in this account and region",
        )
        acknowledge(
            self,
            "AwsSolutions-IAM5[Resource::*]",
            "CloudWatch metric reads, FSx DescribeFileSystems and the load-balancer controller's EC2/ELB/ACM/"
            "WAF describe calls support no resource-level permissions; the controller's WAF and Shield "
            "associations name web ACLs and protections chosen per Ingress, as in its reference policy",
        )
        skip_check(
            self.load_balancer_controller_role.node.find_child("DefaultPolicy"),
            "CKV_AWS_111",
            "Only the controller's WAF and Shield associations are writes on *, as in its v2.13.2 reference "
            "policy: the web ACL and protection are chosen per Ingress by annotation, unknown at synth",
        )
        elb = "arn:<AWS::Partition>:elasticloadbalancing:<AWS::Region>:<AWS::AccountId>"
        ec2 = "arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>"
        for resource in (
            f"{elb}:loadbalancer/*",
            f"{elb}:targetgroup/*",
            f"{elb}:listener/*",
            f"{elb}:listener-rule/*",
            f"{ec2}:security-group/*",
            f"{ec2}:vpc/*",
        ):
            acknowledge(
                self.load_balancer_controller_role,
                f"AwsSolutions-IAM5[Resource::{resource}]",
                "The load-balancer controller creates one ALB, target group and security group per model "
                "at runtime; names are unknown at synth, limited to this account and region",
            )
