"""DisaggregatedServing and DisaggregatedMonitoring synthesized on a bare EKS cluster (no tier stack needed)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from inference_tiers.constructs.disaggregated.monitoring import (
    CLOUDWATCH_OBSERVABILITY_ADDON_VERSION,
    METRIC_NAMESPACE,
    ROUTER_COUNTERS,
    VLLM_HISTOGRAMS,
    VLLM_SCALARS,
    DisaggregatedMonitoring,
)
from inference_tiers.constructs.disaggregated.serving import (
    ROUTER_DOCKERFILE_DIR,
    VLLM_DOCKERFILE_DIR,
    DisaggregatedServing,
)
from inference_tiers.k8s.disaggregated import render_workload
from tests.disaggregated.helpers import MODEL, make_cluster
from tests.harness import DATA_DIR, cfn_lint_errors

DATA = DATA_DIR / "disaggregated"


@dataclass
class Built:
    app: cdk.App
    stack: cdk.Stack
    serving: DisaggregatedServing
    monitoring: DisaggregatedMonitoring

    @property
    def template(self) -> Template:
        return Template.from_stack(self.stack)


def build(**serving_props: Any) -> Built:
    app = cdk.App(context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Test")
    cluster = make_cluster(stack)
    serving = DisaggregatedServing(
        stack, "Serving", cluster=cluster, model_id=MODEL, instance_type="p5.48xlarge", **serving_props
    )
    monitoring = DisaggregatedMonitoring(stack, "Monitoring", cluster=cluster, serving=serving)
    return Built(app, stack, serving, monitoring)


@pytest.fixture(scope="module")
def built() -> Built:
    return build()


@pytest.fixture(scope="module")
def built_kv_store() -> Built:
    return build(enable_kv_store=True)


def resources(template: Template, cfn_type: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = template.find_resources(cfn_type)
    return found


def join_text(value: Any) -> str:
    """A Fn::Join (or plain string) as text: a Fn::Sub part as its template, every other token as <TOKEN>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_part_text(p) for p in parts)
    raise AssertionError(f"not a string or Fn::Join: {value!r}")


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and isinstance(part.get("Fn::Sub"), str):
        return str(part["Fn::Sub"])
    return "<TOKEN>"


def manifests(built: Built) -> dict[str, list[dict[str, Any]]]:
    """The kubectl manifests by construct id (Namespace / Workload), tokens replaced by <TOKEN>."""
    found = resources(built.template, "Custom::AWSCDK-EKS-KubernetesResource")
    result = {}
    for logical_id, resource in found.items():
        key = "Namespace" if logical_id.startswith("ServingNamespace") else "Workload"
        result[key] = json.loads(join_text(resource["Properties"]["Manifest"]))
    return result


# ---------------------------------------------------------------------------------------------------------
# DisaggregatedServing
# ---------------------------------------------------------------------------------------------------------


def test_namespace_is_applied_before_the_workload(built: Built) -> None:
    found = resources(built.template, "Custom::AWSCDK-EKS-KubernetesResource")
    assert len(found) == 2
    namespace_id = next(k for k in found if k.startswith("ServingNamespace"))
    workload_id = next(k for k in found if k.startswith("ServingWorkload"))
    assert namespace_id in found[workload_id]["DependsOn"]
    by_id = manifests(built)
    assert [m["kind"] for m in by_id["Namespace"]] == ["Namespace"]
    kinds = [m["kind"] for m in by_id["Workload"]]
    assert kinds == [
        "Deployment",
        "Deployment",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    ]


def deployment_images(built: Built) -> dict[str, str]:
    return {
        m["metadata"]["name"]: m["spec"]["template"]["spec"]["containers"][0]["image"]
        for m in manifests(built)["Workload"]
        if m["kind"] == "Deployment"
    }


def bootstrap_asset_image(asset_hash: str) -> str:
    """The URI a DockerImageAsset resolves to: the CDK bootstrap's container asset repository, content tag."""
    return (
        "${AWS::AccountId}.dkr.ecr.${AWS::Region}.${AWS::URLSuffix}/"
        f"cdk-hnb659fds-container-assets-${{AWS::AccountId}}-${{AWS::Region}}:{asset_hash}"
    )


