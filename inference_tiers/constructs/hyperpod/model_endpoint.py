"""One ``InferenceEndpointConfig`` applied to the cluster after the inference operator add-on."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.eks.cluster import kubectl_cluster
from inference_tiers.constructs.hyperpod.cluster import HyperPodCluster
from inference_tiers.constructs.hyperpod.inference_operator import HyperPodInferenceOperator
from inference_tiers.k8s.hyperpod_inference import InferenceEndpoint, render_inference_endpoint_config
from inference_tiers.validation import Args


class HyperPodModelEndpoint(Construct):
    """Applies ``endpoint`` as an ``InferenceEndpointConfig`` once the operator add-on (and its CRDs) exists.

    The manifest depends on the add-on, so CloudFormation deletes the custom resource (and the operator removes
    its ALB, SageMaker endpoint and finalizers) before it removes the operator.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        hyperpod_cluster: HyperPodCluster,
        operator: HyperPodInferenceOperator,
        endpoint: InferenceEndpoint,
    ) -> None:
        """
        :param cluster: the EKS cluster (kubectl provider applies the manifest).
        :param hyperpod_cluster: its instance groups must offer every instance type of ``endpoint``.
        :param operator: the inference operator add-on the manifest depends on.
        :param endpoint: the model, worker, scaling and registration (validated when it was created).
        """
        args = Args("HyperPodModelEndpoint")
        cluster = kubectl_cluster(args, "cluster", cluster)
        args.instance("hyperpod_cluster", hyperpod_cluster, HyperPodCluster)
        args.instance("operator", operator, HyperPodInferenceOperator, "a HyperPodInferenceOperator")
        args.instance("endpoint", endpoint, InferenceEndpoint, "an InferenceEndpoint")
        offered = hyperpod_cluster.instance_types
        for index, instance_type in enumerate(endpoint.instance_types):
            if instance_type not in offered:
                raise args.error(
                    f"endpoint.instance_types[{index}]",
                    instance_type,
                    f"an instance type of the HyperPod cluster's instance groups: {', '.join(offered)}",
                )
        super().__init__(scope, construct_id)
        self.endpoint = endpoint
        self.document = render_inference_endpoint_config(endpoint)
        self.manifest = eks.KubernetesManifest(
            self, "Manifest", cluster=cluster, manifest=[self.document], overwrite=True
        )
        self.manifest.node.add_dependency(operator.addon)

    def metric(self, metric_name: str, statistic: str = "Sum") -> cloudwatch.Metric:
        """A metric of the registered SageMaker endpoint (``AWS/SageMaker``); needs ``endpoint_name``."""
        args = Args("HyperPodModelEndpoint.metric")
        if self.endpoint.endpoint_name is None:
            raise args.error(
                "metric_name",
                metric_name,
                "an endpoint with endpoint_name (metrics exist only when registered)",
            )
        args.text("metric_name", metric_name, pattern=r"[A-Za-z0-9_.:-]{1,255}", allow_token=False)
        args.one_of(
            "statistic",
            statistic,
            ("Sum", "Average", "Minimum", "Maximum", "SampleCount", "p50", "p90", "p99"),
        )
        return cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name=metric_name,
            dimensions_map={"EndpointName": self.endpoint.endpoint_name, "VariantName": "AllTraffic"},
            statistic=statistic,
            period=Duration.minutes(1),
        )

    def metric_invocations(self) -> cloudwatch.Metric:
        return self.metric("Invocations")

    def metric_model_latency(self) -> cloudwatch.Metric:
        return self.metric("ModelLatency", statistic="p90")
