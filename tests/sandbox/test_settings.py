"""The agent-sandbox tier's context keys: every bad value is a ConfigError naming the key and what is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from inference_tiers.config import ConfigError
from inference_tiers.ops import smoke
from inference_tiers.ops.smoke import StackError
from tests.harness import make_app
from tests.ops.helpers import StubClients


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("agent-sandbox.vpc_cidr", "10.0.0.0/20", r"an IPv4 CIDR block from /16 to /16"),
        ("agent-sandbox.core_node_instance_type", "p5.48xlarge", "an x86 m/c/r instance type"),
        ("agent-sandbox.core_node_count", "1", "an integer from 2 to 10"),
        ("agent-sandbox.admin_principal_arn", "arn:aws:sts::123456789012:assumed-role/a/b", "an IAM role"),
        ("agent-sandbox.public_endpoint_cidrs", "everywhere", "an IPv4 CIDR block"),
        ("agent-sandbox.public_endpoint_cidrs", "0.0.0.0/0", "from /8 to /32"),
        ("agent-sandbox.public_endpoint_cidrs", "10.0.0.0/7", "from /8 to /32"),
        ("agent-sandbox.node_mode", "vm", "one of nested, metal"),
        ("agent-sandbox.instance_families", "m7g", "one of c8i"),
        ("agent-sandbox.kata_shim", "fc", "one of qemu-runtime-rs, clh-runtime-rs"),
        ("agent-sandbox.max_vcpus", "4", "an integer from 8 to 100000"),
        ("agent-sandbox.consolidate_after_minutes", "1", "an integer from 2 to 1440"),
        ("agent-sandbox.root_volume_gib", "20", "an integer from 30 to 16384"),
        ("agent-sandbox.ami_alias", "al2023@2026", r"al2023@latest or al2023@vYYYYMMDD"),
        ("agent-sandbox.tenants", '{"Team A": {}}', "keys match"),
        ("agent-sandbox.tenants", '{"a": {"gpus": 1}}', "keys are among max_sandboxes"),
        ("agent-sandbox.tenants", "{}", "at least one tenant"),
        # json.loads keeps the last of a repeated key: two teams would share one namespace.
        (
            "agent-sandbox.tenants",
            '{"a": {}, "b": {}, "a": {"warm_pool": 1}}',
            "each tenant .*once; 'a' is repeated",
        ),
        ("agent-sandbox.tenants", '{"a": {"warm_pool": 1, "warm_pool": 2}}', "once; 'warm_pool' is repeated"),
        ("agent-sandbox.tenants", '{"a": {"warm_pool": 20}}', "from 0 to 10"),
        ("agent-sandbox.tenants", '{"a": {"egress": ["169.254.169.254/32:80"]}}', "instance metadata"),
        ("agent-sandbox.model_gateway_url", "ftp://gw", "an http"),
        ("agent-sandbox.sandbox_image", "python:latest", "pinned tag"),
        ("agent-sandbox.claim_ttl_minutes", "0", "an integer from 5 to 10080"),
    ],
)
def test_bad_values_name_the_key(key: str, value: Any, accepted: str) -> None:
    with pytest.raises(ConfigError, match=rf"context key '{key}[^']*': got .*expected .*({accepted})"):
        make_app(tier="agent-sandbox", **{key: value})


@pytest.mark.parametrize("tier", ["agent-sandbox", "platform"])
def test_tenant_errors_name_the_tenant_and_field(tier: str) -> None:
    """The platform tier's sandbox keys are its own: errors name ``platform.``, never ``agent-sandbox.``."""
    with pytest.raises(ConfigError, match=rf"'{tier}.tenants.a.egress\[0\]': got '10.0.0.0/8'"):
        make_app(tier=tier, **{f"{tier}.tenants": {"a": {"egress": ["10.0.0.0/8"]}}})


def test_gateway_cidrs_without_a_gateway_url_name_the_key() -> None:
    with pytest.raises(
        ConfigError, match=r"'agent-sandbox.model_gateway_cidrs': .*empty without model_gateway_url"
    ):
        make_app(tier="agent-sandbox", **{"agent-sandbox.model_gateway_cidrs": ["10.60.0.0/24"]})


@pytest.mark.parametrize(
    ("mode", "family", "accepted"),
    [("nested", "m7i", "one of 'c8i', 'c8i-flex'"), ("metal", "c8i-flex", "one of 'c6i', 'm6i'")],
)
def test_families_that_cannot_run_kata_in_the_node_mode_name_the_key(
    mode: str, family: str, accepted: str
) -> None:
    with pytest.raises(
        ConfigError, match=rf"'agent-sandbox.instance_families\[0\]': got '{family}'; .*{accepted}"
    ):
        make_app(
            tier="agent-sandbox",
            **{"agent-sandbox.node_mode": mode, "agent-sandbox.instance_families": [family]},
        )


def test_smoke_explains_how_to_reach_a_private_sandbox_cluster() -> None:
    clients = StubClients()
    clients.stub("cloudformation").add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "InferenceTiers-AgentSandbox",
                    "CreationTime": "2026-12-01T00:00:00Z",
                    "StackStatus": "CREATE_COMPLETE",
                    "Outputs": [{"OutputKey": "EksClusterName", "OutputValue": "c"}],
                }
            ]
        },
    )
    with pytest.raises(StackError, match=r"InferenceTiers-AgentSandbox: .*SandboxClaimExample"):
        smoke.run_smoke(clients, "agent-sandbox")
