"""One ``InferenceEndpointConfig`` applied to the cluster after the inference operator add-on."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from inference_tiers.constructs.eks.cluster import kubectl_cluster
from inference_tiers.constructs.eks.lora_reader import LoraAdapterReader
from inference_tiers.constructs.hyperpod.cluster import HyperPodCluster
from inference_tiers.constructs.hyperpod.inference_operator import (
    HyperPodInferenceOperator,
    field_refusal,
    fields_missing_from,
    rendered_operator_fields,
)
from inference_tiers.k8s.hyperpod_inference import (
    USER_ASSIGNABLE_LABEL,
    InferenceEndpoint,
    LoraServing,
    creation_suffix,
    render_inference_endpoint_config,
)
from inference_tiers.k8s.inference_gateway_lora import lora_service_account
from inference_tiers.validation import Args

# The InferenceEndpoint parameter that renders each field of OPERATOR_FIELD_MINIMUMS.
_ENDPOINT_PARAMS = {
    "spec.worker.requestLimits": "request_limits",
    "spec.kubernetes.serviceAccountName": "lora",
    "spec.pdSpec": "prefill_decode",
    "spec.autoScalingSpec.prometheusTrigger": "autoscaling",
    "spec.autoScalingSpec.prometheusTriggerList": "autoscaling",
}


class HyperPodModelEndpoint(Construct):
    """Applies ``endpoint`` as an ``InferenceEndpointConfig`` once the operator add-on (and its CRDs) exists.

    The manifest depends on the add-on, so CloudFormation deletes the custom resource (and the operator removes
    its ALB, SageMaker endpoint and finalizers) before it removes the operator.

    With ``endpoint.lora`` it also creates the model pods' ServiceAccount (labelled user-assignable, as the
    operator requires) and its EKS Pod Identity role (:attr:`lora_role`), which may only list and read the
    adapters' prefixes (and decrypt with ``adapter_key``): the worker fetches the adapters with it.
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
        adapter_key: kms.IKey | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (kubectl provider applies the manifest; its Pod Identity agent add-on
            gives the LoRA role to the pods).
        :param hyperpod_cluster: its instance groups must offer every instance type of ``endpoint``.
        :param operator: the inference operator add-on the manifest depends on.
        :param endpoint: the model, worker, scaling, registration and LoRA adapters (validated when it was
            created).
        :param adapter_key: the KMS key the adapter objects are encrypted with (SSE-KMS); the LoRA role may
            decrypt with it. Only with ``endpoint.lora``. Default: none (SSE-S3).
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
        kv_cache = endpoint.kv_cache
        tiered = kv_cache.tiered_storage_memory_percent if kv_cache else None
        if tiered is not None and hyperpod_cluster.tiered_storage_memory_percent != tiered:
            # Without the cluster's daemon the operator has no tieredstorage backend to offload to.
            raise args.error(
                "endpoint.kv_cache.tiered_storage_memory_percent",
                tiered,
                "the HyperPod cluster's tiered_storage_memory_percent "
                f"({hyperpod_cluster.tiered_storage_memory_percent}): the tieredstorage L2 tier is the cluster's "
                "TieredStorageConfig",
            )
        if adapter_key is not None:
            args.implements("adapter_key", adapter_key, kms.IKey)
            if endpoint.lora is None:
                raise args.error("adapter_key", adapter_key, "None when the endpoint has no lora adapters")
        document = render_inference_endpoint_config(endpoint)
        # The pinned add-on's CRD must declare every field: kubectl's strict validation rejects the others.
        for field in fields_missing_from(operator.addon_version, rendered_operator_fields(document)):
            param = _ENDPOINT_PARAMS[field]
            raise args.error(
                f"endpoint.{param}", getattr(endpoint, param), field_refusal(operator.addon_version, field)
            )
        super().__init__(scope, construct_id)
        self.endpoint = endpoint
        """The ``InferenceEndpoint`` this construct applies."""
        self.document = document
        """The rendered ``InferenceEndpointConfig`` object that :attr:`manifest` applies."""
        self.endpoint_name = endpoint.registered_endpoint_name
        """The SageMaker endpoint name the operator registers (``endpoint.endpoint_name`` plus the creation
        suffix when routing is on), for alarms and clients; None without ``endpoint.endpoint_name``."""
        # Creation-only fields rename the custom resource too: CloudFormation then creates the new object and
        # deletes the old one (an update would `kubectl apply --prune`, whose default allowlist has no custom
        # resources, leaving the old endpoint running; aws-cdk-lib 2.275 aws-eks-v2 kubectl-handler/apply).
        self.manifest = eks.KubernetesManifest(
            self,
            "Manifest" + creation_suffix(endpoint.routing).replace("-", ""),
            cluster=cluster,
            manifest=[self.document],
            overwrite=True,
        )
        """The manifest that applies :attr:`document`, after the operator add-on (and, with ``endpoint.lora``,
        after the ServiceAccount and its role); make resources that call the endpoint depend on it."""
        self.manifest.node.add_dependency(operator.addon)
        self.lora_role: iam.Role | None = None
        """The role the model pods fetch the LoRA adapters with (None without ``endpoint.lora``)."""
        self.service_account_manifest: eks.KubernetesManifest | None = None
        """The manifest of the model pods' ServiceAccount (labelled user-assignable), or None without
        ``endpoint.lora``."""
        if endpoint.lora is not None:
            self._add_lora_identity(cluster, endpoint.lora, adapter_key)

    def _add_lora_identity(self, cluster: eks.ICluster, lora: LoraServing, key: kms.IKey | None) -> None:
        """The pods' ServiceAccount (labelled user-assignable) and its role, before the operator makes pods."""
        name = self.endpoint.service_account_name
        assert name is not None  # set whenever lora is
        namespace = self.endpoint.namespace
        self.service_account_manifest = eks.KubernetesManifest(
            self,
            "LoraServiceAccount",
            cluster=cluster,
            manifest=[lora_service_account(namespace, name, {USER_ASSIGNABLE_LABEL: "true"})],
            overwrite=True,
        )
        reader = LoraAdapterReader(
            self,
            "LoraReader",
            cluster=cluster,
            namespace=namespace,
            service_account=name,
            lora=lora,
            key=key,
            description=f"Reads the LoRA adapters of HyperPod endpoint {self.endpoint.name}",
        )
        self.lora_role = reader.role
        self.manifest.node.add_dependency(self.service_account_manifest, reader)

    def metric(self, metric_name: str, statistic: str = "Sum") -> cloudwatch.Metric:
        """A metric of the registered SageMaker endpoint (``AWS/SageMaker``); needs ``endpoint_name``."""
        args = Args("HyperPodModelEndpoint.metric")
        endpoint_name = self.endpoint_name
        if endpoint_name is None:
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
            dimensions_map={"EndpointName": endpoint_name, "VariantName": "AllTraffic"},
            statistic=statistic,
            period=Duration.minutes(1),
        )

    def metric_invocations(self) -> cloudwatch.Metric:
        """``Invocations``: requests the SageMaker endpoint in front of the model served."""
        return self.metric("Invocations")

    def metric_model_latency(self) -> cloudwatch.Metric:
        """``ModelLatency`` p90, in microseconds."""
        return self.metric("ModelLatency", statistic="p90")
