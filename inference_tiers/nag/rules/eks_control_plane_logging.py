"""EKS3: an EKS cluster sends every control-plane log type to CloudWatch Logs (one finding per missing type)."""

from __future__ import annotations

from collections.abc import Mapping

from cdk_nag import NagMessageLevel

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule, findings

LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")


def check(resource: Resource, facts: AppFacts) -> Result:
    logging = resource.properties.get("Logging")
    cluster_logging = logging.get("ClusterLogging") if isinstance(logging, Mapping) else None
    enabled = iam.as_list(cluster_logging.get("EnabledTypes")) if isinstance(cluster_logging, Mapping) else []
    on = {t.get("Type") for t in enabled if isinstance(t, Mapping)}
    return findings([f"LogType::{t}" for t in LOG_TYPES if t not in on])


RULE = Rule(
    suffix="EKS3",
    level=NagMessageLevel.ERROR,
    info="The EKS cluster does not send this control-plane log type to CloudWatch Logs.",
    explanation=(
        "The audit and authenticator logs are the only record of who scheduled what onto the GPU nodes; the "
        "api, controllerManager and scheduler logs explain pods that never start. Enable all five types in "
        "Logging.ClusterLogging.EnabledTypes (aws_eks_v2.Cluster(cluster_logging=[...]))."
    ),
    documentation="https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html",
    resource_types=frozenset({"AWS::EKS::Cluster"}),
    check=check,
)