def test_default_images_are_built_from_the_packaged_dockerfiles_into_the_bootstrap_repository(
    built_kv_store: Built,
) -> None:
    serving = built_kv_store.serving
    assert serving.vllm_image_asset is not None and serving.router_image_asset is not None
    vllm = bootstrap_asset_image(serving.vllm_image_asset.asset_hash)
    router = bootstrap_asset_image(serving.router_image_asset.asset_hash)
    assert deployment_images(built_kv_store) == {
        "vllm-pd-mooncake-master": vllm,
        "vllm-pd-prefill": vllm,
        "vllm-pd-decode": vllm,
        "vllm-pd-router": router,
    }
    assembly = built_kv_store.app.synth()
    images = json.loads(Path(assembly.directory, "Test.assets.json").read_text())["dockerImages"]
    assert set(images) == {serving.vllm_image_asset.asset_hash, serving.router_image_asset.asset_hash}
    for asset_hash, image in images.items():
        # Built for the x86_64 GPU and system nodes, from exactly the packaged Dockerfile.
        assert image["source"]["platform"] == "linux/amd64"
        staged = Path(assembly.directory, image["source"]["directory"], "Dockerfile").read_text()
        packaged = (
            VLLM_DOCKERFILE_DIR
            if asset_hash == serving.vllm_image_asset.asset_hash
            else ROUTER_DOCKERFILE_DIR
        )
        assert staged == (packaged / "Dockerfile").read_text()
        (destination,) = image["destinations"].values()
        assert (
            destination["repositoryName"] == "cdk-hnb659fds-container-assets-${AWS::AccountId}-${AWS::Region}"
        )
        assert destination["imageTag"] == asset_hash


def test_an_image_uri_replaces_only_its_own_image_asset() -> None:
    b = build(image_uri="public.ecr.aws/example/vllm-efa:1.0")
    assert b.serving.vllm_image_asset is None and b.serving.router_image_asset is not None
    images = deployment_images(b)
    assert images["vllm-pd-prefill"] == images["vllm-pd-decode"] == "public.ecr.aws/example/vllm-efa:1.0"
    assert images["vllm-pd-router"] == bootstrap_asset_image(b.serving.router_image_asset.asset_hash)
    b.template.resource_count_is("AWS::ECR::Repository", 0)  # the bootstrap's repository holds the assets


def test_load_balancer_admits_the_vpc_cidr_by_default(built: Built) -> None:
    service = next(m for m in manifests(built)["Workload"] if m["kind"] == "Service")
    assert service["spec"]["loadBalancerSourceRanges"] == ["<TOKEN>"]
    raw = next(
        r
        for k, r in resources(built.template, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if "Workload" in k
    )
    assert "CidrBlock" in json.dumps(raw["Properties"]["Manifest"])


def test_router_endpoint_is_read_back_from_the_service(built: Built) -> None:
    built.template.has_resource_properties(
        "Custom::AWSCDK-EKS-KubernetesObjectValue",
        {
            "ObjectType": "service",
            "ObjectName": "vllm-pd-router",
            "ObjectNamespace": "inference",
            "JsonPath": ".status.loadBalancer.ingress[0].hostname",
        },
    )
    assert cdk.Token.is_unresolved(built.serving.router_hostname)
    resolved = built.stack.resolve(built.serving.router_endpoint)
    assert join_text(resolved) == "http://<TOKEN>:80"


def test_allowed_cidrs_reach_the_load_balancer_service() -> None:
    serving = build_on_new_cluster(
        instance_type="p5.48xlarge", allowed_cidrs=["10.0.0.0/16", "192.168.0.0/24"]
    )
    service = next(
        m
        for m in render_workload(serving.spec)
        if m["kind"] == "Service" and m["metadata"]["name"] == serving.router_service_name
    )
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/16", "192.168.0.0/24"]


def build_on_new_cluster(*, kubectl: bool = True, **props: Any) -> DisaggregatedServing:
    stack = cdk.Stack(cdk.App(), "S")
    cluster = make_cluster(stack) if kubectl else eks.Cluster(stack, "C", version=eks.KubernetesVersion.V1_35)
    return DisaggregatedServing(stack, "Serving", cluster=cluster, **{"model_id": MODEL, **props})


# ---------------------------------------------------------------------------------------------------------
# DisaggregatedMonitoring
# ---------------------------------------------------------------------------------------------------------


def addon_configuration(built: Built) -> dict[str, Any]:
    addon = next(iter(resources(built.template, "AWS::EKS::Addon").values()))
    parsed: dict[str, Any] = json.loads(join_text(addon["Properties"]["ConfigurationValues"]))
    return parsed


def test_container_insights_addon_with_pod_identity(built: Built) -> None:
    built.template.has_resource_properties(
        "AWS::EKS::Addon",
        {
            "AddonName": "amazon-cloudwatch-observability",
            "AddonVersion": CLOUDWATCH_OBSERVABILITY_ADDON_VERSION,
            "PodIdentityAssociations": [{"ServiceAccount": "cloudwatch-agent", "RoleArn": Match.any_value()}],
        },
    )
    built.template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Action": ["sts:AssumeRole", "sts:TagSession"],
                        "Principal": {"Service": "pods.eks.amazonaws.com"},
                        "Effect": "Allow",
                    }
                ]
            }
        },
    )


