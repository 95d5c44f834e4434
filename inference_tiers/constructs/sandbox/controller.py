"""The agent-sandbox controller (kubernetes-sigs/agent-sandbox, pinned release) with its extensions.

The chart is not published to a chart repository, so it is installed from a local copy that
``inference_tiers/assets/sandbox/fetch-agent-sandbox-chart.sh`` fetches at the pinned commit (uploaded as an
S3 asset). Without one, a placeholder chart stands in, so that the stack still synthesizes offline; synth then
warns, and a template rule stops the deploy before anything is created, both with the fetch instructions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from inference_tiers import ASSETS_DIR
from inference_tiers.constructs.common.charts import refuse_unfetched_chart
from inference_tiers.constructs.common.nag import acknowledge_chart_asset_read
from inference_tiers.constructs.eks.cluster import SYSTEM_NODE_LABEL, as_cluster_ref
from inference_tiers.k8s.sandbox_tenancy import AGENT_SANDBOX_NAMESPACE, controller_values
from inference_tiers.validation import Args

FETCH_SCRIPT = ASSETS_DIR / "sandbox" / "fetch-agent-sandbox-chart.sh"
MISSING_CHART_PLACEHOLDER = ASSETS_DIR / "sandbox" / "agent-sandbox-chart-missing"
# What the fetch script changes in the chart: a writable /tmp for the webhook certificates (W2 of the audit).
WRITABLE_TMP_PATCH = ASSETS_DIR / "sandbox" / "writable-tmp.patch"
CHART_NAME = "agent-sandbox"


class AgentSandboxController(Construct):
    """Installs the agent-sandbox controller (Sandbox, SandboxTemplate, SandboxWarmPool, SandboxClaim) on the
    core nodes, in ``agent-sandbox-system``.

    Attributes: ``chart`` (``HelmChart``; make every agent-sandbox object depend on it: the chart installs the
    CRDs and the conversion webhook), ``asset`` (the chart's S3 asset), ``fetched`` (False when the placeholder
    chart stands in).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        chart_directory: Path | None = None,
        node_selector: Mapping[str, str] | None = None,
        chart_directory_setting: str | None = None,
    ) -> None:
        """
        :param cluster: the EKS cluster (with a kubectl provider).
        :param chart_directory: the fetched ``helm/`` directory of agent-sandbox (output of the fetch script).
            Default: none; a placeholder chart, a synth warning and a template rule that stops the deploy, with
            the fetch instructions.
        :param node_selector: where the controller runs. Default: the core nodes.
        :param chart_directory_setting: the context key that sets ``chart_directory`` in your app, named in the
            warning when the chart was not fetched (the tiers pass ``<tier>.controller_chart_dir``). Default: none.
        """
        super().__init__(scope, construct_id)
        args = Args("AgentSandboxController")
        args.implements("cluster", cluster, eks.ICluster)
        if chart_directory is not None:
            args.instance("chart_directory", chart_directory, Path, "a pathlib.Path of the fetched chart")
            _check_chart_directory(args, chart_directory)
        if chart_directory_setting is not None:
            args.text("chart_directory_setting", chart_directory_setting, max_length=128, allow_token=False)
        selector = args.mapping(
            "node_selector",
            {SYSTEM_NODE_LABEL: "system"} if node_selector is None else node_selector,
            lambda name, value: args.text(name, value, max_length=63, allow_token=False),
        )
        self.fetched = chart_directory is not None
        """False when no ``chart_directory`` was given and the placeholder chart stands in (synth warns, and a
        template rule stops the deploy before anything is created)."""
        if not self.fetched:
            refuse_unfetched_chart(
                self,
                "ChartFetched",
                "inference-tiers:agent-sandbox-chart-missing",
                f"The agent-sandbox controller chart was not fetched: run inference_tiers/assets/sandbox/"
                f"{FETCH_SCRIPT.name}, then pass its output directory as AgentSandboxController chart_directory"
                + (f" (-c {chart_directory_setting}=<directory>)" if chart_directory_setting else ""),
            )
        self.asset = s3_assets.Asset(
            self, "ChartAsset", path=str(chart_directory or MISSING_CHART_PLACEHOLDER)
        )
        """The S3 asset of the chart directory that the Helm chart installs (the fetched chart, or the
        placeholder)."""
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=as_cluster_ref(cluster),
            chart_asset=self.asset,
            release=CHART_NAME,
            namespace=AGENT_SANDBOX_NAMESPACE,
            create_namespace=True,
            values=controller_values(selector),
            wait=True,
            timeout=Duration.minutes(10),
        )
        """The controller's ``HelmChart`` (release ``agent-sandbox`` in ``agent-sandbox-system``): make every
        agent-sandbox object depend on it, since it installs the CRDs and the conversion webhook."""
        assert cluster.kubectl_provider is not None
        acknowledge_chart_asset_read(cluster.kubectl_provider, self.asset)


# The first line the patch adds (a comment the fetched chart has only once the patch is applied).
_PATCH_MARKER = next(
    line[1:] for line in WRITABLE_TMP_PATCH.read_text().splitlines() if line.startswith("+ ")
)


def _check_chart_directory(args: Args, directory: Path) -> None:
    how = f"the helm/ directory that {FETCH_SCRIPT.name} (inference_tiers/assets/sandbox/) copies"
    chart_yaml = directory / "Chart.yaml"
    try:
        metadata = yaml.safe_load(chart_yaml.read_text()) if chart_yaml.is_file() else None
    except OSError:
        metadata = None
    if not isinstance(metadata, dict) or metadata.get("name") != CHART_NAME:
        raise args.error(
            "chart_directory", str(directory), f"a directory with the {CHART_NAME} chart ({how})"
        )
    if not any((directory / "crds").glob("*.yaml")):
        raise args.error("chart_directory", str(directory), f"the chart with its crds/ folder ({how})")
    deployment = directory / "templates" / "deployment.yaml"
    if not deployment.is_file() or _PATCH_MARKER not in deployment.read_text():
        raise args.error(
            "chart_directory",
            str(directory),
            f"the chart with {WRITABLE_TMP_PATCH.name} applied, a writable /tmp for the webhook certificates "
            f"under the read-only root file system ({how}; fetch it again if an older script copied it)",
        )
