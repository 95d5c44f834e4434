"""LiteLLMGateway: one OpenAI-compatible API in front of every tier, with keys, budgets and an audit trail.

The LiteLLM proxy runs on ECS Fargate (two or more tasks across AZs, private subnets) behind an internal
Application Load Balancer, with Aurora PostgreSQL (virtual keys, teams, budgets, spend logs) and Valkey (limits
shared by all tasks). Its configuration is rendered from typed targets (``inference_tiers.litellm.config``) and
passed in an environment variable; secrets come from Secrets Manager through ECS ``secrets``.

The load balancer has two listeners:

- the API listener (443, from ``client_cidrs``) forwards only the inference and health routes; everything else,
  ``/metrics`` and the admin API included, gets a fixed 404;
- the admin listener (8443, from ``admin_cidrs``) forwards the admin API (keys, teams, budgets, spend), still
  behind the master key, and refuses ``/metrics`` (which LiteLLM also protects with a key).

Migrations run once per new task definition, before the service is updated: a custom resource provisions the
proxy's database role (RDS Data API) and runs the image with ``--skip_server_startup``; serving tasks run with
``DISABLE_SCHEMA_UPDATE=true``. Each rotation of the proxy's database password restarts the service (the rotation
path, docs/gateway.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aws_cdk import Annotations, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from inference_tiers.constructs.common.checkov import skip_check
from inference_tiers.constructs.common.encryption import allow_log_encryption, retained_key
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.gateway.bootstrap import ASSETS as ASSETS  # the tests' path to the handlers
from inference_tiers.constructs.gateway.bootstrap import DatabaseBootstrap, MigrationTask, asset_function
from inference_tiers.constructs.gateway.state import GatewayCache, GatewayDatabase
from inference_tiers.constructs.gateway.targets import GATEWAY_TARGETS, GatewayTarget
from inference_tiers.litellm import config as litellm
from inference_tiers.litellm.database import (
    PROXY_CONNECTION_SHARE,
    proxy_connection_budget,
)
from inference_tiers.validation import Args

CONTAINER_NAME = "litellm"
API_PORT, ADMIN_PORT = 443, 8443
HTTP_API_PORT, HTTP_ADMIN_PORT = 80, 8080
# The inference and health routes the API listener forwards (LiteLLM serves each with and without /v1).
API_PATHS = (
    "/v1/*",
    "/chat/completions",
    "/completions",
    "/embeddings",
    "/models",
    "/responses",
    *litellm.HEALTH_PATHS,
)
METRICS_PATHS = ("/metrics", "/metrics/*")
# 1.84.0 fixes the unauthenticated Host-header bypass CVE-2026-49468.
MINIMUM_VERSION = (1, 84, 0)
_PINNED_IMAGE = r"[^\s@]+@sha256:[0-9a-f]{64}"
# Fargate's task sizes for the CPU values the gateway takes: CPU units -> the memory (MiB) Fargate accepts with
# them. AWS, Amazon ECS developer guide, "Troubleshoot Amazon ECS task definition invalid CPU or memory errors"
# (docs.aws.amazon.com/AmazonECS/latest/developerguide/task-cpu-memory-error.html); 8192 and 16384 need Linux
# platform 1.4.0 or later, which the service's default (LATEST) is.
FARGATE_MEMORY_MIB: dict[int, range] = {
    1024: range(2048, 8192 + 1, 1024),
    2048: range(4096, 16384 + 1, 1024),
    4096: range(8192, 30720 + 1, 1024),
    8192: range(16384, 61440 + 1, 4096),
    16384: range(32768, 122880 + 1, 8192),
}


def fargate_memory_text(cpu: int) -> str:
    """What Fargate accepts as task memory with ``cpu`` units (a key of :data:`FARGATE_MEMORY_MIB`)."""
    allowed = FARGATE_MEMORY_MIB[cpu]
    return f"{allowed.start} to {allowed[-1]} MiB in steps of {allowed.step} (Fargate's sizes for cpu {cpu})"


def _image_version(image: str) -> tuple[int, ...] | None:
    match = re.search(r":v?([0-9]+)\.([0-9]+)\.([0-9]+)[^@]*@", image)
    return tuple(int(part) for part in match.groups()) if match else None


class LiteLLMGateway(Construct):
    """The LiteLLM proxy, its state, its load balancer and least-privilege access to exactly ``models``.

    :param vpc: the VPC (tasks, database and cache go to its private subnets with egress).
    :param models: the targets to serve (1-50, unique names); the task role may invoke these and nothing else.
    :param certificate: the ACM certificate of both HTTPS listeners (required unless ``allow_http``).
    :param allow_http: serve plain HTTP instead (80 and 8080), for a test only; adds a synth warning.
        Default False.
    :param domain_name: forward only requests whose Host header is this name (defence in depth against
        Host-header tricks). Default: any host.
    :param client_cidrs: who may call the API listener (default: the VPC's CIDR).
    :param admin_cidrs: who may reach the admin listener (default: the VPC's CIDR).
    :param router: retries, timeouts and fallbacks (default ``RouterOptions()``).
    :param image: the LiteLLM image, pinned by digest, at least 1.84.0. Default :data:`LITELLM_IMAGE`.
    :param desired_count: tasks at start and the autoscaling minimum (2-100, default 2).
    :param max_count: autoscaling maximum (default 10).
    :param requests_per_target: scale out above this many requests per task per minute (default 600).
    :param cpu: task vCPU units (1024-16384, default 4096; LiteLLM recommends 4 vCPU and 8 GB).
    :param memory_mib: task memory (default 8192).
    :param workers: proxy worker processes per task (default 4).
    :param upstream_api_key: the API key sent to OpenAI-compatible targets. Default: a placeholder (for
        servers without ``--api-key``).
    :param encryption_key: encrypts logs, secrets, database and cache. Default: a new retained key.
    :param log_retention: retention of the proxy's log group (default one year).
    :param request_logging: log one JSON line per request (LiteLLM's INFO level), for debugging; it costs
        every request its formatting (docs/gateway.md, "Proxy overhead"). Default False: the proxy logs warnings
        and errors, and the per-request audit is the spend log in PostgreSQL.
    :param database_capacity: (min, max) Aurora capacity units (default (0.5, 8)).
    :param cache_node_type: Valkey node type (default ``cache.t4g.small``).

    Attributes:

    - ``url`` and ``admin_url``: the API and admin listeners' base URLs; ``connections``: the load balancer's.
    - ``models``, ``router``: the checked arguments; ``config`` and ``config_text``: the rendered LiteLLM
      configuration (dict and YAML the container gets).
    - ``encryption_key``, ``database`` (:class:`GatewayDatabase`), ``cache`` (:class:`GatewayCache`),
      ``master_key_secret``, ``salt_key_secret``, ``log_group`` (the proxy's log).
    - ``cluster``, ``task_role``, ``task_definition``, ``container``, ``security_group``, ``service``: the ECS
      Fargate service and its parts; ``load_balancer`` and ``target_group``; ``migration``: the database
      migration the service waits for.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        models: Sequence[GatewayTarget],
        certificate: acm.ICertificate | None = None,
        allow_http: bool = False,
        domain_name: str | None = None,
        client_cidrs: Sequence[str] | None = None,
        admin_cidrs: Sequence[str] | None = None,
        router: litellm.RouterOptions | None = None,
        image: str = litellm.LITELLM_IMAGE,
        desired_count: int = 2,
        max_count: int = 10,
        requests_per_target: int = 600,
        cpu: int = 4096,
        memory_mib: int = 8192,
        workers: int = 4,
        upstream_api_key: secretsmanager.ISecret | None = None,
        encryption_key: kms.IKey | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        request_logging: bool = False,
        database_capacity: tuple[float, float] = (0.5, 8),
        cache_node_type: str = "cache.t4g.small",
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("LiteLLMGateway")
        args.implements("vpc", vpc, ec2.IVpc)

        def target(name: str, value: object) -> GatewayTarget:
            if not isinstance(value, GATEWAY_TARGETS):
                raise args.error(name, value, "a BedrockTarget, SageMakerTarget or OpenAICompatibleTarget")
            return value

        self._certificate = certificate
        self.models = args.sequence("models", models, target, min_items=1, max_items=50)
        """The checked targets (a tuple of ``BedrockTarget``, ``SageMakerTarget`` and
        ``OpenAICompatibleTarget``): the task role may invoke these and nothing else."""
        args.boolean("allow_http", allow_http)
        if certificate is None and not allow_http:
            raise args.error(
                "certificate",
                None,
                "an acm.ICertificate for the HTTPS listeners (or allow_http=True for a test)",
            )
        if certificate is not None:
            if allow_http:
                raise args.error("allow_http", True, "False when a certificate is given (HTTPS is used)")
            args.implements("certificate", certificate, acm.ICertificate)
        if domain_name is not None:
            args.text("domain_name", domain_name, pattern=r"([a-z0-9-]{1,63}\.)+[a-z]{2,63}", max_length=253)
        cidr = (
            r"(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){3}"
            r"/([89]|[12][0-9]|3[0-2])"
        )
        cidr_text = "an IPv4 CIDR block from /8 to /32 such as 10.0.0.0/16"
        clients = args.sequence(
            "client_cidrs",
            [vpc.vpc_cidr_block] if client_cidrs is None else client_cidrs,
            lambda n, v: args.text(n, v, pattern=cidr, description=cidr_text),
            min_items=1,
            max_items=20,
        )
        admins = args.sequence(
            "admin_cidrs",
            [vpc.vpc_cidr_block] if admin_cidrs is None else admin_cidrs,
            lambda n, v: args.text(n, v, pattern=cidr, description=cidr_text),
            min_items=1,
            max_items=20,
        )
        self.router = args.instance("router", router or litellm.RouterOptions(), litellm.RouterOptions)
        """The retry, timeout and fallback options the configuration is rendered with (``RouterOptions``)."""
        args.text(
            "image",
            image,
            pattern=_PINNED_IMAGE,
            allow_token=False,
            description="an image pinned by digest (<repository>:<tag>@sha256:<64 hex>)",
        )
        version = _image_version(image)
        if version is not None and version < MINIMUM_VERSION:
            raise args.error(
                "image", image, "LiteLLM 1.84.0 or later (CVE-2026-49468: unauthenticated auth bypass)"
            )
        args.integer("desired_count", desired_count, minimum=2, maximum=100)
        args.integer("max_count", max_count, minimum=desired_count, maximum=100)
        args.integer("requests_per_target", requests_per_target, minimum=1, maximum=100_000)
        args.one_of("cpu", cpu, tuple(FARGATE_MEMORY_MIB))
        if args.integer("memory_mib", memory_mib) not in FARGATE_MEMORY_MIB[cpu]:
            raise args.error("memory_mib", memory_mib, fargate_memory_text(cpu))
        args.integer("workers", workers, minimum=1, maximum=max(1, cpu // 512))
        if upstream_api_key is not None:
            args.implements("upstream_api_key", upstream_api_key, secretsmanager.ISecret)
        if encryption_key is not None:
            args.implements("encryption_key", encryption_key, kms.IKey)
        args.instance("log_retention", log_retention, logs.RetentionDays)
        self._request_logging = args.boolean("request_logging", request_logging)
        capacity = args.sequence(
            "database_capacity",
            list(database_capacity) if isinstance(database_capacity, tuple) else database_capacity,
            lambda n, v: args.number(n, v, minimum=0.5, maximum=256),
            min_items=2,
            max_items=2,
        )
        pool = litellm.DATABASE_POOL_PER_WORKER * workers
        budget = proxy_connection_budget(capacity[0], capacity[1])
        if pool * max_count > budget:
            raise args.error(
                "max_count",
                max_count,
                f"at most {budget // pool} tasks: database_connection_pool_limit "
                f"{litellm.DATABASE_POOL_PER_WORKER} x workers {workers} x max_count must fit {budget} connections "
                f"({PROXY_CONNECTION_SHARE:.0%} of Aurora's max_connections at database_capacity "
                f"{tuple(capacity)}); lower max_count or workers, or raise database_capacity",
            )
        # The render checks names and fallbacks; do it before creating anything.
        self.config = self._render(litellm.ProxyFeatures())
        """The rendered LiteLLM configuration as a dictionary; :meth:`export_traces` replaces it with the
        traced one."""
        self.config_text = litellm.render_text(self.config)
        """:attr:`config` as the container gets it in ``LITELLM_CONFIG_YAML`` (JSON text, which LiteLLM's
        YAML loader reads)."""

        stack = Stack.of(self)
        self.encryption_key = encryption_key or retained_key(
            self, "Key", "Encrypts the LiteLLM gateway's logs, secrets, database and cache"
        )
        """The key that encrypts the logs, secrets, database and cache: ``encryption_key``, or a new
        key with yearly rotation, retained."""
        # --- state ------------------------------------------------------------------------------------------
        self.database = GatewayDatabase(
            self,
            "Database",
            vpc=vpc,
            encryption_key=self.encryption_key,
            min_capacity=capacity[0],
            max_capacity=capacity[1],
        )
        """The proxy's Aurora PostgreSQL database (:class:`GatewayDatabase`): virtual keys, teams, budgets
        and spend logs."""
        self.cache = GatewayCache(
            self, "Cache", vpc=vpc, encryption_key=self.encryption_key, node_type=cache_node_type
        )
        """The Valkey replication group every task shares (:class:`GatewayCache`): limits, cooldowns and the
        spend-write buffer."""
        self.master_key_secret = self._generated_secret("MasterKey", "LiteLLM master key (prefixed with sk-)")
        """The LiteLLM master key (48 letters and digits; the proxy prefixes ``sk-``), retained and
        rotated by hand: it opens the admin API. Let an operator read it with :meth:`grant_admin`."""
        self.salt_key_secret = self._generated_secret(
            "SaltKey", "LiteLLM salt key: encrypts credentials stored in the database; never change it"
        )
        """The LiteLLM salt key, retained: it encrypts the credentials stored in the database, so never
        change it."""

        # --- the proxy's log: warnings and errors (every request with request_logging), KMS-encrypted, retained --
        allow_log_encryption(self.encryption_key, self, "*")
        self.log_group = logs.LogGroup(
            self,
            "RequestLogs",
            encryption_key=self.encryption_key,
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN,
        )
        """The proxy's log (the containers' output, stream prefix ``proxy``): encrypted with
        :attr:`encryption_key`, kept for ``log_retention`` and retained when the stack is deleted."""

        # --- compute ---------------------------------------------------------------------------------------------
        self.cluster = ecs.Cluster(
            self, "Cluster", vpc=vpc, container_insights_v2=ecs.ContainerInsights.ENHANCED
        )
        """The ECS cluster (Container Insights enhanced) that runs the proxy service and its migration
        task."""
        self.task_role = iam.Role(
            self,
            "TaskRole",
            assumed_by=iam.ServicePrincipal(
                "ecs-tasks.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": stack.format_arn(service="ecs", resource="*")},
                },
            ),
            description="LiteLLM gateway tasks: invoke exactly the configured models",
        )
        """The role the proxy containers run as, allowed to invoke exactly :attr:`models`: the role to grant
        further permissions to."""
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "TaskDefinition",
            cpu=cpu,
            memory_limit_mib=memory_mib,
            task_role=self.task_role,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        """The Fargate task definition (``cpu`` units, ``memory_mib`` MiB, x86_64 Linux); each new
        revision runs :attr:`migration` before the service is updated."""
        for index, model in enumerate(self.models):
            model.grant(self, f"Invoke{index}", self.task_role)
        self.container = self._container(image, workers, upstream_api_key)
        """The LiteLLM container (``litellm``): the rendered configuration and connection settings in its
        environment, the master, salt, database and Valkey credentials from Secrets Manager."""
        self.security_group = ec2.SecurityGroup(
            self,
            "ServiceSecurityGroup",
            vpc=vpc,
            description="LiteLLM gateway tasks",
            allow_all_outbound=True,
        )
        """The proxy tasks' security group (all outbound allowed), which the database and cache admit: the
        security group an OpenAI-compatible target's server must admit too."""
        self.database.connections.allow_default_port_from(self.security_group, "LiteLLM gateway tasks")
        self.cache.connections.allow_default_port_from(self.security_group, "LiteLLM gateway tasks")
        private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.service = ecs.FargateService(
            self,
            "Service",
            cluster=self.cluster,
            task_definition=self.task_definition,
            desired_count=desired_count,
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            health_check_grace_period=Duration.seconds(180),
            vpc_subnets=private,
            security_groups=[self.security_group],
            assign_public_ip=False,
            enable_execute_command=False,
            availability_zone_rebalancing=ecs.AvailabilityZoneRebalancing.ENABLED,
        )
        """The Fargate service that runs the proxy tasks in the private subnets, ``desired_count`` to
        ``max_count`` tasks scaled on requests per task; for its CPU and memory metrics."""

        # --- load balancer -------------------------------------------------------------------------------------
        load_balancer, target_group = self._load_balancer(
            vpc, certificate, domain_name, clients, admins, private
        )
        self.load_balancer = load_balancer
        """The internal Application Load Balancer in the private subnets, with the API and admin listeners;
        reach it through :attr:`connections` and :attr:`url`."""
        self.target_group = target_group
        """The IP target group of the proxy tasks (health check ``/health/readiness``); the service scales on
        its requests per target."""
        scaling = self.service.auto_scale_task_count(min_capacity=desired_count, max_capacity=max_count)
        scaling.scale_on_request_count(
            "RequestsPerTask", requests_per_target=requests_per_target, target_group=self.target_group
        )
        self.migration = self._migration(private, workers)
        """The custom resource that provisions the proxy's database role and runs LiteLLM's migrations once
        per new task definition; :attr:`service` depends on it."""
        self.service.node.add_dependency(self.migration)
        self.restart_handler = self._restart_on_rotation()
        """The Lambda function that starts a new deployment of :attr:`service` after each rotation of
        the proxy's database password; ``GatewayMonitoring`` alarms on its errors."""

    # --- public API --------------------------------------------------------------------------------------------

    @property
    def connections(self) -> ec2.Connections:
        """The load balancer's: allow a client to reach the API with ``gateway.connections.allow_from(...)``."""
        return self.load_balancer.connections

    @property
    def url(self) -> str:
        """The API listener's base URL (HTTPS on the API port, or HTTP with ``allow_http``)."""
        scheme, port = ("https", API_PORT) if self._https else ("http", HTTP_API_PORT)
        return f"{scheme}://{self.load_balancer.load_balancer_dns_name}:{port}"

    @property
    def admin_url(self) -> str:
        """The admin listener's base URL (``inference-tiers gateway keys --admin-url``)."""
        scheme, port = ("https", ADMIN_PORT) if self._https else ("http", HTTP_ADMIN_PORT)
        return f"{scheme}://{self.load_balancer.load_balancer_dns_name}:{port}"

    def export_traces(self, endpoint: str = litellm.SIDECAR_OTLP_HTTP) -> None:
        """Trace every request: call this once a trace collector runs in the task (the observability tier's
        ADOT sidecar, ``ObservabilityHub.add_ecs_collector``). The proxy then exports its spans, children of the
        client's ``traceparent``, over OTLP/HTTP to ``endpoint`` and forwards the client's ``traceparent`` to
        the backends (docs/observability.md, "W3C trace context, end to end")."""
        environment = litellm.tracing_environment(endpoint)
        self.config = self._render(litellm.ProxyFeatures(tracing=True))
        self.config_text = litellm.render_text(self.config)
        # The container was created with the untraced configuration; these replace it and add the exporter.
        for name, value in {litellm.CONFIG_ENV: self.config_text, **environment}.items():
            self.container.add_environment(name, value)

    def grant_admin(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` read the master key (``inference-tiers gateway keys`` needs it)."""
        return self.master_key_secret.grant_read(grantee)

    # --- parts ---------------------------------------------------------------------------------------------------

    def _render(self, features: litellm.ProxyFeatures) -> dict[str, Any]:
        return litellm.render_config(
            [m.render(self) for m in self.models], router=self.router, features=features
        )

    def _generated_secret(self, construct_id: str, description: str) -> secretsmanager.Secret:
        secret = secretsmanager.Secret(
            self,
            construct_id,
            description=description,
            encryption_key=self.encryption_key,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True
            ),
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(
            secret,
            "AwsSolutions-SMG4",
            "LiteLLM reads its master and salt keys once at start, and the salt key must never change (it "
            "encrypts credentials stored in the database): these keys are rotated by hand (docs/gateway.md)",
        )
        return secret

    def _container(
        self, image: str, workers: int, upstream_api_key: secretsmanager.ISecret | None
    ) -> ecs.ContainerDefinition:
        environment = {
            **litellm.proxy_environment(self.config_text, request_logging=self._request_logging),
            "DISABLE_SCHEMA_UPDATE": "true",
            "USE_V2_MIGRATION_RESOLVER": "true",
            "DATABASE_HOST": self.database.host,
            "DATABASE_NAME": self.database.database_name,
            "DATABASE_USERNAME": self.database.username,
            "REDIS_HOST": self.cache.host,
            "REDIS_PORT": self.cache.port,
            "REDIS_SSL": "True",
        }
        secrets = {
            litellm.MASTER_KEY_ENV: ecs.Secret.from_secrets_manager(self.master_key_secret),
            litellm.SALT_KEY_ENV: ecs.Secret.from_secrets_manager(self.salt_key_secret),
            "DATABASE_PASSWORD": ecs.Secret.from_secrets_manager(self.database.app_secret, "password"),
            "REDIS_PASSWORD": ecs.Secret.from_secrets_manager(self.cache.auth_secret),
        }
        upstream_env = {
            m.render(self).litellm_params().get("api_key", "").removeprefix("os.environ/")
            for m in self.models
        } - {""}
        for name in sorted(upstream_env):
            if upstream_api_key is not None:
                secrets[name] = ecs.Secret.from_secrets_manager(upstream_api_key)
            else:
                environment[name] = "no-key"
        acknowledge(
            self.task_definition,
            "AwsSolutions-ECS2",
            "The environment holds the rendered config and connection settings only; the master, salt, "
            "database and Valkey credentials are injected from Secrets Manager through ECS secrets",
        )
        missing = litellm.referenced_environment(self.config) - set(environment) - set(secrets)
        assert not missing, f"the rendered config names unset variables: {sorted(missing)}"
        health = "import urllib.request as u; u.urlopen('http://127.0.0.1:%d/health/liveliness', timeout=4)"
        return self.task_definition.add_container(
            CONTAINER_NAME,
            image=ecs.ContainerImage.from_registry(image),
            entry_point=["/bin/sh", "-c"],
            command=[litellm.proxy_command(workers=workers)],
            environment=environment,
            secrets=secrets,
            port_mappings=[ecs.PortMapping(container_port=litellm.PORT)],
            logging=ecs.LogDriver.aws_logs(stream_prefix="proxy", log_group=self.log_group),
            # The image has no curl: its own python checks liveness (never /health, which calls every model).
            health_check=ecs.HealthCheck(
                command=["CMD-SHELL", f'python3 -c "{health % litellm.PORT}" || exit 1'],
                interval=Duration.seconds(30),
                timeout=Duration.seconds(5),
                retries=3,
                start_period=Duration.seconds(120),
            ),
            stop_timeout=Duration.seconds(120),
            readonly_root_filesystem=False,
        )

    @property
    def _https(self) -> bool:
        return self._certificate is not None

    def _load_balancer(
        self,
        vpc: ec2.IVpc,
        certificate: acm.ICertificate | None,
        domain_name: str | None,
        clients: Sequence[str],
        admins: Sequence[str],
        private: ec2.SubnetSelection,
    ) -> tuple[elbv2.ApplicationLoadBalancer, elbv2.ApplicationTargetGroup]:
        api_port, admin_port = (API_PORT, ADMIN_PORT) if certificate else (HTTP_API_PORT, HTTP_ADMIN_PORT)
        security_group = ec2.SecurityGroup(
            self,
            "LoadBalancerSecurityGroup",
            vpc=vpc,
            description="LiteLLM gateway load balancer",
            allow_all_outbound=False,
        )
        for cidr in clients:
            security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(api_port), "gateway API clients"
            )
        for cidr in admins:
            security_group.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(admin_port), "gateway admins")
        acknowledge(
            security_group,
            "AwsSolutions-EC23",
            "Internal load balancer: ingress only on the API and admin ports from client_cidrs/admin_cidrs "
            "(default the VPC's own CIDR, a deploy-time value), each checked to be /8 or narrower",
        )
        load_balancer = elbv2.ApplicationLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            vpc_subnets=private,
            internet_facing=False,
            security_group=security_group,
            drop_invalid_header_fields=True,
            # Longer than the proxy's own timeout, so a slow completion ends in LiteLLM's error, not a 504.
            idle_timeout=Duration.seconds(min(4000, self.router.request_timeout_seconds + 60)),
        )
        # Access logs need the Region's ELB account at synth time, which an environment-agnostic stack lacks;
        # every request is recorded in the proxy's spend log.
        acknowledge(
            load_balancer,
            "AwsSolutions-ELB2",
            "Environment-agnostic stack: ELB access logging needs the Region's ELB account at synth time; the "
            "proxy records every request (key, team, model, tokens, cost) in its spend log in Postgres",
        )
        skip_check(
            load_balancer,
            "CKV_AWS_91",
            "Environment-agnostic stack (no Region at synth time for the ELB log-delivery account); requests "
            "are recorded by the proxy in its spend log in Postgres",
        )
        target_group = elbv2.ApplicationTargetGroup(
            self,
            "Targets",
            vpc=vpc,
            port=litellm.PORT,
            protocol=elbv2.ApplicationProtocol.HTTP,
            target_type=elbv2.TargetType.IP,
            targets=[self.service],
            deregistration_delay=Duration.seconds(120),
            health_check=elbv2.HealthCheck(
                path="/health/readiness", interval=Duration.seconds(15), healthy_threshold_count=2
            ),
        )
        protocol = elbv2.ApplicationProtocol.HTTPS if certificate else elbv2.ApplicationProtocol.HTTP
        certificates = (
            [elbv2.ListenerCertificate.from_certificate_manager(certificate)] if certificate else None
        )
        ssl_policy = elbv2.SslPolicy.RECOMMENDED_TLS if certificate else None
        api = load_balancer.add_listener(
            "Api",
            port=api_port,
            protocol=protocol,
            open=False,
            default_action=elbv2.ListenerAction.fixed_response(404, message_body="not found"),
            certificates=certificates,
            ssl_policy=ssl_policy,
        )
        host = [elbv2.ListenerCondition.host_headers([domain_name])] if domain_name else []
        per_rule = 4 if host else 5  # at most five condition values per rule
        for index in range(0, len(API_PATHS), per_rule):
            api.add_action(
                f"Inference{index // per_rule}",
                priority=10 + index,
                conditions=[
                    *host,
                    elbv2.ListenerCondition.path_patterns(list(API_PATHS[index : index + per_rule])),
                ],
                action=elbv2.ListenerAction.forward([target_group]),
            )
        admin = load_balancer.add_listener(
            "Admin",
            port=admin_port,
            protocol=protocol,
            open=False,
            default_action=elbv2.ListenerAction.forward([target_group]),
            certificates=certificates,
            ssl_policy=ssl_policy,
        )
        admin.add_action(
            "NoMetrics",
            priority=1,
            conditions=[elbv2.ListenerCondition.path_patterns(list(METRICS_PATHS))],
            action=elbv2.ListenerAction.fixed_response(403, message_body="forbidden"),
        )
        if not certificate:
            Annotations.of(self).add_warning_v2(
                "inference-tiers:gateway-plain-http",
                "LiteLLMGateway serves PLAIN HTTP (allow_http=True): API keys and prompts cross the VPC "
                "unencrypted. For a test only; pass an ACM certificate for anything else.",
            )
        return load_balancer, target_group

    def _migration(self, private: ec2.SubnetSelection, workers: int) -> CustomResource:
        # Id "Default" leaves the path out of the logical ids: the tier's resources keep theirs.
        bootstrap = DatabaseBootstrap(
            self,
            "Default",
            database=self.database,
            encryption_key=self.encryption_key,
            migration_task=MigrationTask(
                cluster=self.cluster,
                task_definition=self.task_definition,
                container_name=CONTAINER_NAME,
                command=litellm.proxy_command(workers=workers, migrate_only=True),
                subnets=self.cluster.vpc.select_subnets(subnet_type=private.subnet_type),
                security_group=self.security_group,
            ),
        )
        return bootstrap.resource

    def _restart_on_rotation(self) -> lambda_.Function:
        """The rotation path (docs/gateway.md): each successful rotation of the proxy's database password starts a
        new deployment of the service (rolling, at least ``desired_count`` healthy tasks throughout)."""
        handler, _ = asset_function(
            self,
            "Restart",
            asset="restart",
            entry="index.on_rotation",
            timeout=Duration.seconds(30),
            memory_size=128,
            description="Restarts the gateway's tasks after a rotation of their database password",
            encryption_key=self.encryption_key,
        )
        handler.add_to_role_policy(
            iam.PolicyStatement(actions=["ecs:UpdateService"], resources=[self.service.service_arn])
        )
        # Secrets Manager records RotationSucceeded as a service event through CloudTrail (Secrets Manager user
        # guide, "AWS CloudTrail entries for Secrets Manager" and "Match Secrets Manager events with EventBridge").
        rule = events.Rule(
            self,
            "RestartOnRotation",
            description="A rotation of the gateway's database password restarts its tasks",
            event_pattern=events.EventPattern(
                source=["aws.secretsmanager"],
                detail_type=["AWS Service Event via CloudTrail", "AWS API Call via CloudTrail"],
                detail={"eventSource": ["secretsmanager.amazonaws.com"], "eventName": ["RotationSucceeded"]},
            ),
        )
        rule.add_target(
            events_targets.LambdaFunction(
                handler,
                event=events.RuleTargetInput.from_object(
                    {
                        "Cluster": self.cluster.cluster_arn,
                        "Service": self.service.service_name,
                        "SecretArn": self.database.app_secret.secret_arn,
                        "Detail": events.EventField.from_path("$.detail"),
                    }
                ),
            )
        )
        acknowledge(
            handler,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The restart function uses the basic execution role only to write its logs",
        )
        skip_check(handler, "CKV_AWS_117", "Calls only the ECS API: no VPC resource to reach")
        skip_check(
            handler,
            "CKV_AWS_115",
            "Runs once per rotation (every 30 days); any reservation fails in accounts at the new-account quota "
            "of 10 concurrent executions",
        )
        skip_check(
            handler,
            "CKV_AWS_116",
            "A failed restart is retried by Lambda's asynchronous retries and raises the gateway's "
            "RotationRestart alarm, whose runbook is the manual restart (docs/gateway.md, the rotation path)",
        )
        return handler
