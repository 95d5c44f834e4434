"""Args with real jsii objects (implements, and values jsii cannot marshal): declared interfaces pass (even where jsii's generated protocol lists
a member the class lacks), imported resources pass without their getters being read, the rest is refused."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import jsii
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

from inference_tiers.validation import Args, ArgumentError, declares

ARGS = Args("Widget")


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")))
    stack = cdk.Stack(app, "Stack")
    cluster = eks.Cluster(
        stack,
        "Cluster",
        version=eks.KubernetesVersion.V1_35,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")),
    )
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-1", availability_zones=["us-east-1a"], vpc_cidr_block="10.0.0.0/16"
    )
    imported = eks.Cluster.from_cluster_attributes(
        stack, "Imported", cluster_name="other", vpc=vpc, kubectl_provider=cluster.kubectl_provider
    )
    topic = sns.Topic.from_topic_arn(stack, "Topic", "arn:aws:sns:us-east-1:123456789012:alarms")
    return {"cluster": cluster, "imported": imported, "vpc": vpc, "topic": topic, "stack": stack}


def test_a_cluster_passes_although_the_generated_protocol_lists_a_member_it_lacks(
    objects: dict[str, Any],
) -> None:
    cluster = objects["cluster"]
    assert not hasattr(cluster, "kubectl_provider_options")  # why a member check alone refuses it
    assert ARGS.implements("cluster", cluster, eks.ICluster) is cluster
    assert ARGS.implements("cluster", cluster, ec2.IConnectable) is cluster  # an interface ICluster extends


def test_an_imported_resource_passes_without_its_getters_being_read(objects: dict[str, Any]) -> None:
    imported = objects["imported"]
    with pytest.raises(RuntimeError, match="clusterSecurityGroupId"):
        _ = imported.cluster_security_group_id  # what reading every member would run into
    assert ARGS.implements("cluster", imported, eks.ICluster) is imported
    assert ARGS.implements("alarm_topic", objects["topic"], sns.ITopic) is objects["topic"]


@pytest.mark.parametrize(
    ("name", "interface", "shown"),
    [
        ("topic", eks.ICluster, "a _TopicBaseProxy"),
        ("vpc", eks.ICluster, r"a Resource\+IVpc"),
        ("cluster", sns.ITopic, "a Cluster"),
        ("stack", iam.IGrantable, "a Stack"),
    ],
)
def test_a_construct_of_another_kind_is_refused_naming_what_it_is(
    objects: dict[str, Any], name: str, interface: type, shown: str
) -> None:
    with pytest.raises(ArgumentError, match=f"got {shown}; expected an {interface.__name__}"):
        ARGS.implements("target", objects[name], interface)


def test_a_python_class_declaring_the_interface_passes_and_a_string_never_does() -> None:
    @jsii.implements(iam.IGrantable)
    class Grantee:
        def __init__(self) -> None:
            self.grant_principal = iam.AccountRootPrincipal()

    grantee = Grantee()
    assert declares(grantee, iam.IGrantable)
    assert ARGS.implements("grantee", grantee, iam.IGrantable) is grantee
    with pytest.raises(ArgumentError, match="not a string"):
        ARGS.implements("grantee", "arn:aws:iam::123456789012:role/x", iam.IGrantable)


def test_a_list_of_non_strings_is_described_not_sent_to_jsii() -> None:
    with pytest.raises(ArgumentError, match=r"got \[\('A', 'b'\)\]; expected a mapping"):
        ARGS.mapping("env", [("A", "b")])
