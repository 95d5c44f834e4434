"""One ``InferenceEndpointConfig`` applied to the cluster after the inference operator add-on."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from inference_tiers.constructs.hyperpod.cluster import HyperPodCluster
from inference_tiers.constructs.hyperpod.inference_operator import HyperPodInferenceOperator
from inference_tiers.k8s.hyperpod_inference import InferenceEndpoint, render_inference_endpoint_config


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
        super().__init__(scope, construct_id)
        offered = hyperpod_cluster.instance_types
        for instance_type in endpoint.instance_types:
            if instance_type not in offered:
                raise ValueError(
                    f"endpoint {endpoint.name} instance type: got {instance_type!r}, which is not in any "
                    f"instance group; expected one of {', '.join(offered)}"
                )
        self.endpoint = endpoint
        self.document = render_inference_endpoint_config(endpoint)
        self.manifest = eks.KubernetesManifest(
            self, "Manifest", cluster=cluster, manifest=[self.document], overwrite=True
        )
        self.manifest.node.add_dependency(operator.addon)

    def metric(self, metric_name: str, statistic: str = "Sum") -> cloudwatch.Metric:
        """A metric of the registered SageMaker endpoint (``AWS/SageMaker``); needs ``endpoint_name``."""
        if self.endpoint.endpoint_name is None:
            raise ValueError(
                f"endpoint {self.endpoint.name}: metrics need endpoint_name (a registered SageMaker endpoint)"
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
