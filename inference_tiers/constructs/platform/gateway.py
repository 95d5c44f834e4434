"""LiteLLM on the platform cluster's core nodes: the componentized chart in monolith mode, with the gateway
tier's proxy configuration, PostgreSQL and Valkey, EKS Pod Identity and an optional internal ALB.

The chart is installed from a local copy that ``inference_tiers/assets/platform/fetch-litellm-chart.sh`` fetches
at the pinned commit (uploaded as an S3 asset). Without one, a placeholder chart stands in, so that the stack
still synthesizes offline; synth then warns, and a template rule stops the deploy before anything is created.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import yaml
from aws_cdk import Duration, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct, IDependable

from inference_tiers import ASSETS_DIR
from inference_tiers.constructs.common.charts import refuse_unfetched_chart
from inference_tiers.constructs.common.encryption import allow_log_encryption
from inference_tiers.constructs.common.nag import acknowledge_chart_asset_read, acknowledge_invocation_logging
from inference_tiers.constructs.eks.cluster import as_cluster_ref, kubectl_cluster
from inference_tiers.constructs.gateway.bootstrap import DatabaseBootstrap
from inference_tiers.constructs.gateway.state import GatewayCache, GatewayDatabase
from inference_tiers.constructs.gateway.targets import GATEWAY_TARGETS, GatewayTarget
from inference_tiers.constructs.sandbox.identity import PodIdentityRole
from inference_tiers.k8s import litellm_chart
from inference_tiers.k8s.platform_names import CORE_NODE_LABELS, GATEWAY_NAMESPACE, GatewayEndpoint
from inference_tiers.k8s.tenant_keys import gateway_network_policies
from inference_tiers.k8s.trace_collector import TraceCollector
from inference_tiers.litellm.config import LITELLM_VERSION, ProxyFeatures, RouterOptions, render_config
from inference_tiers.validation import Args

FETCH_SCRIPT = ASSETS_DIR / "platform" / "fetch-litellm-chart.sh"
MISSING_CHART_PLACEHOLDER = ASSETS_DIR / "platform" / "litellm-chart-missing"
CERTIFICATE_ARN = r"arn:aws(-[a-z-]+)?:acm:[a-z0-9-]{1,20}:[0-9]{12}:certificate/[a-f0-9-]{36}"
# The kubectl handler that runs `helm upgrade --wait` dies at 15 minutes and can leave the release
# pending-upgrade (aws-cdk#22257): the chart's wait, the migration hook (litellm_chart.MIGRATION_DEADLINE_SECONDS)
# included, ends before it.
CHART_TIMEOUT = Duration.minutes(12)
SECRET_PROVIDER_CLASS = "litellm-state"


class PlatformGateway(Construct):
    """LiteLLM (the ``gateway`` tier's proxy configuration) on the platform cluster, namespace ``litellm``.

    Attributes: ``endpoint`` (:class:`GatewayEndpoint`: Service, port, pod labels, metrics Service, master key
    Secret), ``chart`` (``HelmChart``), ``objects`` (the namespace, ServiceAccount and SecretProviderClass),
    ``identity`` (:class:`PodIdentityRole` of the proxy's ServiceAccount), ``database`` (``GatewayDatabase``),
    ``bootstrap`` (``DatabaseBootstrap``: the proxy's database role), ``cache`` (``GatewayCache``),
    ``secrets_store`` (the Secrets Store CSI driver's ``HelmChart``, None when skipped), ``network_policy``
    (the proxy pods' NetworkPolicy), ``fetched`` (False when the placeholder chart stands in).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        vpc: ec2.IVpc,
        models: Sequence[GatewayTarget],
        router: RouterOptions | None = None,
        certificate_arn: str | None = None,
        replicas: int = 2,
        max_replicas: int = 10,
        node_selector: Mapping[str, str] = CORE_NODE_LABELS,
        chart_directory: Path | None = None,
        encryption_key: kms.IKey | None = None,
        alb_cidrs: Sequence[str] | None = None,
        scraper_cidrs: Sequence[str] | None = None,
        install_secrets_store: bool = True,
        trace_collector: TraceCollector | None = None,
        chart_directory_setting: str | None = None,
    ) -> None:
        """
        :param cluster: the platform's EKS cluster (with a kubectl provider).
        :param vpc: the cluster's VPC: the database and Valkey go to its private subnets.
        :param models: the models served (``BedrockTarget``, ``SageMakerTarget``, ``OpenAICompatibleTarget``, as
            the ``gateway`` tier takes them); the proxy's role may invoke these and nothing else.
        :param router: retries, timeouts and fallbacks. Default: ``RouterOptions()``.
        :param certificate_arn: an ACM certificate ARN: with it, an internal HTTPS-only ALB (AWS Load Balancer
            Controller Ingress) fronts the proxy. Default: none, in-cluster clients only (the ClusterIP Service).
        :param replicas: the fewest proxy pods (2-100). Default: 2.
        :param max_replicas: the most (``replicas``-100). Default: 10.
        :param node_selector: where the proxy and its migration Job run. Default: the core nodes.
        :param chart_directory: the fetch script's output. Default: none; a placeholder chart, a synth warning
            and a template rule that stops the deploy.
        :param encryption_key: encrypts the database, Valkey, their secrets and the bootstrap function's log (a
            key of your own must allow CloudWatch Logs). Default: a new rotated key.
        :param alb_cidrs: the load balancer's subnets, allowed to the proxy port. Default: the VPC's CIDR.
        :param scraper_cidrs: the metrics scraper's subnets, allowed to the metrics port. Default: the VPC's CIDR.
        :param install_secrets_store: install the Secrets Store CSI driver and its AWS provider (chart
            ``secrets-store-csi-driver-provider-aws`` 3.1.1 in ``kube-system``, secret sync and rotation on).
            False when the cluster has them already, with ``syncSecret.enabled`` and rotation. Default: True.
        :param trace_collector: an OpenTelemetry collector in the cluster (``PlatformObservability(traces=True)``
            runs one: :class:`~inference_tiers.k8s.trace_collector.TraceCollector`): the proxy exports its spans
            there over OTLP/HTTP and forwards the client's ``traceparent`` to the models. Default: none.
        :param chart_directory_setting: the context key that sets ``chart_directory`` in your app, named in the
            warning when the chart was not fetched (the tier passes ``platform.litellm_chart_dir``). Default: none.
        """
        super().__init__(scope, construct_id)
        args = Args("PlatformGateway")
        kubectl_cluster(args, "cluster", cluster)
        args.implements("vpc", vpc, ec2.IVpc)

        def target(name: str, value: object) -> GatewayTarget:
            if not isinstance(value, GATEWAY_TARGETS):
                raise args.error(name, value, "a BedrockTarget, SageMakerTarget or OpenAICompatibleTarget")
            return value

        targets = args.sequence("models", models, target, min_items=1, max_items=50)
        router = args.instance("router", router or RouterOptions(), RouterOptions)
        args.integer("replicas", replicas, minimum=2, maximum=100)
        args.integer("max_replicas", max_replicas, minimum=replicas, maximum=100)
        if certificate_arn is not None:
            args.text(
                "certificate_arn",
                certificate_arn,
                pattern=CERTIFICATE_ARN,
                description="an ACM certificate ARN",
            )
        if chart_directory is not None:
            _check_chart_directory(args, chart_directory)
        if encryption_key is not None:
            args.implements("encryption_key", encryption_key, kms.IKey)
        args.boolean("install_secrets_store", install_secrets_store)
        if trace_collector is not None:
            args.instance("trace_collector", trace_collector, TraceCollector)
        if chart_directory_setting is not None:
            args.text("chart_directory_setting", chart_directory_setting, max_length=128, allow_token=False)
        vpc_cidr = vpc.vpc_cidr_block
        albs = args.sequence("alb_cidrs", alb_cidrs or [vpc_cidr], _cidr(args), min_items=1, max_items=16)
        scrapers = args.sequence(
            "scraper_cidrs", scraper_cidrs or [vpc_cidr], _cidr(args), min_items=1, max_items=16
        )
        key = encryption_key or kms.Key(
            self, "Key", enable_key_rotation=True, description="Platform gateway state"
        )

        self.database = GatewayDatabase(self, "Database", vpc=vpc, encryption_key=key)
        """The proxy's Aurora PostgreSQL (``GatewayDatabase``)."""
        allow_log_encryption(key, self, "*")
        self.bootstrap = DatabaseBootstrap(self, "Bootstrap", database=self.database, encryption_key=key)
        """Creates the proxy's role and database (as the master user) before the chart's migration hook."""
        self.cache = GatewayCache(self, "Cache", vpc=vpc, encryption_key=key)
        """The proxy's Valkey (``GatewayCache``, TLS)."""
        # The pods use the cluster security group (managed node groups attach it): the rules are children of
        # the database and cache, on which the chart (and its migration hook) depends.
        pods = ec2.SecurityGroup.from_security_group_id(
            self, "ClusterSecurityGroup", cluster.cluster_security_group_id
        )
        for state in (self.database, self.cache):
            state.connections.allow_default_port_from(pods, "LiteLLM pods of the platform cluster")

        self.identity = PodIdentityRole(
            self,
            "Identity",
            cluster=as_cluster_ref(cluster),
            namespace=GATEWAY_NAMESPACE,
            service_account=litellm_chart.SERVICE_ACCOUNT,
            description="LiteLLM proxy of the platform cluster: Bedrock with the guardrail, its state secrets",
        )
        """The proxy's ServiceAccount's role (EKS Pod Identity)."""
        acknowledge_invocation_logging(self.identity.role)
        grants = [f"Invoke{index}" for index in range(len(targets))]
        for grant_id, model in zip(grants, targets, strict=True):
            model.grant(self, grant_id, self.identity.role)
        self.database.app_secret.grant_read(self.identity.role)
        self.cache.auth_secret.grant_read(self.identity.role)

        stack = Stack.of(self)
        self.objects = eks.KubernetesManifest(
            self,
            "Objects",
            cluster=as_cluster_ref(cluster),
            manifest=[
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GATEWAY_NAMESPACE}},
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": litellm_chart.SERVICE_ACCOUNT, "namespace": GATEWAY_NAMESPACE},
                },
                litellm_chart.secret_provider_class(
                    SECRET_PROVIDER_CLASS,
                    database_secret_arn=self.database.app_secret.secret_arn,
                    redis_secret_arn=self.cache.auth_secret.secret_arn,
                    region=stack.region,
                ),
            ],
        )
        """The namespace, the proxy's ServiceAccount and its SecretProviderClass (before the chart)."""
        self.secrets_store = (
            eks.HelmChart(
                self,
                "SecretsStore",
                cluster=as_cluster_ref(cluster),
                repository=litellm_chart.SECRETS_STORE_CHART_REPOSITORY,
                chart=litellm_chart.SECRETS_STORE_CHART,
                version=litellm_chart.SECRETS_STORE_CHART_VERSION,
                release=litellm_chart.SECRETS_STORE_RELEASE,
                namespace=litellm_chart.SECRETS_STORE_NAMESPACE,
                values=litellm_chart.secrets_store_values(),
                wait=True,
                timeout=Duration.minutes(10),
            )
            if install_secrets_store
            else None
        )
        """The Secrets Store CSI driver and AWS provider ``HelmChart`` (None with ``install_secrets_store=False``);
        it installs the SecretProviderClass CRD."""
        if self.secrets_store is not None:
            self.objects.node.add_dependency(self.secrets_store)
        self.network_policy = eks.KubernetesManifest(
            self,
            "NetworkPolicy",
            cluster=as_cluster_ref(cluster),
            manifest=gateway_network_policies(
                litellm_chart.gateway_endpoint(),
                vpc_cidr=vpc_cidr,
                alb_cidrs=albs,
                scraper_cidrs=scrapers,
                trace_collector=trace_collector,
            ),
        )
        """The proxy pods' NetworkPolicy: the proxy port from tenant namespaces, the Jobs that call the management
        API (label ``inference-tiers/litellm-admin``: the key provisioner, the model registration) and
        ``alb_cidrs``; the metrics port from ``scraper_cidrs``; egress to DNS, the VPC, the Pod Identity agent and the
        trace collector's OTLP port."""
        self.network_policy.node.add_dependency(self.objects)

        balancer = None
        if certificate_arn is not None:
            # As the gateway tier's ALB: longer than a whole call, so a slow stream is not cut.
            idle = min(4000, router.request_timeout_seconds + 60)
            balancer = litellm_chart.LoadBalancer(certificate_arn, idle)
        values = litellm_chart.chart_values(
            render_config(
                [m.render(self) for m in targets],
                router=router,
                # The elastic pool (stage pool) is added through /model/new: see PlatformInferencePool.
                features=ProxyFeatures(models_in_database=True, tracing=trace_collector is not None),
            ),
            state=litellm_chart.GatewayState(
                database_host=self.database.host,
                database_port=Token.as_string(self.database.cluster.cluster_endpoint.port),
                database_name=self.database.database_name,
                redis_host=self.cache.host,
                redis_port=self.cache.port,
            ),
            replicas=replicas,
            max_replicas=max_replicas,
            node_selector=node_selector,
            secret_provider_class=SECRET_PROVIDER_CLASS,
            load_balancer=balancer,
            trace_endpoint=trace_collector.endpoint if trace_collector else None,
        )

        self.fetched = chart_directory is not None
        """False when no ``chart_directory`` was given and the placeholder chart stands in."""
        if not self.fetched:
            refuse_unfetched_chart(
                self,
                "ChartFetched",
                "inference-tiers:litellm-chart-missing",
                f"The LiteLLM chart was not fetched: run inference_tiers/assets/platform/{FETCH_SCRIPT.name}, "
                "then pass its output directory as PlatformGateway chart_directory"
                + (f" (-c {chart_directory_setting}=<directory>)" if chart_directory_setting else ""),
            )
        asset = s3_assets.Asset(self, "ChartAsset", path=str(chart_directory or MISSING_CHART_PLACEHOLDER))
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=as_cluster_ref(cluster),
            chart_asset=asset,
            release=litellm_chart.RELEASE,
            namespace=GATEWAY_NAMESPACE,
            create_namespace=False,
            values=values,
            wait=True,
            timeout=CHART_TIMEOUT,
        )
        """The LiteLLM ``HelmChart`` (release ``litellm``)."""
        waits: list[IDependable] = [self.objects, self.identity, self.database, self.bootstrap, self.cache]
        waits += [child for gid in grants if (child := self.node.try_find_child(gid)) is not None]
        self.chart.node.add_dependency(*waits)
        assert cluster.kubectl_provider is not None
        acknowledge_chart_asset_read(cluster.kubectl_provider, asset)

        self.endpoint: GatewayEndpoint = litellm_chart.gateway_endpoint()
        """How pods reach the proxy (``http://litellm-gateway.litellm.svc.cluster.local:4000``), its pod labels,
        metrics Service and master key Secret."""


