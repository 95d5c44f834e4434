"""The gateway's state: Aurora PostgreSQL Serverless v2 (keys, teams, budgets, spend logs) and an ElastiCache
Valkey replication group (limits, cooldowns and the spend-write buffer every task shares).

Both are private (isolated from everything but the security groups given access), encrypted with the
gateway's customer-managed key, and retained with their data when the stack is deleted.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.valkey import check_valkey_args, private_valkey
from inference_tiers.validation import Args

DATABASE_NAME = "litellm"
APP_USERNAME = "litellm"
MASTER_USERNAME = "gateway_admin"
REDIS_PORT = 6379
ROTATION = Duration.days(30)


class GatewayDatabase(Construct):
    """Aurora PostgreSQL Serverless v2, a writer and a reader in different AZs, with two credentials in
    Secrets Manager, both rotated: the master user's (administration and provisioning only) and the proxy's
    own role (``litellm``, owner of the ``litellm`` database; see ``inference_tiers.litellm.database``).

    :param vpc: the VPC; instances go to its private subnets.
    :param encryption_key: encrypts storage, snapshots, Performance Insights and both secrets.
    :param min_capacity: Aurora capacity units at idle (default 0.5).
    :param max_capacity: ACUs at peak (default 8).
    :param rotation: how often both passwords rotate (default 30 days). The proxy reads its password at task
        start: LiteLLMGateway restarts it after each rotation of its own (docs/gateway.md, "the rotation path").
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        encryption_key: kms.IKey,
        min_capacity: float = 0.5,
        max_capacity: float = 8,
        rotation: Duration = ROTATION,
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("GatewayDatabase")
        args.implements("vpc", vpc, ec2.IVpc)
        args.implements("encryption_key", encryption_key, kms.IKey)
        low = args.number("min_capacity", min_capacity, minimum=0.5, maximum=256)
        args.number("max_capacity", max_capacity, minimum=max(1, low), maximum=256)
        args.duration("rotation", rotation, minimum=Duration.days(1), maximum=Duration.days(365))
        private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=rds.DatabaseClusterEngine.aurora_postgres(
                version=rds.AuroraPostgresEngineVersion.VER_16_9
            ),
            credentials=rds.Credentials.from_generated_secret(
                MASTER_USERNAME,
                encryption_key=encryption_key,
                exclude_characters=" %+~`#$&*()|[]{}:;<>?!'/@\"\\",
            ),
            writer=rds.ClusterInstance.serverless_v2("Writer", enable_performance_insights=True),
            readers=[
                rds.ClusterInstance.serverless_v2(
                    "Reader", scale_with_writer=True, enable_performance_insights=True
                )
            ],
            serverless_v2_min_capacity=min_capacity,
            serverless_v2_max_capacity=max_capacity,
            vpc=vpc,
            vpc_subnets=private,
            storage_encrypted=True,
            storage_encryption_key=encryption_key,
            performance_insight_encryption_key=encryption_key,
            iam_authentication=True,
            enable_data_api=True,
            deletion_protection=True,
            backup=rds.BackupProps(retention=Duration.days(14)),
            copy_tags_to_snapshot=True,
            cloudwatch_logs_exports=["postgresql"],
            monitoring_interval=Duration.seconds(60),
            removal_policy=RemovalPolicy.RETAIN,
            port=5433,
        )
        """The Aurora cluster (a writer and a reader, port 5433, deletion protection on): for its endpoints
        and metrics, such as ``metric_database_connections``."""
        assert self.cluster.secret is not None
        self.master_secret: secretsmanager.ISecret = self.cluster.secret
        """The master user's (``gateway_admin``) generated credentials, rotated every ``rotation``: for
        administration and provisioning the proxy's role only, never for the proxy itself."""
        self.cluster.add_rotation_single_user(automatically_after=rotation, vpc_subnets=private)
        self.app_secret = rds.DatabaseSecret(
            self,
            "AppSecret",
            username=APP_USERNAME,
            encryption_key=encryption_key,
            exclude_characters=" %+~`#$&*()|[]{}:;<>?!'/@\"\\",
        )
        """The proxy's own credentials (user ``litellm``), rotated every ``rotation`` and retained: the tasks
        get its ``password`` as ``DATABASE_PASSWORD``."""
        self.app_secret.apply_removal_policy(RemovalPolicy.RETAIN)
        attached = self.app_secret.attach(self.cluster)
        secretsmanager.SecretRotation(
            self,
            "AppSecretRotation",
            application=secretsmanager.SecretRotationApplication.POSTGRES_ROTATION_SINGLE_USER,
            secret=attached,
            target=self.cluster,
            vpc=vpc,
            vpc_subnets=private,
            automatically_after=rotation,
            # Not at creation: the role exists only once the migration has run, and its generated password is
            # new anyway. Each later rotation restarts the proxy (LiteLLMGateway, "the rotation path").
            rotate_immediately_on_update=False,
        )
        self.database_name = DATABASE_NAME
        """The proxy's database, ``litellm`` (LiteLLM's ``DATABASE_NAME``)."""
        self.username = APP_USERNAME
        """The proxy's database user, ``litellm``, owner of :attr:`database_name` (LiteLLM's
        ``DATABASE_USERNAME``)."""
        acknowledge(
            self.cluster,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole]",
            "Enhanced monitoring's role: the AWS managed policy only lets RDS write OS metrics to its own log group",
        )
        acknowledge(
            self.cluster,
            "AwsSolutions-RDS6",
            "The proxy authenticates with its rotated Secrets Manager password, and each rotation restarts its "
            "tasks (docs/gateway.md, the rotation path); IAM auth is enabled for operators",
        )

    @property
    def connections(self) -> ec2.Connections:
        """The cluster's security group and port: allow a client with
        ``database.connections.allow_default_port_from(...)``."""
        return self.cluster.connections

    @property
    def host(self) -> str:
        """``host:port`` of the writer (LiteLLM's DATABASE_HOST)."""
        endpoint = self.cluster.cluster_endpoint
        return f"{endpoint.hostname}:{endpoint.port}"


