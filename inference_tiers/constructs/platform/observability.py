"""PlatformObservability: metrics of the platform tier's one EKS cluster in Amazon Managed Service for
Prometheus, collected by the agentless AMP managed scraper (platform-cluster.md D4).

It reuses :class:`~inference_tiers.constructs.observability.ObservabilityHub` (workspace, rules, alert topic) and
its :meth:`~inference_tiers.constructs.observability.ObservabilityHub.add_eks_scraper` (the scraper, its RBAC
and the shared jobs: annotated pods such as vLLM, DCGM and node exporters, KEDA, kube-state-metrics), and adds
the gateway's metrics Service (:func:`~inference_tiers.observability.platform_scrape.gateway_metrics_job`). Grafana
runs on the core nodes from the community chart (:mod:`inference_tiers.k8s.grafana_chart`), reading the workspace
with an IRSA role that may only query it, with the project's dashboards and the per-tenant board provisioned.
With ``traces``, an OpenTelemetry collector (ADOT) on the core nodes receives the gateway's spans and exports them
to AWS X-Ray (:mod:`inference_tiers.k8s.trace_collector`).
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IDependable

from inference_tiers.constructs.eks.cluster import kubectl_cluster
from inference_tiers.constructs.observability import ADOT_IMAGE, ObservabilityHub
from inference_tiers.constructs.observability.hub import grant_trace_export
from inference_tiers.constructs.sandbox.identity import PodIdentityRole
from inference_tiers.k8s import grafana_chart, prometheus_chart, trace_collector
from inference_tiers.k8s.inference_gateway_scaling import PrometheusMetrics
from inference_tiers.k8s.platform_names import CORE_NODE_LABELS, GatewayEndpoint
from inference_tiers.observability.collectors import eks_scrape_config
from inference_tiers.observability.dashboards import all_dashboards
from inference_tiers.observability.platform_scrape import controller_jobs, gateway_metrics_job
from inference_tiers.observability.rules import rules_yaml
from inference_tiers.validation import Args

METRICS_BACKENDS = ("amp", "prometheus")
"""Where the platform's metrics go: Amazon Managed Service for Prometheus, or an in-cluster Prometheus."""


def amp_metrics(workspace: aps.CfnWorkspace) -> PrometheusMetrics:
    """KEDA's source for an Amazon Managed Service for Prometheus workspace: its query endpoint (KEDA appends
    ``/api/v1/query``), signed with SigV4 in the stack's Region."""
    url = f"https://aps-workspaces.{Aws.REGION}.{Aws.URL_SUFFIX}/workspaces/{workspace.attr_workspace_id}"
    return PrometheusMetrics(url=url, region=Aws.REGION)