def test_otel_pipeline_scrapes_the_workload_and_exports_to_cloudwatch(built: Built) -> None:
    otel = addon_configuration(built)["agent"]["otelConfig"]
    pipeline = otel["service"]["pipelines"]["metrics/inference_tiers"]
    assert set(pipeline["receivers"]) <= set(otel["receivers"])
    assert set(pipeline["processors"]) <= set(otel["processors"])
    assert set(pipeline["exporters"]) <= set(otel["exporters"])
    scrape = otel["receivers"]["prometheus/inference_tiers"]["config"]["scrape_configs"][0]
    assert scrape["kubernetes_sd_configs"][0]["namespaces"] == {"names": ["inference"]}
    assert scrape["kubernetes_sd_configs"][0]["selectors"][0]["field"] == "spec.nodeName=${env:K8S_NODE_NAME}"
    keep = re.compile(scrape["metric_relabel_configs"][0]["regex"])
    for name in VLLM_HISTOGRAMS:
        assert all(keep.fullmatch(name + s) for s in ("_bucket", "_sum", "_count")), name
    for name in VLLM_SCALARS + ROUTER_COUNTERS:
        assert keep.fullmatch(name), name
    assert not keep.fullmatch("vllm:prompt_tokens_total")
    emf = otel["exporters"]["awsemf/inference_tiers"]
    assert emf["namespace"] == METRIC_NAMESPACE
    assert emf["metric_declarations"][0]["dimensions"] == [["ClusterName", "Namespace", "Role"]]
    role_relabel = next(r for r in scrape["relabel_configs"] if r.get("target_label") == "Role")
    assert role_relabel["source_labels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_component"]