class GatewayCache(Construct):
    """A Valkey replication group with cluster mode disabled (LiteLLM's pipelines break on sharded caches:
    ``CROSSSLOT``, litellm#8159): a primary and a replica in different AZs, automatic failover, TLS required,
    AUTH token from Secrets Manager, encrypted at rest with the gateway's key.

    :param vpc: the VPC; nodes go to its private subnets.
    :param encryption_key: encrypts the data at rest, snapshots and the AUTH secret.
    :param node_type: the cache node type (default ``cache.t4g.small``).
    :param engine_version: Valkey version (default ``8.0``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        encryption_key: kms.IKey,
        node_type: str = "cache.t4g.small",
        engine_version: str = "8.0",
    ) -> None:
        super().__init__(scope, construct_id)
        args = Args("GatewayCache")
        args.implements("vpc", vpc, ec2.IVpc)
        args.implements("encryption_key", encryption_key, kms.IKey)
        check_valkey_args(args, node_type, engine_version)
        self.auth_secret = secretsmanager.Secret(
            self,
            "AuthToken",
            description="AUTH token of the gateway's Valkey replication group",
            encryption_key=encryption_key,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
            removal_policy=RemovalPolicy.RETAIN,
        )
        """The Valkey AUTH token (64 letters and digits), retained: the tasks get it as ``REDIS_PASSWORD``. It
        is not rotated automatically (docs/gateway.md)."""
        acknowledge(
            self.auth_secret,
            "AwsSolutions-SMG4",
            "ElastiCache has no managed AUTH-token rotation: rotating needs ModifyReplicationGroup with "
            "AuthTokenUpdateStrategy ROTATE then SET and a proxy restart (docs/gateway.md)",
        )
        security_group, resource = private_valkey(
            self,
            name="Gateway Valkey",
            description="inference-tiers gateway: LiteLLM limits and spend buffer",
            vpc=vpc,
            encryption_key=encryption_key,
            node_type=node_type,
            engine_version=engine_version,
            port=REDIS_PORT,
            auth_token=self.auth_secret.secret_value.unsafe_unwrap(),  # a dynamic reference, resolved by CFN
            snapshot_retention_limit=7,
        )
        self.security_group = security_group
        """The cache's security group: no ingress until you allow it (the gateway allows its tasks through
        :attr:`connections`)."""
        self.resource = resource
        """The ``CfnReplicationGroup`` (retained on stack deletion): its primary endpoint is :attr:`host` and
        :attr:`port`."""
        self.resource.apply_removal_policy(RemovalPolicy.RETAIN)
        self._connections = ec2.Connections(
            security_groups=[self.security_group], default_port=ec2.Port.tcp(REDIS_PORT)
        )

    @property
    def connections(self) -> ec2.Connections:
        """The replication group's security group, default port 6379: allow a client with
        ``cache.connections.allow_default_port_from(...)``."""
        return self._connections

    @property
    def host(self) -> str:
        """The primary endpoint's address, a deploy-time token (LiteLLM's ``REDIS_HOST``)."""
        return self.resource.attr_primary_end_point_address

    @property
    def port(self) -> str:
        """The primary endpoint's port as a string, a deploy-time token (LiteLLM's ``REDIS_PORT``)."""
        return self.resource.attr_primary_end_point_port