def _cidr(args: Args) -> Callable[[str, object], str]:
    def check(name: str, value: object) -> str:
        text = args.text(name, value, description="an IPv4 CIDR such as 10.0.0.0/16")
        if not Token.is_unresolved(text):
            try:
                ipaddress.IPv4Network(text)
            except ValueError:
                raise args.error(name, value, "an IPv4 CIDR such as 10.0.0.0/16") from None
        return text

    return check


def _check_chart_directory(args: Args, directory: Path) -> None:
    args.instance("chart_directory", directory, Path, "a pathlib.Path of the fetched chart")
    chart_yaml = directory / "Chart.yaml"
    try:
        metadata = yaml.safe_load(chart_yaml.read_text()) if chart_yaml.is_file() else None
    except OSError:  # a name too long for the file system, a folder it may not read
        metadata = None
    if not isinstance(metadata, dict) or metadata.get("name") != "litellm":
        raise args.error(
            "chart_directory", str(directory), f"the helm/litellm chart that {FETCH_SCRIPT.name} copies"
        )
    if metadata.get("appVersion") != LITELLM_VERSION:
        raise args.error(
            "chart_directory",
            str(directory),
            f"the chart of LiteLLM {LITELLM_VERSION} (appVersion {metadata.get('appVersion')!r} found)",
        )
