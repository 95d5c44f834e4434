"""The platform's NetworkPolicies, evaluated (tests/platform/netpol.py) for the pairs that must and must not talk:
tenants reach only DNS and the LiteLLM proxy port; the proxy reaches its database, cache, VPC endpoints and the
Pod Identity agent (trap 8); the metrics port is the scraper's."""

from __future__ import annotations

import pytest

from inference_tiers.k8s import sandbox_tenancy as tenancy_k8s
from inference_tiers.k8s.sandbox_tenancy import TENANT_LABEL
from inference_tiers.k8s.tenant_keys import (
    PROVISIONER_LABELS,
    gateway_network_policies,
    model_registration_objects,
    provisioner_objects,
)
from tests.platform.netpol import Cluster, Pod, allows, selects
from tests.platform.tenant_keys_data import GATEWAY, TEAM_A, TEAM_B, TENANCY, TENANTS

VPC = "10.0.0.0/16"
ALB_SUBNETS = ("10.0.0.0/24", "10.0.1.0/24")
SCRAPER_SUBNETS = ("10.0.8.0/24",)

NAMESPACES = {
    "kube-system": {},
    GATEWAY.namespace: {},
    TEAM_A.namespace: {TENANT_LABEL: TEAM_A.name},
    TEAM_B.namespace: {TENANT_LABEL: TEAM_B.name},
    "default": {},
}
COREDNS = Pod("kube-system", {"k8s-app": "kube-dns"}, "10.0.20.2")
PROXY = Pod(GATEWAY.namespace, dict(GATEWAY.pod_labels), "10.0.20.10")
PROVISIONER = Pod(GATEWAY.namespace, dict(PROVISIONER_LABELS), "10.0.20.11")
REGISTRATION_OBJECTS = model_registration_objects(GATEWAY, [], image="x/y:1")
REGISTRATION = Pod(
    GATEWAY.namespace,
    next(o for o in REGISTRATION_OBJECTS if o["kind"] == "Job")["spec"]["template"]["metadata"]["labels"],
    "10.0.20.12",
)
SANDBOX_A = Pod(TEAM_A.namespace, {TENANT_LABEL: TEAM_A.name}, "10.0.30.5")
SANDBOX_B = Pod(TEAM_B.namespace, {TENANT_LABEL: TEAM_B.name}, "10.0.30.6")
OTHER = Pod("default", {"app": "web"}, "10.0.40.7")
ALB = "10.0.1.20"
SCRAPER = "10.0.8.9"
AURORA = "10.0.50.4"


def platform() -> Cluster:
    policies = [
        *(p for t in (TEAM_A, TEAM_B) for p in tenancy_k8s.network_policies(t, TENANCY)),
        *gateway_network_policies(
            GATEWAY, vpc_cidr=VPC, alb_cidrs=ALB_SUBNETS, scraper_cidrs=SCRAPER_SUBNETS
        ),
        *(
            p
            for p in provisioner_objects(GATEWAY, TENANTS, image="x/y:1", vpc_cidr=VPC)
            if p["kind"] == "NetworkPolicy"
        ),
        *(p for p in REGISTRATION_OBJECTS if p["kind"] == "NetworkPolicy"),
    ]
    return Cluster(NAMESPACES, policies)


@pytest.mark.parametrize(
    ("source", "destination", "port", "protocol"),
    [
        (SANDBOX_A, PROXY, GATEWAY.port, "TCP"),
        (SANDBOX_B, PROXY, GATEWAY.port, "TCP"),
        (SANDBOX_A, COREDNS, 53, "UDP"),
        (SANDBOX_A, COREDNS, 53, "TCP"),
        (ALB, PROXY, GATEWAY.port, "TCP"),
        (SCRAPER, PROXY, GATEWAY.metrics_port, "TCP"),
        (PROVISIONER, PROXY, GATEWAY.port, "TCP"),
        (PROVISIONER, "10.0.3.3", 443, "TCP"),  # the EKS API endpoint's ENIs
        (REGISTRATION, PROXY, GATEWAY.port, "TCP"),  # the pool's model registration
        (REGISTRATION, COREDNS, 53, "UDP"),
        (PROXY, "169.254.170.23", 80, "TCP"),  # trap 8: the Pod Identity agent
        (PROXY, AURORA, 5432, "TCP"),
        (PROXY, "10.0.50.5", 6379, "TCP"),
        (PROXY, "10.0.60.6", 443, "TCP"),  # bedrock-runtime, sts, eks-auth endpoints
        (PROXY, COREDNS, 53, "UDP"),
    ],
)
def test_allowed(source: Pod | str, destination: Pod | str, port: int, protocol: str) -> None:
    assert (
        allows(platform(), source, destination, port, protocol)
        if isinstance(source, Pod)
        else ingress_allows(source, destination, port)
    )


