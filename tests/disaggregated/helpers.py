"""Shared by the disaggregated construct tests: a bare EKS cluster with the kubectl provider the constructs need."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

MODEL = "meta-llama/Llama-3.3-70B-Instruct"


def make_cluster(stack: cdk.Stack, construct_id: str = "Cluster") -> eks.Cluster:
    return eks.Cluster(
        stack,
        construct_id,
        version=eks.KubernetesVersion.V1_35,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        kubectl_provider_options=eks.KubectlProviderOptions(
            kubectl_layer=KubectlV35Layer(stack, f"{construct_id}Kubectl")
        ),
    )