def test_monitored_metric_names_exist_in_the_pinned_versions() -> None:
    vllm_series = {
        line
        for line in (DATA / "vllm-metrics-v0.33.0.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    for name in VLLM_HISTOGRAMS:
        assert {f"{name}_bucket", f"{name}_sum", f"{name}_count"} <= vllm_series, name
    for name in VLLM_SCALARS:
        assert name in vllm_series, name
    # Router names are compiled into the Rust core of the pinned wheel.
    spec = find_spec("vllm_router_rs")
    assert spec is not None and spec.origin is not None
    core = Path(spec.origin).read_bytes()
    for name in ROUTER_COUNTERS:
        assert name.encode() in core, name


def test_dashboard_shows_latency_queue_kv_cache_and_transfer_health(built: Built) -> None:
    dashboard = next(iter(resources(built.template, "AWS::CloudWatch::Dashboard").values()))
    body = json.loads(join_text(dashboard["Properties"]["DashboardBody"]))
    titles = [w["properties"]["title"] for w in body["widgets"]]
    for word in (
        "Time to first token",
        "Inter-token latency",
        "Queue depth",
        "KV-cache usage",
        "transfer time",
        "transfer failures",
    ):
        assert any(word in t for t in titles), word
    text = json.dumps(body)
    for name in (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm_router_pd_decode_errors_total",
        "decode - prefill",
    ):
        assert name in text, name
    assert "mooncake_xfer" not in text


def test_alarms_on_ttft_and_transfer_failures_go_to_an_encrypted_topic(built: Built) -> None:
    alarms = resources(built.template, "AWS::CloudWatch::Alarm")
    assert len(alarms) == 2
    topic_id = next(iter(resources(built.template, "AWS::SNS::Topic")))
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]

    def metric_stats(alarm: dict[str, Any]) -> list[dict[str, Any]]:
        return [m["MetricStat"] for m in alarm["Properties"]["Metrics"] if "MetricStat" in m]

    ttft = next(a for k, a in alarms.items() if k.startswith("MonitoringTtft"))
    [stat] = metric_stats(ttft)
    assert stat["Metric"]["MetricName"] == "vllm:time_to_first_token_seconds" and stat["Stat"] == "Average"
    assert ttft["Properties"]["Threshold"] == 10
    dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
    assert dims["Role"] == "decode" and dims["Namespace"] == "inference"
    failures = next(a for k, a in alarms.items() if k.startswith("MonitoringTransferFailure"))
    names = {s["Metric"]["MetricName"] for s in metric_stats(failures)}
    assert names == {"vllm_router_pd_prefill_errors_total", "vllm_router_pd_decode_errors_total"}
    assert failures["Properties"]["Threshold"] == 1
    built.template.has_resource_properties(
        "AWS::SNS::Topic",
        {"KmsMasterKeyId": {"Fn::GetAtt": [Match.string_like_regexp("MonitoringKey"), "Arn"]}},
    )
    built.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    key_policy = json.dumps(
        next(iter(resources(built.template, "AWS::KMS::Key").values()))["Properties"]["KeyPolicy"]
    )
    assert "cloudwatch.amazonaws.com" in key_policy


def test_kv_store_adds_its_failure_alarm(built_kv_store: Built) -> None:
    alarms = resources(built_kv_store.template, "AWS::CloudWatch::Alarm")
    assert len(alarms) == 3
    assert "vllm:mooncake_store_operation_failed_keys_total" in json.dumps(alarms)


def test_an_existing_topic_is_used_as_is() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    cluster = make_cluster(stack)
    serving = DisaggregatedServing(
        stack, "Serving", cluster=cluster, model_id=MODEL, instance_type="p5.48xlarge"
    )
    topic = sns.Topic.from_topic_arn(stack, "T", "arn:aws:sns:us-east-1:123456789012:ops")
    monitoring = DisaggregatedMonitoring(stack, "M", cluster=cluster, serving=serving, alarm_topic=topic)
    assert monitoring.alarm_key is None
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SNS::Topic", 0)
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm", {"AlarmActions": ["arn:aws:sns:us-east-1:123456789012:ops"]}
    )


# ---------------------------------------------------------------------------------------------------------
# Template hygiene
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["built", "built_kv_store"])
def test_no_nag_findings_and_no_cfn_lint_errors_in_these_constructs(
    variant: str, request: pytest.FixtureRequest
) -> None:
    b: Built = request.getfixturevalue(variant)
    report = AwsSolutionsChecks().validate_scope(b.stack)
    ours = [
        f"{v.rule_name}: {r.construct_path}"
        for v in report.violations
        for r in v.violating_resources
        if r.construct_path.startswith(("Test/Serving", "Test/Monitoring"))
    ]
    assert ours == []
    assert cfn_lint_errors(b.template.to_json()) == []


def test_logs_and_keys_are_retained(built: Built) -> None:
    for cfn_type in ("AWS::Logs::LogGroup", "AWS::KMS::Key"):
        found = resources(built.template, cfn_type)
        assert found
        assert all(r.get("DeletionPolicy") == "Retain" for r in found.values()), cfn_type


def test_metrics_log_group_is_encrypted_with_a_key_only_cloudwatch_logs_of_that_group_may_use(
    built: Built,
) -> None:
    template = built.template
    (key_id,) = resources(template, "AWS::KMS::Key")
    (log_group,) = resources(template, "AWS::Logs::LogGroup").values()
    assert log_group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    statements = resources(template, "AWS::KMS::Key")[key_id]["Properties"]["KeyPolicy"]["Statement"]
    logs = [s for s in statements if "logs." in json.dumps(s.get("Principal", {}))]
    assert len(logs) == 1
    condition = json.dumps(logs[0]["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    assert "/aws/containerinsights/" in condition and "/inference-tiers" in condition
    # The same key encrypts the default alarm topic.
    (topic,) = resources(template, "AWS::SNS::Topic").values()
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