@pytest.mark.parametrize(
    ("source", "destination", "port"),
    [
        (SANDBOX_A, SANDBOX_B, 8080),  # another tenant
        (SANDBOX_B, SANDBOX_A, 22),
        (SANDBOX_A, "169.254.169.254", 80),  # instance metadata
        (SANDBOX_A, "169.254.170.23", 80),  # no AWS identity (D7): not even the Pod Identity agent
        (SANDBOX_A, "93.184.216.34", 443),  # the internet
        (SANDBOX_A, PROXY, GATEWAY.metrics_port),  # the unauthenticated metrics port
        (SANDBOX_A, AURORA, 5432),  # the gateway's database
        (SANDBOX_A, PROVISIONER, GATEWAY.port),
        (OTHER, PROXY, GATEWAY.port),  # a pod of no tenant
        (PROXY, "93.184.216.34", 443),  # Bedrock only through the VPC endpoints
        (PROXY, "169.254.169.254", 80),
        (PROVISIONER, "93.184.216.34", 443),
        (REGISTRATION, "10.0.3.3", 443),  # no Kubernetes API: it writes nothing there
        (SANDBOX_A, REGISTRATION, GATEWAY.port),
    ],
)
def test_denied(source: Pod, destination: Pod | str, port: int) -> None:
    assert not allows(platform(), source, destination, port)


def ingress_allows(source_ip: str, destination: Pod | str, port: int) -> bool:
    """Traffic from outside the pods (the ALB, the managed scraper): only the destination's ingress applies."""
    assert isinstance(destination, Pod)
    outside = Pod("outside", {}, source_ip)
    cluster = platform()
    return allows(
        Cluster({**cluster.namespaces, "outside": {}}, cluster.policies), outside, destination, port
    )


def test_scrapers_and_albs_reach_only_their_port() -> None:
    assert not ingress_allows(SCRAPER, PROXY, GATEWAY.port)
    assert not ingress_allows(ALB, PROXY, GATEWAY.metrics_port)
    assert not ingress_allows("10.0.9.9", PROXY, GATEWAY.port)


# The evaluator itself, on the cases of kubernetes.io/docs/concepts/services-networking/network-policies.
def _policy(namespace: str, spec: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"namespace": namespace, "name": "p"}, "spec": {"podSelector": {}, **spec}}


A = Pod("a", {"role": "db"}, "10.1.0.1")
B = Pod("b", {"role": "client"}, "10.1.0.2")
C = Pod("a", {"role": "client"}, "10.1.0.3")
SPACES = {"a": {}, "b": {"project": "p"}}


def test_evaluator_without_policies_everything_is_allowed() -> None:
    assert allows(Cluster(SPACES), B, A, 5432)


def test_evaluator_default_deny_and_policy_types_default() -> None:
    deny_in = _policy("a", {})  # policyTypes defaults to Ingress
    assert not allows(Cluster(SPACES, [deny_in]), B, A, 5432)
    assert allows(Cluster(SPACES, [deny_in]), A, B, 80)  # egress is not isolated
    deny_out = _policy("a", {"policyTypes": ["Egress"]})
    assert not allows(Cluster(SPACES, [deny_out]), A, "8.8.8.8", 53, "UDP")


def test_evaluator_namespace_and_pod_selector_in_one_peer_is_an_and_in_two_peers_an_or() -> None:
    both = {
        "namespaceSelector": {"matchLabels": {"project": "p"}},
        "podSelector": {"matchLabels": {"role": "x"}},
    }
    one_peer = _policy("a", {"ingress": [{"from": [both]}]})
    assert not allows(Cluster(SPACES, [one_peer]), B, A, 1)
    assert not allows(Cluster(SPACES, [one_peer]), Pod("a", {"role": "x"}, "10.1.0.4"), A, 1)
    two_peers = _policy(
        "a",
        {
            "ingress": [
                {
                    "from": [
                        {"namespaceSelector": both["namespaceSelector"]},
                        {"podSelector": both["podSelector"]},
                    ]
                }
            ]
        },
    )
    assert allows(Cluster(SPACES, [two_peers]), B, A, 1)
    same_ns_only = _policy(
        "a", {"ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]}
    )
    assert allows(Cluster(SPACES, [same_ns_only]), C, A, 1) and not allows(
        Cluster(SPACES, [same_ns_only]), B, A, 1
    )


def test_evaluator_ip_blocks_ports_and_expressions() -> None:
    rule = {
        "to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.9.0.0/16"]}}],
        "ports": [{"port": 30, "endPort": 40}],
    }
    policy = _policy("a", {"policyTypes": ["Egress"], "egress": [rule]})
    cluster = Cluster(SPACES, [policy])
    assert allows(cluster, A, "10.2.3.4", 35)
    assert not allows(cluster, A, "10.9.3.4", 35)
    assert not allows(cluster, A, "10.2.3.4", 41)
    assert not allows(cluster, A, "10.2.3.4", 35, "UDP")
    assert selects({"matchExpressions": [{"key": "k", "operator": "Exists"}]}, {"k": ""})
    assert not selects({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["v"]}]}, {"k": "v"})
    assert selects({"matchExpressions": [{"key": "k", "operator": "DoesNotExist"}]}, {})
