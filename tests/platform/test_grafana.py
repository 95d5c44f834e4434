"""Grafana on the platform's core nodes: the community chart's values checked against the vendored chart
(grafana-community/helm-charts @3386a11, grafana 12.11.1 / Grafana 13.2.0, tests/data/platform/grafana-chart), the
AMP data source through the plugin with IRSA (query only), no secret value anywhere, and the dashboards
provisioned with the AMP plugin's data source type."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import jsonschema
import pytest
import yaml
from aws_cdk.assertions import Template

from inference_tiers.constructs.eks.cluster import EksCluster
from inference_tiers.constructs.platform.observability import PlatformObservability
from inference_tiers.k8s import grafana_chart
from inference_tiers.k8s.platform_names import CORE_NODE_LABELS
from inference_tiers.observability import dashboards
from tests.harness import DATA_DIR
from tests.misuse import assert_refused
from tests.platform.test_observability import GATEWAY
from tests.sandbox.helpers import helm_charts, missing_values_keys

CHART = DATA_DIR / "platform" / "grafana-chart"
SCHEMA = json.loads((DATA_DIR / "observability" / "grafana-dashboard-13.2.3.schema.json").read_text())


def values(**overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "workspace_endpoint": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/",
        "region": "us-east-1",
        "node_selector": CORE_NODE_LABELS,
        "dashboards": dashboards.all_dashboards(),
    }
    return grafana_chart.chart_values(**{**arguments, **overrides})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("grafana")), context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(account="111122223333", region="us-east-1"))
    observability = PlatformObservability(
        stack, "Observability", cluster=EksCluster(stack, "Eks").cluster, gateway=GATEWAY
    )
    return {"stack": stack, "construct": observability, "template": Template.from_stack(stack)}


def test_pins_are_the_vendored_charts() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["name"], chart["version"], chart["appVersion"]) == (
        grafana_chart.CHART,
        grafana_chart.CHART_VERSION,
        grafana_chart.APP_VERSION,
    )


def test_every_value_is_a_key_of_the_pinned_chart() -> None:
    """Free-form below ``grafana.ini`` (rendered to ini, values.yaml:959), ``datasources``/``dashboardProviders``/
    ``dashboards`` (provisioning files, values.yaml:744, :880, :913) and ``resources`` (values.yaml:427)."""
    free = ("grafana.ini", "datasources", "dashboardProviders", "dashboards", "resources")
    assert missing_values_keys(values(), "../platform/grafana-chart/values.yaml", free) == []
    assert missing_values_keys(
        {**values(), "persistance": {"enabled": False}}, "../platform/grafana-chart/values.yaml", free
    ) == ["persistance.enabled"]


def test_no_anonymous_access_no_sign_up_no_pvc_and_the_leak_assertion_on() -> None:
    """values.yaml:1815 ``assertNoLeakedSecrets`` (the chart refuses values with a secret in grafana.ini),
    :489 ``persistence``; Grafana's ``[auth.anonymous] enabled`` and ``[users] allow_sign_up``."""
    rendered = values()
    ini = rendered["grafana.ini"]
    assert ini["auth.anonymous"] == {"enabled": False} and ini["users"] == {"allow_sign_up": False}
    assert rendered["assertNoLeakedSecrets"] is True and rendered["persistence"] == {"enabled": False}
    assert rendered["nodeSelector"] == dict(CORE_NODE_LABELS)


def test_the_admin_password_is_the_charts_generated_secret() -> None:
    """values.yaml:575-579: with ``admin.existingSecret`` empty the chart creates Secret ``<fullname>``
    (templates/secret.yaml:1) whose ``admin-password`` is kept from the live Secret or generated
    (_helpers.tpl:131-138, ``lookup`` else ``randAlphaNum 40``); _pod.tpl:288 reads it by secretKeyRef. No
    ``adminPassword`` is rendered."""
    rendered = values()
    assert rendered["admin"] == {"existingSecret": ""}
    assert "adminPassword" not in rendered and "adminUser" not in rendered


def test_amp_through_the_plugin_with_sigv4_default_credentials() -> None:
    """The plugin is preinstalled from ``plugins`` (_config.tpl:8-9 joins them into the ConfigMap key that
    _pod.tpl:1434-1438 sets as ``GF_PLUGINS_PREINSTALL_SYNC``, ``id@version``); SigV4 with ``default``
    credentials: the SDK chain, i.e. the pod's IRSA web identity (platform-cluster.md §2)."""
    rendered = values()
    assert rendered["plugins"] == ["grafana-amazonprometheus-datasource@3.3.5"]
    (source,) = rendered["datasources"]["datasources.yaml"]["datasources"]
    assert source["type"] == grafana_chart.AMP_PLUGIN and source["isDefault"] is True
    assert source["url"].endswith("/workspaces/ws-1/")
    assert source["jsonData"] == {
        "httpMethod": "POST",
        "sigV4Auth": True,
        "sigV4AuthType": "default",
        "sigV4Region": "us-east-1",
    }


