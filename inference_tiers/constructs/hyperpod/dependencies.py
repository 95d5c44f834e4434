"""The SageMaker HyperPod dependency Helm chart, installed before ``AWS::SageMaker::Cluster``.

HyperPod's resiliency features (health-monitoring agent, deep health checks, device plugins) come from the
``HyperPodHelmChart`` in ``aws/sagemaker-hyperpod-cli``; HyperPod rejects or degrades a cluster created before
it is installed. The chart is not published to any chart repository and has remote sub-charts, so it is
fetched and packaged at a pinned commit by ``inference_tiers/assets/hyperpod/fetch-dependency-chart.sh`` and
installed here from a local directory (uploaded as an S3 asset). Without one, a placeholder chart stands in, so
that the app still synthesizes offline; synth then warns, and a template rule stops the deploy before anything is
created, both with the fetch instructions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from aws_cdk import Aws, Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from inference_tiers import ASSETS_DIR
from inference_tiers.constructs.common.charts import refuse_unfetched_chart
from inference_tiers.constructs.common.nag import acknowledge_chart_asset_read
from inference_tiers.constructs.eks.cluster import kubectl_cluster
from inference_tiers.validation import Args

ASSETS = ASSETS_DIR / "hyperpod"
FETCH_SCRIPT = ASSETS / "fetch-dependency-chart.sh"
# Installed instead of the real chart when it has not been packaged: rendering it fails with instructions.
MISSING_CHART_PLACEHOLDER = ASSETS / "dependency-chart-missing"


class HyperPodDependencyChart(Construct):
    """Installs the HyperPod dependency chart from ``chart_directory`` into ``kube-system``.

    The directory must contain ``Chart.yaml`` and, in ``charts/``, every dependency it lists (``helm dependency
    build`` puts them there); anything missing is an error at synth time, not a failed deploy an hour later.
    Make ``AWS::SageMaker::Cluster`` depend on :attr:`chart` (``HyperPodCluster`` does). Without
    ``chart_directory`` (or given the placeholder), synth warns and a template rule stops the deploy.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        chart_directory: Path | None = None,
        values: Mapping[str, Any] | None = None,
        release: str = "hyperpod-dependencies",
    ) -> None:
        """
        :param cluster: the EKS cluster (needs a kubectl provider).
        :param chart_directory: the packaged ``HyperPodHelmChart`` directory (output of the fetch script).
            Default: none; a placeholder chart, a synth warning and a template rule that stops the deploy, with
            the fetch instructions.
        :param values: Helm values merged over the defaults; default: the health-monitoring agent's region is
            the stack's region (the agent cannot always detect it).
        :param release: Helm release name. Default ``hyperpod-dependencies`` (as in the AWS templates).
        """
        args = Args("HyperPodDependencyChart")
        cluster = kubectl_cluster(args, "cluster", cluster)
        if chart_directory is None:
            chart_directory = MISSING_CHART_PLACEHOLDER
        args.instance("chart_directory", chart_directory, Path, "a pathlib.Path of the packaged chart")
        if values is not None:
            args.mapping("values", values)
        args.text(
            "release",
            release,
            pattern=r"[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?",
            description="a Helm release name (lowercase letters, digits and '-', at most 53)",
            allow_token=False,
        )
        try:
            check_chart_directory(chart_directory)
        except ValueError as error:
            raise args.error("chart_directory", str(chart_directory), str(error)) from None
        super().__init__(scope, construct_id)
        self.fetched = chart_directory.resolve() != MISSING_CHART_PLACEHOLDER.resolve()
        """False when the placeholder chart stands in (synth warns, and a template rule stops the deploy before
        anything is created)."""
        if not self.fetched:
            refuse_unfetched_chart(
                self,
                "ChartPackaged",
                "inference-tiers:hyperpod-chart-missing",
                "The HyperPod dependency Helm chart is not packaged: run inference_tiers/assets/hyperpod/"
                f"{FETCH_SCRIPT.name}, then pass its output directory as HyperPodDependencyChart chart_directory "
                "(-c hyperpod.dependency_chart_dir=<directory> for the tier's stack)",
            )
        # Absolute: the jsii kernel resolves a relative path against its own working directory, not Python's.
        self.asset = s3_assets.Asset(self, "ChartAsset", path=str(chart_directory.resolve()))
        """The S3 asset of ``chart_directory``, which the kubectl provider installs the chart from."""
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=cluster,
            chart_asset=self.asset,
            release=release,
            namespace="kube-system",
            values={"health-monitoring-agent": {"region": Aws.REGION}, **(values or {})},
            # The chart's pods run on HyperPod nodes, which only exist after the cluster it must precede.
            wait=False,
            timeout=Duration.minutes(10),
        )
        """The Helm release of the dependency chart (``release``, in ``kube-system``);
        ``AWS::SageMaker::Cluster`` must depend on it (``HyperPodCluster`` does)."""
        assert cluster.kubectl_provider is not None, (
            "the cluster needs a kubectl provider to install Helm charts"
        )
        acknowledge_chart_asset_read(cluster.kubectl_provider, self.asset)


def check_chart_directory(chart_directory: Path) -> None:
    """Raise ValueError (saying what is expected) unless ``chart_directory`` holds a Helm chart with all its
    dependencies packaged."""
    how = f"run {FETCH_SCRIPT.name} (inference_tiers/assets/hyperpod/) with helm and internet access first"
    chart_yaml = chart_directory / "Chart.yaml"
    try:
        has_chart = chart_yaml.is_file()
    except OSError:  # is_file() raises, not returns False, for a name the file system rejects (too long)
        has_chart = False
    if not has_chart:
        raise ValueError(f"a directory with Chart.yaml: the packaged HyperPodHelmChart ({how})")
    metadata = yaml.safe_load(chart_yaml.read_text()) or {}
    charts = chart_directory / "charts"
    missing = [
        f"{dep['name']}-{dep.get('version', '*')}"
        for dep in metadata.get("dependencies") or []
        if not any(charts.glob(f"{dep['name']}-*.tgz")) and not (charts / dep["name"]).is_dir()
    ]
    if missing:
        raise ValueError(
            f"the packaged sub-charts {', '.join(missing)} in charts/, which are missing ({how}: it runs helm "
            "dependency build)"
        )