class PlatformObservability(Construct):
    """AMP workspace and managed scraper for the platform cluster, with the LiteLLM metrics Service scraped.

    :param cluster: the platform's EKS cluster (``aws_eks_v2.ICluster``; private endpoint access, authentication
        mode API or API_AND_CONFIG_MAP); the scraper's read-only RBAC is applied to it. The scraper's ENIs take
        one private subnet per AZ of its VPC and its cluster security group, so nodes without that group (a
        Karpenter pool whose EC2NodeClass selects other groups) must admit it on their metrics ports.
    :param gateway: where the LiteLLM gateway serves its unauthenticated metrics.
    :param retention_days: how long AMP keeps samples. Default 150.
    :param alarm_email: subscribe this address to the alert topic. Default: none.
    :param grafana: run Grafana on the cluster (needs a kubectl provider and the cluster's OIDC provider for
        IRSA; the plugin is downloaded from grafana.com at start, through the VPC's NAT). Default: True.
    :param node_selector: where Grafana runs. Default: the core nodes.
    :param metrics: ``amp`` (default: the AMP workspace and its managed scraper) or ``prometheus``: the same scrape
        jobs and rules in an in-cluster Prometheus on the core nodes (kube-prometheus-stack,
        :mod:`inference_tiers.k8s.prometheus_chart`); no AWS resource, no alert delivery (``alarm_email`` is AMP's).
    :param prometheus_storage_class: with ``prometheus``, the StorageClass of its volume (one the cluster has,
        such as the EBS CSI driver's); None: an ``emptyDir`` (samples lost when the pod moves). Default: None.
    :param prometheus_volume_gib: that volume's size. Default 50.
    :param prometheus_retention_days: with ``prometheus``, how long samples are kept (1-90). Default 15.
    :param traces: run the trace collector (namespace ``otel``, Service ``otel-collector``, OTLP/HTTP on 4318)
        that exports to AWS X-Ray with an EKS Pod Identity role (the cluster needs the Pod Identity agent);
        point the gateway at it (``PlatformGateway(trace_collector=...)``). Default: False.
    :param collector_image: the ADOT collector image. Default: :data:`ADOT_IMAGE`.

    Attributes: ``hub`` (the :class:`~inference_tiers.constructs.observability.ObservabilityHub`),
    ``scraper`` (its ``aps.CfnScraper`` for ``cluster``), both None with ``prometheus``; ``prometheus`` (the
    kube-prometheus-stack ``HelmChart``, None with ``amp``); ``node_exporter`` (its ``HelmChart``, on every
    node in both modes); ``keda_metrics`` (where KEDA reads the series:
    ``PrometheusMetrics``); ``grafana_identity`` (the IRSA ``ServiceAccount``, None without AMP) and
    ``grafana`` (the ``HelmChart``); both None without Grafana; ``trace_collector`` (the ``KubernetesManifest``)
    and ``trace_identity`` (its ``PodIdentityRole``), both None without traces.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        gateway: GatewayEndpoint,
        retention_days: int = 150,
        alarm_email: str | None = None,
        grafana: bool = True,
        node_selector: Mapping[str, str] = CORE_NODE_LABELS,
        traces: bool = False,
        collector_image: str = ADOT_IMAGE,
        metrics: str = "amp",
        prometheus_storage_class: str | None = None,
        prometheus_volume_gib: int = 50,
        prometheus_retention_days: int = 15,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("PlatformObservability")
        args.implements("cluster", cluster, eks.ICluster)
        args.boolean("grafana", grafana)
        args.boolean("traces", traces)
        args.one_of("metrics", metrics, METRICS_BACKENDS)
        if metrics == "prometheus" and alarm_email is not None:
            raise args.error(
                "alarm_email", alarm_email, "None with metrics='prometheus' (alerts are sent by AMP)"
            )
        args.text(
            "collector_image",
            collector_image,
            pattern=r"\S+(:[^\s:@]+|@sha256:[0-9a-f]{64})",
            allow_token=False,
        )
        if grafana:
            kubectl_cluster(args, "cluster", cluster)
            args.mapping("node_selector", node_selector, lambda name, value: args.text(name, value))
        args.instance(
            "gateway", gateway, GatewayEndpoint, "an inference_tiers.k8s.platform_names.GatewayEndpoint"
        )
        jobs = [gateway_metrics_job(gateway), *controller_jobs()]
        self.hub: ObservabilityHub | None = None
        """The workspace, rules and alert topic the scraper writes to (None with ``prometheus``)."""
        self.scraper: aps.CfnScraper | None = None
        """The AMP managed scraper of ``cluster`` (``aps.CfnScraper``; None with ``prometheus``)."""
        self.prometheus: eks.HelmChart | None = None
        """The in-cluster Prometheus (kube-prometheus-stack ``HelmChart``; None with ``amp``)."""
        self.node_exporter = eks.HelmChart(
            self,
            "NodeExporter",
            cluster=cluster,
            chart=prometheus_chart.NODE_EXPORTER_CHART,
            repository=prometheus_chart.CHART_REPOSITORY,
            version=prometheus_chart.NODE_EXPORTER_VERSION,
            release="node-exporter",
            namespace=prometheus_chart.NODE_EXPORTER_NAMESPACE,
            create_namespace=True,
            values=prometheus_chart.node_exporter_values(),
        )
        """The node exporter on every node (core, Kata, GPU): the ``node-exporter`` job scrapes it."""
        if metrics == "amp":
            # the scraper's ENIs: one private subnet per AZ of the cluster's VPC (AMP wants distinct AZs)
            subnets = cluster.vpc.select_subnets(
                subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, one_per_az=True
            )
            self.hub = ObservabilityHub(self, "Hub", retention_days=retention_days, alarm_email=alarm_email)
            self.scraper = self.hub.add_eks_scraper(
                "Scraper",
                cluster_arn=cluster.cluster_arn,
                subnet_ids=subnets.subnet_ids,
                # the cluster security group: every managed node carries it, so the ENIs reach the pods' ports
                security_group_ids=[cluster.cluster_security_group_id],
                cluster_label=cluster.cluster_name,
                cluster=cluster,
                extra_jobs=jobs,
            )
            keda_metrics = amp_metrics(self.hub.workspace)
        else:
            self.prometheus = eks.HelmChart(
                self,
                "Prometheus",
                cluster=cluster,
                chart=prometheus_chart.CHART,
                repository=prometheus_chart.CHART_REPOSITORY,
                version=prometheus_chart.CHART_VERSION,
                release=prometheus_chart.RELEASE,
                namespace=prometheus_chart.NAMESPACE,
                create_namespace=True,
                values=prometheus_chart.chart_values(
                    scrape_configs=eks_scrape_config(cluster.cluster_name, extra_jobs=jobs)["scrape_configs"],
                    rules_text=rules_yaml(),
                    cluster_label=cluster.cluster_name,
                    node_selector=node_selector,
                    retention_days=prometheus_retention_days,
                    storage_class=prometheus_storage_class,
                    volume_gib=prometheus_volume_gib,
                ),
                wait=True,
                # inside the kubectl handler's 15 minutes (platform-cluster.md trap 1)
                timeout=Duration.minutes(10),
            )
            keda_metrics = PrometheusMetrics(url=prometheus_chart.SERVER_URL)
        self.keda_metrics = keda_metrics
        """Where KEDA reads vLLM's and the Endpoint Picker's series (the stage pool's scaler)."""
        self.grafana_identity: eks.ServiceAccount | None = None
        """Grafana's ServiceAccount with its IRSA role (query access to the workspace only); None without Grafana."""
        self.grafana: eks.HelmChart | None = None
        """The Grafana ``HelmChart``; None without Grafana."""
        if grafana:
            self._add_grafana(cluster, node_selector)
        self.trace_identity: PodIdentityRole | None = None
        """The trace collector's EKS Pod Identity role (X-Ray writes only); None without traces."""
        self.trace_collector: eks.KubernetesManifest | None = None
        """The trace collector's objects (:func:`~inference_tiers.k8s.trace_collector.collector_objects`)."""
        if traces:
            self._add_trace_collector(cluster, gateway, collector_image)

    def _add_trace_collector(self, cluster: eks.ICluster, gateway: GatewayEndpoint, image: str) -> None:
        self.trace_collector = eks.KubernetesManifest(
            self,
            "TraceCollector",
            cluster=cluster,
            manifest=trace_collector.collector_objects(Stack.of(self).region, image=image, clients=gateway),
        )
        self.trace_identity = PodIdentityRole(
            self,
            "TraceIdentity",
            cluster=cluster,
            namespace=trace_collector.NAMESPACE,
            service_account=trace_collector.SERVICE_ACCOUNT,
            description="Platform trace collector: sends the gateway's spans to AWS X-Ray (EKS Pod Identity)",
        )
        grant_trace_export(self.trace_identity, "TraceExport", self.trace_identity.role)
        # The pods' first credentials come from the association.
        self.trace_collector.node.add_dependency(self.trace_identity)

    def _add_grafana(self, cluster: eks.ICluster, node_selector: Mapping[str, str]) -> None:
        namespace = eks.KubernetesManifest(
            self,
            "GrafanaNamespace",
            cluster=cluster,
            manifest=[
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": grafana_chart.NAMESPACE}}
            ],
        )
        waits: list[IDependable] = [namespace]
        if self.hub is not None:
            # IRSA, not Pod Identity: the AMP plugin's SDK does not pick up Pod Identity credentials
            # (grafana#105822).
            identity = eks.ServiceAccount(
                self,
                "GrafanaIdentity",
                cluster=cluster,
                name=grafana_chart.SERVICE_ACCOUNT,
                namespace=grafana_chart.NAMESPACE,
                identity_type=eks.IdentityType.IRSA,
            )
            identity.node.add_dependency(namespace)
            self.hub.grant_query(identity)
            self.grafana_identity = identity
            waits = [identity]
            source: dict[str, str] = {
                "workspace_endpoint": self.hub.prometheus_endpoint,
                "region": Stack.of(self).region,
            }
        else:
            source = {"prometheus_url": prometheus_chart.SERVER_URL}
        boards = all_dashboards()
        self.grafana = eks.HelmChart(
            self,
            "Grafana",
            cluster=cluster,
            chart=grafana_chart.CHART,
            repository=grafana_chart.CHART_REPOSITORY,
            version=grafana_chart.CHART_VERSION,
            release=grafana_chart.RELEASE,
            namespace=grafana_chart.NAMESPACE,
            create_namespace=False,
            values=grafana_chart.chart_values(
                **source,
                node_selector=node_selector,
                dashboards={name: boards[name] for name in grafana_chart.PLATFORM_DASHBOARDS},
            ),
            wait=True,
            # inside the kubectl handler's 15 minutes (platform-cluster.md trap 1)
            timeout=Duration.minutes(10),
        )
        self.grafana.node.add_dependency(*waits)