def test_provisioned_dashboards_query_the_amp_data_source_and_stay_valid() -> None:
    """Each board's Prometheus data source variable and every panel take the plugin's type, the provider's
    path is where the chart mounts provider dashboards (_pod.tpl:1296), and the boards still fit the schema."""
    rendered = values(
        dashboards={
            n: b for n, b in dashboards.all_dashboards().items() if n in grafana_chart.PLATFORM_DASHBOARDS
        }
    )
    (provider,) = rendered["dashboardProviders"]["dashboardproviders.yaml"]["providers"]
    assert provider["options"]["path"] == f"/var/lib/grafana/dashboards/{provider['name']}"
    boards = rendered["dashboards"][provider["name"]]
    assert sorted(f"{name}.json" for name in boards) == sorted(grafana_chart.PLATFORM_DASHBOARDS)
    for entry in boards.values():
        board = json.loads(entry["json"])
        jsonschema.Draft7Validator(SCHEMA).validate(board)
        text = json.dumps(board)
        assert '"type": "prometheus"' not in text and '"query": "prometheus"' not in text
        assert all(p["datasource"]["type"] == grafana_chart.AMP_PLUGIN for p in board["panels"])


def test_grafana_may_only_query_its_workspace_through_irsa(built: dict[str, Any]) -> None:
    template = built["template"]
    construct = built["construct"]
    role_ref = built["stack"].resolve(construct.grafana_identity.role.role_arn)
    trust = [
        r["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        for r in template.find_resources("AWS::IAM::Role").values()
        if any(
            s.get("Action") == "sts:AssumeRoleWithWebIdentity"
            for s in r["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        )
    ]
    assert len(trust) == 1 and role_ref
    statements = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        if any("GrafanaIdentity" in str(role) for role in p["Properties"]["Roles"])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert [sorted(s["Action"]) for s in statements] == [
        ["aps:GetLabels", "aps:GetMetricMetadata", "aps:GetSeries", "aps:QueryMetrics"]
    ]
    assert statements[0]["Resource"] == built["stack"].resolve(construct.hub.workspace_arn)


def test_the_chart_is_pinned_on_core_nodes_after_its_identity(built: dict[str, Any]) -> None:
    chart = helm_charts(built["template"])[grafana_chart.RELEASE]
    assert (chart["Chart"], chart["Repository"], chart["Version"]) == (
        "grafana",
        "https://grafana-community.github.io/helm-charts",
        "12.11.1",
    )
    assert chart["Values"]["serviceAccount"] == {"create": False, "name": grafana_chart.SERVICE_ACCOUNT}
    assert chart["Values"]["nodeSelector"] == dict(CORE_NODE_LABELS)
    resources = built["template"].to_json()["Resources"]
    (chart_id,) = (
        k
        for k, v in resources.items()
        if v["Type"] == "Custom::AWSCDK-EKS-HelmChart" and v["Properties"]["Release"] == grafana_chart.RELEASE
    )
    assert any("GrafanaIdentity" in d for d in resources[chart_id].get("DependsOn", []))


def test_without_grafana_no_chart_and_no_identity(tmp_path_factory: pytest.TempPathFactory) -> None:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("nografana")), context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(account="111122223333", region="us-east-1"))
    construct = PlatformObservability(
        stack, "Observability", cluster=EksCluster(stack, "Eks").cluster, gateway=GATEWAY, grafana=False
    )
    assert construct.grafana is None and construct.grafana_identity is None
    releases = {
        r["Properties"]["Release"]
        for r in Template.from_stack(stack).find_resources("Custom::AWSCDK-EKS-HelmChart").values()
    }
    assert grafana_chart.RELEASE not in releases and releases == {"node-exporter"}


@pytest.mark.parametrize(
    ("param", "overrides", "match"),
    [
        ("dashboards", {"dashboards": {}}, "at least one dashboard"),
        ("region", {"region": 3}, "region"),
    ],
)
def test_bad_input_names_the_parameter(param: str, overrides: dict[str, Any], match: str) -> None:
    assert_refused(lambda: values(**overrides), "grafana_chart.chart_values", param, match)
