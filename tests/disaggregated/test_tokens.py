"""Deploy-time values are accepted where the docstrings promise them and reach the template unparsed: image
URIs from another repository, CIDRs and an add-on version from other stacks or parameters, a Secret name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from inference_tiers.constructs.disaggregated.monitoring import DisaggregatedMonitoring
from inference_tiers.constructs.disaggregated.serving import DisaggregatedServing
from inference_tiers.k8s.disaggregated import DisaggregatedWorkloadSpec, render
from inference_tiers.validation import ArgumentError
from tests.disaggregated.helpers import make_cluster


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out"))), "Tokens")
    cluster = make_cluster(stack)
    repository = ecr.Repository.from_repository_name(stack, "Repo", "team/vllm-efa")
    model = cdk.CfnParameter(stack, "Model").value_as_string
    serving = DisaggregatedServing(
        stack,
        "Serving",
        cluster=cluster,
        model_id=model,
        instance_type="p5.48xlarge",
        image_uri=repository.repository_uri_for_tag("2026-12"),
        router_image_uri=cdk.CfnParameter(stack, "RouterImage").value_as_string,
        allowed_cidrs=[cdk.Fn.import_value("ClientCidr"), "192.168.0.0/24"],
        hf_token_secret_name=cdk.CfnParameter(stack, "TokenSecret").value_as_string,
        extra_env={"MC_EFA_NIC_SELECTION": cdk.CfnParameter(stack, "NicSelection").value_as_string},
    )
    monitoring = DisaggregatedMonitoring(
        stack,
        "Monitoring",
        cluster=cluster,
        serving=serving,
        addon_version=cdk.CfnParameter(stack, "AddonVersion").value_as_string,
        alarm_topic=sns.Topic.from_topic_arn(stack, "Topic", cdk.Fn.import_value("OpsTopicArn")),
        encryption_key=kms.Key.from_key_arn(stack, "Key", cdk.Fn.import_value("LogKeyArn")),
    )
    return {
        "stack": stack,
        "serving": serving,
        "monitoring": monitoring,
        "template": Template.from_stack(stack),
    }


def _workload_manifest(template: Template) -> str:
    resources = template.find_resources("Custom::AWSCDK-EKS-KubernetesResource")
    return json.dumps(next(r for k, r in resources.items() if k.startswith("ServingWorkload"))["Properties"])


def test_serving_passes_every_token_to_the_manifests_unparsed(built: dict[str, Any]) -> None:
    serving: DisaggregatedServing = built["serving"]
    assert (
        serving.vllm_image_asset is None and serving.router_image_asset is None
    )  # no asset when a URI is given
    manifest = _workload_manifest(built["template"])
    for reference in (
        '{"Ref": "Model"}',
        '{"Ref": "RouterImage"}',
        '{"Ref": "TokenSecret"}',
        '{"Ref": "NicSelection"}',
    ):
        assert reference in manifest, reference
    assert '{"Fn::ImportValue": "ClientCidr"}' in manifest
    assert "team/vllm-efa:2026-12" in manifest
    assert "192.168.0.0/24" in manifest


def test_monitoring_passes_its_tokens_to_the_template(built: dict[str, Any]) -> None:
    template: Template = built["template"]
    (addon,) = template.find_resources("AWS::EKS::Addon").values()
    assert addon["Properties"]["AddonVersion"] == {"Ref": "AddonVersion"}
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Fn::ImportValue": "OpsTopicArn"}]
    (log_group,) = template.find_resources("AWS::Logs::LogGroup").values()
    assert log_group["Properties"]["KmsKeyId"] == {"Fn::ImportValue": "LogKeyArn"}
    template.resource_count_is("AWS::KMS::Key", 0)


def test_a_whole_list_token_of_cidrs_is_accepted(tmp_path: Path) -> None:
    cidrs = cdk.Fn.split(",", cdk.Fn.import_value("ClientCidrs"))
    spec = DisaggregatedWorkloadSpec(
        model_id="org/model",
        instance_type="p5.48xlarge",
        vllm_image="a/b:1",
        router_image="a/r:1",
        allowed_cidrs=cidrs,
    )
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "List")
    service = next(m for m in render(spec) if m["kind"] == "Service")
    resolved = stack.resolve(service["spec"]["loadBalancerSourceRanges"])
    assert resolved == {"Fn::Split": [",", {"Fn::ImportValue": "ClientCidrs"}]}


def test_tokens_are_refused_where_a_synth_time_value_is_needed(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Refused")
    name = cdk.CfnParameter(stack, "Name").value_as_string
    for field in ("name", "namespace"):
        with pytest.raises(
            ArgumentError, match=rf"parameter '{field}' got a deploy-time token; .*known at synth"
        ):
            DisaggregatedWorkloadSpec(
                model_id="org/model",
                instance_type="p5.48xlarge",
                vllm_image="a/b:1",
                router_image="a/r:1",
                **{field: name},
            )
    with pytest.raises(ArgumentError, match=r"parameter 'instance_type' got a deploy-time token"):
        DisaggregatedWorkloadSpec(
            model_id="org/model", instance_type=name, vllm_image="a/b:1", router_image="a/r:1"
        )
